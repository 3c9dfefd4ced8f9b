"""`nonlinearity` Thm. 2 / Cor. 2 (Sec. 3.2): Gaussian α lowers the roughness bound by z₀, may keep more local optima.

Data with a density on the plane (Thm. 2 needs ``‖x‖ ≤ C₀`` and a density ``p_D``):
:class:`~ssldyn.data.circle_mixture.CircleMixture` — ``n_clusters`` von Mises clusters of angle
(concentration ``kappa``) evenly spaced over an arc ``[−a, a]`` and radius ``U[1 − δ, 1 + δ]``. The
*layouts* are arcs of several half-widths ``a`` (a wider arc puts more data on the inactive side of
the optima). ReLU, no augmentation, ``N → ∞``; pairwise importance: uniform ``α ≡ 1`` and the 1-D
Gaussian α of Cor. 2, ``α(x, y) = exp(−(h(w*ᵀx) − h(w*ᵀy))²/2τ)`` with ``w*`` the current weight
(stop-gradient, eq. 2), for a grid of ``τ``.

Everything is a population integral, computed with quadrature adapted to the kinks of the
integrand (:meth:`CircleMixture.nodes`), so ``A(w)`` is a smooth function of ``w`` and no
sample-level artefact (piecewise-constant ``A``, power iterations cycling at kinks) enters:

- ``A(w) = C_α[x̃^w]`` (population limit of eq. 3,
  :func:`~ssldyn.dynamics.alpha_cl_mixture.population_contrastive_covariance`);
- **stable optima**: on the circle the flow is ``θ̇ = r(θ) = w⊥ᵀA(w)w``; its stable fixed points are the
  downward zeros of ``r`` (θ grid, then bisection) — the exact count, for every α;
- at each optimum ``w*``: the inactive fraction ``P[w*ᵀx ≤ 0]``, ``z₀(α_g) = E[exp(−h²(w*ᵀx)/2τ)]``
  (Cor. 2), the roughness ``ρ(w*) = ‖∂_θ A(w) w*‖`` with α frozen at ``w*`` (central differences,
  smooth data), for uniform α and for Gaussian α at the same ``w*``, and Thm. 2's bound
  ``ρ ≤ C₀³ vol(C₀)/π · r = C₀⁵ r`` (``d = 2``: ``vol(C₀) = πC₀²``) with ``r(w*, α_u) = max_{w*ᵀx=0} p_D``
  and ``r(w*, α_g) = z₀ r(w*, α_u)`` (Cor. 2).

Cor. 2's premise, "most data on the positive side", is a property of the optimum, not of the
data set: we do not fix "z₀ ≤ 0.1" but measure the relation the corollary gives across layouts
and τ — ``z₀ = P[inactive] + E[e^{−h²/2τ}; active]`` tracks the inactive fraction
(``z0-tracks-inactive``), and the roughness ratio ``ρ_g/ρ_u`` stays below ``z₀`` (``ratio-below-z0``, an upper
bound, not a proportionality: the ratio is typically far below ``z₀``).

The paper fixes neither the data nor τ. The two Gaussian-vs-uniform claims read the **smallest τ** of the
run (where z₀ → P[inactive], the regime the corollary is about): ``lower-roughness`` the fraction of its optima
with ``ρ_g < ½ρ_u``, ``more-optima`` its exact counts; the fraction at every τ (and pooled) is in the detail.
A robustness map runs them at each τ alone (0.5, 0.1, 0.02), on the first two and the last two of the four
paper-scale arcs, and at three cluster concentrations κ: both fail at τ = 0.5 (where z₀ ≥ 0.7), and
``more-optima`` holds only where the ±70°/±90° arcs are in the run and τ ≤ 0.1 (the narrow arcs never gain an
optimum). Even at τ = 0.02 the smallest z₀ at an optimum is ≈ 0.24 (0.08 at κ = 200): z₀ ≪ 1 is not reached.
The quick preset keeps every τ and drops the arcs ±50° and ±70° (and coarsens the scan grid).

Deterministic (fixed layouts, quadrature): one evaluation. Runs on ``ctx.device``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, field_validator

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Measured, Robustness, ge, gt, is_true, le
from ssldyn.data.circle_mixture import CircleMixture
from ssldyn.data.latent import circle_points
from ssldyn.dynamics.alpha_cl_mixture import population_contrastive_covariance
from ssldyn.experiments.nonlinearity._common import F64, NonlinearityExperiment
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.probes.alpha_cl import eigen_summary, theta_grid
from ssldyn.probes.slopes import spearman
from ssldyn.viz.common import PALETTE, new_figure, save_figure

HALF = math.pi / 2


class Corollary2Config(ExperimentConfig):
    arc_half_widths: list[PositiveFloat] = Field(
        [30.0, 50.0, 70.0, 90.0], min_length=2, description="layouts: half-width a (degrees) of the data arc"
    )
    n_clusters: int = Field(6, ge=2, description="von Mises clusters evenly spaced over [−a, a]")
    kappa: PositiveFloat = Field(100.0, description="von Mises concentration (angular std ≈ 1/√κ rad ≈ 5.7°)")
    delta: float = Field(0.1, gt=0, lt=1, description="radius r ~ U[1 − δ, 1 + δ]; C₀ = 1 + δ")
    taus: list[PositiveFloat] = Field([0.5, 0.1, 0.02], min_length=1, description="Gaussian-α temperatures τ")
    control_tau: PositiveFloat = Field(
        10.0, description="a large τ (α ≈ 1, nearly uniform): the control of the Gaussian-α claims"
    )
    n_grid: int = Field(180, ge=60, description="θ grid of the circle scan (then bisection)")
    scan_arc_deg: PositiveFloat = Field(6.0, description="quadrature sub-arc (degrees) of the scan")
    scan_nodes: int = Field(3, ge=2, description="Gauss–Legendre nodes per sub-arc and in the radius (scan)")
    fine_arc_deg: PositiveFloat = Field(3.0, description="quadrature sub-arc (degrees) at the optima (ρ, checks)")
    fine_nodes: int = Field(4, ge=2, description="Gauss–Legendre nodes per sub-arc and in the radius (fine)")
    rho_eps: PositiveFloat = Field(1e-4, description="finite-difference step (radians) of ρ")

    @field_validator("arc_half_widths")
    @classmethod
    def _arcs(cls, v: list[float]) -> list[float]:
        if any(a > 180 for a in v):
            raise ValueError("arc_half_widths: at most 180 degrees")
        return sorted(set(v))

    @field_validator("taus")
    @classmethod
    def _taus(cls, v: list[float]) -> list[float]:
        return sorted(set(v), reverse=True)


def layout(cfg: Corollary2Config, half_width_deg: float) -> CircleMixture:
    cs = np.radians(np.linspace(-half_width_deg, half_width_deg, cfg.n_clusters))
    return CircleMixture(tuple(float(c) for c in cs), kappa=cfg.kappa, delta=cfg.delta)


def _quad(arc_deg: float, nodes: int) -> dict:
    return {"max_arc": math.radians(arc_deg), "n_gl": nodes, "n_r": nodes}


def A_population(
    mix: CircleMixture, theta: torch.Tensor, tau: float | None, quad: dict, h: float = 0.0
) -> torch.Tensor:
    """``A(w) (G, 2, 2)`` at ``w = (cos θ, sin θ)`` with α (Gaussian, temperature ``tau``; None: uniform)
    evaluated at ``w* = (cos(θ + h), sin(θ + h))`` — ``h = 0`` is the flow's A (α at the current w).

    Only the half-planes ``wᵀx > 0`` and ``w*ᵀx > 0`` need nodes: elsewhere ``x̃ = 0`` and ``h(w*ᵀx) = 0``,
    so those points enter the Gaussian α only through their total mass ``p₀`` and ``K(u, 0) = e^{−u²/2τ}``.
    """
    lo, hi = min(-HALF, h - HALF), max(HALF, h + HALF)
    breaks = [-HALF, HALF, h - HALF, h + HALF]
    n = mix.nodes(theta[:1], breaks, span=(lo, hi), **quad)[1].shape[-1]
    chunk = max(1, int(3e6 // (n * n)))
    out = []
    for th in theta.split(chunk):
        x, p, _ = mix.nodes(th, breaks, span=(lo, hi), **quad)  # (G, n, 2)
        xt = x * ((x * circle_points(th)[:, None, :]).sum(-1) > 0).to(x.dtype)[..., None]  # x̃^w
        if tau is None:
            out.append(population_contrastive_covariance(xt, p, None))
            continue
        u = torch.relu((x * circle_points(th + h)[:, None, :]).sum(-1))  # (G, n): h(w*ᵀx)
        p0 = 1.0 - p.sum(-1)  # (G,) mass outside both half-planes: x̃ = 0, u = 0
        K = torch.exp(-((u[:, :, None] - u[:, None, :]) ** 2) / (2 * tau))  # (G, n, n)
        kbar = (K @ p[..., None]).squeeze(-1) + p0[:, None] * torch.exp(-u * u / (2 * tau))  # (G, n)
        pa = p[..., None] * xt
        out.append((pa * kbar[..., None]).mT @ xt - pa.mT @ K @ pa)
    return torch.cat(out)


def A_reference(mix: CircleMixture, theta: torch.Tensor, tau: float | None, quad: dict) -> torch.Tensor:
    """``A(w)`` with α at the same ``w``, integrating over the whole circle (no shortcut): the check of
    :func:`A_population`."""
    x, p, _ = mix.nodes(theta, [HALF, -HALF], **quad)
    xt = x * ((x * circle_points(theta)[:, None, :]).sum(-1) > 0).to(x.dtype)[..., None]
    K = None
    if tau is not None:
        u = torch.relu((x * circle_points(theta)[:, None, :]).sum(-1))
        K = torch.exp(-((u[:, :, None] - u[:, None, :]) ** 2) / (2 * tau))
    return population_contrastive_covariance(xt, p, K)


def flow_rate(A: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """``r(θ) = w⊥ᵀ A w`` (the flow on the circle, eq. 7), ``(G,)``."""
    wp = torch.stack([-theta.sin(), theta.cos()], -1)
    return (wp[:, None, :] @ A @ circle_points(theta)[:, :, None]).reshape(-1)


def stable_optima(
    mix: CircleMixture, tau: float | None, n_grid: int, quad: dict, iters: int = 40
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stable fixed points of eq. 7 on the circle: downward zeros of ``r`` refined by bisection.

    Returns ``(θ* (n_opt,), θ grid (n_grid,), r on the grid)``.
    """
    th = theta_grid(n_grid)  # the θ grid of the circle scan
    r = flow_rate(A_population(mix, th, tau, quad), th)
    s = torch.sign(r)
    idx = ((s > 0) & (torch.roll(s, -1) < 0)).nonzero().reshape(-1)
    lo = th[idx]
    hi = lo + 2 * math.pi / n_grid
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        rm = flow_rate(A_population(mix, mid, tau, quad), mid)
        lo, hi = torch.where(rm > 0, mid, lo), torch.where(rm > 0, hi, mid)
    return torch.remainder(0.5 * (lo + hi) + math.pi, 2 * math.pi) - math.pi, th, r


def roughness(mix: CircleMixture, theta: torch.Tensor, tau: float | None, eps: float, quad: dict) -> torch.Tensor:
    """``ρ(w*) = ‖∂_θ A(w) w*‖`` at ``θ*`` with α frozen at ``w*`` (central differences), ``(G,)``."""
    ap = A_population(mix, theta + eps, tau, quad, h=-eps)
    am = A_population(mix, theta - eps, tau, quad, h=eps)
    w = circle_points(theta)[:, :, None]
    return ((ap - am) @ w).squeeze(-1).norm(dim=-1) / (2 * eps)


LOC2 = "Thm. 2, Cor. 2, Sec. 3.2"


def optima_summary(
    counts: pd.DataFrame, opts: pd.DataFrame, taus: Sequence[float], control_tau: float
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The readings of the run's local optima: ``(optima, summary)``.

    ``counts``: one row per (alpha, tau, arc_deg) with ``n_optima`` (``tau`` NaN for the uniform α); ``opts``: one
    row per optimum with alpha, tau, rho, rho_u, z0, bound, inactive and ``rho_g@<control_tau>``. The optima of the
    Gaussian α at ``control_tau`` are the control set: left out of the returned table, counted in the summary.
    ``more_optima`` (Cor. 2's "more local optima"): at the smallest τ the Gaussian α has at least the uniform
    α's count at every arc and more at one; ``max_ratio_over_z0``: the largest ρ_g/(ρ_u z0) over every Gaussian
    optimum (the bound ρ_g ≤ z0 ρ_u must hold for each).
    """
    ctl = opts.loc[(opts["alpha"] == "gaussian") & (opts["tau"] == control_tau)]
    opts = opts.loc[(opts["alpha"] == "uniform") | (opts["tau"] != control_tau)]
    g = opts.loc[opts["alpha"] == "gaussian"]
    small = min(taus)
    gs = g[g["tau"] == small]
    ratio = g["rho"] / g["rho_u"]

    def n_optima(tau: float | None) -> pd.Series:  # arc_deg -> count, of the uniform α (None) or the Gaussian α at τ
        sel = counts["alpha"] == "uniform" if tau is None else (counts["alpha"] == "gaussian") & (counts["tau"] == tau)
        return counts.loc[sel].set_index("arc_deg")["n_optima"]

    def by_arc(c: pd.Series) -> dict[str, int]:
        return {f"{k:g}": int(v) for k, v in c.items()}

    def more_than_uniform(c: pd.Series) -> bool:  # at least the uniform count at every arc, more at one
        diff = (c - n_optima(None).reindex(c.index)).to_numpy()
        return bool((diff >= 0).all() and (diff > 0).any())

    rng = np.random.default_rng(0)

    def frac_below_half(sel: pd.DataFrame, col: str = "rho") -> float:
        return float((sel[col] < 0.5 * sel["rho_u"]).mean()) if len(sel) else float("nan")

    summary = {
        "thm2_max_ratio": float((opts.loc[:, "rho"] / opts.loc[:, "bound"]).max()),
        "thm2_max_ratio_uniform": float((opts.loc[opts.alpha == "uniform", "rho"] / opts.loc[:, "bound"]).max()),
        "frac_rho_g_below_rho_u": float((gs["rho"] < gs["rho_u"]).mean()) if len(gs) else float("nan"),
        # lower-roughness: at the smallest τ (its optima), the control at the same optima with τ = control_tau
        "frac_rho_g_below_half_rho_u": frac_below_half(gs),
        "frac_rho_g_below_half_rho_u_control": frac_below_half(gs, f"rho_g@{control_tau:g}"),
        "frac_rho_g_below_half_rho_u_by_tau": {f"{t:g}": frac_below_half(g[g["tau"] == t]) for t in taus},
        "frac_rho_g_below_half_rho_u_pooled": frac_below_half(g),
        "spearman_z0_inactive_shuffled": spearman(gs["z0"], pd.Series(rng.permutation(gs["inactive"].to_numpy())))
        if len(gs) > 2
        else float("nan"),
        "counts_gaussian_control_tau": by_arc(n_optima(control_tau)),
        "more_optima_control": more_than_uniform(n_optima(control_tau)),
        "n_control_tau_optima": int(len(ctl)),
        "median_ratio_rho_g_rho_u": float((gs["rho"] / gs["rho_u"]).median()) if len(gs) else float("nan"),
        "spearman_ratio_z0": spearman(g["z0"], ratio) if len(g) > 2 else float("nan"),
        "max_ratio_over_z0": float((ratio / g["z0"]).max()) if len(g) else float("nan"),
        "spearman_z0_inactive": spearman(gs["z0"], gs["inactive"]) if len(gs) > 2 else float("nan"),
        "min_z0_minus_inactive": float((g["z0"] - g["inactive"]).min()) if len(g) else float("nan"),
        "min_inactive": float(opts.loc[:, "inactive"].min()),
        "min_z0": float(g["z0"].min()) if len(g) else float("nan"),
        "counts_uniform": by_arc(n_optima(None)),
        "counts_gaussian_small_tau": by_arc(n_optima(small)),
        "counts_gaussian_by_tau": {f"{t:g}": by_arc(n_optima(t)) for t in taus},
        "more_optima": more_than_uniform(n_optima(small)),
    }
    return opts, summary


@register
class Corollary2(NonlinearityExperiment):
    name = "nonlinearity.corollary2"
    figure = "Thm. 2, Cor. 2"
    description = "Gaussian vs uniform α on data with a density: roughness, Thm. 2's bound, z₀ and the exact optima"
    Config = Corollary2Config
    quick = {"arc_half_widths": [30.0, 90.0], "n_grid": 120}  # every τ of the paper scale; arcs ±50°, ±70° dropped
    est_seconds = (4, 25)
    # 2: quadrature-converged declares its range (0, ∞) (a relative difference); 3: lower-roughness reads the
    # smallest τ, as more-optima (it pooled every τ); the quick preset keeps τ = 0.5; robustness map over τ and layouts
    version = "4"  # 4: figure only (one colour per τ in every panel, the y = z₀ line)
    robustness = (
        Robustness(
            claims=("more-optima", "lower-roughness"),
            knobs={
                "taus": [[0.5], [0.1], [0.02]],
                "arc_half_widths": [[30.0, 50.0], [70.0, 90.0]],
                "kappa": [30.0, 100.0, 200.0],
            },  # fmt: skip
            paper="Cor. 2 and the text after it ('z₀(α_g) can be exponentially small (e.g., when most data appear on "
            "the positive side of the weight w*)') fix neither the data nor the temperature τ of the Gaussian α; "
            "Sec. 3.2 gives no data set for Thm. 2 or Cor. 2. The layouts (arcs, cluster concentration κ) and τ are "
            "ours.",
        ),
    )
    seeded = False  # fixed layouts and quadrature: nothing is random
    claims = (
        ClaimSpec(
            "thm2-bound", "ρ(w*) ≤ C₀³ vol(C₀)/π · r(w*, α) (bounded input, kernel α, N → ∞).", "Thm. 2",
            kind="paper",
            reading="largest ρ / (C₀⁵ r) over every stable optimum of every α (d = 2: vol(C₀) = πC₀²; "
            "r_u = max of p_D on the plane w*ᵀx = 0, r_g = z₀ r_u)", relation=le(1.0), bounds=(0.0, float("inf")),
            basis="paper: the bound itself (ratio ≤ 1)",
            no_control="Thm. 2 is a proved upper bound at every w with no setting of this run where it is expected "
            "to fail; its slack (the ratio) is reported",
        ),
        ClaimSpec(
            "lower-roughness", "The roughness with Gaussian α can be much smaller than with uniform α at the same "
            "w*.", LOC2, kind="paper",
            reading="fraction of the Gaussian-α optima at the smallest τ of the run (all layouts) where ρ_g(w*) < "
            "½ρ_u(w*) — the same τ as more-optima; the fraction at every τ, and pooled over τ, in the detail",
            relation=ge(0.8), bounds=(0.0, 1.0),
            basis="tolerance: 'much smaller' read as 'below half at ≥ 80% of the optima'",
            control="the same fraction at the same optima with a large τ (control_tau = 10: α ≈ 1)",
            if_fails="Cor. 2 needs z₀ ≪ 1, i.e. a small τ: at τ = 0.5 (smallest z₀ ≈ 0.7) ρ_g < ½ρ_u holds at none "
            "of the optima of the ±30° and ±50° arcs and at 0.8 of those of the ±70° and ±90° arcs (robustness map, "
            "each τ alone); at τ ≤ 0.1 it holds at every optimum of every layout of the map",
        ),
        ClaimSpec(
            "ratio-below-z0", "Gaussian α lowers the roughness by (at least) the factor z₀ of Cor. 2: "
            "r(w*, α_g) = z₀ r(w*, α_u).", "Cor. 2, eq. 99", kind="consequence",
            reading="largest (ρ_g/ρ_u)/z₀ over the Gaussian-α optima (all layouts, τ; both ρ at the same w*)",
            relation=le(1.0), bounds=(0.0, float("inf")),
            basis="relation: the ratio of roughness is at most the ratio z₀ of the bounds",
            derivation="Cor. 2 scales the bound r of Thm. 2 by z₀ (eq. 99); for the roughness itself, to first "
            "order in the frozen α, ρ_g/ρ_u = E[h e^{−h²/2τ}]/E[h] (h = h(w*ᵀx)), and Chebyshev's association "
            "inequality (h increasing, e^{−h²/2τ} decreasing in h) gives E[h e^{−h²/2τ}] ≤ E[h]E[e^{−h²/2τ}] = "
            "E[h] z₀, hence ρ_g/ρ_u ≤ z₀",
            no_control="an inequality (Chebyshev's association inequality) that holds for every τ and layout; as "
            "τ → ∞ it only approaches equality, so no setting of the run is expected to violate it",
        ),
        ClaimSpec(
            "z0-tracks-inactive", "z₀(α_g) is small when most data lie on the active (positive) side of w*.",
            "Cor. 2, eq. 100, Sec. 3.2", kind="consequence",
            reading="Spearman rank correlation of z₀ with the inactive fraction P[w*ᵀx ≤ 0] at the smallest τ",
            relation=gt(0.8), bounds=(-1.0, 1.0), basis="tolerance: a strong positive rank correlation",
            control="the same rank correlation with the inactive fractions permuted across the optima (fixed "
            "permutation)",
            derivation="eq. 100: z₀ = P[inactive] + E[e^{−h²/2τ}; active], and the second term → 0 as τ → 0",
        ),
        ClaimSpec(
            "more-optima", "Non-uniform (Gaussian) α creates more local optima than uniform α.",
            "Cor. 2, Sec. 5.1", kind="paper",
            reading="exact stable-optimum counts at the smallest τ of the run (the τ of lower-roughness): ≥ uniform's "
            "in every layout and > in at least one", relation=is_true(),
            basis="relation: 'more' — never fewer, sometimes more",
            if_fails="the counts depend on τ and on the layout (robustness map, the same at quick and paper scale): "
            "at τ = 0.5 they equal the uniform counts in every layout; the ±30° and ±50° arcs keep the uniform count "
            "(2) at every τ; at τ = 0.1 only the ±90° arc gains optima (3 → 5, κ ≥ 100), at τ = 0.02 the ±70° and "
            "±90° arcs do (κ = 30: only ±90°, 3 → 4)",
            control="the same comparison at a large τ (control_tau = 10: α ≈ 1)",
        ),
        ClaimSpec(
            "z0-identity", "z₀ ≥ P[inactive] with equality as τ → 0 (eq. 100 splits over the two sides).",
            "Cor. 2, eq. 100", kind="sanity", reading="smallest z₀ − P[inactive] over all Gaussian optima",
            relation=ge(-1e-12), basis="method: round-off of an identity",
        ),
        ClaimSpec(
            "quadrature-converged", "The scan's quadrature is converged.", "Thm. 2, Cor. 2", kind="sanity",
            reading="largest relative difference of A(w*) between the scan and the fine quadrature, and between "
            "the half-plane shortcut and the whole-circle integral",
            relation=le(1e-4), basis="tolerance: well below the gaps and roughness compared (≥ 1e-2 relative)",
            bounds=(0.0, math.inf),
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: Corollary2Config, n_seeds: int) -> tuple[int, str]:
        """``BASE + 0.05 GB + 20 · n_grid·n_q·8`` bytes, ``n_q = ⌈360°/scan_arc_deg⌉·scan_nodes²`` quadrature
        nodes per θ of the circle scan (``A(w)`` on the whole grid at once: nodes, weights, α and features,
        ≈ 16 copies measured). Measured (max RSS): 0.59 GB at the quick preset (estimate 0.61 GB), 0.66 GB
        with n_grid = 1200 (estimate 0.70 GB; +72 kB per grid point)."""
        n_q = math.ceil(360.0 / cfg.scan_arc_deg) * cfg.scan_nodes**2
        return int(PROCESS_BASELINE + 0.05e9 + 20 * cfg.n_grid * n_q * F64), "n_grid"

    def run(self, cfg: Corollary2Config, ctx: Context) -> Result:
        scan_q, fine_q = _quad(cfg.scan_arc_deg, cfg.scan_nodes), _quad(cfg.fine_arc_deg, cfg.fine_nodes)
        rows, opt_rows, scans = [], [], {}
        quad_err = short_err = 0.0
        settings = [None, *cfg.taus, cfg.control_tau]
        for a in ctx.track(cfg.arc_half_widths, description="layouts"):
            mix = layout(cfg, a)
            C0 = mix.C0
            for tau in settings:
                opt, _, r = stable_optima(mix, tau, cfg.n_grid, scan_q)
                scans[f"a={a:g} " + ("uniform" if tau is None else f"τ={tau:g}")] = r.numpy()
                rows.append({"arc_deg": a, "alpha": "uniform" if tau is None else "gaussian", "tau": tau,
                             "n_optima": int(opt.numel())})  # fmt: skip
                if opt.numel() == 0:
                    continue
                A_f = A_population(mix, opt, tau, fine_q)
                A_s = A_population(mix, opt, tau, scan_q)
                A_r = A_reference(mix, opt[:1], tau, fine_q)  # the half-plane shortcut vs the whole circle
                scale = A_f.abs().amax((-2, -1))
                quad_err = max(quad_err, float(((A_f - A_s).abs().amax((-2, -1)) / scale).max()))
                short_err = max(short_err, float((A_f[:1] - A_r).abs().max() / scale[0]))
                _, _, gap, phi1 = eigen_summary(A_f)  # (G,), (G, 2)
                c = (phi1 * circle_points(opt)).sum(-1).abs()
                x, p, _ = mix.nodes(opt, [HALF, -HALF], **fine_q)
                pre = (x * circle_points(opt)[:, None, :]).sum(-1)  # (G, n)
                inactive = (p * (pre <= 0)).sum(-1)
                rho_u = roughness(mix, opt, None, cfg.rho_eps, fine_q)
                rho_g = {t: roughness(mix, opt, t, cfg.rho_eps, fine_q) for t in [*cfg.taus, cfg.control_tau]}
                r_u = mix.max_density_on_line(opt)
                for j in range(opt.numel()):
                    row = {
                        "arc_deg": a, "alpha": "uniform" if tau is None else "gaussian", "tau": tau,
                        "theta_deg": math.degrees(float(opt[j])), "inactive": float(inactive[j]),
                        "gap": float(gap[j]), "c": float(c[j]), "rho_u": float(rho_u[j]),
                        "r_u": float(r_u[j]), "bound_u": C0**5 * float(r_u[j]),
                    }  # fmt: skip
                    for t in [*cfg.taus, cfg.control_tau]:  # Gaussian α at this w*, every τ (α frozen at w*)
                        z0 = float((p[j] * torch.exp(-(torch.relu(pre[j]) ** 2) / (2 * t))).sum())
                        row[f"z0@{t:g}"] = z0
                        row[f"rho_g@{t:g}"] = float(rho_g[t][j])
                    if tau is not None:
                        row["z0"], row["rho"] = row[f"z0@{tau:g}"], row[f"rho_g@{tau:g}"]
                        row["bound"] = C0**5 * row["z0"] * row["r_u"]
                    else:
                        row["z0"], row["rho"], row["bound"] = 1.0, row["rho_u"], row["bound_u"]
                    opt_rows.append(row)
        counts = pd.DataFrame(rows)
        opts, summary = optima_summary(counts, pd.DataFrame(opt_rows), cfg.taus, cfg.control_tau)
        res = Result(
            tables={
                "counts": counts,
                "optima": opts,
                "scan": pd.DataFrame({"theta": theta_grid(cfg.n_grid).numpy(), **scans}),
            },
        )
        res.summary = {
            **summary,
            "quadrature_rel_err": max(quad_err, short_err),
            "shortcut_rel_err": short_err,
            "smallest_tau": min(cfg.taus),
        }
        res.notes.append(
            f"Layouts: {cfg.n_clusters} von Mises clusters (κ = {cfg.kappa:g}) over arcs ±{cfg.arc_half_widths}°, "
            "radius "
            f"U[{1 - cfg.delta:g}, {1 + cfg.delta:g}]; population integrals by quadrature adapted to the kinks (the "
            "paper gives no data for Cor. 2). The premise 'most data on the positive side of w*' is a property of "
            f"each optimum: the inactive fraction at the stable optima ranges from {res.summary['min_inactive']:.2f} "
            f"up, and z₀ ≥ that fraction (smallest z₀ {res.summary['min_z0']:.2f}), so z₀ ≪ 1 needs optima with "
            "almost all data on the active side."
        )
        return res

    def measure(self, cfg: Corollary2Config, result: Result) -> dict:
        s = result.summary
        counts = "; ".join(
            f"±{k}°: {s['counts_uniform'].get(k)} → {v}" for k, v in s["counts_gaussian_small_tau"].items()
        )
        by_tau = ", ".join(f"τ = {t}: {v:.2f}" for t, v in s["frac_rho_g_below_half_rho_u_by_tau"].items())
        return {
            "thm2-bound": Measured(s["thm2_max_ratio"], detail=f"uniform α alone: {s['thm2_max_ratio_uniform']:.3g}"),
            "lower-roughness": Measured(
                s["frac_rho_g_below_half_rho_u"],
                control=s["frac_rho_g_below_half_rho_u_control"],
                detail=f"τ = {s['smallest_tau']:g}: median ρ_g/ρ_u {s['median_ratio_rho_g_rho_u']:.3g}, ρ_g < ρ_u at "
                f"{s['frac_rho_g_below_rho_u']:.2f} of the optima; ρ_g < ½ρ_u at each τ: {by_tau}; pooled over τ "
                f"{s['frac_rho_g_below_half_rho_u_pooled']:.2f}",
            ),
            "ratio-below-z0": Measured(
                s["max_ratio_over_z0"],  # no control: an inequality for every τ (see the claim)
                detail=f"Spearman(z₀, ρ_g/ρ_u) = {s['spearman_ratio_z0']:.2f}: the ratio "
                "is far below z₀, not proportional to it",
            ),
            "z0-tracks-inactive": Measured(
                s["spearman_z0_inactive"],
                control=s["spearman_z0_inactive_shuffled"],
                detail=f"smallest inactive fraction {s['min_inactive']:.3f}, smallest z₀ {s['min_z0']:.3f}",
            ),
            "more-optima": Measured(
                s["more_optima"],
                control=s["more_optima_control"],
                detail=f"uniform → Gaussian τ={s['smallest_tau']:g}: {counts}; every τ: {s['counts_gaussian_by_tau']}; "
                f"τ = {cfg.control_tau:g}: {s['counts_gaussian_control_tau']}",
            ),
            "z0-identity": s["min_z0_minus_inactive"],
            "quadrature-converged": s["quadrature_rel_err"],
        }

    def plots(self, cfg: Corollary2Config, result: Result, fig_dir: Path):
        opts, counts = result.tables["optima"], result.tables["counts"]
        g = opts.loc[opts["alpha"] == "gaussian"]
        color = {tau: PALETTE[i % len(PALETTE)] for i, tau in enumerate(cfg.taus)}  # one colour per τ, every panel
        fig, ax = new_figure(3, 1, size=(4.2, 3.6))
        for tau in cfg.taus:
            gt_ = g[g["tau"] == tau]
            lab = f"Gaussian α, τ = {tau:g}"
            ax[0, 0].plot(gt_["inactive"], gt_["z0"], "o", color=color[tau], label=lab)
            ax[0, 1].plot(gt_["z0"], gt_["rho"] / gt_["rho_u"], "o", color=color[tau], label=lab)
        lim = [0, max(1e-3, float(opts.loc[:, "inactive"].max()) * 1.1)]
        ax[0, 0].plot(lim, lim, ":", color="0.5", label="z₀ = P[inactive]")
        ax[0, 0].set(xlabel="inactive fraction P[w*ᵀx ≤ 0]", ylabel="z₀(α_g)", title="Cor. 2: z₀ at the optima")
        ax[0, 0].legend(fontsize=7)
        z = np.linspace(0.9 * float(g["z0"].min()) if len(g) else 0.0, 1.0, 100)
        ax[0, 1].plot(z, z, ":", color="0.3", label="y = z₀ (ratio-below-z0: points below)")
        ax[0, 1].set(xlabel="z₀(α_g)", ylabel="ρ_g / ρ_u (same w*)", yscale="log",
                     title="roughness ratio vs z₀ (Cor. 2)")  # fmt: skip
        ax[0, 1].legend(fontsize=7)
        arcs = sorted(counts["arc_deg"].unique())
        xs = np.arange(len(arcs))
        labels = [("uniform", None)] + [("gaussian", t) for t in cfg.taus]
        wdt = 0.8 / len(labels)
        for i, (al, tau) in enumerate(labels):
            sel = counts.loc[
                (counts["alpha"] == al) & ((counts["tau"] == tau) if tau is not None else counts["tau"].isna())
            ]
            v = [int(sel[sel["arc_deg"] == a]["n_optima"].iloc[0]) for a in arcs]
            ax[0, 2].bar(xs + (i - len(labels) / 2 + 0.5) * wdt, v, width=wdt,
                         color="0.6" if tau is None else color[tau],
                         label="uniform α" if tau is None else f"Gaussian α, τ = {tau:g}")  # fmt: skip
        ax[0, 2].set_xticks(xs, [f"±{a:g}°" for a in arcs])
        ax[0, 2].set(xlabel="data arc", ylabel="# stable optima (exact)", title="uniform vs Gaussian α (more-optima)")
        ax[0, 2].legend(fontsize=6)
        fig.suptitle("Thm. 2 / Cor. 2: ReLU, population limit (quadrature, deterministic: no seed)", fontsize=9)
        return [save_figure(fig, fig_dir / "corollary2.png")]
