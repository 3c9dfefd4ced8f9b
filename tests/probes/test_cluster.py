import math

import numpy as np
import pytest
import torch
from sklearn.metrics import silhouette_samples, silhouette_score

from ssldyn.data.latent import circle_points
from ssldyn.probes.cluster import (
    alignment,
    angular_spread,
    invariance_gap,
    per_cluster_mean,
    silhouette_cosine,
    silhouette_samples_cosine,
    uniformity,
    uniformity_reference,
)


def test_silhouette_matches_scikit_learn_cosine():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(40, 3))
    lab = rng.integers(0, 4, 40)
    assert abs(silhouette_cosine(z, lab) - silhouette_score(z, lab, metric="cosine")) < 1e-7
    z[lab == 0] += 5 * np.array([1, 0, 0])
    assert abs(silhouette_cosine(z, lab) - silhouette_score(z, lab, metric="cosine")) < 1e-7


def test_per_cluster_mean_written_out_and_per_cluster_silhouette():
    rng = np.random.default_rng(1)
    lab = np.array([2, 0, 5, 2, 2, 0, 5, 5, 5, 0, 2])  # (n,) unsorted labels with gaps
    v = torch.as_tensor(rng.normal(size=(3, 4, lab.size)))  # (R, E, n)
    ref = np.stack([v.numpy()[..., lab == c].mean(-1) for c in (0, 2, 5)], -1)  # (R, E, C) in label order
    np.testing.assert_allclose(per_cluster_mean(v, lab).numpy(), ref, rtol=1e-14)
    np.testing.assert_allclose(per_cluster_mean(v, torch.as_tensor(lab)).numpy(), ref, rtol=1e-14)
    # the per-cluster silhouette against scikit-learn's per-sample values averaged by hand
    z = rng.normal(size=(lab.size, 3))
    sk = silhouette_samples(z, lab, metric="cosine")
    ours = per_cluster_mean(silhouette_samples_cosine(z, lab), lab).numpy()
    np.testing.assert_allclose(ours, [sk[lab == c].mean() for c in (0, 2, 5)], atol=1e-12)
    with pytest.raises(ValueError, match="per_cluster_mean: labels must have shape"):
        per_cluster_mean(v, lab[:-1])
    with pytest.raises(ValueError, match=r"angular_spread: labels must have shape \(11,\), one per sample"):
        angular_spread(z, lab[:-1])  # was a boolean-mask IndexError


def test_non_integer_float_labels_are_one_error_and_whole_float_labels_work():
    # 0.2 and 0.7 used to be truncated to one cluster 0 without a message (4 labels, 2 clusters)
    v = np.array([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(
        ValueError,
        match=r"^per_cluster_mean: labels must be integers \(cluster labels\), got non-integer values such as "
        r"\[0\.2, 0\.7, 1\.2\]$",
    ):
        per_cluster_mean(v, np.array([0.2, 0.7, 1.2, 1.7]))
    z = np.random.default_rng(3).normal(size=(6, 3))
    with pytest.raises(ValueError, match=r"^silhouette: labels must be integers"):
        silhouette_cosine(z, np.array([0.2, 0.2, 0.7, 0.7, 1.5, 1.5]))
    with pytest.raises(ValueError, match=r"^silhouette: labels must be integers"):
        silhouette_samples_cosine(z, torch.tensor([0.0, 0.0, 1.0, 1.0, 2.0, 2.5]))
    with pytest.raises(ValueError, match=r"^angular_spread: labels must be integers .* such as \[nan\]$"):
        angular_spread(z, np.array([0.0, 0.0, 1.0, 1.0, 2.0, np.nan]))
    # whole numbers in a float array are labels: the same values as the integer labels, and as written out
    lab = np.array([1, 0, 1, 0])
    np.testing.assert_array_equal(per_cluster_mean(v, lab.astype(np.float64)).numpy(), [3.0, 2.0])
    lab6 = np.array([0, 0, 1, 1, 2, 2])
    assert silhouette_cosine(z, lab6.astype(np.float32)) == silhouette_cosine(z, lab6)
    assert abs(silhouette_cosine(z, lab6.astype(np.float64)) - silhouette_score(z, lab6, metric="cosine")) < 1e-7


def test_uniformity_and_alignment_written_out():
    g = torch.Generator().manual_seed(3)
    z = torch.randn(7, 3, generator=g, dtype=torch.float64)
    u = z / z.norm(dim=1, keepdim=True)
    vals = [math.exp(-2 * float(((u[i] - u[j]) ** 2).sum())) for i in range(7) for j in range(7) if i != j]
    assert abs(uniformity(z) - math.log(sum(vals) / len(vals))) < 1e-12
    w = torch.randn(7, 3, generator=g, dtype=torch.float64)
    v = w / w.norm(dim=1, keepdim=True)
    assert abs(alignment(z, w) - float(((u - v) ** 2).sum(1).mean())) < 1e-12


def test_uniformity_reference_values():
    # continuous uniform on S^1: log E exp(-2t(1 - cos θ)) by quadrature written out
    th = np.linspace(0, 2 * np.pi, 200001)[:-1]
    ref = math.log(np.mean(np.exp(-4 * (1 - np.cos(th)))))
    assert abs(uniformity_reference(d=2) - ref) < 1e-8
    n = 200  # equally spaced: the periodic trapezoid rule is exact to round-off, minus the i = j term
    assert abs(uniformity_reference(n) - math.log((n * math.exp(ref) - 1) / (n - 1))) < 1e-10
    # S^2: cos θ ~ U[−1, 1] for uniform points (Archimedes), so log E e^{−2t(1 − cos θ)} = log((1 − e^{−4t}) / (4t))
    assert uniformity_reference(d=3) == pytest.approx(math.log((1 - math.exp(-8)) / 8), rel=1e-10)
    # and a sample mean of a large uniform sample
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4000, 3, generator=g, dtype=torch.float64)
    assert abs(uniformity(x) - uniformity_reference(d=3)) < 0.02
    # Fibonacci points: the i = j exclusion written out, against the continuous value
    m = 3000
    assert abs(uniformity_reference(m, d=3) - math.log((m * math.exp(uniformity_reference(d=3)) - 1) / (m - 1))) < 2e-3


def test_angular_spread_and_invariance_gap():
    a = torch.tensor([-0.1, 0.0, 0.1, math.pi / 2 - 0.2, math.pi / 2 + 0.2])
    z = circle_points(a)  # (cos a, sin a)
    lab = torch.tensor([0, 0, 0, 1, 1])
    assert abs(angular_spread(z, lab) - (0.2 / 3 + 0.2) / 2) < 1e-6
    x = torch.randn(50, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    f = lambda t: t[:, :2] * 2  # noqa: E731  invariant to the last two coordinates
    assert invariance_gap(f, x, lambda t: t + torch.cat([torch.zeros(50, 2), torch.ones(50, 2)], 1)) == 0.0
    assert abs(invariance_gap(f, x, lambda t: t + 0.5) - 2 * 0.5 * math.sqrt(2)) < 1e-12


def test_uniformity_and_alignment_reject_what_has_no_meaning():
    from ssldyn.probes.cluster import alignment, uniformity, uniformity_batch, uniformity_reference

    z = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match=r"^uniformity: t must be a finite number > 0"):
            uniformity(z, t=bad)
        with pytest.raises(ValueError, match=r"^uniformity_batch: t must be a finite number > 0"):
            uniformity_batch(z, t=bad)
        with pytest.raises(ValueError, match=r"^uniformity_reference: t must be a finite number > 0"):
            uniformity_reference(t=bad)
        with pytest.raises(ValueError, match=r"^alignment: alpha must be a finite number > 0"):
            alignment(z, z, alpha=bad)
    with pytest.raises(ValueError, match=r"^uniformity: need n >= 2 points, got 1"):
        uniformity(z[:1])
    with pytest.raises(ValueError, match=r"^alignment: z1 and z2 must be positive pairs of one shape"):
        alignment(z, z[:5])
    # numpy scalars are numbers; the value is the formula's
    u = z / z.norm(dim=1, keepdim=True)
    sq = torch.cdist(u, u) ** 2
    want = math.log(torch.exp(-1.5 * sq[~torch.eye(6, dtype=torch.bool)]).mean().item())
    assert uniformity(z, t=np.float32(1.5)) == pytest.approx(want, rel=1e-6)


def test_per_cluster_mean_keeps_no_graph_and_averages_integers_in_float64():
    """The probes' rule (no graph; integers become float64) holds here too: it returned a graph (grad_fn) and turned
    int64 into float32."""
    v = torch.randn(4, dtype=torch.float64, requires_grad=True)
    out = per_cluster_mean(v * 2, [0, 0, 1, 1])
    assert not out.requires_grad
    torch.testing.assert_close(out, torch.stack([(2 * v[:2]).mean(), (2 * v[2:]).mean()]).detach())
    ints = per_cluster_mean(np.arange(6), [0, 0, 1, 1, 2, 2])
    assert ints.dtype == torch.float64 and ints.tolist() == [0.5, 2.5, 4.5]


def test_one_embedding_probes_name_themselves_and_the_ensemble_variant():
    """An ensemble (E, n, d) passed to a one-embedding probe is one error naming the probe and its batched twin;
    the twin gives, member by member, the one-embedding values."""
    from ssldyn.probes.cluster import alignment, angular_spread, silhouette_cosine, uniformity, uniformity_batch

    z = torch.randn(2, 10, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(10) % 2
    with pytest.raises(ValueError, match=r"^uniformity: embeddings must have shape \(n, d\), got \(2, 10, 3\); "
                       r"for an ensemble \(E, n, d\) use uniformity_batch$"):  # fmt: skip
        uniformity(z)
    with pytest.raises(ValueError, match=r"^silhouette_cosine: .*use silhouette_samples_cosine$"):
        silhouette_cosine(z, labels)
    with pytest.raises(ValueError, match=r"^alignment: embeddings must have shape \(n, d\), got \(2, 10, 3\)$"):
        alignment(z, z)
    with pytest.raises(ValueError, match=r"^angular_spread: embeddings must have shape \(n, d\), got \(10,\)$"):
        angular_spread(z[0, :, 0], labels)
    torch.testing.assert_close(uniformity_batch(z), torch.tensor([uniformity(z[0]), uniformity(z[1])],
                                                                 dtype=torch.float64))  # fmt: skip
