"""nonlinearity.modulation's helpers against independent references: the binomial standard error written out and
checked by simulation, eq. 147's check against a perturbed solver, and the Monte Carlo of eq. 155-157 recomputed in
numpy from the same draws, with P[E_l] by scipy quadrature of ``½∫₀¹ Π_{l'≠l} F(y + ε_l − ε_l') dy``."""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import quad

from ssldyn.experiments.nonlinearity import modulation as mod
from ssldyn.experiments.nonlinearity.modulation import (
    ModulationConfig,
    _binomial_se,
    _eq147_error,
    _modulation_factor_mc,
)


def test_binomial_se_is_sqrt_p_one_minus_p_over_n_with_a_one_count_floor():
    n = 100
    p = torch.tensor([0.3, 0.5, 0.0, 1.0, 0.001, 0.02], dtype=torch.float64)
    got = _binomial_se(p, n).numpy()
    ref = [math.sqrt(0.3 * 0.7 / 100), 0.05, 0.01, 0.01, 0.01, math.sqrt(0.02 * 0.98 / 100)]
    # p = 0, 1 and 0.001 (p(1 − p) = 0.000999 < 1/n = 0.01) take the floor √((1/n)/n) = 1/n; 0.02·0.98 = 0.0196 does not
    np.testing.assert_allclose(got, ref, rtol=1e-14)
    # a Monte Carlo of the proportion: its standard deviation over repeated draws is the standard error (p away from
    # the floor)
    rng = np.random.default_rng(0)
    for pp, nn in ((0.3, 400), (0.07, 2000)):
        sim = rng.binomial(nn, pp, size=40000) / nn
        assert float(_binomial_se(torch.tensor(pp, dtype=torch.float64), nn)) == pytest.approx(sim.std(), rel=0.02)


def test_eq147_error_is_small_and_sees_a_perturbed_solver(monkeypatch):
    """The closed form ``y/(y + b) = y₀/(y₀ + b) e^{bt}`` is the exact solution of ``ẏ = (y + b)y`` (Bernoulli:
    ``1/y = (1/y₀ + 1/b)e^{−bt} − 1/b``), so the helper's error is at the solver's tolerance; a solver whose solution
    is off by a relative 1e-3 must be reported as an error of ≈ 1e-3 (the helper really compares the two)."""
    assert 0 <= _eq147_error() < 1e-8
    import scipy.integrate

    real = scipy.integrate.solve_ivp

    def off(*args, **kw):
        sol = real(*args, **kw)
        sol.y = sol.y * (1 + 1e-3)
        return sol

    monkeypatch.setattr(scipy.integrate, "solve_ivp", off)
    assert _eq147_error() == pytest.approx(1e-3 / (1 + 1e-3), rel=1e-4)  # |c − c(1 + δ)| / |c(1 + δ)|


def _p_event_quad(eps: np.ndarray, l: int) -> float:
    """``P[Y_l > 0, Y_l + ε_l ≥ Y_l' + ε_l' ∀ l'] = ½∫₀¹ Π_{l'≠l} F(y + ε_l − ε_l') dy``, ``F(m) = clip((m + 1)/2)``."""
    others = np.delete(eps, l)

    def f(y):
        return float(np.prod(np.clip((y + eps[l] - others + 1) / 2, 0.0, 1.0)))

    kinks = sorted({float(v) for o in others for v in (o - eps[l] - 1, o - eps[l] + 1) if 0 < v < 1})
    return 0.5 * quad(f, 0.0, 1.0, points=kinks or None, epsabs=1e-14, epsrel=1e-12, limit=200)[0]


def test_modulation_factor_mc_recomputed_in_numpy_from_the_same_draws():
    d, n = 4, 40_000
    grid = [-2.5, -1.5, -1.0, -0.4, 0.0, 0.3, 1.0, 1.6]
    cfg = ModulationConfig.model_validate({"d": d, "mc_samples": n, "eps_grid": grid, "eps_vectors": 3})
    out = _modulation_factor_mc(cfg, torch.Generator().manual_seed(5), torch.device("cpu"))
    # the same draws, in the same order: Y (n, d), then per case the lower ranks ε (d,) ~ U[−½, ½] and u ~ U[0, 1);
    # case j's top factor is moved to the second one + (j + 1 − u)/3, a gap in (j/3, (j + 1)/3]
    g = torch.Generator().manual_seed(5)
    Y = (torch.rand(n, d, generator=g, dtype=torch.float64) * 2 - 1).numpy()
    vecs, gaps = [], []
    for j in range(3):
        e = (torch.rand(d, generator=g, dtype=torch.float64) - 0.5).numpy()
        u = float(torch.rand((), generator=g, dtype=torch.float64))
        o = np.argsort(-e)
        gaps.append((j + 1 - u) / 3)
        e[o[0]] = e[o[1]] + gaps[-1]
        vecs.append(e)
    assert all(j / 3 < gp <= (j + 1) / 3 for j, gp in enumerate(gaps))

    def se(p):
        return math.sqrt(max(p * (1 - p), 1 / n) / n)

    t = out["table"]
    np.testing.assert_allclose(t["eps"], grid)
    for row, eps in zip(t.itertuples(), grid):
        mc = float(np.mean((Y[:, 0] > 0) & (Y[:, 0] + eps >= Y[:, 1:].max(1))))
        exact = _p_event_quad(np.array([eps, 0.0, 0.0, 0.0]), 0)  # one coordinate shifted by ε
        assert row.mc == mc
        assert row.closed_form == pytest.approx(exact, abs=1e-12)  # eq. 155 (with ½ for ε > 1, and ε ≤ −1)
        assert row.z == pytest.approx(abs(mc - exact) / se(exact), rel=1e-8, abs=1e-8)
        assert abs(mc - exact) <= 4.5 * se(exact)  # the Monte Carlo agrees with the quadrature
        off = _p_event_quad(np.zeros(d - 1) + np.r_[eps, np.zeros(d - 2)], 0)  # d − 1 coordinates
        assert row.z_control == pytest.approx(abs(mc - off) / se(exact), rel=1e-8, abs=1e-8)
    assert t.loc[t.eps == -2.5, "closed_form"].item() == 0.0 and t.loc[t.eps == 1.6, "closed_form"].item() == 0.5
    assert out["eq155_max_z"] == pytest.approx(t.loc[t.eps <= 1, "z"].max(), rel=1e-12)
    assert out["eq155_big_eps"] == 1.6 and out["eq155_big_eps_p"] == t.loc[t.eps == 1.6, "mc"].item()
    # eq. 156 / 157 on the random vectors, recomputed
    z156, z157, z156c, z157c, t156, t157 = [], [], [], [], [], []
    for eps, gap in zip(vecs, gaps):
        sh = Y + eps
        p = ((sh >= sh.max(1, keepdims=True)) & (Y > 0)).mean(0)  # (d,)
        for l_ in range(d):  # the Monte Carlo agrees with the quadrature for every coordinate
            ex = _p_event_quad(eps, l_)
            assert abs(p[l_] - ex) <= 4.5 * se(ex)
        o = np.argsort(-eps)
        es, ps = eps[o], p[o]
        assert es[0] - es[1] == pytest.approx(gap, abs=1e-12) and es[0] - es[-1] < 2  # inside eq. 157's range
        z156.append((0.5 * gap - ps[0]) / se(ps[0]))
        z156c.append((gap - ps[0]) / se(ps[0]))  # the control: the bound doubled, P ≥ gap, on the same draw
        t156.append(ps[0] / (0.5 * gap))
        for r in range(2, d + 1):  # 1-based rank r, bound over the 1-based r' < r: (1 − gap/2)^{r'+1} / (r' + 1)
            bound = min((1 - (es[rp - 1] - es[r - 1]) / 2) ** (rp + 1) / (rp + 1) for rp in range(1, r))
            z157.append((ps[r - 1] - bound) / se(ps[r - 1]))
            z157c.append((ps[r - 1] - 0.5 * bound) / se(ps[r - 1]))
            t157.append(ps[r - 1] / bound)
    assert out["eq156_cases"] == 3 and out["eq157_cases"] == 3 * (d - 1)
    assert out["eq156_max_z"] == pytest.approx(max(z156), rel=1e-9)
    assert out["eq156_control_max_z"] == pytest.approx(max(z156c), rel=1e-9)
    assert out["eq157_max_z"] == pytest.approx(max(z157), rel=1e-9)
    assert out["eq157_control_max_z"] == pytest.approx(max(z157c), rel=1e-9)
    assert out["eq156_max_z"] < 4 and out["eq157_max_z"] < 4  # the bounds hold at these gaps (≤ 1)
    assert out["eq156_tightness"] == pytest.approx(min(t156), rel=1e-12) and out["eq156_tightness"] >= 1
    assert out["eq156_tightness_gap"] == gaps[int(np.argmin(t156))]
    assert out["eq157_tightness"] == pytest.approx(max(t157), rel=1e-12) and out["eq157_tightness"] <= 1
    assert out["eq156_gap_min"] == min(gaps) and out["eq156_gap_max"] == max(gaps)
    assert out["eq156_control_violated"] == sum(z > 4 for z in z156c) >= 1  # the top stratum, gap > 2/3 > ½


@pytest.mark.parametrize("gap", [0.6, 0.8, 1.0])
def test_eq156_doubled_bound_is_violated_where_the_papers_bound_holds(gap):
    """eq156's control, P ≥ gap, against the formula written out: with ε = (gap, 0, …, 0) the bound's chain is an
    equality, P[E_0] = (1 − ((1 + gap)/2)^d)/d + gap/2 (eq. 155, 0 ≤ ε ≤ 1), ≥ gap/2 (the paper's bound; equal at
    gap = 1, where P = P[Y_0 > 0] = ½) and < gap for gap > ½. A Monte Carlo P agrees with the formula, satisfies
    the paper's bound within 4 SE and violates the doubled one by many SE."""
    d, n = 10, 200_000
    exact = (1 - ((1 + gap) / 2) ** d) / d + gap / 2
    assert exact == pytest.approx(mod.p_event_closed_form(gap, d), abs=1e-15)
    assert exact >= gap / 2 and exact <= 0.5 < gap
    Y = np.random.default_rng(1).uniform(-1, 1, size=(n, d))
    p = float(np.mean((Y[:, 0] > 0) & (Y[:, 0] + gap >= Y[:, 1:].max(1))))
    se = math.sqrt(p * (1 - p) / n)
    assert abs(p - exact) <= 4 * se
    assert (gap / 2 - p) / se <= 4  # eq. 156 holds
    assert (gap - p) / se > 100  # the control fails: (gap − P)/SE ≈ 190 (gap 0.6) … 450 (gap 1) SE


def test_p_event_closed_form_matches_quadrature_on_every_case():
    """The helper's closed form, used by the z-scores above, against the quadrature in every branch (d = 3, 6)."""
    for d in (3, 6):
        for eps in (-2.3, -2.0, -1.4, -1.0, -0.5, -1e-3, 0.0, 0.6, 1.0, 1.2):
            ref = _p_event_quad(np.r_[eps, np.zeros(d - 1)], 0)
            assert mod.p_event_closed_form(eps, d) == pytest.approx(ref, abs=1e-12)
