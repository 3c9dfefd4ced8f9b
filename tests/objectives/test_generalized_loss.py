"""generalized_contrastive_loss against loops (variational Definition 2.1, eq. 4-5)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import logsumexp

from ssldyn.objectives import GeneralizedContrastiveLoss, generalized_contrastive_loss


def ref_generalized(z1, z2, psi, eta, symmetric=True):
    """Batch version of eq. (4): mean_i Ψ( mean_j η(‖z1_i-z2_j‖²/2) / η(‖z1_i-z2_i‖²/2) )."""

    def one(a, b):
        n = a.shape[0]
        vals = []
        for i in range(n):
            num = sum(eta(0.5 * np.sum((a[i] - b[j]) ** 2)) for j in range(n)) / n
            den = eta(0.5 * np.sum((a[i] - b[i]) ** 2))
            vals.append(psi(num / den))
        return float(np.mean(vals))

    z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    return 0.5 * (one(z1, z2) + one(z2, z1)) if symmetric else one(z1, z2)


def ref_generalized_log(z1, z2, tau, symmetric=True):
    """Default Ψ = log1p, η(t) = e^{-t/τ} in the log domain (float64): Ψ(mean_j e^{x_ij}) = log(1 + e^{lse_j x_ij}/N)
    with x_ij = (‖z1_i-z2_i‖² - ‖z1_i-z2_j‖²)/(2τ), exact where e^{-t/τ} underflows."""

    def one(a, b):
        n = a.shape[0]
        vals = []
        for i in range(n):
            x = [(np.sum((a[i] - b[i]) ** 2) - np.sum((a[i] - b[j]) ** 2)) / (2 * tau) for j in range(n)]
            vals.append(np.logaddexp(0.0, logsumexp(x) - math.log(n)))
        return float(np.mean(vals))

    z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    return 0.5 * (one(z1, z2) + one(z2, z1)) if symmetric else one(z1, z2)


def _views(*shape, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype), torch.randn(*shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("symmetric", [True, False])
def test_defaults_match_loop_reference(symmetric):
    z1, z2 = _views(5, 3)
    tau = 0.8
    got = generalized_contrastive_loss(z1, z2, temperature=tau, symmetric=symmetric)
    want = ref_generalized(z1.numpy(), z2.numpy(), math.log1p, lambda t: math.exp(-t / tau), symmetric)
    assert got.item() == pytest.approx(want, rel=1e-12)
    assert ref_generalized_log(z1.numpy(), z2.numpy(), tau, symmetric) == pytest.approx(want, rel=1e-12)


def test_custom_psi_eta_match_loop_reference():
    z1, z2 = _views(6, 2, seed=1)
    psi = lambda t: t**2  # noqa: E731 (non-decreasing on t > 0)
    eta = lambda t: 1.0 / (1.0 + t)  # noqa: E731 (maximised at 0)
    got = generalized_contrastive_loss(z1, z2, psi=psi, eta=eta, symmetric=False)
    want = ref_generalized(z1.numpy(), z2.numpy(), psi, eta, symmetric=False)
    assert got.item() == pytest.approx(want, rel=1e-12)


def test_user_psi_with_default_eta():
    z1, z2 = _views(4, 3, seed=2)
    a = generalized_contrastive_loss(z1, z2, psi=torch.log1p, temperature=0.5)
    b = generalized_contrastive_loss(z1, z2, temperature=0.5)
    assert a.item() == pytest.approx(b.item(), rel=1e-12)


def test_relation_to_cosine_nt_xent_form_on_the_sphere():
    """Below eq. (5): on the sphere exp(-‖f(x)-f(y)‖²/2τ) = e^{-1/τ} exp(cos/τ); the ratio is a cosine softmax."""
    z1, z2 = _views(5, 4, seed=3)
    z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    tau = 0.3
    cos = z1 @ z2.T
    want = torch.log1p(torch.exp((cos - cos.diag()[:, None]) / tau).mean(1)).mean()
    got = generalized_contrastive_loss(z1, z2, temperature=tau, symmetric=False)
    assert got.item() == pytest.approx(want.item(), rel=1e-12)


def test_collapsed_embedding_gives_log2():
    """Constant f: every η_f = η(0), ratio 1, Ψ(1) = log 2 (the trivial stationary point)."""
    z = torch.ones(7, 3, dtype=torch.float64)
    assert generalized_contrastive_loss(z, z.clone(), temperature=0.1).item() == pytest.approx(math.log(2), rel=1e-14)


@pytest.mark.parametrize("custom", [False, True])
def test_gradcheck(custom):
    z1, z2 = _views(4, 3, seed=4)
    z1.requires_grad_(True)
    z2.requires_grad_(True)
    kw = dict(psi=lambda t: torch.log(1 + t), eta=lambda t: torch.exp(-t / 0.7)) if custom else dict(temperature=0.7)
    assert torch.autograd.gradcheck(lambda a, b: generalized_contrastive_loss(a, b, **kw), (z1, z2))


def test_ensemble_axis_equals_separate_calls():
    z1, z2 = _views(3, 5, 4, seed=5)
    got = generalized_contrastive_loss(z1, z2, temperature=0.4)
    assert got.shape == (3,)
    for e in range(3):
        assert got[e].item() == pytest.approx(
            generalized_contrastive_loss(z1[e], z2[e], temperature=0.4).item(), rel=1e-12
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_stable_at_tiny_temperature(dtype):
    z1, z2 = _views(2, 16, 8, seed=6, dtype=dtype)
    z1 = F.normalize(z1, dim=-1).requires_grad_(True)
    z2 = F.normalize(z2, dim=-1).requires_grad_(True)
    loss = generalized_contrastive_loss(z1, z2, temperature=1e-3)
    assert loss.dtype == dtype and torch.isfinite(loss).all()
    g = torch.autograd.grad(loss.sum(), (z1, z2))
    assert all(torch.isfinite(t).all() for t in g)
    # against the log-domain float64 reference on the same (rounded) inputs: e^{-t/τ} underflows at τ = 1e-3
    a, b = z1.detach().double().numpy(), z2.detach().double().numpy()
    ref = [ref_generalized_log(a[e], b[e], 1e-3) for e in range(2)]
    assert min(ref) > 10.0  # ratios of order e^{1/τ}: a naive loop gives inf / 0
    tol = dict(rtol=1e-10, atol=1e-9) if dtype == torch.float64 else dict(rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(loss.detach().double().numpy(), ref, **tol)


def test_module_wrapper_and_validation():
    z1, z2 = _views(4, 3, seed=7)
    mod = GeneralizedContrastiveLoss(temperature=0.2, symmetric=False)
    assert mod(z1, z2).item() == pytest.approx(
        generalized_contrastive_loss(z1, z2, temperature=0.2, symmetric=False).item(), rel=1e-14
    )
    with pytest.raises(ValueError, match="psi must be a callable"):
        generalized_contrastive_loss(z1, z2, psi=3.0)
    with pytest.raises(ValueError, match="temperature"):
        generalized_contrastive_loss(z1, z2, temperature=-2)
    with pytest.raises(ValueError, match="same shape"):
        generalized_contrastive_loss(z1, z2[:3])


# generalized_contrastive_loss with a user η and the default Ψ = log1p (the one path the loop tests missed)
@pytest.mark.parametrize("symmetric", [True, False])
def test_user_eta_with_default_psi_matches_loop_reference(symmetric):
    g = torch.Generator().manual_seed(11)
    z1, z2 = torch.randn(6, 3, generator=g, dtype=torch.float64), torch.randn(6, 3, generator=g, dtype=torch.float64)
    eta = lambda t: 1.0 / (1.0 + t)  # noqa: E731  (maximal at 0)
    got = generalized_contrastive_loss(z1, z2, eta=eta, symmetric=symmetric)  # psi=None: Ψ = log1p
    want = ref_generalized(z1.numpy(), z2.numpy(), math.log1p, lambda t: 1.0 / (1.0 + t), symmetric)
    assert got.item() == pytest.approx(want, rel=1e-12)
