"""`nonlinearity` Thm. 5-6 (Sec. 4.2, App. C.3): global modulation enlarges the basin of discriminative patterns.

Part 1 (Thm. 6). Structural assumption ``A(w) = Σ_l g(u_lᵀw) u_l u_lᵀ`` with ``g(y) = y + b``
(``b > 1`` so that ``g > 0`` on the sphere) and ``{u_l}`` orthonormal; adding ``c·u_0u_0ᵀ``
(``c ≥ 0``). From the same random initialisations (uniform on the sphere) we integrate
``ẇ = P⊥_w A(w) w`` (eq. 7) and count the fraction that converges to ``u_0``, for a grid of ``c``.

Part 2 (Thm. 5). Two-layer network, ``C = 2``, ``M = 1``, uniform α, no augmentation, ReLU, and
the conditional-independence model (Assumption 2, exact per-RF populations): each RF has ``d``
orthonormal patterns; pattern 0 is more likely when ``z = 1``, pattern 1 when ``z = 0``
(the discriminative patterns, directions of ``Δ_k``), the others have the same probability for
both ``z``. All patterns have the same marginal probability, so without the top-down term
(one-layer flow ``ẇ_k = P⊥A_k(w_k)w_k``) they are symmetric. We integrate eq. 15 (fast top
layer, ``s_k²A_k + δ_kΔ_kΔ_kᵀ``) for all RFs jointly from random filters and compare the fraction
of filters that end at a discriminative pattern with the one-layer flow from the same starts.

Both flows run on ``ctx.device``: bases, populations and initialisations are made on the CPU
(CPU generator) and moved; the fractions come back to the CPU for the tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.data.latent import TwoRFModel, random_orthonormal_basis
from ssldyn.dynamics.alpha_cl import sphere_flow
from ssldyn.dynamics.two_layer_alpha_cl import thm5_flow
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class ModulationConfig(ExperimentConfig):
    d: conint(ge=2) = Field(10, description="Part 1: dimension (number of orthonormal u_l)")
    b: float = Field(1.5, gt=1.0, description="Part 1: g(y) = y + b, b > 1 keeps g > 0 (Thm. 6)")
    cs: list[float] = Field([0.0, 0.1, 0.25, 0.5, 1.0, 2.0], min_length=2, description="modulation strengths c")
    inits: conint(ge=10) = Field(2000, description="Part 1: random initialisations")
    t_max: PositiveFloat = Field(60.0, description="Part 1: flow time")
    dt: PositiveFloat = Field(0.05)
    K: conint(ge=2) = Field(4, description="Part 2: receptive fields")
    d2: conint(ge=3) = Field(4, description="Part 2: patterns (= dimension) per RF")
    p_disc: float = Field(0.45, gt=0, lt=1, description="Part 2: P[pattern 0 | z=1] = P[pattern 1 | z=0]")
    p_other: float = Field(0.05, ge=0, lt=1, description="Part 2: P[pattern 0 | z=0] = P[pattern 1 | z=1]")
    inits2: conint(ge=4) = Field(200, description="Part 2: random initialisations of all filters")
    t_max2: PositiveFloat = Field(300.0)
    dt2: PositiveFloat = Field(1.0)


@register
class Modulation(Experiment):
    name = "nonlinearity.modulation"
    paper = "nonlinearity"
    figure = "Thm. 5-6, Sec. 4.2"
    description = "Global modulation: basin of u_l grows with c; two-layer filters prefer discriminative patterns"
    Config = ModulationConfig
    quick = {"inits": 400, "t_max": 40.0, "dt": 0.1, "inits2": 40, "t_max2": 200.0}
    est_seconds = (12, 100)

    def run(self, cfg: ModulationConfig, ctx) -> Result:
        g = ctx.generator(0)
        dev = ctx.device
        # ---- Part 1: Thm. 6
        U = random_orthonormal_basis(cfg.d, cfg.d, generator=g).to(dev)
        w0 = torch.randn(cfg.inits, cfg.d, generator=g, dtype=torch.float64).to(dev)
        e0 = (torch.arange(cfg.d, device=dev) == 0).to(torch.float64)  # (d,): indicator of u_0
        rows = []
        for c in ctx.track(cfg.cs, description="Thm. 6: modulation c"):

            def A_fn(W, c=c):
                y = W @ U  # (E, d): u_lᵀw
                gl = y + cfg.b
                gl = gl + c * e0.to(W.dtype)  # + c u_0 u_0ᵀ
                return (U[None] * gl[:, None, :]) @ U.T  # U diag(g) Uᵀ

            res = sphere_flow(w0, A_fn, steps=max(1, round(cfg.t_max / cfg.dt)), dt=cfg.dt, every=None)
            cos = res.state @ U  # (E, d)
            best = cos.abs().argmax(-1)
            sign = torch.gather(cos, 1, best[:, None]).squeeze(1)
            conv = cos.abs().max(-1).values > 0.99
            rows.append(
                {
                    "c": c,
                    "frac_to_u0": float(((best == 0) & (sign > 0) & conv).double().mean()),
                    "frac_converged": float(conv.double().mean()),
                    "frac_to_other_plus": float(((best != 0) & (sign > 0) & conv).double().mean() / (cfg.d - 1)),
                }
            )
        basin = pd.DataFrame(rows)
        # ---- Part 2: Thm. 5 two-layer simulation
        P = cfg.d2
        pats = torch.stack([random_orthonormal_basis(P, P, generator=g).T for _ in range(cfg.K)])  # (K, P, P), CPU
        rest = (1.0 - cfg.p_disc - cfg.p_other) / (P - 2)
        pz1 = torch.tensor([cfg.p_disc, cfg.p_other] + [rest] * (P - 2), dtype=torch.float64)
        pz0 = torch.tensor([cfg.p_other, cfg.p_disc] + [rest] * (P - 2), dtype=torch.float64)
        model = TwoRFModel(
            pats, torch.stack([torch.stack([pz0, pz1])] * cfg.K), torch.tensor([0.5, 0.5], dtype=torch.float64)
        )
        xs, zs, ws = (t.to(dev) for t in model.conditional_support())
        W0 = torch.randn(cfg.inits2, cfg.K, P, generator=g, dtype=torch.float64).to(dev)
        pats = pats.to(dev)
        rows2 = []
        for mod in (True, False):
            W = thm5_flow(
                W0, xs, zs, weights=ws, modulation=mod, steps=max(1, round(cfg.t_max2 / cfg.dt2)), dt=cfg.dt2
            ).state
            cos = torch.einsum("ekd,kpd->ekp", W, pats)  # (E, K, P)
            best = cos.max(-1)
            conv = best.values > 0.95
            disc = conv & (best.indices < 2)
            rows2.append(
                {
                    "modulation": mod,
                    "frac_converged": float(conv.double().mean()),
                    "frac_discriminative_of_converged": float(disc.sum() / conv.sum().clamp_min(1)),
                    "frac_discriminative_of_all": float(disc.double().mean()),
                    "chance": 2.0 / P,
                }
            )
        two = pd.DataFrame(rows2)
        f = basin["frac_to_u0"].to_numpy()
        mod_row, base_row = two[two.modulation].iloc[0], two[~two.modulation].iloc[0]
        res = Result(tables={"basin": basin, "two_layer": two})
        res.summary = {
            "frac_to_u0_c0": float(f[0]),
            "frac_to_u0_cmax": float(f[-1]),
            "max_decrease_over_c": float(np.max(-np.diff(f))) if len(f) > 1 else 0.0,
            "disc_frac_modulated": float(mod_row["frac_discriminative_of_converged"]),
            "disc_frac_one_layer": float(base_row["frac_discriminative_of_converged"]),
            "converged_frac_modulated": float(mod_row["frac_converged"]),
            "converged_frac_one_layer": float(base_row["frac_converged"]),
            "chance": 2.0 / P,
        }
        res.notes.append(
            "Part 2 uses the exact per-RF conditional populations and eq. 15 with the top layer at its "
            "stationary point (S = ssᵀ). Filters that end as dead ReLUs or at a saddle (s_k → 0 freezes "
            "RF k) are not counted as converged; the converged fractions are in the summary."
        )
        return res

    def claims(self, cfg: ModulationConfig, result: Result):
        s = result.summary
        return [
            check(
                "basin-monotone",
                "Adding c·u_l u_lᵀ (c > 0) enlarges the attractive basin of u_l: the fraction of "
                "random initialisations converging to u_l grows with c.",
                "Thm. 6",
                s["max_decrease_over_c"],
                le=0.0,
                expected="largest decrease of the fraction between consecutive c <= 0 (same initialisations)",
            ),
            check(
                "basin-grows",
                "... strictly, from c = 0 to the largest c.",
                "Thm. 6",
                s["frac_to_u0_cmax"] - s["frac_to_u0_c0"],
                gt=0.0,
                expected="fraction(c_max) − fraction(0) > 0",
            ),
            check(
                "two-layer-prefers-delta",
                "With global modulation (Thm. 5, C = 2, M = 1) filters converge to the "
                "discriminative direction Δ_k more often than without it (one-layer flow from the same starts).",
                "Thm. 5, Sec. 4.2",
                s["disc_frac_modulated"] - s["disc_frac_one_layer"],
                gt=0.0,
                expected=f"fraction at discriminative patterns: {s['disc_frac_modulated']:.3f} (modulated) − "
                f"{s['disc_frac_one_layer']:.3f} (one-layer) > 0",
            ),
            check(
                "two-layer-above-chance",
                "... and more often than to the other patterns.",
                "Sec. 4.2",
                s["disc_frac_modulated"],
                gt=s["chance"],
                expected=f"fraction of converged filters at the 2 discriminative patterns > chance {s['chance']:.2f}",
            ),
        ]

    def plots(self, cfg: ModulationConfig, result: Result, fig_dir: Path):
        b, t = result.tables["basin"], result.tables["two_layer"]
        fig, ax = new_figure(2, 1, size=(4.4, 3.4))
        ax[0, 0].plot(b["c"], b["frac_to_u0"], "o-", color=PALETTE[0], label="→ u_0 (modulated)")
        ax[0, 0].plot(b["c"], b["frac_to_other_plus"], "s--", color=PALETTE[1], label="→ a given other u_l")
        ax[0, 0].set(xlabel="modulation c", ylabel="fraction of initialisations", title="Thm. 6: attractive basin")
        ax[0, 0].legend(fontsize=7)
        labels = ["two-layer (eq. 15)", "one-layer"]
        vals = [
            t[t.modulation]["frac_discriminative_of_converged"].iloc[0],
            t[~t.modulation]["frac_discriminative_of_converged"].iloc[0],
        ]
        ax[0, 1].bar(labels, vals, color=[PALETTE[0], PALETTE[1]])
        ax[0, 1].axhline(t["chance"].iloc[0], color="0.4", ls=":", label="chance")
        ax[0, 1].set(ylabel="fraction at discriminative patterns", ylim=(0, 1), title="Thm. 5: global modulation")
        ax[0, 1].legend(fontsize=7)
        return [save_figure(fig, fig_dir / "modulation.png")]
