"""nonlinearity.corollary2's population integrals against independent float64 references.

``A(w) = C_α[x̃^w]`` of the von Mises × uniform-radius mixture (``x̃^w = x·1[wᵀx > 0]``), written out here:
uniform α with ``scipy.integrate.quad`` over the active half-circle (``A = E[r²]·E[uuᵀ; act] − E[r]²·m mᵀ``,
``E[r] = 1``, ``E[r²] = 1 + δ²/3``), Gaussian α as the pair integral ``½ E[K(x, y)(x̃ − ỹ)(x̃ − ỹ)ᵀ]`` on a
tensor Gauss–Legendre rule of our own over the whole circle (no half-plane shortcut, no inactive-mass term).
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.integrate import quad
from scipy.special import i0e

from ssldyn.data.circle_mixture import CircleMixture
from ssldyn.experiments.nonlinearity.corollary2 import A_population, flow_rate, roughness, stable_optima

D = torch.float64
MIX = CircleMixture((-0.6, 0.1, 0.9), kappa=8.0, weights=(0.5, 0.3, 0.2), delta=0.2)
FINE = {"max_arc": math.radians(6.0), "n_gl": 6, "n_r": 5}


def _p_phi(phi):
    w = np.array(MIX.weights) / sum(MIX.weights)
    return sum(wj * math.exp(MIX.kappa * (math.cos(phi - c) - 1)) for wj, c in zip(w, MIX.centres)) / (
        2 * math.pi * i0e(MIX.kappa)
    )


def _A_uniform(theta):
    lo, hi = theta - math.pi / 2, theta + math.pi / 2
    pts = [c + 2 * math.pi * k for c in MIX.centres for k in (-1, 0, 1) if lo < c + 2 * math.pi * k < hi]

    def E(f):
        return quad(lambda p: f(p) * _p_phi(p), lo, hi, points=pts or None, epsabs=1e-13, epsrel=1e-11, limit=200)[0]

    m = np.array([E(math.cos), E(math.sin)])
    M2 = np.array([[E(lambda p: math.cos(p) ** 2), E(lambda p: math.cos(p) * math.sin(p))],
                   [0.0, E(lambda p: math.sin(p) ** 2)]])  # fmt: skip
    M2[1, 0] = M2[0, 1]
    return (1 + MIX.delta**2 / 3) * M2 - np.outer(m, m)


def _A_pairs(theta, tau, alpha_theta):
    """½ E[K(x, y)(x̃ − ỹ)(x̃ − ỹ)ᵀ], gate at θ, α = Gaussian of relu(w*ᵀx) with w* at ``alpha_theta``."""
    breaks = np.sort(np.mod([theta - math.pi / 2, theta + math.pi / 2, alpha_theta - math.pi / 2,
                             alpha_theta + math.pi / 2], 2 * math.pi))  # fmt: skip
    ends = np.append(breaks[1:], breaks[0] + 2 * math.pi)
    gx, gw = np.polynomial.legendre.leggauss(8)
    phi, wphi = [], []
    for a, b in zip(breaks, ends):
        if b - a < 1e-15:
            continue
        edges = np.linspace(a, b, max(1, math.ceil((b - a) / math.radians(8.0))) + 1)
        for e0, e1 in zip(edges[:-1], edges[1:]):
            phi.append(0.5 * (e1 - e0) * gx + 0.5 * (e1 + e0))
            wphi.append(0.5 * (e1 - e0) * gw)
    phi, wphi = np.concatenate(phi), np.concatenate(wphi)
    rx, rw = np.polynomial.legendre.leggauss(5)
    r, wr = 1 + MIX.delta * rx, 0.5 * rw  # r ~ U[1 − δ, 1 + δ]
    P = (np.array([_p_phi(v) for v in phi]) * wphi)[:, None] * wr[None, :]  # (n_φ, n_r)
    x = r[None, :, None] * np.stack([np.cos(phi), np.sin(phi)], -1)[:, None, :]  # (n_φ, n_r, 2)
    x, p = x.reshape(-1, 2), P.reshape(-1)
    xt = x * (x @ [math.cos(theta), math.sin(theta)] > 0)[:, None]
    u = np.maximum(x @ [math.cos(alpha_theta), math.sin(alpha_theta)], 0.0)
    K = np.exp(-((u[:, None] - u[None, :]) ** 2) / (2 * tau))
    W = p[:, None] * p[None, :] * K  # (n, n)
    d0, d1 = xt[:, None, 0] - xt[None, :, 0], xt[:, None, 1] - xt[None, :, 1]  # (n, n): x̃ − ỹ
    c01 = 0.5 * float((W * d0 * d1).sum())
    return np.array([[0.5 * float((W * d0 * d0).sum()), c01], [c01, 0.5 * float((W * d1 * d1).sum())]])


def test_uniform_alpha_A_is_the_covariance_of_the_gated_input_by_scipy_quad():
    th = torch.tensor([-2.0, -0.3, 0.4, 1.9], dtype=D)
    A = A_population(MIX, th, None, FINE)
    for i, t in enumerate(th.tolist()):
        np.testing.assert_allclose(A[i].numpy(), _A_uniform(t), rtol=1e-9, atol=1e-12)
    # the flow r(θ) = w⊥ᵀAw on the circle, written out
    ref = [np.array([-math.sin(t), math.cos(t)]) @ _A_uniform(t) @ [math.cos(t), math.sin(t)] for t in th.tolist()]
    np.testing.assert_allclose(flow_rate(A, th).numpy(), ref, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("tau", [0.5, 0.05])
def test_gaussian_alpha_A_is_the_pair_integral(tau):
    th = torch.tensor([-0.3, 0.4], dtype=D)
    A = A_population(MIX, th, tau, FINE)  # α at the current w
    for i, t in enumerate(th.tolist()):
        np.testing.assert_allclose(A[i].numpy(), _A_pairs(t, tau, t), rtol=1e-7, atol=1e-10)
    # α frozen at another w* (θ + h): the form the roughness differentiates
    Ah = A_population(MIX, th, tau, FINE, h=0.3)
    for i, t in enumerate(th.tolist()):
        np.testing.assert_allclose(Ah[i].numpy(), _A_pairs(t, tau, t + 0.3), rtol=1e-7, atol=1e-10)
    assert not np.allclose(A.numpy(), Ah.numpy(), rtol=1e-3)  # the frozen α matters


def test_roughness_is_the_theta_derivative_with_alpha_frozen():
    """ρ(w*) = ‖(A(θ* + ε) − A(θ* − ε)) w*‖ / 2ε with α kept at w* (the experiment's central difference), against the
    same difference of the pair integral; and its ε → 0 limit. At θ = θ* the gate's kink crosses α's kink, so A's
    second derivative jumps there and the central difference converges like O(ε), not O(ε²): the limit is the
    linear extrapolation 2·cd(ε) − cd(2ε)."""
    tau = 0.2
    for t in (-0.3, 0.4):
        w = np.array([math.cos(t), math.sin(t)])

        def cd(e, t=t, w=w):
            return float(np.linalg.norm((_A_pairs(t + e, tau, t) - _A_pairs(t - e, tau, t)) @ w / (2 * e)))

        rho = lambda e, t=t: float(roughness(MIX, torch.tensor([t], dtype=D), tau, e, FINE)[0])  # noqa: E731
        c1, c2 = cd(1e-3), cd(2e-3)
        assert rho(1e-3) == pytest.approx(c1, rel=1e-7) and rho(2e-3) == pytest.approx(c2, rel=1e-7)
        assert rho(1e-4) == pytest.approx(2 * c1 - c2, rel=2e-4)
    # uniform α: the same difference of the scipy-quad covariance
    w = np.array([math.cos(0.4), math.sin(0.4)])
    ref = np.linalg.norm((_A_uniform(0.401) - _A_uniform(0.399)) @ w / 2e-3)
    assert float(roughness(MIX, torch.tensor([0.4], dtype=D), None, 1e-3, FINE)[0]) == pytest.approx(ref, rel=1e-7)


def test_stable_optima_are_the_downward_zeros_of_the_flow():
    """Every returned θ* is a zero of r(θ) = w⊥ᵀA(θ)w (scipy-quad A) with r > 0 before and r < 0 after it, and the
    count equals the downward sign changes of r on a fine grid of the reference."""
    opt, _, _ = stable_optima(MIX, None, 60, {"max_arc": math.radians(10.0), "n_gl": 4, "n_r": 3}, iters=30)

    def r(t):
        return np.array([-math.sin(t), math.cos(t)]) @ _A_uniform(t) @ [math.cos(t), math.sin(t)]

    for t in opt.tolist():
        assert abs(r(t)) < 1e-8
        assert r(t - 0.02) > 0 > r(t + 0.02)
    grid = np.linspace(-math.pi, math.pi, 241)[:-1]
    rg = np.array([r(t) for t in grid])
    assert len(opt) == int(np.sum((rg > 0) & (np.roll(rg, -1) < 0))) >= 2  # two optima here


@pytest.mark.parametrize("tau", [None, 0.5, 0.05])
def test_A_reference_whole_circle_against_scipy_quad_and_the_pair_integral(tau):
    """The reference A(w) (whole circle, α at the same w): uniform α against scipy quad over the active half-circle,
    Gaussian α against the pair integral ``½ E[K(x, y)(x̃ − ỹ)(x̃ − ỹ)ᵀ]`` of our own rule; and it agrees with the
    half-plane shortcut of A_population (the experiment's sanity check of the shortcut)."""
    from ssldyn.experiments.nonlinearity.corollary2 import A_reference

    th = torch.tensor([-0.3, 0.4, 2.5], dtype=D)
    A = A_reference(MIX, th, tau, FINE)
    assert A.shape == (3, 2, 2)
    for i, t in enumerate(th.tolist()):
        ref = _A_uniform(t) if tau is None else _A_pairs(t, tau, t)
        np.testing.assert_allclose(A[i].numpy(), ref, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(A.numpy(), A_population(MIX, th, tau, FINE).numpy(), rtol=1e-8, atol=1e-11)


def test_optima_summary_readings_on_hand_made_optima():
    # counts per arc (degrees): uniform α 2, 3; Gaussian α at the smallest τ 0.1: 2, 4 (≥ everywhere, > once: more
    # optima); at τ 0.5: 3, 3; at the control τ 10: 1, 5 (fewer at one arc: not "more")
    from ssldyn.experiments.nonlinearity.corollary2 import optima_summary

    counts = pd.DataFrame(
        [{"alpha": "uniform", "tau": float("nan"), "arc_deg": a, "n_optima": n} for a, n in ((30, 2), (90, 3))]
        + [{"alpha": "gaussian", "tau": t, "arc_deg": a, "n_optima": n}
           for t, per in ((0.1, (2, 4)), (0.5, (3, 3)), (10.0, (1, 5))) for a, n in zip((30, 90), per)]
    )  # fmt: skip
    # Gaussian optima: (tau, rho, rho_u, z0); ρ_g/(ρ_u z0) = 0.4/(0.8·0.5) = 1.0, 0.3/(1.0·0.6) = 0.5, 0.2/(0.4·0.25) = 2
    rows = [(0.1, 0.4, 0.8, 0.5), (0.1, 0.3, 1.0, 0.6), (0.5, 0.2, 0.4, 0.25), (10.0, 9.0, 1.0, 0.1)]
    opts = pd.DataFrame(
        [{"alpha": "gaussian", "tau": t, "rho": r, "rho_u": ru, "z0": z, "bound": 1.0, "inactive": 0.1,
          "rho_g@10": 0.9 * ru} for t, r, ru, z in rows]
        + [{"alpha": "uniform", "tau": float("nan"), "rho": 0.5, "rho_u": 0.5, "z0": 1.0, "bound": 1.0,
            "inactive": 0.2, "rho_g@10": 0.5}]
    )  # fmt: skip
    kept, s = optima_summary(counts, opts, [0.1, 0.5], 10.0)
    assert len(kept) == 4 and not (kept["tau"] == 10.0).any() and s["n_control_tau_optima"] == 1
    assert s["more_optima"] is True and s["more_optima_control"] is False
    assert s["max_ratio_over_z0"] == pytest.approx(2.0)  # the largest over every Gaussian optimum, not a median
    assert s["median_ratio_rho_g_rho_u"] == pytest.approx((0.5 + 0.3) / 2)  # at the smallest τ: 0.5 and 0.3
    # ρ_g < ρ_u / 2 at the smallest τ: 0.4 < 0.4 no, 0.3 < 0.5 yes; the control reads ρ_g at τ = 10 (0.9 ρ_u): none
    assert s["frac_rho_g_below_half_rho_u"] == 0.5 and s["frac_rho_g_below_half_rho_u_control"] == 0.0
    assert s["counts_gaussian_small_tau"] == {"30": 2, "90": 4} and s["counts_uniform"] == {"30": 2, "90": 3}
    # equal counts everywhere are not "more"; nor are more at one arc and fewer at another
    _, s_eq = optima_summary(counts.assign(n_optima=2), opts, [0.1, 0.5], 10.0)
    mixed = counts.copy()
    mixed.loc[(mixed["alpha"] == "gaussian") & (mixed["tau"] == 0.1), "n_optima"] = [1, 5]
    _, s_mixed = optima_summary(mixed, opts, [0.1, 0.5], 10.0)
    assert s_eq["more_optima"] is False and s_mixed["more_optima"] is False
