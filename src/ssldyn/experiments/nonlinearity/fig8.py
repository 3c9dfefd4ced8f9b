"""`nonlinearity` App. E.1, Fig. 8: local maxima of ``E_α(θ) = ½ C_α[h(wᵀx)]`` on the circle.

``w = (cos θ, sin θ)``, nine data points on the unit circle at the angles of App. E.1,
uniform α (``α_ij ≡ 1``), no augmentation (so ``C_α[f]`` is the variance of ``f`` over the
nine points). ReLU (solid) versus linear (dotted), each scaled to max 1. The paper: ReLU
has at least 8 local maxima, not orthogonal to each other; linear has exactly 2, at ``±φ₁``
(top PCA direction). We also run power iteration (eq. PI) from each ReLU maximum to see
whether it is a fixed point of eq. 7 (a critical point), reported in the summary.

Controls (claims-v3): each count or angle of one curve is also measured on the other curve of the
same run — the ReLU counts on the linear curve (which the paper says has only ±φ₁), the linear
statements on the ReLU curve.

Runs on ``ctx.device`` (energy curves, eigen-decomposition, power iteration); the local-maximum
search (numpy) and the tables use CPU copies.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
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


@register
class Fig8(NonlinearityExperiment):
    name = "nonlinearity.fig8"
    figure = "Fig. 8, App. E.1"
    description = "E_α(θ) on the circle: ReLU has ≥ 8 non-orthogonal local maxima, linear only ±φ₁"
    Config = Fig8Config
    quick = {"n_grid": 3600}
    est_seconds = (1, 2)
    version = "3"  # 3: relu-not-orthogonal is a consequence of relu-many-maxima; 2: power iteration in float64
    seeded = False  # nine fixed points and an exact landscape: nothing is random
    claims = (
        ClaimSpec(
            "relu-many-maxima", "With ReLU, E_α(θ) has many local maxima (≥ 8).", LOC, kind="paper",
            reading="number of local maxima of the exact E_α(θ) on a θ grid (prominence floor 1e-6 of the range)",
            relation=ge(8), basis="paper: '(≥ 8)'", control="the linear curve's count (same landscape)",
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
            LOC, kind="consequence", reading="smallest angle between neighbouring ReLU maxima (degrees)",
            relation=lambda cfg: lt(90.0 - 2 * 360.0 / cfg.n_grid),
            basis="method: 90° minus two grid steps (orthogonal maxima would be 90° apart up to the grid)",
            derivation="App. E.1 states it, but on the circle it follows from relu-many-maxima: n ≥ 5 maxima split "
            "the 360° into n neighbour gaps, so the smallest is ≤ 360°/n ≤ 72° < 90° (≤ 45° for the paper's ≥ 8); "
            "in 2-D no reading of 'not orthogonal' is independent of the count",
            control="the smallest angle between neighbouring maxima of the linear curve",
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
        phi1 = eigen_summary(uniform_contrastive_covariance(x))[3]  # top PCA direction of the nine points
        phi_ang = math.atan2(float(phi1[1]), float(phi1[0]))

        def dev_from_phi1(ms) -> list[float]:
            return [min(abs((m - a + math.pi) % (2 * math.pi) - math.pi) for a in (phi_ang, phi_ang + math.pi))
                    for m in ms]  # fmt: skip

        lin_dev, nonlin_dev = dev_from_phi1(maxima["linear"]), dev_from_phi1(maxima[cfg.activation])
        # are the ReLU maxima fixed points of eq. PI?
        w_max = circle_points(maxima[cfg.activation]).to(dev)  # (n_max, 2), float64 (was built in float32: ~1e-8 off)
        # 200 steps from each landscape maximum: how far the iteration moves is the measurement, not convergence
        w_pi = power_iteration(w_max, make_A_fn(x, cfg.activation), steps=200, tol=1e-12, warn_unconverged=False).state
        moved = angle_deg(w_pi, w_max).cpu().numpy()
        step = 360.0 / cfg.n_grid
        seps = circ_sep_deg(maxima[cfg.activation])
        lin_seps = circ_sep_deg(maxima["linear"])
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
                "min_sep_linear_deg": float(lin_seps.min()) if len(lin_seps) else float("nan"),
                "phi1_deg": math.degrees(phi_ang),
                "grid_step_deg": step,
                "min_sep_nonlinear_deg": float(seps.min()) if len(seps) else float("nan"),
                "n_sep_not_90": int(np.sum(np.abs(seps - 90.0) > 2 * step)),
                "maxima_that_are_PI_fixed_points": int(np.sum(moved < 2 * step)),
                "max_PI_drift_from_maxima_deg": float(moved.max()) if len(moved) else float("nan"),
            },
            arrays={"x": x.cpu().numpy()},
        )
        kinks = np.mod(np.array(cfg.angles)[:, None] + np.array([-math.pi / 2, math.pi / 2])[None], 2 * math.pi)
        on_kink = [
            float(np.min(np.abs((t - kinks + math.pi) % (2 * math.pi) - math.pi))) < 2 * math.radians(step)
            for t in maxima[cfg.activation]
        ]
        res.summary["maxima_on_kinks"] = int(sum(on_kink))
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
            "relu-many-maxima": Measured(nl, control=li),
            "more-than-pca": Measured(nl, control=li),
            "linear-two-maxima": Measured(li, control=nl),
            "linear-at-phi1": Measured(
                s["linear_max_dev_deg"], control=s["nonlinear_max_dev_deg"], detail=f"φ₁ at {s['phi1_deg']:.2f}°"
            ),
            "relu-not-orthogonal": Measured(
                s["min_sep_nonlinear_deg"],
                control=s["min_sep_linear_deg"],
                detail=f"{s['n_sep_not_90']} neighbouring separations differ from 90°",
            ),
        }

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
