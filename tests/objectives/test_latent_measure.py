"""Latent-measure NT-Xent (variational Prop. 2.1, Fig. 3) against loops."""

import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from ssldyn.data.sphere import circle_points_even
from ssldyn.objectives import (
    LatentMeasureNTXent,
    cluster_measure_nt_xent,
    cluster_sizes,
    latent_measure_nt_xent,
)


def ref_measure(points, weights, tau, positive_term=False):
    """Σ_i w_i log(1 + 2 Σ_{j≠i} w_j exp(cos(y_i, y_j)/τ)) with explicit loops."""
    y = np.asarray(points, np.float64)
    w = np.asarray(weights, np.float64)
    w = w / w.sum()
    shift = 1.0 / tau if positive_term else 0.0
    total = 0.0
    for i in range(len(y)):
        inner = 0.0
        for j in range(len(y)):
            if j != i:  # a different *sample*, even at the same location
                cos = y[i] @ y[j] / (np.linalg.norm(y[i]) * np.linalg.norm(y[j]))
                inner += w[j] * math.exp(cos / tau - shift)
        total += w[i] * math.log(1.0 + 2.0 * inner)
    return total


def ref_measure_log(points, weights, tau):
    """ref_measure in the log domain: log(1 + 2 Σ_j w_j e^{c_ij/τ}) = logaddexp(0, log 2 + lse_j(c_ij/τ + log w_j))."""
    y = np.asarray(points, np.float64)
    w = np.asarray(weights, np.float64)
    w = w / w.sum()
    u = y / np.linalg.norm(y, axis=1, keepdims=True)
    total = 0.0
    for i in range(len(y)):
        logits = [u[i] @ u[j] / tau + math.log(w[j]) for j in range(len(y)) if j != i]
        total += w[i] * np.logaddexp(0.0, math.log(2.0) + logsumexp(logits))
    return total


def _points(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("positive_term", [False, True])
def test_uniform_weights_match_loop_reference(positive_term):
    y = _points(6, 3)
    got = latent_measure_nt_xent(y, temperature=0.7, positive_term=positive_term)
    want = ref_measure(y.numpy(), np.ones(6), 0.7, positive_term)
    assert got.item() == pytest.approx(want, rel=1e-12)
    if not positive_term:
        assert ref_measure_log(y.numpy(), np.ones(6), 0.7) == pytest.approx(want, rel=1e-12)


def test_weights_match_loop_reference_and_are_normalised():
    y = _points(5, 3, seed=1)
    w = torch.tensor([0.1, 0.4, 0.2, 0.2, 0.1], dtype=torch.float64)
    got = latent_measure_nt_xent(y, w, 0.5)
    assert got.item() == pytest.approx(ref_measure(y.numpy(), w.numpy(), 0.5), rel=1e-12)
    assert latent_measure_nt_xent(y, 3 * w, 0.5).item() == pytest.approx(got.item(), rel=1e-14)


def test_coincident_samples_contribute():
    """Two samples at one location: L = log(1 + 2·½·e^{1/τ}); one sample per location would give 0."""
    y = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    tau = 0.5
    assert latent_measure_nt_xent(y, temperature=tau).item() == pytest.approx(math.log1p(math.exp(1 / tau)), rel=1e-14)


@pytest.mark.parametrize("counts", [12, [1, 2, 3, 4], [5, 5, 1, 1]])
def test_cluster_closed_form_equals_repeated_samples(counts):
    centers = _points(4, 3, seed=2)
    m = torch.tensor(cluster_sizes(counts, 4) if isinstance(counts, int) else counts)
    samples = torch.repeat_interleave(centers, m, dim=0)  # (n, d)
    want = latent_measure_nt_xent(samples, temperature=0.4)
    got = cluster_measure_nt_xent(centers, counts, 0.4)
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    got_pt = cluster_measure_nt_xent(centers, counts, 0.4, positive_term=True)
    assert got_pt.item() == pytest.approx(
        latent_measure_nt_xent(samples, temperature=0.4, positive_term=True).item(), rel=1e-12
    )


def test_fig3_loss_decreases_with_number_of_clusters_then_plateaus():
    """variational Fig. 3 (left): K evenly spaced clusters on S¹, loss falls with K then levels off."""
    n, tau = 120, 0.5
    losses = [cluster_measure_nt_xent(circle_points_even(k), n, tau).item() for k in (1, 2, 3, 4, 5, 6, 8, 12)]
    assert all(a > b for a, b in zip(losses[:5], losses[1:6]))
    assert abs(losses[-1] - losses[-2]) < 1e-3 < losses[0] - losses[-1]


def test_cluster_sizes():
    assert cluster_sizes(10, 3) == [4, 3, 3]
    assert sum(cluster_sizes(17, 5)) == 17
    with pytest.raises(ValueError, match=r"^cluster_sizes: n \(samples\) must be an integer >= 3, got 2$"):
        cluster_sizes(2, 3)
    with pytest.raises(ValueError, match=r"^cluster_sizes: k \(clusters\) must be an integer >= 1, got 0$"):
        cluster_sizes(5, 0)
    with pytest.raises(ValueError, match=r"^cluster_sizes: n \(samples\) must be an integer >= 2, got 4\.0$"):
        cluster_sizes(4.0, 2)  # a float count is still refused


def test_numpy_integer_counts_work_and_equal_python_ints():
    # np.int64 (what ``sizes.sum()`` returns) used to be refused as "not an int"
    assert cluster_sizes(np.int64(10), np.int32(3)) == cluster_sizes(10, 3) == [4, 3, 3]
    assert all(type(m) is int for m in cluster_sizes(np.int64(10), 3))
    centers = _points(3, 2, seed=8)
    total = np.array([3, 3, 4]).sum()  # np.int64(10)
    got = cluster_measure_nt_xent(centers, total, 0.4)
    assert got.item() == cluster_measure_nt_xent(centers, 10, 0.4).item()
    samples = torch.repeat_interleave(centers, torch.tensor([4, 3, 3]), dim=0)  # cluster_sizes(10, 3) copies
    assert got.item() == pytest.approx(ref_measure(samples.numpy(), np.ones(10), 0.4), rel=1e-12)
    with pytest.raises(
        ValueError,
        match=r"^cluster_measure_nt_xent: counts \(total samples of K=3 clusters\) must be an integer >= 3, got np",
    ):
        cluster_measure_nt_xent(centers, np.int64(2))
    with pytest.raises(ValueError, match=r"^cluster_measure_nt_xent: counts must be an int or a sequence of K=3"):
        cluster_measure_nt_xent(centers, True)


def test_gradcheck_points_and_weights():
    y = _points(5, 3, seed=3).requires_grad_(True)
    w = torch.rand(5, generator=torch.Generator().manual_seed(3), dtype=torch.float64).add(0.1).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p, q: latent_measure_nt_xent(p, q, 0.6), (y, w))
    c = _points(3, 2, seed=4).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p: cluster_measure_nt_xent(p, [2, 3, 1], 0.6), (c,))


def test_ensemble_axis_equals_separate_calls():
    y = _points(3, 6, 2, seed=5)
    w = torch.rand(3, 6, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    got = latent_measure_nt_xent(y, w, 0.3)
    got_c = cluster_measure_nt_xent(y, 12, 0.3)
    assert got.shape == (3,) and got_c.shape == (3,)
    for e in range(3):
        assert got[e].item() == pytest.approx(latent_measure_nt_xent(y[e], w[e], 0.3).item(), rel=1e-12)
        assert got_c[e].item() == pytest.approx(cluster_measure_nt_xent(y[e], 12, 0.3).item(), rel=1e-12)
    # shared (n,) weights broadcast over members
    shared = latent_measure_nt_xent(y, w[0], 0.3)
    assert shared[2].item() == pytest.approx(latent_measure_nt_xent(y[2], w[0], 0.3).item(), rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_stable_at_tiny_temperature(dtype):
    y = _points(2, 20, 3, seed=6, dtype=dtype)
    y[:, 1] = y[:, 0]  # coincident samples: e^{1/τ} = e^{1000} would overflow
    y.requires_grad_(True)
    loss = latent_measure_nt_xent(y, temperature=1e-3)
    assert loss.dtype == dtype and torch.isfinite(loss).all()
    assert torch.isfinite(torch.autograd.grad(loss.sum(), y)[0]).all()
    # against the log-domain float64 reference on the same (rounded) points
    ref = [ref_measure_log(y[e].detach().double().numpy(), np.ones(20), 1e-3) for e in range(2)]
    assert min(ref) > 50.0  # the coincident pair alone contributes (2/20)·log(1 + 2·e^{1000}/20)
    np.testing.assert_allclose(loss.detach().double().numpy(), ref, rtol=1e-10 if dtype == torch.float64 else 1e-5)
    c = circle_points_even(4, dtype=dtype).requires_grad_(True)
    lc = cluster_measure_nt_xent(c, 40, 1e-3)
    assert torch.isfinite(lc) and torch.isfinite(torch.autograd.grad(lc, c)[0]).all()
    # log(1 + 2·(9/40)·e^{1000}) ≈ 1000 + log(2·9/40)
    assert lc.item() == pytest.approx(1000 + math.log(2 * 9 / 40), rel=1e-5)


def test_module_and_validation():
    y = _points(4, 3, seed=7)
    assert LatentMeasureNTXent(0.2)(y).item() == pytest.approx(latent_measure_nt_xent(y, temperature=0.2).item())
    with pytest.raises(ValueError, match="weights must have shape"):
        latent_measure_nt_xent(y, torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="non-negative"):
        latent_measure_nt_xent(y, torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=torch.float64))
    # NaN or inf weights used to give a NaN loss without a message (inf / inf after normalising)
    for bad in (math.nan, math.inf):
        with pytest.raises(
            ValueError, match=r"^latent_measure_nt_xent: weights must be finite, non-negative, with a positive sum$"
        ):
            latent_measure_nt_xent(y, torch.tensor([0.2, bad, 0.3, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^latent_measure_nt_xent: weights must be finite"):
        latent_measure_nt_xent(_points(2, 4, 3, seed=9), torch.tensor([[1.0] * 4, [1.0, 1.0, math.nan, 1.0]]))
    with pytest.raises(ValueError, match="at least 2 samples"):
        latent_measure_nt_xent(y[:1])
    with pytest.raises(ValueError, match="counts"):
        cluster_measure_nt_xent(y, 3)
    with pytest.raises(ValueError, match="cluster sizes must be >= 1"):
        cluster_measure_nt_xent(y, [1, 0, 2, 2])
    with pytest.raises(ValueError, match="temperature"):
        cluster_measure_nt_xent(y, 8, 0)


def test_module_with_positive_term_is_prop_2_1_divided_by_the_positive_pair():
    """LatentMeasureNTXent forwards positive_term (the module test only used the default): Σ_i w_i log(1 + 2 Σ_{j≠i}
    w_j e^{(cos_ij − 1)/τ}), uniform w = 1/n, the loop reference."""
    y = torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    tau = 0.4
    ref = ref_measure(y.numpy(), np.ones(5), tau, positive_term=True)
    assert LatentMeasureNTXent(tau, positive_term=True)(y).item() == pytest.approx(ref, rel=1e-12)
