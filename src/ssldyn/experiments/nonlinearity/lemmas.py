"""`nonlinearity` Lemma 3 (eq. 7), the App. B.2 remark, Lemma 5 (eq. 120) and eq. 146-151 (Fig. 7) as claims.

1. **Lemma 3** (App. B.2, eq. 46-47): for homogeneous ``h`` (``h(x) = h'(x)x``: ReLU, LeakyReLU,
   linear) and α treated as a constant, ``∂E_α/∂w = A(w)w`` with ``A(w) = C_α[x̃^w]``,
   ``x̃^w = x·h'(wᵀx)``, so the flow on the sphere is ``ẇ = P⊥_w A(w)w`` (eq. 7). Checked against
   autograd of ``E_α = ½C_α[h(wᵀx)]`` (:func:`~ssldyn.dynamics.alpha_cl.one_layer_energy`) on a
   sampled batch with two augmented views and a fixed Gaussian α (Lemma 1's kernel on the
   un-augmented samples), at random ``w``; ``tanh`` (not homogeneous) is the control.
2. **App. B.2 remark**: taking the differential of ``wᵀA(w)w`` adds ``½wᵀ(dA)w``, which is zero for
   ReLU because ``x h''(x) = xδ(x) = 0``. Discrete data make ``A`` piecewise constant (``dA = 0``
   almost everywhere, a vacuous check), so we use the Gaussian-smoothed population
   (:func:`~ssldyn.dynamics.alpha_cl_mixture.gaussian_mixture_A_fn`, ``A(w)`` smooth, in closed form)
   and central differences along random tangent directions ``v``: ``|wᵀ(∂_vA)w|/‖∂_vA‖₂`` against
   ``|vᵀ(∂_vA)w|/‖∂_vA‖₂`` (the same derivative contracted with the tangent ``v`` instead of ``w``: the control,
   non-zero).
3. **Lemma 5** (App. C.2, eq. 120): under Assumption 2 (the RF inputs are independent given ``z``),
   ``V[x̃] = diag_k[L_k] + Σ_c p_c(1 − p_c)²Δ(c)Δ(c)ᵀ`` with ``L_k = E_z V[x̃_k|z]`` and
   ``Δ(c) = E[x̃|z = c] − E[x̃|z ≠ c]``, for the gated input ``x̃`` of a two-layer ReLU network
   (``K`` RFs, ``M`` filters, random weights). Exact populations
   (:meth:`~ssldyn.data.latent.TwoRFModel.support`). Control: the same formula on data that break
   Assumption 2 (RF 1 copies RF 0's pattern index, same marginals).
4. **Eq. 146-151 / Fig. 7**: ``ẏ = (y + b)y`` (``b > 0``) has the stable critical point ``y = −b`` and
   the unstable ``y = 0``; for ``y(0) > 0`` it blows up at ``t* = ln(1 + b/y(0))/b`` (eq. 150) and
   ``∂t*/∂b = [x/(1 + x) − ln(1 + x)]/b²`` with ``x = b/y(0)`` (eq. 151) is negative. Blow-up times from
   scipy's ``solve_ivp`` (an event at ``y = 1e8``, a relative error ~1e-8 of ``t*``), the derivative by
   central differences of the numerical blow-up times. From ``y(0) < 0`` — below ``−b`` (``−2b``), between
   (``−b/2``) and just below the unstable point (``−0.01b``) — the same solver runs to ``T = 50/b`` and
   ``|y(T) + b|/b`` measures the convergence to ``−b`` (``eq150-converges``); its control starts at the
   ``y(0) > 0`` of the blow-up grid (they stop at the cap ``y = 1e8``).

Seeds: each seed draws its own batch, weights, model and directions (eq. 146-151 are deterministic
and the same for every seed). Float64 on the CPU (small exact computations).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Measured, ge, le
from ssldyn.data.latent import TwoRFModel
from ssldyn.dynamics.alpha_cl import make_A_fn, one_layer_energy
from ssldyn.dynamics.alpha_cl_mixture import gaussian_mixture_A_fn
from ssldyn.experiments.nonlinearity._common import F64, NonlinearityExperiment
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.objectives import alpha_gaussian
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class LemmasConfig(ExperimentConfig):
    d: int = Field(6, ge=2, description="Lemma 3 / B.2: input dimension")
    n: int = Field(256, ge=8, description="Lemma 3: batch size")
    tau: PositiveFloat = Field(1.0, description="Lemma 3: Gaussian-α temperature (α fixed, eq. 2 stop-gradient)")
    aug_noise: PositiveFloat = Field(0.3, description="Lemma 3: augmentation noise of the two views")
    trials: int = Field(8, ge=1, description="Lemma 3 / B.2: random weights (and directions) per seed")
    atoms: int = Field(12, ge=2, description="B.2: Gaussian-smoothed atoms of the population")
    sigma_x: PositiveFloat = Field(0.3, description="B.2: smoothing σ_x of the atoms")
    fd_eps: PositiveFloat = Field(1e-5, description="B.2: central-difference step of ∂_vA")
    K: int = Field(3, ge=2, description="Lemma 5: receptive fields")
    rf_dim: int = Field(4, ge=2, description="Lemma 5: input dimension per RF")
    P: int = Field(3, ge=2, description="Lemma 5: patterns per RF")
    C: int = Field(3, ge=2, description="Lemma 5: values of the latent z")
    M: int = Field(2, ge=1, description="Lemma 5: filters per RF")
    bs: list[PositiveFloat] = Field([0.5, 1.0, 2.0], min_length=1, description="eq. 150-151: b values")
    y0s: list[PositiveFloat] = Field([0.05, 0.2, 1.0, 3.0], min_length=1, description="eq. 150-151: y(0) > 0")
    neg_starts: list[PositiveFloat] = Field(
        [2.0, 0.5, 0.01], min_length=1, description="Fig. 7: starts y(0) = −c·b < 0 (c > 1: below −b)"
    )
    t_conv: PositiveFloat = Field(50.0, description="Fig. 7: time T·b at which |y(T) + b| is read (units of 1/b)")


#: where a solution of ẏ = (y + b)y counts as blown up (the time from there to ∞ is ≈ 1e-8·t*)
CAP = 1e8


def _solve(y0: float, b: float, t_end: float):
    """solve_ivp (LSODA, rtol 1e-12, atol 1e-14) of ẏ = (y + b)y from ``y0`` on ``[0, t_end]``, stopped where the
    solution reaches :data:`CAP` (a blow-up)."""
    from scipy.integrate import solve_ivp

    def hit(t: float, y: np.ndarray) -> float:
        return float(y[0] - CAP)

    hit.terminal = True  # type: ignore[attr-defined]  # scipy reads the attribute
    return solve_ivp(lambda t, y: (y + b) * y, (0.0, t_end), [y0], events=hit, rtol=1e-12, atol=1e-14,
                     method="LSODA")  # fmt: skip


def _blowup_time(y0: float, b: float) -> float:
    """Time at which the solution of ẏ = (y + b)y from y0 reaches :data:`CAP` (inf if it does not by t = 200)."""
    sol = _solve(y0, b, 200.0)
    return float(sol.t_events[0][0]) if len(sol.t_events[0]) else math.inf


def _final_value(y0: float, b: float, t_end: float) -> float:
    """``y(t_end)`` of ẏ = (y + b)y from ``y0``; :data:`CAP` if the solution reaches it first (a blow-up)."""
    return float(_solve(y0, b, t_end).y[0, -1])


def eq147(y0: float, b: float, t: float) -> float:
    """The closed form of eq. 147, ``y/(y + b) = q := y0/(y0 + b)·e^{bt}`` ⇒ ``y(t) = b q/(1 − q)`` (before a
    blow-up, ``q ≠ 1``)."""
    q = y0 / (y0 + b) * math.exp(b * t)
    return b * q / (1 - q)


def eq150(y0: float, b: float) -> float:
    """Blow-up time ``t* = ln(1 + b/y0)/b`` of eq. 150 (``y0 > 0``)."""
    return math.log1p(b / y0) / b


def eq151(y0: float, b: float) -> float:
    """``∂t*/∂b = [x/(1 + x) − ln(1 + x)]/b²``, ``x = b/y0`` (eq. 151)."""
    x = b / y0
    return (x / (1 + x) - math.log1p(x)) / b**2


def lemma5_check(model: TwoRFModel, W: torch.Tensor, x: torch.Tensor, z: torch.Tensor, p: torch.Tensor) -> float:
    """Relative Frobenius error of eq. 120 against the exact ``V[x̃]`` on a population.

    ``W (K, M, d)`` ReLU filters, atoms ``x (A, K, d)``, ``z (A,)``, probabilities ``p (A,)``.
    """
    K, M, d = W.shape
    gate = (torch.einsum("akd,kmd->akm", x, W) > 0).to(x.dtype)  # (A, K, M): h'(w_kmᵀx_k)
    xt = (gate[..., None] * x[:, :, None, :]).reshape(len(x), -1)  # (A, K·M·d)
    mean = p @ xt
    V = (xt - mean).T @ ((xt - mean) * p[:, None])  # exact V[x̃]
    C = int(z.max()) + 1
    blk = M * d  # one RF's block of x̃
    L = torch.zeros_like(V)
    between = torch.zeros_like(V)
    for c in range(C):
        sel = z == c
        pc = float(p[sel].sum())
        if pc == 0 or pc == 1:
            continue
        mc = (p[sel] @ xt[sel]) / pc
        mnot = (p[~sel] @ xt[~sel]) / (1 - pc)
        dev = xt[sel] - mc
        cov_c = dev.T @ (dev * (p[sel] / pc)[:, None])  # V[x̃ | z = c]
        for k in range(K):  # diag_k[L_k]: only the within-RF blocks of E_z V[x̃|z]
            s_ = slice(k * blk, (k + 1) * blk)
            L[s_, s_] += pc * cov_c[s_, s_]
        delta = mc - mnot
        between += pc * (1 - pc) ** 2 * torch.outer(delta, delta)
    return float((L + between - V).norm() / V.norm())


@register
class Lemmas(NonlinearityExperiment):
    name = "nonlinearity.lemmas"
    figure = "Lemma 3, Lemma 5, App. B.2, eq. 146-151 (Fig. 7)"
    description = "Lemma 3's flow vs autograd, wᵀ(dA)w = 0 (App. B.2), Lemma 5's variance decomposition, Fig. 7 blow-up"
    Config = LemmasConfig
    quick = {"trials": 4, "n": 128}
    est_seconds = (2, 5)
    # 2: eq150's control states the stable-side start, y(0) = −min(y, b/2) (was −y); 3: eq150-converges measures the
    # convergence to −b from y(0) < 0 (eq150 keeps the blow-up half of the statement)
    # 4: figure only (Fig. 7's critical points and flow marked, the y(0) < 0 trajectories)
    # 5: figure only: the right panel's legend below the axes (it covered the curves); claims unchanged
    version = "5"
    claims = (
        ClaimSpec(
            "lemma3", "For homogeneous h and α treated as a constant, the gradient of E_α is A(w)w with "
            "A(w) = C_α[x̃^w], so the dynamics on the sphere is ẇ = P⊥_w A(w)w (eq. 7).",
            "Lemma 3, eq. 7, App. B.2", kind="paper",
            reading="largest ‖A(w)w − ∂E_α/∂w‖/‖∂E_α/∂w‖ (autograd of ½C_α[h(wᵀx)], two augmented views, fixed "
            "Gaussian α) over random w and the activations ReLU, LeakyReLU, linear", relation=le(1e-10),
            bounds=(0.0, float("inf")), basis="method: float64 round-off",
            control="the smallest relative error of A(w)w for tanh (not homogeneous: h ≠ h'(x)x)",
        ),
        ClaimSpec(
            "b2-remark", "The extra term ½wᵀ(dA)w of the alternative derivation is zero for ReLU, since "
            "x h''(x) = xδ(x) = 0.", "App. B.2, eq. 48-50", kind="paper",
            reading="largest |wᵀ(∂_vA)w| / ‖∂_vA‖₂ over random w and unit tangent v, ReLU on a Gaussian-smoothed "
            "population (A smooth, closed form), central differences", relation=le(1e-6),
            bounds=(0.0, float("inf")), basis="method: central-difference error O(ε²) ≈ 1e-10 plus the round-off "
            "of a difference quotient (1e-16/ε ≈ 1e-11), with margin",
            control="the smallest |vᵀ(∂_vA)w| / ‖∂_vA‖₂ (the same derivative not contracted with w on both sides)",
        ),
        ClaimSpec(
            "lemma5", "Under Assumption 2, V[x̃] = diag_k[L_k] + Σ_c p_c(1 − p_c)²Δ(c)Δ(c)ᵀ.",
            "Lemma 5, eq. 120, App. C.2", kind="paper",
            reading="relative Frobenius error of eq. 120 against the exact V[x̃] of a two-layer ReLU network "
            "(random filters) on the exact population of a conditional-independence model, C ≥ 2",
            relation=le(1e-10), bounds=(0.0, float("inf")), basis="method: float64 round-off",
            control="the same error on data that break Assumption 2 (RF 1 copies RF 0's pattern index)",
        ),
        ClaimSpec(
            "eq150", "For y(0) > 0 the dynamics ẏ = (y + b)y blows up at t* = ln(1 + b/y(0))/b (Fig. 7).",
            "eq. 150, Fig. 7, App. C.3", kind="paper",
            reading="fraction of the (b, y(0) > 0) grid whose numerical blow-up time (solve_ivp, y = 1e8) is within "
            "1e-6 relative of eq. 150", relation=ge(1.0), bounds=(0.0, 1.0),
            basis="method: the time from y = 1e8 to ∞ is ≈ 1e-8·t*; the solver's tolerance 1e-12",
            control="the same fraction for starts y(0) = −min(y, b/2) ∈ (−b, 0) on the stable side (they converge to "
            "−b and never blow up)",
        ),
        ClaimSpec(
            "eq150-converges", "When y(0) < 0 the dynamics ẏ = (y + b)y converge to the stable critical point "
            "y(+∞) = −b.", "eq. 146, Fig. 7, App. C.3", kind="paper",
            reading="largest |y(T) + b|/b at T = t_conv/b (solve_ivp) over the b grid and the starts y(0) = −c·b, "
            "c ∈ neg_starts (below −b, between −b and 0, and just below the unstable point 0)",
            relation=le(1e-6), bounds=(0.0, float("inf")),
            basis="method: by eq. 147, |y(T) + b|/b ≈ |1 − c|/c · e^{−bT} ≤ 2e-20 at T = 50/b for c ≥ 0.01; what "
            "remains is the solver's tolerance (rtol 1e-12, atol 1e-14), far below 1e-6",
            control="the smallest |y(T) + b|/b from the y(0) > 0 of the blow-up grid (they reach the cap y = 1e8 "
            "before T)",
        ),
        ClaimSpec(
            "eq151", "∂t*/∂b = [x/(1 + x) − ln(1 + x)]/b² < 0 (x = b/y(0)): a larger b blows up sooner.",
            "eq. 151, App. C.3", kind="paper",
            reading="largest |central difference in b of the numerical blow-up times − eq. 151| / |eq. 151| over the "
            "grid (eq. 151 < 0 at every grid point, see detail)", relation=le(1e-3), bounds=(0.0, float("inf")),
            basis="method: central differences (step 1e-4·b) of blow-up times accurate to ~1e-8",
            control="the same relative difference for the derivative in y(0) (∂t*/∂y₀ = −1/(y₀(y₀ + b))), a "
            "different quantity eq. 151 must not match",
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: LemmasConfig, n_seeds: int) -> tuple[int, str]:
        """``BASE + 4 · n²·8`` bytes: Lemma 3's fixed Gaussian-α weights ``(n, n)`` float64 and the weighted
        energy and its autograd built on them (≈ 3 copies measured). Measured (max RSS): 0.48 GB at the quick
        preset (n = 128, estimate 0.55 GB), 0.68 GB with n = 3000 (estimate 0.84 GB)."""
        return int(PROCESS_BASELINE + 4 * cfg.n**2 * F64), "n"

    def run(self, cfg: LemmasConfig, ctx: Context) -> Result:
        g = ctx.generator(0)
        dt = torch.float64
        # ---- Lemma 3: A(w)w vs autograd (two augmented views, fixed Gaussian α)
        x0 = torch.randn(cfg.n, cfg.d, generator=g, dtype=dt)
        x1 = x0 + cfg.aug_noise * torch.randn(cfg.n, cfg.d, generator=g, dtype=dt)
        x2 = x0 + cfg.aug_noise * torch.randn(cfg.n, cfg.d, generator=g, dtype=dt)
        alpha = alpha_gaussian(x0, cfg.tau)  # (n, n), fixed: the stop-gradient of eq. 2
        rows = []
        for act in ("relu", "leaky_relu", "linear", "tanh"):
            for _ in range(cfg.trials):
                w = torch.randn(cfg.d, generator=g, dtype=dt)
                w = (w / w.norm()).requires_grad_(True)
                (grad,) = torch.autograd.grad(one_layer_energy(x1, w, act, x_pos=x2, alpha=alpha), w)
                A = make_A_fn(x1, act, x_pos=x2, alpha=alpha)(w.detach()[None])[0]  # (d, d)
                aw = A @ w.detach()
                rows.append({"activation": act, "rel_err": float((aw - grad).norm() / grad.norm())})
        l3 = pd.DataFrame(rows)
        homog = l3.loc[l3.activation != "tanh", "rel_err"]
        # ---- App. B.2 remark: wᵀ(∂_vA)w = 0 for ReLU on a smooth population
        means = torch.randn(cfg.atoms, cfg.d, generator=g, dtype=dt)
        probs = torch.rand(cfg.atoms, generator=g, dtype=dt) + 0.5
        probs = probs / probs.sum()
        A_fn = gaussian_mixture_A_fn(means, probs, cfg.sigma_x)
        b2, b2c = [], []
        for _ in range(cfg.trials):
            w = torch.randn(cfg.d, generator=g, dtype=dt)
            w = w / w.norm()
            v = torch.randn(cfg.d, generator=g, dtype=dt)
            v = v - (v @ w) * w
            v = v / v.norm()
            dA = (A_fn((w + cfg.fd_eps * v)[None])[0] - A_fn((w - cfg.fd_eps * v)[None])[0]) / (2 * cfg.fd_eps)
            scale = float(torch.linalg.matrix_norm(dA, ord=2))
            b2.append(abs(float(w @ dA @ w)) / scale)
            b2c.append(abs(float(v @ dA @ w)) / scale)
        # ---- Lemma 5 (eq. 120) on an exact population, and on data breaking Assumption 2
        model = TwoRFModel.random(K=cfg.K, d=cfg.rf_dim, C=cfg.C, P=cfg.P, generator=g)
        xs, zs, ps = model.support()
        W = torch.randn(cfg.K, cfg.M, cfg.rf_dim, generator=g, dtype=dt)
        err5 = lemma5_check(model, W, xs, zs, ps)
        pats = model.patterns  # (K, P, d)
        idx0 = (xs[:, 0, None, :] - pats[0][None]).norm(dim=-1).argmin(-1)  # pattern index of RF 0
        xs_dep = xs.clone()
        xs_dep[:, 1] = pats[1][idx0]  # RF 1 copies RF 0's pattern: dependent given z
        err5_ctl = lemma5_check(model, W, xs_dep, zs, ps)
        # ---- eq. 150-151 / Fig. 7
        grid = []
        for b in cfg.bs:
            for y0 in cfg.y0s:
                t_num = _blowup_time(y0, b)
                t_neg = _blowup_time(-min(y0, 0.5 * b), b)  # stable side: y(0) ∈ (−b, 0)
                h_b, h_y = 1e-4 * b, 1e-4 * y0
                d_num = (_blowup_time(y0, b + h_b) - _blowup_time(y0, b - h_b)) / (2 * h_b)
                d_y = (_blowup_time(y0 + h_y, b) - _blowup_time(y0 - h_y, b)) / (2 * h_y)
                grid.append({"b": b, "y0": y0, "t_num": t_num, "t_eq150": eq150(y0, b), "t_stable_side": t_neg,
                             "dtdb_num": d_num, "dtdb_eq151": eq151(y0, b), "dtdy0_num": d_y})  # fmt: skip
        fig7 = pd.DataFrame(grid)
        rel150 = (fig7["t_num"] - fig7["t_eq150"]).abs() / fig7["t_eq150"]
        rel_neg = (fig7["t_stable_side"] - fig7["t_eq150"]).abs() / fig7["t_eq150"]
        rel151 = ((fig7["dtdb_num"] - fig7["dtdb_eq151"]) / fig7["dtdb_eq151"]).abs()
        rel151c = ((fig7["dtdy0_num"] - fig7["dtdb_eq151"]) / fig7["dtdb_eq151"]).abs()
        # Fig. 7's stable side: from y(0) < 0 to −b by T = t_conv/b; the control from the y(0) > 0 of the grid
        conv = pd.DataFrame(
            [{"b": b, "y0": y0, "start": kind, "y_T": yT, "dist_over_b": abs(yT + b) / b}
             for b in cfg.bs
             for kind, y0 in [*(("negative", -c * b) for c in cfg.neg_starts), *(("positive", y) for y in cfg.y0s)]
             for yT in [_final_value(y0, b, cfg.t_conv / b)]]
        )  # fmt: skip
        neg, pos = conv[conv["start"] == "negative"], conv[conv["start"] == "positive"]
        res = Result(tables={"lemma3": l3, "fig7": fig7, "fig7_convergence": conv})
        res.summary = {
            "lemma3_max_rel_err": float(homog.max()),
            "lemma3_min_rel_err_tanh": float(l3.loc[l3.activation == "tanh", "rel_err"].min()),
            "b2_max": max(b2),
            "b2_control_min": min(b2c),
            "lemma5_rel_err": err5,
            "lemma5_rel_err_dependent": err5_ctl,
            "eq150_frac": float((rel150 <= 1e-6).mean()),
            "eq150_max_rel_err": float(rel150.max()),
            "eq150_frac_stable_side": float((rel_neg <= 1e-6).mean()),
            "eq151_max_rel_err": float(rel151.max()),
            "eq151_control_min_rel": float(rel151c.min()),
            "eq151_max_value": float(fig7["dtdb_eq151"].max()),
            "eq150_converge_max_dist": float(neg["dist_over_b"].max()),
            "eq150_converge_control_min_dist": float(pos["dist_over_b"].min()),
        }
        res.notes.append(
            f"Lemma 3 on {cfg.n} samples (two views, noise {cfg.aug_noise:g}, Gaussian α with τ = {cfg.tau:g} fixed); "
            f"B.2 on {cfg.atoms} Gaussian-smoothed atoms (σ_x = {cfg.sigma_x:g}); Lemma 5 on the exact population "
            f"of a {cfg.K}-RF, C = {cfg.C} conditional-independence model; Fig. 7 for b ∈ {cfg.bs}, y(0) ∈ {cfg.y0s}."
        )
        return res

    def measure(self, cfg: LemmasConfig, result: Result) -> dict:
        s = result.summary
        return {
            "lemma3": Measured(s["lemma3_max_rel_err"], control=s["lemma3_min_rel_err_tanh"]),
            "b2-remark": Measured(s["b2_max"], control=s["b2_control_min"]),
            "lemma5": Measured(s["lemma5_rel_err"], control=s["lemma5_rel_err_dependent"]),
            "eq150": Measured(
                s["eq150_frac"],
                control=s["eq150_frac_stable_side"],
                detail=f"largest relative error {s['eq150_max_rel_err']:.1e}",
            ),
            "eq150-converges": Measured(
                s["eq150_converge_max_dist"],
                control=s["eq150_converge_control_min_dist"],
                detail=f"T = {cfg.t_conv:g}/b; starts y(0)/b ∈ {sorted(-c for c in cfg.neg_starts)}, b ∈ {cfg.bs}",
            ),
            "eq151": Measured(
                s["eq151_max_rel_err"],
                control=s["eq151_control_min_rel"],
                detail=f"largest ∂t*/∂b on the grid {s['eq151_max_value']:.3g} (negative)",
            ),
        }

    def plots(self, cfg: LemmasConfig, result: Result, fig_dir: Path):
        f7, conv = result.tables["fig7"], result.tables["fig7_convergence"]
        fig, ax = new_figure(3, 1, size=(4.4, 4.2))
        _plot_fig7_phase_line(ax[0, 0], cfg.bs)
        for i, b in enumerate(cfg.bs):
            sel = f7[f7["b"] == b]
            ax[0, 1].plot(sel["y0"], sel["t_eq150"], "-", color=PALETTE[i % 8], label=f"eq. 150, b = {b:g}")
            ax[0, 1].plot(sel["y0"], sel["t_num"], "o", color=PALETTE[i % 8], mfc="none")
        ax[0, 1].set(xlabel="y(0) > 0", ylabel="blow-up time t*", xscale="log",
                     title="eq. 150: t* = ln(1 + b/y(0))/b\n(o: solve_ivp, the claim eq150)")  # fmt: skip
        ax[0, 1].legend(fontsize=7)
        _plot_fig7_convergence(ax[0, 2], cfg, conv)
        fig.suptitle("Fig. 7 / App. C.3: ẏ = (y + b)y (deterministic, the same for every seed)", fontsize=9)
        return [save_figure(fig, fig_dir / "lemmas.png")]


def _plot_fig7_phase_line(ax, bs: list[float]) -> None:
    """Fig. 7: ẏ = (y + b)y against y for each b, the stable point −b (filled), the unstable 0 (open) and the flow's
    direction on the line ẏ = 0 for the largest b."""
    y = np.linspace(-1.5 * max(bs), 1.0, 300)
    ax.axhline(0, color="0.5", lw=0.8)
    for i, b in enumerate(bs):
        ax.plot(y, (y + b) * y, color=PALETTE[i % 8], label=f"b = {b:g}")
        ax.plot([-b], [0], "o", color=PALETTE[i % 8], ms=7, zorder=3)
    ax.plot([0], [0], "o", mfc="white", mec="k", ms=7, zorder=3)
    b = max(bs)
    for x0, x1 in ((-1.45 * b, -1.1 * b), (-0.2 * b, -0.8 * b), (0.3, 0.9)):  # ẏ > 0, < 0, > 0
        ax.annotate("", xy=(x1, 0), xytext=(x0, 0), arrowprops={"arrowstyle": "->", "color": "k", "lw": 1.2})
    ax.plot([], [], "o", color="0.3", label="stable point y = −b")
    ax.plot([], [], "o", mfc="white", mec="k", label="unstable point y = 0")
    ax.set(xlabel="y", ylabel="ẏ = (y + b)y", title="Fig. 7: phase line (arrows: the flow, largest b)")
    ax.legend(fontsize=7)


def _plot_fig7_convergence(ax, cfg: LemmasConfig, conv) -> None:
    """y(t)/b against b·t from the starts y(0) = −c·b of eq150-converges (eq. 147, closed form; in these units the
    same curve for every b), and the solver's largest |y(T) + b|/b at T = t_conv/b (the claim's reading)."""
    tb = np.linspace(0, 8, 200)  # time in units of 1/b
    b = cfg.bs[0]
    for i, c in enumerate(cfg.neg_starts):
        y = [eq147(-c * b, b, t / b) for t in tb]
        ax.plot(tb, np.asarray(y) / b, color=PALETTE[(i + 4) % 8], lw=1.2, label=f"y(0) = −{c:g}·b")
    ax.axhline(-1, color="0.4", ls=":", lw=1, label="y = −b (stable)")
    ax.axhline(0, color="0.6", lw=0.8)
    worst = float(conv.loc[conv["start"] == "negative", "dist_over_b"].max())
    ax.plot([], [], " ", label=f"solve_ivp: max |y(T) + b|/b = {worst:.1e}\n(T = {cfg.t_conv:g}/b, every b)")
    ax.set(xlabel="b·t", ylabel="y(t) / b (every b)", title="eq150-converges: y(0) < 0 → −b (eq. 147)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)  # below: the curves stay clear
