"""`nonlinearity` App. B.5: augmentation by rotations removes local maxima that are not locally invariant.

Data: the nine circle points of App. E.1 (Fig. 8). Augmentation (eq. 106): ``x = R(t)x₀`` with
``t ~ Uniform[−a, a]`` (rotations of the plane). In the large-batch limit (Lemma 2, uniform α)
``2E_α(w) → V_{x₀}[b(w|x₀)]`` with ``b(w|x₀) = E_t[h(wᵀR(t)x₀)]`` (eq. 105); for ``w = (cos θ, sin θ)``
``wᵀR(t)x₀ = cos(θ − θ₀ − t)``, so ``b`` is the mean of ``h(cos u)`` over the arc
``u ∈ [θ − θ₀ − a, θ − θ₀ + a]``, which has a closed form (:func:`arc_mean`; for ReLU with
``G(u) = ∫₀ᵘ max(cos s, 0) ds``, ``b = (G(θ−θ₀+a) − G(θ−θ₀−a)) / 2a``). No quadrature is involved,
so the curves are exact to round-off.

Counting. A local maximum of ``E_α(θ)`` on the θ grid counts when its prominence is at least
``prominence`` (default 1e-4) of the curve's range (:func:`prominent_maxima`): a maximum of
smaller relative prominence is a ripple, not an optimum an ascent would stop at (the smallest maximum of
App. E.1's curve has relative prominence ≈ 3·10⁻⁴, above the 1e-4 floor). A curve flat to 1e-12 of the
un-augmented range (the full group, ``a = 180°``) has no maximum (:func:`_maxima`).

What App. B.5 says and what we claim: with the full rotation group ``SO(2)`` (``a = π``, a Lie
group, eq. 106-108) ``b`` does not depend on ``θ`` and every local optimum disappears; for ``a < π``
``U[−a, a]`` is not a group, so the argument does not apply (B.5 leaves partial transformations to
"future work"). What holds for every range follows from the mirror identity: the arc over
``[φ − (π − a), φ + (π − a)]`` is the complement of an arc of half-width ``a`` around ``φ + π``, so
``b_{π−a}(φ + π) = c − (a/(π − a)) b_a(φ)`` for ReLU, LeakyReLU and linear (and the same factor for
x²), hence ``E_α(θ; π − a) = (a/(π − a))² E_α(θ + π; a)`` up to a constant: the landscape at
``180° − a`` is a scaled, rotated copy of the one at ``a``, with the same number of maxima, and both
ends (``a → 0`` and ``a → 180°``) keep every maximum. The claim ``removes-some`` is therefore "some
partial range removes maxima" (with ReLU 9 → 2 at 50°–130°), measured on a fixed dense grid of
ranges independent of ``ranges_deg``, with the range dependence in its detail (all 9 kept at
``a ≤ 0.3°`` and ``a ≥ 179.7°``); the linear activation (its curve only rescales: nothing is removed) is
the control. (The earlier reading "every partial range has fewer maxima" held only because the
default grid starts at 5°.)
A finite-batch check compares eq. 3 with two augmented views to the limit.

Runs on ``ctx.device`` (curves and the finite-batch check; random draws from the CPU generator,
then moved); the local-maximum count (numpy) and the tables use CPU copies.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import matplotlib
import numpy as np
import pandas as pd
import torch
from pydantic import Field, field_validator

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Measured, ge, le
from ssldyn.data.latent import FIG8_ANGLES
from ssldyn.dynamics.alpha_cl import uniform_contrastive_covariance
from ssldyn.experiments.nonlinearity._common import F64, NonlinearityExperiment
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.models.activations import get_activation
from ssldyn.probes.alpha_cl import prominent_maxima, theta_grid
from ssldyn.probes.slopes import spearman
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class AugmentationConfig(ExperimentConfig):
    angles: list[float] = Field(list(FIG8_ANGLES), min_length=2, description="data angles (App. E.1)")
    ranges_deg: list[float] = Field(
        [0, 5, 10, 20, 30, 45, 60, 90, 120, 150, 170, 180],
        min_length=3,
        description="rotation ranges a (degrees), t ~ U[−a, a]; 180 = SO(2)",
    )
    n_grid: int = Field(7200, ge=360, description="θ grid points")
    activation: Literal["relu", "leaky_relu", "linear", "quadratic"] = Field(
        "relu", description="activation (App. B.5 / E.1: ReLU); b(w|x₀) in closed form for these"
    )
    prominence: float = Field(1e-4, gt=0, lt=0.1, description="relative prominence floor of a counted maximum")
    mc_range_deg: float = Field(30.0, gt=0, le=180, description="rotation range of the finite-batch check")
    mc_n: int = Field(
        3000, ge=50, description="batch size N of the finite-batch check (samples drawn from the 9 points)"
    )

    @field_validator("ranges_deg")
    @classmethod
    def _ranges(cls, v: list[float]) -> list[float]:
        v = sorted(set(v))
        if v[0] != 0 or v[-1] != 180 or any(a < 0 or a > 180 for a in v):
            raise ValueError("ranges_deg must lie in [0, 180] and include 0 (no augmentation) and 180 (SO(2))")
        return v


def _relu_cos_integral(u: torch.Tensor) -> torch.Tensor:
    """``G(u) = ∫ max(cos s, 0) ds`` up to a constant: 2 per period plus ``1 − cos(min(r, π))`` inside one."""
    v = u + math.pi / 2
    k = torch.floor(v / (2 * math.pi))
    r = v - 2 * math.pi * k  # [0, 2π): the positive half-period is r ∈ [0, π]
    return 2 * k + 1 - torch.cos(torch.clamp(r, max=math.pi))


def arc_mean(phase: torch.Tensor, a: float, activation: str) -> torch.Tensor:
    """``b = E_{t~U[−a,a]} h(cos(phase − t))`` in closed form (``a = 0``: ``h(cos phase)``).

    ReLU: ``(G(phase + a) − G(phase − a)) / 2a``; linear: ``cos(phase)·sin(a)/a``; LeakyReLU with
    slope c: ``(1 − c)·ReLU + c·linear``; quadratic: ``½ + ½ cos(2 phase) sin(2a)/(2a)``.
    """
    if a == 0:
        return get_activation(activation)(torch.cos(phase))
    relu = (_relu_cos_integral(phase + a) - _relu_cos_integral(phase - a)) / (2 * a)
    lin = torch.cos(phase) * (math.sin(a) / a)
    if activation == "relu":
        return relu
    if activation == "linear":
        return lin
    if activation == "leaky_relu":
        c = float(get_activation("leaky_relu")(torch.tensor(-1.0, dtype=torch.float64)).neg())
        return (1 - c) * relu + c * lin
    if activation == "quadratic":
        return 0.5 + 0.5 * torch.cos(2 * phase) * (math.sin(2 * a) / (2 * a))
    raise ValueError(f"activation {activation!r}: closed form only for relu, leaky_relu, linear, quadratic")


def smoothed_energy(theta: torch.Tensor, angles: torch.Tensor, a: float, activation: str = "relu") -> torch.Tensor:
    """``E(θ) = ½ V_{x₀}[b(w|x₀)]`` (eq. 105, uniform α), x₀ uniform over the data points: ``(G,)``."""
    b = arc_mean(theta[:, None] - angles[None, :], a, activation)  # (G, n)
    return 0.5 * b.var(-1, unbiased=False)


def _ref_span(theta: torch.Tensor, angles: torch.Tensor, activation: str) -> float:
    """Range (max − min) of the un-augmented ``E_α(θ)`` (``a = 0``) over the θ grid."""
    return float(np.ptp(smoothed_energy(theta, angles, 0.0, activation).cpu().numpy()))


def _maxima(e: np.ndarray, ref_span: float, prominence: float) -> tuple[np.ndarray, np.ndarray]:
    """Prominent maxima ``(indices, relative prominences)`` of a curve ``e (G,)`` of ``E_α(θ; a)``
    (:func:`~ssldyn.probes.alpha_cl.prominent_maxima`); none when the curve is flat to 1e-12 of the
    un-augmented range ``ref_span`` (E_α invariant, as under the full group)."""
    if float(np.ptp(e)) > 1e-12 * ref_span:
        return prominent_maxima(e, prominence)
    return np.zeros(0, dtype=int), np.zeros(0)


def _counts(theta: torch.Tensor, angles: torch.Tensor, ranges_deg, activation: str, prominence: float) -> list[int]:
    """Number of prominent maxima of ``E_α(θ; a)`` for every range ``a`` (degrees); a flat curve has none."""
    ref = _ref_span(theta, angles, activation)
    out = []
    for a in ranges_deg:
        e = smoothed_energy(theta, angles, math.radians(a), activation).cpu().numpy()
        out.append(len(_maxima(e, ref, prominence)[0]))
    return out


def _rel_span(theta: torch.Tensor, angles: torch.Tensor, a_deg: float, activation: str) -> float:
    """Range of ``E_α(θ; a)`` relative to the un-augmented range."""
    e = smoothed_energy(theta, angles, math.radians(a_deg), activation)
    return float(e.max() - e.min()) / _ref_span(theta, angles, activation)


@register
class Augmentation(NonlinearityExperiment):
    name = "nonlinearity.augmentation"
    figure = "App. B.5 (with the data of Fig. 8)"
    description = "Rotation augmentation removes local maxima of E_α that are not locally invariant"
    Config = AugmentationConfig
    quick = {"n_grid": 3600, "mc_n": 1500}
    est_seconds = (1, 2)
    # 2: exact-vs-quadrature declares its range (0, ∞) (a relative difference); 3: the dense grid's counts (both
    # activations) are stored (table dense_counts) and plotted, the curves each scaled to their own range
    version = "4"  # 4: caption wording (the dense grid just below 180°), stored with the run
    seeded = False  # exact curves; the finite-batch check uses a fixed draw
    claims = (
        ClaimSpec(
            "full-group-removes-all", "With the full rotation group (a Lie group, here SO(2)) E_α(R w) = E_α(w): "
            "no local maximum remains.", "App. B.5, eq. 106-108", kind="paper",
            reading="range of E_α(θ) at a = 180° relative to the un-augmented range", relation=le(1e-12),
            basis="method: float64 round-off of the closed-form curve", bounds=(0.0, float("inf")),
            control="the same relative range at a = 179° (U[−a, a] one degree short of the group)",
        ),
        ClaimSpec(
            "removes-some", "Augmentation removes local optima that are not locally invariant: with ReLU some "
            "partial rotation range has fewer local maxima than no augmentation (the count is symmetric about 90° "
            "and all maxima remain as a → 0 or a → 180°; only the full group removes them all).", "App. B.5",
            kind="consequence",
            reading="maxima removed at the best partial range: count at a = 0 minus the smallest count over a dense "
            "grid of partial ranges 0 < a < 180° (0.01°, 0.1°, 0.3°, then 1° steps to 179°, 179.7°, 179.9°, "
            "179.99°; fixed, independent of ranges_deg), exact curves", relation=ge(1),
            basis="relation: 'removes' — at least one maximum fewer",
            effect="relation: one maximum is the smallest change of an integer count",
            derivation="B.5 (eq. 107-108): a rotation that moves a non-invariant maximum w leaves E_α unchanged "
            "under the group; for U[−a, a] (not a group) the averaging smooths E_α, and by the mirror identity "
            "E_α(θ; π − a) ∝ E_α(θ + π; a) the count at a equals the count at 180° − a",
            control="the same count difference with the linear activation (E_α = ½ sin²(a)/a² V[cos(θ − θ₀)]: a "
            "rescaled copy of the un-augmented curve, nothing is removed)",
        ),
        ClaimSpec(
            "mirror-identity", "Partial rotations beyond a quarter turn give back the maxima: for these "
            "activations E_α(θ; π − a) = (a/(π − a))² E_α(θ + π; a) + const, so the count at a equals the count "
            "at 180° − a.", "App. B.5, eq. 105", kind="sanity",
            reading="max over θ and a ∈ {10°, 30°, 60°} of |((π − a)/a)²(E(θ + π; π − a) − mean) − (E(θ; a) − "
            "mean)| / range E(·; a)", relation=le(1e-10), basis="method: float64 round-off of an exact identity",
        ),
        ClaimSpec(
            "lemma2-limit", "The finite-batch C_α with two augmented views matches the Lemma 2 limit (eq. 105).",
            "Lemma 2, eq. 4, eq. 105", kind="sanity",
            reading="max_θ |E_N − E_∞| / max E_∞ at a = mc_range_deg", relation=le(0.1),
            basis="method: sampling error O(N^-1/2) ≈ 0.02-0.03 at N = 1500-3000; 0.1 is > 3 standard errors",
        ),
        ClaimSpec(
            "exact-vs-quadrature", "The closed-form b(w|x₀) equals a fine trapezoid quadrature over t.",
            "App. B.5, eq. 105", kind="sanity", reading="max |E_closed − E_quad| / max E over θ and a",
            relation=le(1e-4), basis="method: trapezoid error O(h²) of a 2,001-node rule on a kinked integrand",
            bounds=(0.0, math.inf),
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: AugmentationConfig, n_seeds: int) -> tuple[int, str]:
        """``BASE + 5 · G'·mc_n·8 + 3 kB · n_grid`` bytes: the finite-batch check evaluates both views of the
        ``mc_n`` samples on ``G' ≈ 360`` grid angles at once (``(G', mc_n)`` float64, ≈ 4 copies measured);
        the curves over the θ grid for the ranges and the dense grid of ranges. Measured (max RSS): 0.51 GB at
        the quick preset (estimate 0.58 GB), 1.64 GB with mc_n = 10⁵ (estimate 2.0 GB), 0.66 GB with
        n_grid = 72,000 (estimate 0.79 GB)."""
        stride = max(1, cfg.n_grid // 360)
        G = -(-cfg.n_grid // stride)  # len(theta[::stride])
        mc, grid = 5 * G * cfg.mc_n * F64, 3000 * cfg.n_grid
        return int(PROCESS_BASELINE + mc + grid), "mc_n" if mc >= grid else "n_grid"

    def run(self, cfg: AugmentationConfig, ctx: Context) -> Result:
        act = get_activation(cfg.activation)
        dev = ctx.device
        theta = theta_grid(cfg.n_grid, device=dev)
        angles = torch.tensor(cfg.angles, dtype=torch.float64, device=dev)
        rows, curves = [], {}
        ref_span = _ref_span(theta, angles, cfg.activation)
        for a_deg in ctx.track(cfg.ranges_deg, description="rotation ranges"):
            e = smoothed_energy(theta, angles, math.radians(a_deg), cfg.activation).cpu().numpy()
            span = float(e.max() - e.min())
            idx, prom = _maxima(e, ref_span, cfg.prominence)  # none when flat: E_α invariant
            _, all_prom = _maxima(e, ref_span, 1e-15)
            rows.append({
                "range_deg": a_deg, "n_maxima": len(idx), "energy_span": span, "rel_span": span / ref_span,
                "min_prominence": float(prom.min()) if len(prom) else float("nan"),
                "n_ripples_below_floor": int((all_prom < cfg.prominence).sum()),
            })  # fmt: skip
            curves[a_deg] = e
        table = pd.DataFrame(rows)
        # the grid-free count: a dense, fixed grid of partial ranges (ReLU-type activation and the linear control)
        dense_deg = [0.01, 0.1, 0.3, *range(1, 180), 179.7, 179.9, 179.99]
        dense = {}
        for act_name in dict.fromkeys([cfg.activation, "linear"]):
            dense[act_name] = _counts(theta, angles, [0.0, *dense_deg], act_name, cfg.prominence)
        cnt, cnt_lin = dense[cfg.activation], dense["linear"]
        kept = [a for a, n in zip(dense_deg, cnt[1:]) if n >= cnt[0]]
        # the mirror identity E(θ; π − a) = (a/(π − a))² E(θ + π; a) + const (sanity)
        mirror = 0.0
        for a_deg in (10.0, 30.0, 60.0):
            a = math.radians(a_deg)
            e_a = smoothed_energy(theta, angles, a, cfg.activation)
            e_m = smoothed_energy(theta + math.pi, angles, math.pi - a, cfg.activation) * ((math.pi - a) / a) ** 2
            d_ = (e_m - e_m.mean()) - (e_a - e_a.mean())
            mirror = max(mirror, float(d_.abs().max() / (e_a.max() - e_a.min())))
        # closed form vs a fine trapezoid rule over t (sanity)
        sub = theta[:: max(1, cfg.n_grid // 360)]
        quad_err = 0.0
        for a_deg in (10.0, 150.0):
            a = math.radians(a_deg)
            t = torch.linspace(-a, a, 2001, dtype=torch.float64, device=dev)
            wts = torch.full_like(t, 1.0)
            wts[0] = wts[-1] = 0.5
            wts = wts / wts.sum()
            coarse = sub[:: max(1, len(sub) // 90)]
            bq = (act(torch.cos(coarse[:, None, None] - angles[None, :, None] - t)) * wts).sum(-1)  # (G'', n)
            eq = 0.5 * bq.var(-1, unbiased=False)
            ex = smoothed_energy(coarse, angles, a, cfg.activation)
            quad_err = max(quad_err, float((eq - ex).abs().max() / ex.abs().max()))
        # finite-batch check of the Lemma-2 limit at mc_range_deg (two rotated views of each sample)
        g = ctx.generator(1)
        a = math.radians(cfg.mc_range_deg)
        idx = torch.randint(0, len(cfg.angles), (cfg.mc_n,), generator=g).to(dev)
        th0 = angles[idx]
        t1 = ((torch.rand(cfg.mc_n, generator=g, dtype=torch.float64) * 2 - 1) * a).to(dev)
        t2 = ((torch.rand(cfg.mc_n, generator=g, dtype=torch.float64) * 2 - 1) * a).to(dev)
        f1 = act(torch.cos(sub[:, None] - th0[None] - t1[None]))[..., None]  # (G', N, 1)
        f2 = act(torch.cos(sub[:, None] - th0[None] - t2[None]))[..., None]
        e_mc = 0.5 * uniform_contrastive_covariance(f1, f2)[..., 0, 0]  # (G',) eq. 3, uniform α, O(N) memory
        e_lim = smoothed_energy(sub, angles, a, cfg.activation)
        err = float((e_mc - e_lim).abs().max() / e_lim.abs().max())
        ns = table["n_maxima"].to_numpy()
        ranges = table["range_deg"].to_numpy()
        rho = spearman(ranges, ns)
        partial = (ranges > 0) & (ranges < 180)
        ups = [
            f"{ranges[i]:g}°→{ranges[i + 1]:g}°: {ns[i]}→{ns[i + 1]}" for i in range(len(ns) - 1) if ns[i + 1] > ns[i]
        ]
        dense_counts = pd.DataFrame(
            {"range_deg": [0.0, *dense_deg], "n_maxima": cnt, "n_maxima_linear": cnt_lin}
        )  # removes-some's grid, both activations (a = 0 first)
        res = Result(
            tables={
                "maxima": table,
                "curves": pd.DataFrame({"theta": theta.cpu().numpy(), **{f"a={k:g}": v for k, v in curves.items()}}),
                "dense_counts": dense_counts,
            },
            summary={
                "n_maxima_no_aug": int(ns[0]),
                "n_maxima_full_group": int(ns[-1]),
                "max_partial_minus_none": int(ns[partial].max() - ns[0]) if partial.any() else 0,
                "removed_dense": int(cnt[0] - min(cnt[1:])),
                "removed_dense_linear": int(cnt_lin[0] - min(cnt_lin[1:])),
                "added_dense": int(max(cnt[1:]) - cnt[0]),
                "dense_min_count_range_deg": [float(a) for a, n in zip(dense_deg, cnt[1:]) if n == min(cnt[1:])],
                "dense_ranges_keeping_all": [float(a) for a in kept],
                "rel_span_179": _rel_span(theta, angles, 179.0, cfg.activation),
                "spearman_range_vs_count": rho,
                "counts": [int(v) for v in ns],
                "rises": ups,
                "rel_span_full_group": float(table["rel_span"].iloc[-1]),
                "finite_batch_rel_err": err,
                "finite_batch_n": cfg.mc_n,
                "quadrature_rel_err": quad_err,
                "mirror_identity_err": mirror,
            },
        )
        if ups:
            res.notes.append(
                "The exact count is not monotone in a (" + "; ".join(ups) + "): for a < 180° U[−a, a] is not a "
                "group and App. B.5's invariance argument does not apply. By the mirror identity "
                "E_α(θ; π − a) ∝ E_α(θ + π; a) the count at 180° − a equals the count at a, so partial rotations "
                f"wider than 90° give maxima back; only the full group SO(2) removes them all (Spearman ρ(a, count) "
                f"= {rho:.2f})."
            )
        res.notes.append(
            f"Curves are the exact large-batch limit of Lemma 2 (eq. 105, closed-form b(w|x₀)); maxima count "
            f"with relative prominence ≥ {cfg.prominence:g}. U[−a, a] is a group only at a = 180° (SO(2)). The "
            f"finite-batch check compares eq. 3 with N = {cfg.mc_n} samples to the limit at a = {cfg.mc_range_deg:g}°."
        )
        return res

    def measure(self, cfg: AugmentationConfig, result: Result) -> dict:
        s = result.summary
        counts = ", ".join(f"{a:g}°:{n}" for a, n in zip(cfg.ranges_deg, s["counts"]))
        rises = "; rises: " + "; ".join(s["rises"]) if s["rises"] else "; no rise"
        keep = s["dense_ranges_keeping_all"]
        return {
            "full-group-removes-all": Measured(
                s["rel_span_full_group"], control=s["rel_span_179"], detail=f"a = 179°: {s['rel_span_179']:.2e}"
            ),
            "removes-some": Measured(
                s["removed_dense"],
                control=s["removed_dense_linear"],
                detail=f"dense grid: {s['removed_dense']} removed at a ∈ [{min(s['dense_min_count_range_deg']):g}°, "
                f"{max(s['dense_min_count_range_deg']):g}°], "
                f"{s['added_dense']} ever added; all {s['n_maxima_no_aug']} kept at a ∈ "
                f"{[round(a, 2) for a in keep]}° (range-dependent: the claim holds for some ranges, not every one); "
                f"config grid {counts}",
            ),
            "mirror-identity": Measured(s["mirror_identity_err"], detail=counts + rises),
            "lemma2-limit": s["finite_batch_rel_err"],
            "exact-vs-quadrature": s["quadrature_rel_err"],
        }

    def plots(self, cfg: AugmentationConfig, result: Result, fig_dir: Path):
        c, m, dense = result.tables["curves"], result.tables["maxima"], result.tables["dense_counts"]
        fig, axs = new_figure(2, 1, size=(5.0, 5.2), gridspec_kw={"width_ratios": (1.1, 1.0)})
        ax = axs[0]
        cols = [k for k in c.columns if k != "theta"]  # "a=<deg>", increasing a
        cmap = matplotlib.colormaps["viridis"]  # increasing a
        theta = c["theta"].to_numpy()
        ref_span = float(np.ptp(c[cols[0]].to_numpy()))
        for i, k in enumerate(cols):
            e = c[k].to_numpy()
            span = float(np.ptp(e))
            col = cmap(i / max(1, len(cols) - 1))
            y = (e - e.min()) / span if span > 1e-12 * ref_span else np.full_like(e, 0.5)  # flat: invariant
            ax[0].plot(theta, y + 1.25 * i, color=col, lw=1)
            idx, _ = _maxima(e, ref_span, cfg.prominence)  # the maxima the claims count
            ax[0].plot(theta[idx], y[idx] + 1.25 * i, "o", ms=3, color=col)
        ax[0].set_yticks([1.25 * i + 0.5 for i in range(len(cols))], [f"{k[2:]}°" for k in cols])
        ax[0].set(xlabel=r"$\theta$ (direction of $w$)", ylabel="rotation range a (curves offset)",
                  title=f"$E_\\alpha(\\theta; a)$, {cfg.activation}, each curve scaled to its own range\n"
                  "dots: counted local maxima (flat line: no maximum)")  # fmt: skip
        a = ax[1]
        a.step(dense["range_deg"], dense["n_maxima"], where="mid", color=PALETTE[0],
               label=f"{cfg.activation} (dense grid: removes-some)")  # fmt: skip
        a.step(dense["range_deg"], dense["n_maxima_linear"], where="mid", color=PALETTE[1], ls="--",
               label="linear (the control)")  # fmt: skip
        a.plot(m["range_deg"], m["n_maxima"], "o", color=PALETTE[0], ms=4, label="ranges of the left panel")
        a.set(xlabel="rotation range a (degrees), t ~ U[−a, a]", ylabel="# local maxima of $E_\\alpha$",
              title=f"App. B.5: # local maxima vs a ({cfg.activation} vs linear)")  # fmt: skip
        a.set_ylim(bottom=-0.3)
        a.legend(fontsize=7)
        return [save_figure(fig, fig_dir / "augmentation.png")]
