"""`nonlinearity` Fig. 1 (right), Thm. 3, Thm. 1: power iteration in the latent summation model with ``U``
only approximately orthogonal, and the sufficient conditions checked where they can say something.

Data: latent summation model (Sec. 3.1), ``x = Uy``, unit-norm ``u_m`` with ``‖UᵀU − I‖₂ = ε``
(:func:`~ssldyn.data.latent.approx_orthogonal_basis`), ``q_m`` evenly spaced in ``[q_min, q_max]``;
uniform α, ReLU, the large-batch limit of Cor. 1 in two versions:

- **discrete**: the exact population of all ``2^M`` atoms (Fig. 1's model). ``A(w)`` is piecewise
  constant: it only changes when an atom crosses the plane ``wᵀx = 0``.
- **continuous**: every atom smoothed by ``N(0, σ_x² I)`` (:mod:`ssldyn.dynamics.alpha_cl_mixture`,
  ``A(w)`` in closed form), so ``A`` is smooth and the roughness ``ρ`` and Lipschitz constant ``L``
  are finite.

Thm. 3 is about power iteration near a fixed point: ``w(0) = normalize(u_m + σ g)`` for each ``m``
and each start scale ``σ`` in ``start_noise`` (``σ = 0.02``: ~4° from ``u_m``; ``0.1``: ~18°). Each
start iterates eq. PI; we record the iteration discrepancy ``‖w(t+1) − w(t)‖₂`` (the figure), the
angle of the fixed point to the nearest ``u_m``, and Thm. 3's condition ``sup_{B_γ} ω ≤ γ`` for a
grid of ``γ < 1``:

- discrete: **exactly** (:func:`~ssldyn.probes.alpha_cl.theorem3_condition_discrete`: ``L = ∞`` if
  an atom's plane meets ``B_γ``, else ``L = 0`` and ``sup ω = μ`` at the cap's worst ``c``);
- continuous: with ``L`` estimated from sampled points of ``B_γ`` (a lower estimate of the
  true ``L``) and ``κ = 5/(2λ_gap²)`` (:func:`~ssldyn.probes.alpha_cl.theorem3_condition`).

Where the condition holds the theorem promises a critical point in ``B_γ`` — we check that the
power iteration's limit is one. Convergence itself happens whether or not the (sufficient)
condition holds; the run reports how often it holds.

Thm. 1 (``λ_gap(w*) > ρ(w*)`` ⇒ ``w*`` stable) is vacuous on discrete data (``ρ = 0``); it is checked
on the continuous version: ``ρ`` by finite differences (:func:`~ssldyn.probes.alpha_cl.local_roughness`)
at each fixed point, stability independently from the Jacobian of eq. 7
(:func:`~ssldyn.probes.alpha_cl.linear_stability`).

Runs on ``ctx.device``: ``U``, the population and the starts are made on the CPU (CPU generator,
the latent-model helpers) and moved; the per-run diagnostics and tables come back to the CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, model_validator

from ssldyn.data.latent import approx_orthogonal_basis, latent_summation_support
from ssldyn.dynamics.alpha_cl import make_A_fn, power_iteration
from ssldyn.dynamics.alpha_cl_mixture import gaussian_mixture_A_fn
from ssldyn.experiments.nonlinearity._alpha_landscape import angle_deg
from ssldyn.lab import (
    ClaimSpec,
    Context,
    Experiment,
    ExperimentConfig,
    Measured,
    Result,
    ge,
    le,
    register,
)
from ssldyn.probes.alpha_cl import (
    linear_stability,
    lme_test,
    local_roughness,
    theorem3_condition,
    theorem3_condition_discrete,
)
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Fig1Config(ExperimentConfig):
    d: int = Field(10, ge=2, le=14, description="dimension = number of latents M")
    eps_orths: list[float] = Field(
        [0.02, 0.1], min_length=1, description="‖UᵀU − I‖₂ values ('small but non-zero', Fig. 1)"
    )
    q_min: float = Field(0.1, gt=0, lt=0.382, description="smallest q_m (all q_m < 0.382: every u_m an LME)")
    q_max: float = Field(0.3, gt=0, lt=0.382, description="largest q_m")
    start_noise: list[PositiveFloat] = Field(
        [0.005, 0.05], min_length=1, description="σ in w(0) = normalize(u_m + σ g): starts near each u_m"
    )
    sigma_x: PositiveFloat = Field(0.1, description="noise σ_x of the continuous version (Gaussian-smoothed atoms)")
    n_iter: int = Field(200, ge=5, description="maximal power iterations")
    tol: PositiveFloat = Field(1e-12, description="convergence threshold on ‖w(t+1) − w(t)‖")
    gammas: list[float] = Field([i / 20 for i in range(1, 20)], min_length=1, description="γ grid in (0, 1)")
    cap_samples: int = Field(32, ge=4, description="points sampled in B_γ (continuous version) for sup ω and L")
    cap_gammas: list[float] = Field(
        [0.3, 0.5, 0.7, 0.9], min_length=1, description="γ grid of the sampled (continuous) check"
    )
    rho_eps: PositiveFloat = Field(1e-4, description="finite-difference step of ρ (continuous version)")

    @model_validator(mode="after")
    def _check(self) -> Fig1Config:
        if self.q_min > self.q_max:
            raise ValueError(f"q_min = {self.q_min} must be <= q_max = {self.q_max}")
        if any(not 0 <= e < 1 for e in self.eps_orths):
            raise ValueError("eps_orths must lie in [0, 1)")
        if any(not 0 < g < 1 for g in [*self.gammas, *self.cap_gammas]):
            raise ValueError("gammas and cap_gammas must lie in (0, 1) (Thm. 3: γ < 1)")
        return self


LOC = "Fig. 1 (right), Thm. 3"


def _run_version(A_fn, U, w0, starts_pattern, cfg, exact_atoms, g, track, label) -> tuple[pd.DataFrame, torch.Tensor]:
    """Power iteration from every start and the Thm. 3 / Thm. 1 diagnostics (one row per start)."""
    pi = power_iteration(w0, A_fn, steps=cfg.n_iter, tol=cfg.tol)
    w_end = pi.state  # (R, d)
    _, disc = pi.trajectory.series_members("discrepancy")  # (T, R)
    converged = pi.trajectory.meta["converged"]  # (R,)
    cos_all = w_end @ U  # (R, M)
    nearest = cos_all.argmax(-1)
    ang = angle_deg(w_end, U.T[nearest])
    rows = []
    for r in track(range(w0.shape[0]), description=f"Thm. 3 ({label})"):
        if exact_atoms is not None:
            t3 = theorem3_condition_discrete(A_fn, exact_atoms, w0[r], gammas=cfg.gammas)
        else:
            t3 = theorem3_condition(A_fn, w0[r], gammas=cfg.cap_gammas, n_samples=cfg.cap_samples, generator=g)
        in_ball = None
        if t3["holds"]:
            row = next(x for x in t3["per_gamma"] if x["gamma"] == t3["gamma"])
            in_ball = bool(float(w_end[r] @ w0[r]) >= row["min_cos"] - 1e-12)
        lme = lme_test(A_fn, w_end[r], tol=1e-6)
        out = {
            "version": label,
            "run": r,
            "start_noise": float(starts_pattern[r][1]),
            "start_pattern": int(starts_pattern[r][0]),
            "nearest_pattern": int(nearest[r]),
            "start_angle_deg": float(angle_deg(w0[r], U.T[starts_pattern[r][0]])),
            "angle_to_nearest_deg": float(ang[r]),
            "iterations": int(disc.shape[0]),
            "final_discrepancy": float(disc[-1, r]),
            "converged": bool(converged[r]),
            "is_lme": lme.is_lme,
            "gap": lme.gap,
            "c0": t3["c0"],
            "thm3_holds": t3["holds"],
            "thm3_gamma": t3["gamma"],
            "thm3_min_sup_omega": min(x["sup_omega"] for x in t3["per_gamma"]),
            "w_star_in_B_gamma": in_ball,
        }
        if exact_atoms is None:  # Thm. 1 where ρ is finite and non-zero
            out["rho"] = float(local_roughness(A_fn, w_end[r], eps=cfg.rho_eps))
            out["max_real_jacobian"] = linear_stability(A_fn, w_end[r])
            out["thm3_L_min"] = min(x["L"] for x in t3["per_gamma"])
        rows.append(out)
    disc = torch.as_tensor(disc)  # (T, R)
    return pd.DataFrame(rows), disc


@register
class Fig1(Experiment):
    name = "nonlinearity.fig1"
    paper = "nonlinearity"
    figure = "Fig. 1 (right), Thm. 3, Thm. 1"
    description = (
        "Power iteration near u_m with approximately orthogonal U; Thm. 3's condition exact, Thm. 1 on smooth data"
    )
    Config = Fig1Config
    quick = {"d": 8, "cap_samples": 12, "cap_gammas": [0.5, 0.9], "n_iter": 100}
    est_seconds = (2, 15)
    threads = 1
    claims = (
        ClaimSpec(
            "converges", "Power iteration converges (the iteration discrepancy goes to 0) in every run.", LOC,
            kind="paper", reading="largest final ‖w(t+1) − w(t)‖ over all starts, discrete and continuous data",
            relation=le(1e-8), basis="tolerance: 1e-8 (the runs stop at 1e-12 or after n_iter iterations)",
        ),
        ClaimSpec(
            "close-to-u", "Local optima close to each u_m still exist although U is only approximately orthogonal.",
            "Fig. 1, Sec. 3.3", kind="paper",
            reading="largest angle between a fixed point and its nearest u_m (degrees), discrete data, all ε",
            relation=le(10.0), basis="tolerance: 10° for ‖UᵀU − I‖₂ ≤ 0.1 (the u_m themselves are up to ~6° from "
            "orthogonal)",
        ),
        ClaimSpec(
            "one-per-pattern", "... one near each u_m (multiple local optima).", "Fig. 1, Sec. 3.3", kind="paper",
            reading="fraction of starts near u_m whose fixed point is nearest to u_m and an LME (Def. 3), discrete",
            relation=ge(1.0), basis="relation: every pattern",
        ),
        ClaimSpec(
            "thm3-conclusion", "Where Thm. 3's condition holds, power iteration converges to a critical point "
            "inside B_γ.", "Thm. 3, eq. 11", kind="paper",
            reading="fraction of the starts satisfying the exact condition (discrete data) whose limit is a critical "
            "point (converged) in B_γ; NaN (fails) if the condition never holds", relation=ge(1.0),
            basis="relation: the theorem's conclusion for every start where its premise holds",
        ),
        ClaimSpec(
            "thm3-near-fixed-point", "When w(0) is sufficiently close to an LME w*, ω is small and the condition "
            "holds.", "Sec. 3.3, Def. 4, Thm. 3", kind="paper",
            reading="fraction of the closest starts (smallest σ, ~1° from u_m) at the smallest ε where the exact "
            "condition holds for some γ < 1, discrete data", relation=ge(0.8),
            basis="tolerance: 80% of the starts (the paper gives no distance)",
            if_fails="the sufficient condition needs the whole cap B_γ free of atom planes (else L = ∞) and μ ≤ γ; "
            "a start can converge without it",
        ),
        ClaimSpec(
            "thm1-stability", "An LME with λ_gap(w*) > ρ(w*) is stable.", "Thm. 1, Sec. 3.2", kind="paper",
            reading="fraction of the continuous-data fixed points with λ_gap > ρ > 0 whose eq. 7 Jacobian has only "
            "negative eigenvalues (NaN, i.e. fails, if none has λ_gap > ρ)", relation=ge(1.0),
            basis="relation: the theorem's conclusion wherever its premise holds",
        ),
        ClaimSpec(
            "rho-finite-nonzero", "On smooth data the roughness at the fixed points is finite and non-zero (so Thm. "
            "1's condition is a real test).", "Thm. 1, Sec. 3.2", kind="sanity",
            reading="largest ρ(w*)/λ_gap(w*) over the continuous-data fixed points (the smallest is exponentially "
            "small where no atom lies within a few σ_x of the plane w*ᵀx = 0)", relation=ge(1e-2),
            basis="tolerance: ρ at 1% of the gap is far above the O(eps²) ≈ 1e-8 finite-difference error; discrete "
            "data give ρ = 0",
        ),
    )  # fmt: skip

    def run(self, cfg: Fig1Config, ctx: Context) -> Result:
        g = ctx.generator(0)
        dev = ctx.device
        d = cfg.d
        q = torch.linspace(cfg.q_min, cfg.q_max, d, dtype=torch.float64)
        all_runs, discs = [], []
        eps_meas = []
        for eo in cfg.eps_orths:
            U = approx_orthogonal_basis(d, d, eo, generator=g)  # CPU
            xs, ps = latent_summation_support(U, q)  # exact population, built on the CPU
            U, xs, ps = U.to(dev), xs.to(dev), ps.to(dev)
            eye = torch.eye(d, dtype=torch.float64, device=dev)
            eps_meas.append(float(torch.linalg.matrix_norm(U.T @ U - eye, ord=2)))
            starts, labels = [], []
            for sig in cfg.start_noise:
                w0 = U.T + sig * torch.randn(d, d, generator=g, dtype=torch.float64).to(dev)
                starts.append(w0 / w0.norm(dim=-1, keepdim=True))
                labels += [(m, sig) for m in range(d)]
            w0 = torch.cat(starts)  # (R, d)
            A_disc = make_A_fn(xs, "relu", weights=ps)
            A_cont = gaussian_mixture_A_fn(xs, ps, cfg.sigma_x)
            for label, A_fn, atoms in (("discrete", A_disc, xs), ("continuous", A_cont, None)):
                rows, dd = _run_version(A_fn, U, w0, labels, cfg, atoms, g, ctx.track, label)
                all_runs.append(rows.assign(eps_orth=eo))
                discs += [
                    {"eps_orth": eo, "version": label, "t": t, "run": r, "discrepancy": float(dd[t, r])}
                    for t in range(dd.shape[0])
                    for r in range(dd.shape[1])
                ]
        runs = pd.concat(all_runs, ignore_index=True)
        runs_d = runs.loc[runs["version"] == "discrete"]
        runs_c = runs.loc[runs["version"] == "continuous"]
        disc = pd.DataFrame(discs)
        res = Result(tables={"runs": runs, "discrepancy": disc})
        smallest, eps_small = min(cfg.start_noise), min(cfg.eps_orths)
        rd = runs_d
        held = rd[rd["thm3_holds"]]
        ok_c = runs_c[runs_c["is_lme"] & (runs_c["gap"] > runs_c["rho"]) & (runs_c["rho"] > 0)]
        res.summary = {
            "max_final_discrepancy": float(runs.loc[:, "final_discrepancy"].max()),
            "max_angle_to_nearest_deg": float(rd["angle_to_nearest_deg"].max()),
            "frac_one_per_pattern": float(((rd["nearest_pattern"] == rd["start_pattern"]) & rd["is_lme"]).mean()),
            "n_runs": len(rd),
            "thm3_holds_runs": int(len(held)),
            "thm3_conclusion": float((held["converged"] & held["w_star_in_B_gamma"].astype(bool)).mean())
            if len(held)
            else float("nan"),
            "thm3_holds_frac_by_setting": {
                f"ε={e:g}, σ={s:g}": float(rd[(rd["start_noise"] == s) & (rd["eps_orth"] == e)]["thm3_holds"].mean())
                for e in cfg.eps_orths
                for s in cfg.start_noise
            },
            "thm3_holds_frac_closest": float(
                rd[(rd["start_noise"] == smallest) & (rd["eps_orth"] == eps_small)]["thm3_holds"].mean()
            ),
            "thm3_holds_frac_continuous": float(runs_c["thm3_holds"].mean()),
            "thm1_premise_runs": int(len(ok_c)),
            "thm1_stable_frac": float((ok_c["max_real_jacobian"] < 0).mean()) if len(ok_c) else float("nan"),
            "rho_over_gap_min": float((runs_c["rho"] / runs_c["gap"]).min()),
            "rho_over_gap_max": float((runs_c["rho"] / runs_c["gap"]).max()),
            "continuous_frac_stable": float((runs_c["max_real_jacobian"] < 0).mean()),
            "continuous_L_min": float(runs_c["thm3_L_min"].min()),
            "eps_orth_measured": eps_meas,
        }
        s = res.summary
        res.notes.append(
            f"ε = ‖UᵀU − I‖₂ ∈ {cfg.eps_orths}, q_m ∈ [{cfg.q_min}, {cfg.q_max}], d = M = {d}; the paper does not "
            f"give its Fig. 1 settings. Starts w(0) = normalize(u_m + σg), σ ∈ {cfg.start_noise}. Discrete: exact "
            f"population (2^M atoms); continuous: atoms smoothed by N(0, {cfg.sigma_x}² I), A(w) in closed form."
        )
        by_sigma = ", ".join(f"{k}: {v:.0%}" for k, v in s["thm3_holds_frac_by_setting"].items())
        res.notes.append(
            f"Thm. 3's sufficient condition (exact, discrete data) holds for {by_sigma} of the starts; every start "
            f"converges regardless (largest final discrepancy {s['max_final_discrepancy']:.1e}). Where it fails, "
            "an atom's plane wᵀx = 0 crosses B_γ (A jumps: L = ∞) or μ > γ on the cap. On the continuous data the "
            f"sampled check holds for {s['thm3_holds_frac_continuous']:.0%} of the starts (L ≥ "
            f"{s['continuous_L_min']:.3g} from the samples, κ = 5/(2λ_gap²)): the ν-term 2κL²(1 + μc) of ω is large."
        )
        return res

    def measure(self, cfg: Fig1Config, result: Result) -> dict:
        s = result.summary
        by_sigma = ", ".join(f"{k}: {v:.0%}" for k, v in s["thm3_holds_frac_by_setting"].items())
        return {
            "converges": s["max_final_discrepancy"],
            "close-to-u": s["max_angle_to_nearest_deg"],
            "one-per-pattern": s["frac_one_per_pattern"],
            "thm3-conclusion": Measured(
                s["thm3_conclusion"], detail=f"condition holds in {s['thm3_holds_runs']}/{s['n_runs']} starts"
            ),
            "thm3-near-fixed-point": Measured(s["thm3_holds_frac_closest"], detail=f"holds: {by_sigma}"),
            "thm1-stability": Measured(
                s["thm1_stable_frac"],
                detail=f"{s['thm1_premise_runs']} fixed points with λ_gap > ρ; ρ/λ_gap in "
                f"[{s['rho_over_gap_min']:.3g}, {s['rho_over_gap_max']:.3g}]",
            ),
            "rho-finite-nonzero": Measured(
                s["rho_over_gap_max"], detail=f"smallest ρ/λ_gap {s['rho_over_gap_min']:.2g}"
            ),
        }

    def plots(self, cfg: Fig1Config, result: Result, fig_dir: Path):
        disc = result.tables["discrepancy"]
        eo = max(cfg.eps_orths)
        fig, ax = new_figure(2, 1, size=(4.6, 3.5))
        for j, version in enumerate(("discrete", "continuous")):
            sub = disc.loc[(disc["version"] == version) & (disc["eps_orth"] == eo)]
            for r, grp in sub.groupby("run"):
                v = grp["discrepancy"].to_numpy()
                ax[0, j].semilogy(grp["t"], np.maximum(v, 1e-17), color=PALETTE[r % 8], lw=1)
            ax[0, j].set(xlabel="iteration t", ylabel="‖w(t+1) − w(t)‖₂", title=f"{version} data")
        fig.suptitle(f"Fig. 1 (right): ‖UᵀU − I‖₂ = {eo:g}", fontsize=9)
        return [save_figure(fig, fig_dir / "fig1.png")]
