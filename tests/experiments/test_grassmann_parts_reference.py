"""Independent-reference checks beside tests/experiments/test_grassmann_parts.py (test audit, 2026-12-06).

Each test pins a helper that was covered only through a quick run whose claim readings survive the mutant:
fig2's Lemma 2 quantile and Thm. 1 constant, prop3's E[C̃]/n demonstration, and the gather path of
``mean_contrastive_loss`` (negatives taken from the anchors' embeddings)."""

import math

import numpy as np
import pytest
import torch

from ssldyn.dynamics.manifold import random_stiefel
from ssldyn.experiments.grassmann._common import mean_contrastive_loss, moons_batch, repeat_per_seed
from ssldyn.experiments.grassmann.fig2 import C_SIGMOID, C_TANH, Fig2Config, _lemma2, _thm1
from ssldyn.experiments.grassmann.prop3 import Prop3Config, _expectation_demo
from ssldyn.models.two_layer import TwoLayerNet

D = torch.float64


def _ls_slope(x, y):
    """Least-squares slope of log y on log x, written out."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    return float(((lx - lx.mean()) * (ly - ly.mean())).sum() / ((lx - lx.mean()) ** 2).sum())


def test_lemma2_reads_the_95_percent_quantile_of_the_scaled_max_entry():
    """q95(h) = 95 % quantile (linear interpolation, numpy's default) over the Haar draws of max|Q_ij|·√h/log h, the
    draws replayed from the same generator; the slopes are least-squares log-log slopes; the aligned control
    ``[I_2; 0]`` has max entry 1, so its curve is √h/log h exactly."""
    widths, draws = [10, 100, 1000], 40
    cfg = Fig2Config(lemma2_widths=widths, lemma2_draws=draws)
    got = _lemma2(cfg, torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    q95 = []
    for h in widths:
        Q = random_stiefel(h, 2, draws, generator=g, dtype=D).numpy()  # (draws, h, 2)
        m = np.abs(Q).max(axis=(1, 2)) * math.sqrt(h) / math.log(h)
        q95.append(float(np.quantile(m, 0.95)))
        # the max entry of a Haar column is between 1/√h and 1: the statistic lies in [1/log h, √h/log h]
        assert 1 / math.log(h) <= m.min() and m.max() <= math.sqrt(h) / math.log(h)
    assert [got["lemma2_q95"][str(h)] for h in widths] == pytest.approx(q95, rel=1e-12)
    assert got["lemma2_slope"] == pytest.approx(_ls_slope(widths, q95), rel=1e-10)
    aligned = [math.sqrt(h) / math.log(h) for h in widths]
    assert got["lemma2_aligned_slope"] == pytest.approx(_ls_slope(widths, aligned), rel=1e-10)


def test_thm1_constant_is_the_mean_over_draws_of_the_worst_point_ratio_written_out():
    """K̂(h) = mean over the Haar draws (W1 ∈ St(h, d), W2 ∈ St(h, z), drawn in that order) of
    max_x ‖W2ᵀ(φ(W1x) − W1x)‖ / (c‖x‖² d √(log⁴h/h)), in numpy, for tanh and sigmoid."""
    widths, draws = [20, 200], 3
    cfg = Fig2Config(thm1_widths=widths, thm1_draws=draws, thm1_points=7)
    x = torch.randn(12, 2, generator=torch.Generator().manual_seed(0), dtype=D)
    got = _thm1(cfg, x, torch.Generator().manual_seed(9))
    xp = x[:7].numpy()
    g = torch.Generator().manual_seed(9)
    ref = {"tanh": [], "sigmoid": []}
    for h in widths:
        acc = {"tanh": 0.0, "sigmoid": 0.0}
        for _ in range(draws):
            W1 = random_stiefel(h, 2, 1, generator=g, dtype=D)[0].numpy()
            W2 = random_stiefel(h, cfg.z, 1, generator=g, dtype=D)[0].numpy()
            a = xp @ W1.T  # (P, h)
            for act, fn, c in (("tanh", np.tanh, C_TANH), ("sigmoid", lambda t: 1 / (1 + np.exp(-t)), C_SIGMOID)):
                gap = np.linalg.norm((fn(a) - a) @ W2, axis=1)
                bound = c * (xp**2).sum(1) * 2 * math.sqrt(math.log(h) ** 4 / h)
                acc[act] += float((gap / bound).max())
        for act in acc:
            ref[act].append(acc[act] / draws)
    for act in ("tanh", "sigmoid"):
        assert [got[f"{act}_K_hat"][str(h)] for h in widths] == pytest.approx(ref[act], rel=1e-10)
        assert got[f"{act}_K_hat_slope"] == pytest.approx(_ls_slope(widths, ref[act]), rel=1e-10)


def test_expectation_demo_matches_the_exact_expectation_minus_the_unbiased_covariance():
    """With negatives uniform over the other anchors and zero-mean positive noise (p = q = 1),
    E[C̃]/n = (1/n) Σ_i x_i((n x̄ − x_i)/(n − 1) − x_i)ᵀ = −cov(x) with the unbiased 1/(n − 1) exactly (written out
    here). Few anchors (n = 6) make the biased covariance 1/n off by ‖cov‖/n; the Monte Carlo error of the demo's
    average is estimated from its own per-draw spread (independent numpy simulation)."""
    n, draws = 6, 3000
    x = torch.randn(n, 2, generator=torch.Generator().manual_seed(1), dtype=D) * torch.tensor([2.0, 0.7], dtype=D)
    xn = x.numpy()
    xbar = xn.mean(0)
    exact = sum(np.outer(xn[i], (n * xbar - xn[i]) / (n - 1) - xn[i]) for i in range(n)) / n
    cov_u = np.cov(xn.T)  # ddof 1
    np.testing.assert_allclose(exact, -cov_u, rtol=1e-12, atol=1e-14)
    # per-draw spread of C̃/n, simulated independently (noise variance 0.1, one positive and one negative)
    rng = np.random.default_rng(0)
    sims = []
    for _ in range(2000):
        j = (np.arange(n) + rng.integers(1, n, size=n)) % n
        eps = rng.normal(0.0, math.sqrt(0.1), size=(n, 2))
        sims.append(sum(np.outer(xn[i], xn[j[i]] - xn[i] - eps[i]) for i in range(n)) / n)
    se = np.linalg.norm(np.std(sims, axis=0)) / math.sqrt(draws)  # Frobenius size of the standard error
    out = _expectation_demo(Prop3Config(mc_draws=draws), 0, x)
    assert out["ec_used_error"] < 4 * se
    bias = np.linalg.norm(cov_u - np.cov(xn.T, ddof=0))  # what a 1/n covariance would add
    assert bias > 8 * se  # the check can see the wrong normalisation
    assert out["ec_printed_error"] == pytest.approx(np.linalg.norm(-cov_u + xn.T @ xn / n), abs=4 * se)
    assert out["mean_outer_norm"] == pytest.approx(np.linalg.norm(np.outer(xbar, xbar)), rel=1e-12)


def test_negatives_gathered_from_the_anchors_give_the_same_loss_as_embedding_them():
    """``neg_index`` (the negatives are anchors) is a shortcut: the loss equals the one with the negatives embedded
    again, member by member (mean_contrastive_loss without neg_index, itself checked against simple_contrastive)."""
    mb = moons_batch(25, 0.05, [0, 4])
    net = TwoLayerNet(2, 9, 2, "tanh", ensemble=4, seeds=[1, 2, 3, 4], dtype=D)
    x, xp, xn, ni = (repeat_per_seed(t, 2) for t in (mb.x, mb.x_pos, mb.x_neg, mb.neg_index))
    ref = mean_contrastive_loss(net, x, xp, xn)
    got = mean_contrastive_loss(net, x, xp, xn, ni)
    torch.testing.assert_close(got, ref, rtol=1e-13, atol=1e-15)
    # gradients too (the gather is differentiable)
    gr = torch.autograd.grad(ref.sum(), net.W1)[0]
    gg = torch.autograd.grad(got.sum(), net.W1)[0]
    torch.testing.assert_close(gg, gr, rtol=1e-12, atol=1e-14)


def test_fig5_shortfall_reads_exactly_v1_to_vk():
    """``max(1 − ‖P v_i‖, i ≤ z; ‖P v_i‖, z < i ≤ k)``: v_{k+1} and beyond do not count. The existing hand case has
    ‖P v_4‖ = 0, which cannot tell ``norms[z:k]`` from ``norms[z:k + 1]``; here every eigenvector's norm differs."""
    from ssldyn.experiments.grassmann.fig5 import shortfall

    norms = [0.9, 0.8, 0.3, 0.6, 0.95]
    assert shortfall(norms, 2, 3) == pytest.approx(0.3)  # v_1, v_2 short by 0.1, 0.2; v_3 inside by 0.3
    assert shortfall(norms, 2, 4) == pytest.approx(0.6)  # v_4 now counts
    assert shortfall(norms, 2, 2) == pytest.approx(0.2)  # only the first z
    assert shortfall(norms, 1, 1) == pytest.approx(0.1)
