"""VICReg, BYOL / SimSiam and spectral contrastive losses against loops."""

import math

import numpy as np
import pytest
import torch

from ssldyn.objectives import (
    BYOLLoss,
    NegativeCosine,
    SpectralContrastiveLoss,
    VICRegLoss,
    byol_loss,
    negative_cosine,
    spectral_contrastive_loss,
    vicreg_loss,
    vicreg_terms,
)


def _rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def ref_vicreg(z1, z2, inv=25.0, var=25.0, cov=1.0, gamma=1.0, eps=1e-4):
    """Bardes et al. reference implementation written with explicit loops."""
    z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    n, d = z1.shape
    s = sum((z1[i, k] - z2[i, k]) ** 2 for i in range(n) for k in range(d)) / (n * d)

    def v(z):
        total = 0.0
        for k in range(d):
            mean = sum(z[i, k] for i in range(n)) / n
            variance = sum((z[i, k] - mean) ** 2 for i in range(n)) / (n - 1)
            total += max(0.0, gamma - math.sqrt(variance + eps))
        return total / d

    def c(z):
        mean = z.mean(0)
        total = 0.0
        for k in range(d):
            for m in range(d):
                if k != m:
                    ckm = sum((z[i, k] - mean[k]) * (z[i, m] - mean[m]) for i in range(n)) / (n - 1)
                    total += ckm**2
        return total / d

    terms = (s, 0.5 * (v(z1) + v(z2)), c(z1) + c(z2))
    return terms, inv * terms[0] + var * terms[1] + cov * terms[2]


def ref_cos(p, z):
    return float(p @ z / (np.linalg.norm(p) * np.linalg.norm(z)))


def ref_spectral(z1, z2):
    z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    n = len(z1)
    pos = sum(float(z1[i] @ z2[i]) for i in range(n)) / n
    neg = sum(float(z1[i] @ z2[j]) ** 2 for i in range(n) for j in range(n) if j != i) / (n * (n - 1))
    return -2 * pos + neg


# --------------------------------------------------------------------------- VICReg
@pytest.mark.parametrize("scale", [0.3, 3.0])  # std below / above γ: the hinge is active / inactive
def test_vicreg_matches_loop_reference(scale):
    z1, z2 = scale * _rand(6, 4, seed=0), scale * _rand(6, 4, seed=1)
    (s, v, c), total = ref_vicreg(z1.numpy(), z2.numpy())
    t = vicreg_terms(z1, z2)
    assert t.invariance.item() == pytest.approx(s, rel=1e-12)
    assert t.variance.item() == pytest.approx(v, rel=1e-12, abs=1e-15)
    assert t.covariance.item() == pytest.approx(c, rel=1e-12)
    assert vicreg_loss(z1, z2).item() == pytest.approx(total, rel=1e-12)
    _, total2 = ref_vicreg(z1.numpy(), z2.numpy(), inv=1.0, var=2.0, cov=3.0, gamma=2.0, eps=1e-3)
    assert vicreg_loss(z1, z2, inv=1.0, var=2.0, cov=3.0, gamma=2.0, eps=1e-3).item() == pytest.approx(
        total2, rel=1e-12
    )


def test_vicreg_collapse_is_penalised_only_by_variance():
    z = torch.ones(8, 3, dtype=torch.float64)
    t = vicreg_terms(z, z)
    assert t.invariance.item() == 0 and t.covariance.item() == 0
    assert t.variance.item() == pytest.approx(1 - math.sqrt(1e-4), rel=1e-12)


# --------------------------------------------------------------------------- BYOL / SimSiam
def test_byol_and_negative_cosine_match_loops():
    p, z = _rand(5, 3, seed=2), _rand(5, 3, seed=3)
    cos = [ref_cos(p[i].numpy(), z[i].numpy()) for i in range(5)]
    assert byol_loss(p, z).item() == pytest.approx(np.mean([2 - 2 * c for c in cos]), rel=1e-12)
    # ‖p̄ - z̄‖² form of BYOL
    pn, zn = p / p.norm(dim=1, keepdim=True), z / z.norm(dim=1, keepdim=True)
    assert byol_loss(p, z).item() == pytest.approx((pn - zn).pow(2).sum(1).mean().item(), rel=1e-12)
    assert negative_cosine(p, z).item() == pytest.approx(-np.mean(cos), rel=1e-12)
    assert negative_cosine(p, z).item() == pytest.approx(byol_loss(p, z).item() / 2 - 1, rel=1e-12)


def test_stop_gradient_on_target():
    p, z = _rand(4, 3, seed=4).requires_grad_(True), _rand(4, 3, seed=5).requires_grad_(True)
    gp, gz = torch.autograd.grad(byol_loss(p, z), (p, z), allow_unused=True)
    assert gz is None and torch.any(gp != 0)
    gp, gz = torch.autograd.grad(negative_cosine(p, z, stop_gradient=False), (p, z))
    assert torch.any(gz != 0)


# --------------------------------------------------------------------------- spectral contrastive
def test_spectral_matches_loops():
    z1, z2 = _rand(5, 3, seed=6), _rand(5, 3, seed=7)
    assert spectral_contrastive_loss(z1, z2).item() == pytest.approx(ref_spectral(z1.numpy(), z2.numpy()), rel=1e-12)


# --------------------------------------------------------------------------- gradcheck, ensemble, dtype
def test_gradcheck():
    z1, z2 = _rand(5, 3, seed=8).requires_grad_(True), _rand(5, 3, seed=9).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: vicreg_loss(0.5 * a, 0.5 * b), (z1, z2))
    assert torch.autograd.gradcheck(lambda a, b: byol_loss(a, b, stop_gradient=False), (z1, z2))
    assert torch.autograd.gradcheck(lambda a, b: negative_cosine(a, b, stop_gradient=False), (z1, z2))
    assert torch.autograd.gradcheck(spectral_contrastive_loss, (z1, z2))


@pytest.mark.parametrize("fn", [vicreg_loss, byol_loss, negative_cosine, spectral_contrastive_loss])
def test_ensemble_axis_equals_separate_calls(fn):
    z1, z2 = _rand(2, 3, 6, 4, seed=10), _rand(2, 3, 6, 4, seed=11)
    got = fn(z1, z2)
    assert got.shape == (2, 3)
    for i in range(2):
        for e in range(3):
            assert got[i, e].item() == pytest.approx(fn(z1[i, e], z2[i, e]).item(), rel=1e-12)


@pytest.mark.parametrize("fn", [vicreg_loss, byol_loss, negative_cosine, spectral_contrastive_loss])
def test_float32(fn):
    z1, z2 = _rand(6, 4, seed=12), _rand(6, 4, seed=13)
    l32 = fn(z1.float(), z2.float())
    assert l32.dtype == torch.float32
    assert l32.item() == pytest.approx(fn(z1, z2).item(), rel=1e-5, abs=1e-6)


def test_modules_and_validation():
    z1, z2 = _rand(5, 3, seed=14), _rand(5, 3, seed=15)
    assert VICRegLoss(inv=1.0, var=2.0, cov=3.0)(z1, z2).item() == pytest.approx(
        vicreg_loss(z1, z2, inv=1.0, var=2.0, cov=3.0).item()
    )
    assert BYOLLoss()(z1, z2).item() == pytest.approx(byol_loss(z1, z2).item())
    assert NegativeCosine()(z1, z2).item() == pytest.approx(negative_cosine(z1, z2).item())
    assert SpectralContrastiveLoss()(z1, z2).item() == pytest.approx(spectral_contrastive_loss(z1, z2).item())
    with pytest.raises(ValueError, match="gamma must be a finite number > 0"):
        vicreg_loss(z1, z2, gamma=0)
    with pytest.raises(ValueError, match="inv must be a finite number >= 0"):
        VICRegLoss(inv=-1)
    with pytest.raises(ValueError, match="at least 2 samples"):
        vicreg_loss(z1[:1], z2[:1])
    with pytest.raises(ValueError, match="p and z must have the same shape"):
        byol_loss(z1, z2[:, :2])


# the module forms forward every setting (VICRegLoss dropped eps silently under mutation)
def test_vicreg_module_forwards_gamma_and_eps():
    g = torch.Generator().manual_seed(5)
    z1, z2 = (
        0.4 * torch.randn(7, 3, generator=g, dtype=torch.float64),
        0.4 * torch.randn(7, 3, generator=g, dtype=torch.float64),
    )
    kw = dict(inv=1.5, var=2.0, cov=0.5, gamma=1.3, eps=0.2)  # eps large enough to move the hinge visibly
    want = ref_vicreg(z1.numpy(), z2.numpy(), **kw)[1]
    assert VICRegLoss(**kw)(z1, z2).item() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("module", [BYOLLoss, NegativeCosine])
def test_predictor_modules_forward_stop_gradient(module):
    p = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(6)).requires_grad_(True)
    z = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(7)).requires_grad_(True)
    (gz,) = torch.autograd.grad(module(stop_gradient=False)(p, z), z)
    # d/dz of -mean cos(p, z) (BYOL: 2 - 2cos, twice that), written out: -(p̂ - (p̂·ẑ)ẑ)/(N‖z‖)
    pn, zn = p.detach() / p.detach().norm(dim=1, keepdim=True), z.detach() / z.detach().norm(dim=1, keepdim=True)
    ref = -(pn - (pn * zn).sum(1, keepdim=True) * zn) / (4 * z.detach().norm(dim=1, keepdim=True))
    torch.testing.assert_close(gz, (2.0 if module is BYOLLoss else 1.0) * ref, rtol=1e-12, atol=1e-14)
    out = module()(p, z)  # default: the target is detached
    assert torch.autograd.grad(out, (p, z), allow_unused=True)[1] is None
