"""RankMe, the linear probe and the k-NN probe against written-out references."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import logsumexp

from ssldyn.probes.monitors import KNNProbe, LinearProbe
from ssldyn.probes.rank import rankme


def _rankme_reference(z: np.ndarray, eps: float = 1e-7) -> float:
    s = np.linalg.svd(z, compute_uv=False)  # not centred (Garrido et al. eq. 1)
    p = s / s.sum() + eps
    return float(np.exp(-(p * np.log(p)).sum()))


def test_rankme_is_the_formula_of_garrido_et_al():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(40, 6)) * np.array([5.0, 3.0, 1.0, 0.5, 0.1, 0.01]) + 2.0
    r = rankme(z)  # numpy in: a 0-d tensor out (the type does not depend on the input's rank)
    assert isinstance(r, torch.Tensor) and r.shape == () and r.dtype == torch.float64
    assert float(r) == pytest.approx(_rankme_reference(z), rel=1e-12)
    assert float(rankme(torch.tensor(z))) == pytest.approx(_rankme_reference(z), rel=1e-12)
    ens = rng.normal(size=(3, 40, 6))
    np.testing.assert_allclose(rankme(torch.tensor(ens)).numpy(), [_rankme_reference(e) for e in ens], rtol=1e-12)
    # the uncentred rank sees a constant offset (the centred effective rank would not)
    assert float(rankme(np.ones((10, 4)) * np.arange(1, 5))) == pytest.approx(1.0, abs=1e-5)


def test_rankme_rejects_bad_input():
    with pytest.raises(ValueError, match=r"\(n, d\) or \(E, n, d\)"):
        rankme(np.ones(5))
    with pytest.raises(ValueError, match="NaN"):
        rankme(np.full((3, 2), np.nan))


def _knn_reference(ztr, ytr, zte, k, metric):
    if metric == "cosine":
        a = ztr / np.linalg.norm(ztr, axis=1, keepdims=True)
        b = zte / np.linalg.norm(zte, axis=1, keepdims=True)
        dist = 1.0 - b @ a.T
    else:
        dist = np.sqrt(((zte[:, None, :] - ztr[None, :, :]) ** 2).sum(-1))
    pred = []
    for row in dist:
        nn_idx = np.argsort(row, kind="stable")[:k]
        votes = np.bincount(ytr[nn_idx], minlength=ytr.max() + 1)
        pred.append(np.argmax(votes))  # ties: the smallest label
    return np.asarray(pred)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_knn_probe_matches_a_brute_force_knn(metric):
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(3), 30)
    z = rng.normal(size=(90, 5)) + 0.8 * np.eye(5)[y]  # weakly informative features
    probe = KNNProbe(y, k=7, metric=metric, test_size=0.4, seed=3)
    tr, te = probe.train_idx, probe.test_idx
    want = (_knn_reference(z[tr], y[tr], z[te], 7, metric) == y[te]).mean()
    assert probe(z) == pytest.approx(want, abs=1e-12)
    assert 0.4 < want < 1.0  # a non-trivial accuracy, so a wrong neighbour rule would show
    # the split is fixed, stratified, and the same for every call
    assert sorted(np.bincount(y[te]).tolist()) == [12, 12, 12]
    assert probe(torch.tensor(z)) == probe(z)


def test_linear_probe_matches_the_logistic_regression_objective_minimised_by_scipy():
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(3), 40)
    z = rng.normal(size=(120, 4)) * np.array([1.0, 10.0, 0.1, 1.0]) + np.eye(4)[y] @ np.diag([1.0, 8.0, 0.1, 0.0])
    probe = LinearProbe(y, C=0.5, test_size=0.5, seed=0)
    tr, te = probe.train_idx, probe.test_idx
    mu, sd = z[tr].mean(0), z[tr].std(0)  # StandardScaler: population sd
    xtr, xte = (z[tr] - mu) / sd, (z[te] - mu) / sd
    K, d = 3, 4

    def objective(theta):  # Σ_i CE(softmax(x_i W + b), y_i) + ‖W‖²/(2C), the bias unpenalised
        W, b = theta[: d * K].reshape(d, K), theta[d * K :]
        logits = xtr @ W + b
        return -(logits[np.arange(len(tr)), y[tr]] - logsumexp(logits, axis=1)).sum() + (W**2).sum() / (2 * 0.5)

    theta = minimize(objective, np.zeros(d * K + K), method="L-BFGS-B", options={"gtol": 1e-10}).x
    pred = (xte @ theta[: d * K].reshape(d, K) + theta[d * K :]).argmax(1)
    assert probe(z) == pytest.approx((pred == y[te]).mean(), abs=1e-12)


def test_probes_give_one_value_per_member_for_an_ensemble():
    rng = np.random.default_rng(3)
    y = np.arange(40) % 2
    z = rng.normal(size=(2, 40, 3)) + 2.0 * y[None, :, None]
    for probe in (LinearProbe(y), KNNProbe(y, k=3)):
        out = probe(torch.tensor(z))
        assert out.shape == (2,)
        assert out.tolist() == [probe(z[0]), probe(z[1])]


def test_probes_score_with_the_library_measures_and_accept_any_sortable_labels():
    from ssldyn.probes.downstream import knn_accuracy, linear_probe_accuracy

    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(3), 20)
    z = rng.normal(size=(60, 4)) + 1.2 * np.eye(4)[y]
    lin, knn = LinearProbe(y, C=0.3, seed=1), KNNProbe(y, k=5, seed=1)
    tr, te = lin.train_idx, lin.test_idx
    assert lin(z) == linear_probe_accuracy(z[tr], y[tr], z[te], y[te], C=0.3, max_iter=1000)
    assert knn(z) == knn_accuracy(z[tr], y[tr], z[te], y[te], k=5)
    words = np.array(["cat", "dog", "emu"])[y]  # the same classes, named: coded in sorted order
    assert LinearProbe(words, C=0.3, seed=1)(z) == lin(z) and KNNProbe(words, k=5, seed=1)(z) == knn(z)


def test_probe_inputs_are_checked():
    with pytest.raises(ValueError, match="one row per label"):
        LinearProbe(np.arange(10) % 2)(np.ones((9, 2)))
    with pytest.raises(ValueError, match="test_size"):
        KNNProbe(np.arange(10) % 2, test_size=1.5)
    with pytest.raises(ValueError, match="k=50"):
        KNNProbe(np.arange(10) % 2, k=50)
    with pytest.raises(ValueError, match="metric"):
        KNNProbe(np.arange(10) % 2, metric="manhattan")
