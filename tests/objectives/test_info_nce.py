"""info_nce / InfoNCE against hand-written loops (variational eq. 1, nonlinearity eq. 1)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from ssldyn.objectives import InfoNCE, info_nce

OPTIONS = [
    (sim, neg, eps) for sim in ("cosine", "sqdist", "dot") for neg in ("both", "view1") for eps in (1.0, 0.0, 0.5)
]


def _sim(a, b, similarity):
    if similarity == "cosine":
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    if similarity == "dot":
        return float(a @ b)
    return -0.5 * float(np.sum((a - b) ** 2))


def ref_info_nce(z1, z2, tau, eps=1.0, similarity="cosine", negatives="both"):
    """Explicit loops over anchors, float64 numpy."""
    z1, z2 = np.asarray(z1, dtype=np.float64), np.asarray(z2, dtype=np.float64)
    n = z1.shape[0]
    losses = []
    if negatives == "both":
        z = np.concatenate([z1, z2])
        for k in range(2 * n):
            partner = (k + n) % (2 * n)
            pos = math.exp(_sim(z[k], z[partner], similarity) / tau)
            neg = sum(math.exp(_sim(z[k], z[l], similarity) / tau) for l in range(2 * n) if l not in (k, partner))
            losses.append(-math.log(pos / (eps * pos + neg)))
    else:
        for i in range(n):
            pos = math.exp(_sim(z1[i], z2[i], similarity) / tau)
            neg = sum(math.exp(_sim(z1[i], z1[j], similarity) / tau) for j in range(n) if j != i)
            losses.append(-math.log(pos / (eps * pos + neg)))
    return float(np.mean(losses))


def ref_info_nce_log(z1, z2, tau, eps=1.0, similarity="cosine", negatives="both"):
    """The loop reference in the log domain (scipy's logsumexp), float64: exact where exp(sim/τ) overflows."""
    z1, z2 = np.asarray(z1, dtype=np.float64), np.asarray(z2, dtype=np.float64)
    n = z1.shape[0]
    z = np.concatenate([z1, z2])
    anchors = range(2 * n) if negatives == "both" else range(n)
    losses = []
    for k in anchors:
        partner = (k + n) % (2 * n)
        others = (
            [m for m in range(2 * n) if m not in (k, partner)]
            if negatives == "both"
            else [m for m in range(n) if m != k]
        )
        pos = _sim(z[k], z[partner], similarity) / tau
        logits = [_sim(z[k], z[m], similarity) / tau for m in others]
        if eps > 0:
            logits.append(pos + math.log(eps))
        losses.append(logsumexp(logits) - pos)
    return float(np.mean(losses))


def _views(*shape, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype), torch.randn(*shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("similarity,negatives,eps", OPTIONS)
def test_matches_loop_reference(similarity, negatives, eps):
    z1, z2 = _views(5, 3)
    got = info_nce(z1, z2, 0.7, eps=eps, similarity=similarity, negatives=negatives)
    want = ref_info_nce(z1.numpy(), z2.numpy(), 0.7, eps, similarity, negatives)
    assert got.shape == ()
    assert got.item() == pytest.approx(want, rel=1e-12, abs=1e-12)
    # the log-domain reference used at tiny τ is the same function
    assert ref_info_nce_log(z1.numpy(), z2.numpy(), 0.7, eps, similarity, negatives) == pytest.approx(want, rel=1e-12)


def test_default_is_standard_simclr_nt_xent():
    """Default = SimCLR: cross-entropy over 2N rows, self masked, target = other view."""
    z1, z2 = _views(6, 4, seed=1)
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    logits = (z @ z.T / 0.5).fill_diagonal_(-math.inf)
    target = torch.cat([torch.arange(6, 12), torch.arange(6)])
    assert info_nce(z1, z2).item() == pytest.approx(F.cross_entropy(logits, target).item(), rel=1e-12)


def test_view1_default_is_reference_cross_entropy():
    """negatives='view1' = the nonlinearity reference code: M = z1 z1ᵀ, M_ii = z1_i·z2_i, CE(M/T, i)."""
    z1, z2 = _views(6, 4, seed=2)
    a, b = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    m = a @ a.T
    m[range(6), range(6)] = (a * b).sum(1)
    want = F.cross_entropy(m / 0.3, torch.arange(6))
    assert info_nce(z1, z2, 0.3, negatives="view1").item() == pytest.approx(want.item(), rel=1e-12)


def test_eps_changes_the_loss_and_eps_zero_drops_positive():
    z1, z2 = _views(4, 3, seed=3)
    l1 = info_nce(z1, z2, 0.5, eps=1.0)
    l0 = info_nce(z1, z2, 0.5, eps=0.0)
    assert l0 < l1  # removing a positive term from the denominator lowers the loss
    assert l0.item() == pytest.approx(ref_info_nce(z1.numpy(), z2.numpy(), 0.5, eps=0.0), rel=1e-12)


@pytest.mark.parametrize("negatives", ["both", "view1"])
def test_sqdist_equals_cosine_on_unit_vectors(negatives):
    z1, z2 = _views(5, 3, seed=4)
    z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    a = info_nce(z1, z2, 0.2, similarity="sqdist", negatives=negatives)
    b = info_nce(z1, z2, 0.2, similarity="cosine", negatives=negatives)
    assert a.item() == pytest.approx(b.item(), rel=1e-12)
    # ... but not on raw embeddings
    assert info_nce(2 * z1, z2, 0.2, similarity="sqdist").item() != pytest.approx(
        info_nce(2 * z1, z2, 0.2).item(), rel=1e-3
    )


@pytest.mark.parametrize("similarity,negatives,eps", OPTIONS)
def test_gradcheck(similarity, negatives, eps):
    z1, z2 = _views(4, 3, seed=5)
    z1.requires_grad_(True)
    z2.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda a, b: info_nce(a, b, 0.6, eps=eps, similarity=similarity, negatives=negatives), (z1, z2)
    )


@pytest.mark.parametrize("negatives", ["both", "view1"])
@pytest.mark.parametrize("similarity", ["cosine", "sqdist"])
def test_ensemble_axis_equals_separate_calls(similarity, negatives):
    z1, z2 = _views(2, 3, 5, 4, seed=6)  # (2, 3, N, d): two ensemble axes
    got = info_nce(z1, z2, 0.4, similarity=similarity, negatives=negatives, eps=0.5)
    assert got.shape == (2, 3)
    for i in range(2):
        for e in range(3):
            want = info_nce(z1[i, e], z2[i, e], 0.4, similarity=similarity, negatives=negatives, eps=0.5)
            assert got[i, e].item() == pytest.approx(want.item(), rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("similarity,negatives,eps", OPTIONS)
def test_stable_at_tiny_temperature(dtype, similarity, negatives, eps):
    z1, z2 = _views(3, 16, 8, seed=7, dtype=dtype)
    z1 = F.normalize(z1, dim=-1).requires_grad_(True)
    z2 = F.normalize(z2, dim=-1).requires_grad_(True)
    loss = info_nce(z1, z2, 1e-3, eps=eps, similarity=similarity, negatives=negatives)
    assert loss.dtype == dtype and loss.shape == (3,)
    assert torch.isfinite(loss).all()
    g1, g2 = torch.autograd.grad(loss.sum(), (z1, z2))
    assert torch.isfinite(g1).all() and torch.isfinite(g2).all()
    # against the log-domain float64 reference on the same (rounded) inputs; exp(1/τ) = e^1000 overflows a loop
    a, b = z1.detach().double().numpy(), z2.detach().double().numpy()
    ref = [ref_info_nce_log(a[e], b[e], 1e-3, eps, similarity, negatives) for e in range(3)]
    assert max(ref) > 10.0  # logits of order 1/τ: a naive exp would overflow (inf) or lose every digit
    tol = dict(rtol=1e-10, atol=1e-9) if dtype == torch.float64 else dict(rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(loss.detach().double().numpy(), ref, **tol)


def test_float32_close_to_float64():
    z1, z2 = _views(6, 5, seed=8)
    l64 = info_nce(z1, z2, 0.3)
    l32 = info_nce(z1.float(), z2.float(), 0.3)
    assert l32.dtype == torch.float32
    assert l32.item() == pytest.approx(l64.item(), rel=1e-5)


def test_module_wrapper():
    z1, z2 = _views(5, 3, seed=9)
    mod = InfoNCE(0.25, eps=0.5, similarity="sqdist", negatives="view1")
    want = info_nce(z1, z2, 0.25, eps=0.5, similarity="sqdist", negatives="view1")
    assert mod(z1, z2).item() == pytest.approx(want.item(), rel=1e-14)
    assert "temperature=0.25" in repr(mod)
    with pytest.raises(ValueError, match="temperature"):
        InfoNCE(0.0)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(temperature=0.0), "temperature must be a finite number > 0"),
        (dict(temperature=-1.0), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(eps=-0.1), "eps must be a finite number >= 0"),
        (dict(similarity="euclid"), "similarity .*: allowed values are"),
        (dict(negatives="view2"), "negatives .*: allowed values are"),
    ],
)
def test_invalid_settings(kwargs, match):
    z1, z2 = _views(4, 3)
    with pytest.raises(ValueError, match=match):
        info_nce(z1, z2, **kwargs)


def test_invalid_inputs():
    z1, z2 = _views(4, 3)
    with pytest.raises(ValueError, match="z1 and z2 must have the same shape"):
        info_nce(z1, z2[:, :2])
    with pytest.raises(ValueError, match="z1 must have at least 2 dimensions"):
        info_nce(z1[0], z2[0])
    with pytest.raises(ValueError, match="floating-point"):
        info_nce(z1.long(), z2.long())
    with pytest.raises(ValueError, match="at least 2 samples"):
        info_nce(z1[:1], z2[:1])
    with pytest.raises(ValueError, match="same dtype"):
        info_nce(z1, z2.float())


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.1, 10.0), n=st.integers(2, 6))
def test_property_permutation_and_scale_invariance(seed, scale, n):
    """Jointly permuting the batch leaves NT-Xent unchanged; cosine ignores the embedding scale."""
    z1, z2 = _views(n, 3, seed=seed)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    base = info_nce(z1, z2, 0.5)
    assert info_nce(z1[perm], z2[perm], 0.5).item() == pytest.approx(base.item(), rel=1e-10)
    assert info_nce(scale * z1, z2, 0.5).item() == pytest.approx(base.item(), rel=1e-10)
    # swapping the views is a relabelling of the 2N anchors
    assert info_nce(z2, z1, 0.5).item() == pytest.approx(base.item(), rel=1e-10)


@pytest.mark.parametrize("similarity", ["cosine", "sqdist", "dot"])
@pytest.mark.parametrize("eps", [1.0, 0.5, 0.0])
def test_extra_positives_match_a_loop_and_the_per_pair_cross_entropy(similarity, eps):
    """`positives` with view-1 negatives: anchor i's positives are z2_i and the z1_j marked, each weighted ε in the
    denominator; ℓ_i = −mean_{p∈P_i} s_ip/τ + log(ε Σ_{p∈P_i} e^{s_ip/τ} + Σ_{j∉P_i, j≠i} e^{s_ij/τ}), written out
    per anchor in float64 numpy; at ε = 1 it is also the mean of PyTorch's cross-entropy over each (anchor,
    positive) pair, the supervised contrastive loss's "out" form."""
    z1, z2 = _views(6, 3, seed=4)
    Y = torch.zeros(6, 6, dtype=torch.bool)
    Y[0, 3] = Y[3, 0] = Y[1, 2] = Y[2, 1] = Y[1, 4] = True  # not symmetric everywhere: rows 4 and 2 differ
    got = info_nce(z1, z2, 0.7, eps=eps, similarity=similarity, negatives="view1", positives=Y)
    a, b = z1.numpy(), z2.numpy()
    losses = []
    for i in range(6):
        pos = [_sim(a[i], b[i], similarity) / 0.7] + [_sim(a[i], a[j], similarity) / 0.7 for j in range(6) if Y[i, j]]
        neg = [_sim(a[i], a[j], similarity) / 0.7 for j in range(6) if j != i and not Y[i, j]]
        denom = eps * sum(math.exp(p) for p in pos) + sum(math.exp(n) for n in neg)
        losses.append(-np.mean(pos) + math.log(denom))
    assert got.item() == pytest.approx(float(np.mean(losses)), rel=1e-12, abs=1e-12)
    if eps == 1.0 and similarity == "cosine":
        zn1, zn2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
        m = zn1 @ zn1.T
        m[range(6), range(6)] = (zn1 * zn2).sum(1)
        pairs = (Y | torch.eye(6, dtype=torch.bool)).nonzero()  # (pairs, 2): (anchor, positive)
        ce = F.cross_entropy(m[pairs[:, 0]] / 0.7, pairs[:, 1], reduction="none")  # one term per pair
        per_anchor = torch.zeros(6, dtype=ce.dtype).index_add_(0, pairs[:, 0], ce) / (Y.sum(1) + 1)
        assert got.item() == pytest.approx(per_anchor.mean().item(), rel=1e-12)
    plain = info_nce(z1, z2, 0.7, eps=eps, similarity=similarity, negatives="view1")
    assert info_nce(z1, z2, 0.7, eps=eps, similarity=similarity, negatives="view1", positives=Y & False) == plain
    assert abs(got.item() - plain.item()) > 1e-3
