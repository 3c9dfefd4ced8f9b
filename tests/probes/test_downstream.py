"""Linear probe, k-NN accuracy and label silhouette against independent references."""

import numpy as np
import pytest
import torch
from sklearn.metrics import silhouette_score

from ssldyn.probes.downstream import knn_accuracy, label_silhouette, linear_probe_accuracy


def _blobs(n, d, sep, rng, classes=3):
    centers = rng.normal(size=(classes, d)) * sep
    y = rng.integers(0, classes, size=n)
    return centers[y] + rng.normal(size=(n, d)), y


def _knn_loop(ztr, ytr, zte, k, metric):
    pred = []
    for q in zte:
        if metric == "cosine":
            d = 1 - (ztr @ q) / (np.linalg.norm(ztr, axis=1) * np.linalg.norm(q))
        else:
            d = np.sqrt(((ztr - q) ** 2).sum(1))
        nn = np.argsort(d, kind="stable")[:k]
        counts = np.bincount(ytr[nn], minlength=ytr.max() + 1)
        pred.append(int(np.argmax(counts)))
    return np.array(pred)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_knn_matches_loop(metric):
    rng = np.random.default_rng(0)
    z, y = _blobs(420, 5, 1.0, rng)
    ztr, ytr, zte, yte = z[:300], y[:300], z[300:], y[300:]
    ref = (_knn_loop(ztr, ytr, zte, 7, metric) == yte).mean()
    assert knn_accuracy(torch.tensor(ztr), torch.tensor(ytr), zte, yte, k=7, metric=metric) == pytest.approx(ref)


def test_linear_probe_separable_vs_xor():
    rng = np.random.default_rng(1)
    z, y = _blobs(600, 4, 6.0, rng)
    ztr, ytr, zte, yte = z[:400], y[:400], z[400:], y[400:]
    assert linear_probe_accuracy(ztr, ytr, zte, yte) >= 0.98
    # XOR: no linear separation (probe ≈ chance) but neighbours see it (k-NN ≈ 1)
    x = rng.uniform(-1, 1, size=(800, 2))
    y = ((x[:, 0] > 0) ^ (x[:, 1] > 0)).astype(int)
    lin = linear_probe_accuracy(x[:600], y[:600], x[600:], y[600:])
    knn = knn_accuracy(x[:600], y[:600], x[600:], y[600:], k=5, metric="euclidean")
    assert lin < 0.7 and knn > 0.9
    # labels independent of the features: chance level (1/3)
    yr = rng.integers(0, 3, size=600)
    assert linear_probe_accuracy(ztr[:300], yr[:300], ztr[300:400], yr[300:400]) < 0.5


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_label_silhouette_matches_sklearn(metric):
    rng = np.random.default_rng(2)
    z, y = _blobs(150, 6, 2.0, rng, classes=4)
    assert label_silhouette(z, y, metric) == pytest.approx(silhouette_score(z, y, metric=metric), abs=1e-10)


def test_errors():
    with pytest.raises(ValueError, match="metric"):
        knn_accuracy(np.zeros((3, 2)), [0, 1, 0], np.zeros((1, 2)), [0], k=1, metric="l1")
    with pytest.raises(ValueError, match="k="):
        knn_accuracy(np.zeros((3, 2)), [0, 1, 0], np.zeros((1, 2)), [0], k=5)
    with pytest.raises(ValueError, match="NaN"):
        linear_probe_accuracy(np.full((3, 2), np.nan), [0, 1, 0], np.zeros((1, 2)), [0])


@pytest.mark.parametrize("K", [2, 3])
def test_logistic_regression_minimises_the_documented_objective(K):
    """Independent reference: scipy's L-BFGS on J(W, b) = Σ CE + ‖W‖²/(2C), written out in numpy. Two classes: the
    binary fit of scikit-learn penalises the logit difference (it minimised J with C/2, weights off by 0.17)."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    from ssldyn.probes.downstream import fit_logistic_regression

    rng = np.random.default_rng(3)
    z, y = _blobs(300, 5, 0.7, rng, classes=K)
    C, (n, d) = 0.5, z.shape

    def J(theta):
        W, b = theta[: d * K].reshape(d, K), theta[d * K :]
        logits = z @ W + b
        ce = (logsumexp(logits, axis=1) - logits[np.arange(n), y]).sum()
        return ce + (W**2).sum() / (2 * C)

    ref = minimize(J, np.zeros(d * K + K), method="L-BFGS-B", options={"maxiter": 10000, "ftol": 1e-15, "gtol": 1e-10})
    W, b = fit_logistic_regression(z, y, C=C, max_iter=5000)
    lg = z @ W.numpy() + b.numpy()
    lr = z @ ref.x[: d * K].reshape(d, K) + ref.x[d * K :]
    # the multinomial logits are identified up to a shift per sample: compare centred logits
    np.testing.assert_allclose(lg - lg.mean(1, keepdims=True), lr - lr.mean(1, keepdims=True), atol=1e-3)
    assert J(np.concatenate([W.numpy().ravel(), b.numpy()])) == pytest.approx(ref.fun, rel=1e-6)


def test_logistic_regression_with_two_classes_and_an_absent_label():
    from ssldyn.probes.downstream import fit_logistic_regression

    rng = np.random.default_rng(4)
    z, y = _blobs(200, 3, 2.0, rng, classes=2)
    y = np.where(y == 1, 2, 0)  # labels 0 and 2: class 1 never seen
    W, b = fit_logistic_regression(z, y)
    assert W.shape == (3, 3) and b[1] == -np.inf
    pred = (torch.from_numpy(z) @ W + b).argmax(1).numpy()
    from sklearn.linear_model import LogisticRegression

    np.testing.assert_array_equal(pred, LogisticRegression().fit(z, y).predict(z))


def test_the_linear_probe_takes_any_integer_labels_and_refuses_fractions():
    """Labels {−1, +1} were used as column indices (−1 wrapped onto +1's column): the probe scored 0.5 on a
    separable problem. Now they are coded as classes: the same accuracy as {0, 1}, and scikit-learn's own."""
    from sklearn.linear_model import LogisticRegression

    from ssldyn.probes.downstream import fit_logistic_regression, linear_probe_accuracy

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)  # separable by the first coordinate
    pm = 2 * y - 1  # {−1, +1}
    acc01 = linear_probe_accuracy(X[:100], y[:100], X[100:], y[100:])
    assert acc01 > 0.95
    assert linear_probe_accuracy(X[:100], pm[:100], X[100:], pm[100:]) == acc01
    mu, sd = X[:100].mean(0), X[:100].std(0)
    ref = LogisticRegression().fit((X[:100] - mu) / sd, pm[:100]).score((X[100:] - mu) / sd, pm[100:])
    assert acc01 == pytest.approx(ref, abs=0.02)
    with pytest.raises(ValueError, match="class indices >= 0"):
        fit_logistic_regression(X, pm)  # one column of W per class index: negative labels have none
    with pytest.raises(ValueError, match=r"^linear_probe_accuracy: y_train must be integers"):
        linear_probe_accuracy(X[:100], y[:100] + 0.5, X[100:], y[100:])
    # a shape error names the function and the argument, and what it needs
    with pytest.raises(ValueError, match=r"^knn_accuracy: y_train must have shape \(100,\) \(one label per row"):
        knn_accuracy(X[:100], y[:10], X[100:], y[100:], k=5)
    with pytest.raises(ValueError, match=r"^knn_accuracy: z_test must have shape \(n, d\)"):
        knn_accuracy(X[:100], y[:100], X[100:, 0], y[100:], k=5)
