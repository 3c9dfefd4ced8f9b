"""`nonlinearity` App. E.1, Fig. 8: local maxima of ``E_α(θ) = ½ C_α[h(wᵀx)]`` on the circle.

``w = (cos θ, sin θ)``, nine data points on the unit circle at the angles of App. E.1,
uniform α (``α_ij ≡ 1``), no augmentation (so ``C_α[f]`` is the variance of ``f`` over the
nine points). ReLU (solid) versus linear (dotted), each scaled to max 1. The paper: ReLU
has at least 8 local maxima, not orthogonal to each other; linear has exactly 2, at ``±φ₁``
(top PCA direction). We also run power iteration (eq. PI) from each ReLU maximum to see
whether it is a fixed point of eq. 7 (a critical point), reported in the summary.

What E.1 counts (claim ``relu-maxima-are-corners``, sanity, and ``relu-many-maxima``'s detail): the ReLU maxima
are non-smooth corner maxima of a finite batch, not LMEs of eq. 7. ``E_α(θ)`` is piecewise smooth with kinks
where a data point crosses the plane ``wᵀx = 0`` (``θ = θ_i ± 90°``); with the App. E.1 data all 9 maxima sit on
such kinks (within 2 θ-grid steps) and none is a fixed point of eq. PI (200 steps move each by > 2 grid steps,
up to 86°). ``relu-many-maxima`` remains a correct reading of E.1, which counts local maxima of ``E_α(θ)``; the
counted maxima are not the "critical points … local optima" (LMEs) of Fig. 1(c) and Sec. 3. The control is the
linear curve, whose maxima ``±φ₁`` are smooth and fixed points of eq. PI (fraction 0).

"Not orthogonal to each other" (claims-v4): PCA directions come in orthogonal pairs (``±φ₁ ⟂ ±φ₂``),
so every one of them has another at 90°. We measure the fraction of ReLU maxima that have an
*orthogonal partner* — another maximum whose circular distance is 90° within two grid steps
(:func:`orthogonal_partner_mask`) — and read the statement as: most ReLU maxima have none
(fraction < ½). Unlike the smallest neighbouring gap (claims-v3), which is < 90° for any ≥ 5
maxima on a circle, this fraction can fail: 8 maxima at multiples of 45° give 1.

Controls: each count or angle of one curve is also measured on the other curve of the same run
— the ReLU counts on the linear curve (which the paper says has only ±φ₁), the linear statements
on the ReLU curve. The orthogonality claim's control is the PCA directions ±φ₁, ±φ₂ of the same
nine points located on the same θ grid (the linear curve's maxima and minima), whose fraction is 1.

Runs on ``ctx.device`` (energy curves, eigen-decomposition, power iteration); the local-maximum
search (numpy) and the tables use CPU copies.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from pydantic import Field

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Measured, equals, every_seed, ge, gt, le, lt
from ssldyn.data.latent import FIG8_ANGLES, circle_points
from ssldyn.dynamics.alpha_cl import make_A_fn, one_layer_energy, power_iteration, uniform_contrastive_covariance
from ssldyn.experiments.nonlinearity._common import NonlinearityExperiment
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.probes.alpha_cl import angle_deg, circ_sep_deg, eigen_summary, prominent_maxima, theta_grid
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Fig8Config(ExperimentConfig):
    angles: list[float] = Field(list(FIG8_ANGLES), min_length=2, description="data angles (App. E.1)")
    n_grid: int = Field(7200, ge=360, description="θ grid points on [−π, π)")
    activation: Literal["relu", "leaky_relu", "quadratic"] = Field(
        "relu", description="homogeneous nonlinear activation compared with linear (App. E.1: ReLU)"
    )
    prominence: float = Field(
        1e-6, gt=0, lt=0.1, description="maxima count when their prominence is >= this fraction of the curve's range"
    )


LOC = "App. E.1, Fig. 8"
ORTHO_TOL_STEPS = 2  # orthogonality tolerance in θ-grid steps: each maximum is located to ½ step, a gap to 1 step


def orthogonal_partner_mask(thetas: ArrayLike, tol_deg: float) -> np.ndarray:
    """Which directions have an orthogonal partner in the set: ``(n,) -> (n,)`` bool.

    ``thetas`` are angles in radians of unit vectors ``w = (cos θ, sin θ)``. Direction ``i`` has a
    partner when some ``j ≠ i`` has circular distance ``d_ij = |((θ_i − θ_j + π) mod 2π) − π|`` (in
    ``[0°, 180°]``) with ``|d_ij − 90°| ≤ tol_deg``, i.e. ``|w_iᵀw_j| ≤ sin(tol)``; 90° and 270° apart
    are the same (``wᵀw' = 0``), antipodes (180°) are not partners. The tolerance is inclusive up to
    1e-9° of round-off. PCA directions ``±φ₁, ±φ₂`` all have one (fraction 1).
    """
    return np.asarray(_orthogonal(thetas, tol_deg).any(axis=1), dtype=bool)  # (n,)


def _orthogonal(thetas: ArrayLike, tol_deg: float) -> np.ndarray:
    """``(n, n)`` bool: which pairs of :func:`orthogonal_partner_mask`'s directions are orthogonal (the checks are its)."""
    tol = float(tol_deg)
    if not (0.0 <= tol < 45.0):
        raise ValueError(f"orthogonal_partner_mask: tol_deg must be in [0, 45) degrees, got {tol_deg!r}")
    t = np.asarray(thetas, dtype=np.float64).ravel()  # (n,)
    if not np.all(np.isfinite(t)):
        raise ValueError("orthogonal_partner_mask: thetas must be finite angles in radians")
    d = np.rad2deg(np.abs(np.mod(t[:, None] - t[None, :] + math.pi, 2 * math.pi) - math.pi))  # (n, n) in [0, 180]
    return np.abs(d - 90.0) <= tol + 1e-9  # (n, n); the diagonal has d = 0


def orthogonal_partner_fraction(thetas: ArrayLike, tol_deg: float) -> float:
    """Fraction of ``thetas`` with an orthogonal partner (:func:`orthogonal_partner_mask`); NaN for an empty set."""
    m = orthogonal_partner_mask(thetas, tol_deg)
    return float(m.mean()) if len(m) else float("nan")


def n_orthogonal_pairs(thetas: ArrayLike, tol_deg: float) -> int:
    """Number of unordered pairs ``{i, j}`` of ``thetas`` that are orthogonal within ``tol_deg``."""
    return int(np.triu(_orthogonal(thetas, tol_deg), 1).sum())


@register
class Fig8(NonlinearityExperiment):
    name = "nonlinearity.fig8"
    figure = "Fig. 8, App. E.1"
    description = "E_α(θ) on the circle: ReLU has ≥ 8 non-orthogonal local maxima, linear only ±φ₁"
    Config = Fig8Config
    quick = {"n_grid": 3600}
    est_seconds = (1, 2)
    # 4: relu-not-orthogonal reads the fraction of maxima with an orthogonal partner (the smallest neighbouring gap
    # of v3 was < 90° for any ≥ 5 maxima, so it could not fail) against the PCA directions; 3: it was a consequence
    # of relu-many-maxima; 2: power iteration in float64
    # 5: relu-maxima-are-corners (sanity): the counted maxima are kink maxima, not fixed points of eq. PI
    # 6: the equals claims are read per seed (their statistic is the fraction of seeds, contract.claims.Relation)
    version = "6"
    seeded = False  # nine fixed points and an exact landscape: nothing is random
    claims = (
        ClaimSpec(
            "relu-many-maxima", "With ReLU, E_α(θ) has many local maxima (≥ 8).", LOC, kind="paper",
            reading="number of local maxima of the exact E_α(θ) on a θ grid (prominence floor 1e-6 of the range)",
            relation=ge(8), basis="paper: '(≥ 8)'", control="the linear curve's count (same landscape)",
            if_fails="fewer than 8 local maxima of E_α(θ) on this batch (the detail says how many are corner maxima)",
        ),
        ClaimSpec(
            "more-than-pca", "... much more than 2 × 2 = 4, the most local maxima PCA directions can give in 2D.",
            LOC, kind="paper", reading="number of ReLU local maxima", relation=gt(4),
            basis="paper: '2 × 2 = 4' (±φ₁, ±φ₂)", control="the linear curve's count (same landscape)",
        ),
        ClaimSpec(
            "linear-two-maxima", "With linear activation there are only two local maxima.", LOC, kind="paper",
            reading="number of local maxima of the linear curve", relation=equals(2), basis="paper: 'only two'",
            rule=every_seed("an exact count: a mean of counts is not a count"),
            control="the ReLU curve's count (same landscape)",
        ),
        ClaimSpec(
            "linear-at-phi1", "The linear maxima are at ±φ₁, the largest PCA eigenvector.", LOC, kind="paper",
            reading="largest angle between a linear maximum and the nearer of ±φ₁ (degrees)",
            relation=lambda cfg: le(2 * 360.0 / cfg.n_grid),
            basis="method: two steps of the θ grid (the maxima are located on the grid)",
            control="the largest angle between a ReLU maximum and the nearer of ±φ₁",
        ),
        ClaimSpec(
            "relu-not-orthogonal", "Unlike PCA directions, the ReLU local optima are not orthogonal to each other.",
            LOC, kind="paper",
            reading="fraction of ReLU maxima with an orthogonal partner: another maximum at 90° (circular distance, "
            "90° ≡ 270°) within ± 2 θ-grid steps; PCA directions ±φ₁, ±φ₂ all have one (fraction 1)",
            relation=lt(0.5),
            basis="relation: 'unlike PCA directions [orthogonal pairs], not orthogonal to each other' read as: most "
            "ReLU maxima (more than half) have no maximum orthogonal to them; the literal 'no orthogonal pair' "
            "(fraction 0) is the detail's pair count",
            control="the PCA directions ±φ₁, ±φ₂ of the same nine points on the same θ grid (the linear curve's "
            "maxima and minima): the paper's own contrast, fraction 1",
            bounds=(0.0, 1.0),
            if_fails="a majority of the ReLU maxima sit 90° from another maximum, as PCA directions do; the detail "
            "gives the orthogonal pairs",
        ),
        ClaimSpec(
            "relu-maxima-are-corners", "The ReLU local maxima that E.1 counts are non-smooth corner maxima of the "
            "finite batch (each on a kink θ_i ± 90°), not fixed points of power iteration (Eqn. PI), so not critical "
            "points (LMEs) of eq. 7.", LOC,
            kind="sanity",
            reading="fraction of the ReLU maxima that lie on a kink θ_i ± 90° (within 2 θ-grid steps) and move by "
            "more than 2 θ-grid steps under 200 steps of eq. PI", relation=equals(1.0), bounds=(0.0, 1.0),
            rule=every_seed("an exact fraction of a deterministic landscape: all maxima, not a mean"),
            basis="method: all of them; 2 θ-grid steps: each maximum is located to ½ step on the grid",
            control="the same fraction for the linear curve's maxima ±φ₁ (smooth, fixed points of eq. PI): 0",
            if_fails="some counted maximum is smooth or a fixed point of eq. PI (an LME candidate); the detail gives "
            "how many of each",
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: Fig8Config, n_seeds: int) -> tuple[int, str]:
        """``BASE + 300 B · n_grid``: the energy curves over the θ grid (per data angle and activation,
        float64; ≈ 28 values per grid point measured). Measured (max RSS): 0.48 GB at the quick preset
        (n_grid = 3600, estimate 0.55 GB), 0.64 GB with n_grid = 720,000 (estimate 0.77 GB)."""
        return int(PROCESS_BASELINE + 300 * cfg.n_grid), "n_grid"

    def run(self, cfg: Fig8Config, ctx: Context) -> Result:
        dev = ctx.device
        x = circle_points(cfg.angles).to(dev)  # (9, 2)
        theta = theta_grid(cfg.n_grid, device=dev)
        theta_np = theta.cpu().numpy()
        W = circle_points(theta)  # (G, 2)
        curves, maxima = {}, {}
        for act in (cfg.activation, "linear"):
            e = one_layer_energy(x, W, act)  # (G,)
            e = (e / e.max()).cpu().numpy()
            curves[act] = e
            maxima[act] = theta_np[prominent_maxima(e, cfg.prominence)[0]]
        # the PCA directions on the same grid: the linear curve ½ wᵀCw peaks at ±φ₁ and bottoms out at ±φ₂
        lin_minima = theta_np[prominent_maxima(-curves["linear"], cfg.prominence)[0]]
        pca_dirs = np.concatenate([maxima["linear"], lin_minima])  # (4,) when the spectrum is not degenerate
        phi1 = eigen_summary(uniform_contrastive_covariance(x))[3]  # top PCA direction of the nine points
        phi_ang = math.atan2(float(phi1[1]), float(phi1[0]))

        def dev_from(ms, axis: float) -> list[float]:  # circular distance (rad) of each angle to the nearer of ±axis
            return [min(abs((m - a + math.pi) % (2 * math.pi) - math.pi) for a in (axis, axis + math.pi))
                    for m in ms]  # fmt: skip

        lin_dev, nonlin_dev = dev_from(maxima["linear"], phi_ang), dev_from(maxima[cfg.activation], phi_ang)
        # are the ReLU maxima fixed points of eq. PI?
        w_max = circle_points(maxima[cfg.activation]).to(dev)  # (n_max, 2), float64 (was built in float32: ~1e-8 off)
        # 200 steps from each landscape maximum: how far the iteration moves is the measurement, not convergence
        w_pi = power_iteration(w_max, make_A_fn(x, cfg.activation), steps=200, tol=1e-12, warn_unconverged=False).state
        moved = angle_deg(w_pi, w_max).cpu().numpy()  # (n_max,) degrees
        w_lin = circle_points(maxima["linear"]).to(dev)  # the control: the linear maxima ±φ₁ (smooth)
        w_lin_pi = power_iteration(w_lin, make_A_fn(x, "linear"), steps=200, tol=1e-12, warn_unconverged=False).state
        moved_lin = angle_deg(w_lin_pi, w_lin).cpu().numpy()
        step = 360.0 / cfg.n_grid
        seps = circ_sep_deg(maxima[cfg.activation])
        ortho_tol = ORTHO_TOL_STEPS * step  # degrees
        phi2_dev = dev_from(lin_minima, phi_ang + math.pi / 2)  # the linear curve's minima against ±φ₂
        res = Result(
            tables={
                "curves": pd.DataFrame(
                    {"theta": theta_np, cfg.activation: curves[cfg.activation], "linear": curves["linear"]}
                ),
                "maxima": pd.DataFrame([{"activation": a, "theta": float(t)} for a in maxima for t in maxima[a]]),
            },
            summary={
                "n_max_nonlinear": int(len(maxima[cfg.activation])),
                "n_max_linear": int(len(maxima["linear"])),
                "linear_max_dev_deg": float(np.rad2deg(max(lin_dev))) if lin_dev else float("nan"),
                "nonlinear_max_dev_deg": float(np.rad2deg(max(nonlin_dev))) if nonlin_dev else float("nan"),
                "phi1_deg": math.degrees(phi_ang),
                "grid_step_deg": step,
                "min_sep_nonlinear_deg": float(seps.min()) if len(seps) else float("nan"),
                "ortho_tol_deg": ortho_tol,
                "frac_ortho_partner_nonlinear": orthogonal_partner_fraction(maxima[cfg.activation], ortho_tol),
                "n_ortho_pairs_nonlinear": n_orthogonal_pairs(maxima[cfg.activation], ortho_tol),
                "n_pca_dirs_on_grid": int(len(pca_dirs)),
                "frac_ortho_partner_pca": orthogonal_partner_fraction(pca_dirs, ortho_tol),
                "linear_min_dev_from_phi2_deg": float(np.rad2deg(max(phi2_dev))) if phi2_dev else float("nan"),
                "maxima_that_are_PI_fixed_points": int(np.sum(moved < 2 * step)),
                "max_PI_drift_from_maxima_deg": float(moved.max()) if len(moved) else float("nan"),
            },
            arrays={"x": x.cpu().numpy()},
        )
        kinks = np.mod(np.array(cfg.angles)[:, None] + np.array([-math.pi / 2, math.pi / 2])[None], 2 * math.pi)

        def on_kink_of(ts) -> np.ndarray:  # (n,) bool: within 2 grid steps of a kink θ_i ± π/2
            return np.array(
                [float(np.min(np.abs((t - kinks + math.pi) % (2 * math.pi) - math.pi))) < 2 * math.radians(step)
                 for t in ts], dtype=bool,
            )  # fmt: skip

        on_kink, on_kink_lin = on_kink_of(maxima[cfg.activation]), on_kink_of(maxima["linear"])
        corner = on_kink & (moved >= 2 * step)  # on a kink and not a fixed point of eq. PI
        corner_lin = on_kink_lin & (moved_lin >= 2 * step)
        res.summary["maxima_on_kinks"] = int(sum(on_kink))
        res.summary["corner_maxima"] = int(corner.sum())
        res.summary["frac_corner_maxima"] = float(corner.mean()) if len(corner) else float("nan")
        res.summary["frac_corner_maxima_linear"] = float(corner_lin.mean()) if len(corner_lin) else float("nan")
        res.summary["linear_maxima_that_are_PI_fixed_points"] = int(np.sum(moved_lin < 2 * step))
        res.notes.append(
            f"{res.summary['maxima_that_are_PI_fixed_points']} of {len(moved)} {cfg.activation} maxima are "
            f"fixed points of eq. PI; {sum(on_kink)} of them lie on a kink θ = θ_i ± π/2 (a data point on "
            "the plane wᵀx = 0, where E_α is not differentiable for this 9-point batch)."
        )
        res.notes.append(
            "Maxima counted on a θ grid (strict maxima; a flat top counts once). Local maxima of the "
            "ReLU curve that lie on a kink (a data point on the plane wᵀx = 0) need not be fixed points "
            "of eq. PI; the summary reports how many are."
        )
        return res

    def measure(self, cfg: Fig8Config, result: Result) -> dict:
        s = result.summary
        nl, li = s["n_max_nonlinear"], s["n_max_linear"]
        return {
            "relu-many-maxima": Measured(nl, control=li, detail=self._corner_detail(cfg, s)),
            "more-than-pca": Measured(nl, control=li),
            "linear-two-maxima": Measured(li, control=nl),
            "linear-at-phi1": Measured(
                s["linear_max_dev_deg"], control=s["nonlinear_max_dev_deg"], detail=f"φ₁ at {s['phi1_deg']:.2f}°"
            ),
            "relu-not-orthogonal": Measured(
                s["frac_ortho_partner_nonlinear"],
                control=s["frac_ortho_partner_pca"],
                detail=f"{s['n_ortho_pairs_nonlinear']} orthogonal pairs among {nl} maxima "
                f"(± {s['ortho_tol_deg']:.2g}°); PCA control: {s['n_pca_dirs_on_grid']} directions on the grid",
            ),
            "relu-maxima-are-corners": Measured(
                s["frac_corner_maxima"],
                control=s["frac_corner_maxima_linear"],
                detail=self._corner_detail(cfg, s) + f"; linear: {s['linear_maxima_that_are_PI_fixed_points']} of "
                f"{li} maxima are fixed points of eq. PI",
            ),
        }

    @staticmethod
    def _corner_detail(cfg: Fig8Config, s: dict) -> str:
        """What the counted maxima are: on kinks, fixed points of eq. PI or neither (App. E.1 counts maxima of
        ``E_α(θ)``, not LMEs of eq. 7)."""
        n, k = s["n_max_nonlinear"], s["corner_maxima"]
        return (
            f"{k} of {n} are non-smooth corner maxima of the {len(cfg.angles)}-point batch "
            f"({s['maxima_on_kinks']} on a kink θ_i ± 90°, {s['maxima_that_are_PI_fixed_points']} fixed points of "
            f"eq. PI, which moves them up to {s['max_PI_drift_from_maxima_deg']:.1f}°)"
            + (": maxima of E_α(θ), none an LME of eq. 7" if n and k == n else "")
        )

    def plots(self, cfg: Fig8Config, result: Result, fig_dir: Path):
        c, m = result.tables["curves"], result.tables["maxima"]
        fig, ax = new_figure(1, 1, size=(6.0, 3.6))
        a = ax[0, 0]
        a.plot(c["theta"], c[cfg.activation], "-", color=PALETTE[0], label=cfg.activation)
        a.plot(c["theta"], c["linear"], ":", color=PALETTE[1], label="linear")
        for act, col in ((cfg.activation, PALETTE[0]), ("linear", PALETTE[1])):
            t = m.loc[m["activation"] == act, "theta"].to_numpy()
            a.plot(t, np.interp(t, c["theta"], c[act]), "o", color=col, ms=4)
        for t in cfg.angles:
            a.axvline(t, color="0.8", lw=0.8, zorder=0)
        a.set(xlabel="θ", ylabel="E_α(θ) / max", title="Fig. 8: local maxima of E_α on the circle")
        a.legend(fontsize=8)
        return [save_figure(fig, fig_dir / "fig8.png")]
