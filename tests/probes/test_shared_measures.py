"""The measures the experiments share, once in probes / viz: batched silhouette and uniformity, log-log
slopes, the t-SNE map — each against an independent reference (scikit-learn, numpy loops, closed forms)."""

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import silhouette_samples

from ssldyn.probes import (
    loglog_fit,
    loglog_slope,
    silhouette_cosine,
    silhouette_samples_cosine,
    spearman,
    uniformity,
    uniformity_batch,
)


def _clustered(R=2, E=3, n=30, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 3
    centers = torch.randn(3, d, generator=g, dtype=torch.float64)
    z = centers[labels] + 0.7 * torch.randn(R, E, n, d, generator=g, dtype=torch.float64)
    return z, labels


def test_batched_silhouette_equals_sklearn_per_record_and_member():
    z, labels = _clustered()
    labels = labels.clone()
    labels[0] = 3  # a singleton cluster: its sample gets 0, as in scikit-learn
    s = silhouette_samples_cosine(z, labels)  # (R, E, n)
    assert s.shape == (2, 3, 30)
    for r in range(2):
        for e in range(3):
            ref = silhouette_samples(z[r, e].numpy(), labels.numpy(), metric="cosine")
            np.testing.assert_allclose(s[r, e].numpy(), ref, atol=1e-12)
    assert silhouette_cosine(z[1, 2], labels) == pytest.approx(float(s[1, 2].mean()), abs=1e-15)


def test_batched_silhouette_errors_name_the_input():
    z, labels = _clustered()
    with pytest.raises(ValueError, match="labels must have shape"):
        silhouette_samples_cosine(z, labels[:5])
    with pytest.raises(ValueError, match="number of clusters"):
        silhouette_samples_cosine(z, torch.zeros(30, dtype=torch.long))


def test_batched_uniformity_equals_the_pairwise_formula():
    z, _ = _clustered(n=12)
    u = uniformity_batch(z, t=1.5)  # (R, E)
    for r in range(2):
        for e in range(3):
            x = z[r, e].numpy()
            x = x / np.linalg.norm(x, axis=1, keepdims=True)
            vals = [math.exp(-1.5 * np.sum((x[i] - x[j]) ** 2)) for i in range(12) for j in range(12) if i != j]
            assert float(u[r, e]) == pytest.approx(math.log(np.mean(vals)), abs=1e-12)
            assert float(u[r, e]) == pytest.approx(uniformity(z[r, e], t=1.5), abs=1e-12)


def test_loglog_slope_recovers_a_power_law_and_skips_unusable_points():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    assert loglog_slope(x, 3.0 * x**-0.5) == pytest.approx(-0.5, abs=1e-12)
    s, b = loglog_fit(x, 3.0 * x**2)
    assert s == pytest.approx(2.0, abs=1e-12) and b == pytest.approx(math.log(3.0), abs=1e-12)
    y = 3.0 * x**-0.5
    y[1], y[3] = 0.0, np.nan  # no logarithm: left out
    assert loglog_slope(x, y) == pytest.approx(-0.5, abs=1e-12)
    assert math.isnan(loglog_slope([1.0, 2.0], [1.0, 0.0])) and math.isnan(loglog_slope([2.0, 2.0], [1.0, 3.0]))
    rng = np.random.default_rng(0)
    xn, yn = np.geomspace(1, 100, 20), np.geomspace(1, 100, 20) ** 1.3 * np.exp(rng.normal(0, 0.1, 20))
    assert loglog_slope(xn, yn) == pytest.approx(np.polyfit(np.log(xn), np.log(yn), 1)[0], abs=1e-12)
    with pytest.raises(ValueError, match="same length"):
        loglog_slope([1, 2, 3], [1, 2])


def _average_ranks(v):
    """Ranks 1..n, tied values sharing the mean of their positions (written out, no scipy)."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return np.array(r)


def test_spearman_is_the_pearson_correlation_of_average_ranks():
    rng = np.random.default_rng(4)
    a = rng.normal(size=25)
    b = np.round(a + rng.normal(size=25), 0)  # ties in b
    ra, rb = _average_ranks(a.tolist()), _average_ranks(b.tolist())
    want = ((ra - ra.mean()) * (rb - rb.mean())).sum() / np.sqrt(
        ((ra - ra.mean()) ** 2).sum() * ((rb - rb.mean()) ** 2).sum()
    )
    assert spearman(a, b) == pytest.approx(want, abs=1e-12)
    assert 0.3 < want < 0.95  # a partial order, so a wrong rank rule would show
    assert spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)  # monotone, not linear
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # a constant sample: undefined, NaN by default or 0 (no order) when asked; either side
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert spearman([1, 2, 3], [5, 5, 5], if_constant="zero") == 0.0
    assert spearman([np.inf] * 3, [1, 2, 3], if_constant="zero") == 0.0
    assert math.isnan(spearman([1, 2, np.nan], [1, 2, 3], if_constant="zero"))
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="spearman: if_constant 'skip': allowed values are 'nan', 'zero'"):
        spearman([1, 2], [1, 2], if_constant="skip")  # pyright: ignore[reportArgumentType]


def test_tsne_embedding_is_scikit_learn_tsne_with_the_documented_settings():
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE

    from ssldyn.viz.images import tsne_embedding

    rng = np.random.default_rng(1)
    y = np.arange(120) % 3
    x = rng.normal(size=(3, 64))[y] * 4 + rng.normal(size=(120, 64))
    got = tsne_embedding(x, seed=2, perplexity=20, max_iter=300)
    xp = PCA(50, svd_solver="full", random_state=2).fit_transform(x)
    ref = TSNE(2, perplexity=20, init="pca", random_state=2, max_iter=300, method="exact", n_jobs=1).fit_transform(xp)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
    from ssldyn.probes.downstream import knn_accuracy

    assert knn_accuracy(got[::2], y[::2], got[1::2], y[1::2], k=3, metric="euclidean") == 1.0
