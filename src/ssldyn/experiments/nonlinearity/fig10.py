"""`nonlinearity` Fig. 10: the Fig. 4 grid with the quadratic loss (constant α), vs InfoNCE.

Same settings and protocol choices as ``nonlinearity.fig4`` (lr 0.02, mean-only BN, |cos| for
linear); the grid is shared (cached per run), so running both costs one grid.
Claims: the trends of Fig. 4 hold with the quadratic loss, and its χ̄₊ is lower than InfoNCE's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ssldyn.experiments.nonlinearity.fig4 import ActivationGridConfig, run_activation_grid, trend_claims
from ssldyn.experiments.nonlinearity.token_plots import plot_chi_grid
from ssldyn.lab import Experiment, Result, check, register
from ssldyn.lab.claims import Claim


class Fig10(Experiment):
    name = "nonlinearity.fig10"
    paper = "nonlinearity"
    figure = "Fig. 10 (and Fig. 4 bottom row)"
    description = "χ̄₊ / χ̄₋ vs β per activation and P with the quadratic loss, compared with InfoNCE"
    Config = ActivationGridConfig
    quick = {
        "steps": 800,
        "log_every": 200,
        "seeds": 1,
        "activations": ["linear", "relu"],
        "betas": [1, 5],
        "Ps": [1, 3],
        "losses": ["infonce", "quadratic"],
    }
    est_seconds = (25, 1200)

    def run(self, cfg, ctx) -> Result:
        return run_activation_grid(cfg, ctx)

    def claims(self, cfg, result) -> list[Claim]:
        if "quadratic" not in cfg.losses:
            return []
        t = result.tables["final"]
        out = trend_claims(cfg, t, "quadratic", "Fig. 10 (top), App. E.2")
        if {"infonce", "quadratic"} <= set(cfg.losses):
            keys = ["activation", "beta", "P"]
            q = t[t["loss"] == "quadratic"].set_index(keys)["chi_plus_mean"]
            n = t[t["loss"] == "infonce"].set_index(keys)["chi_plus_mean"]
            diff = (q - n.reindex(q.index)).to_numpy()
            out.append(
                check(
                    "quadratic-below-infonce",
                    "Quadratic loss is not as effective as InfoNCE in feature learning: mean over "
                    "(activation, β, P) of χ̄₊(quadratic) − χ̄₊(InfoNCE).",
                    "Fig. 4 / Fig. 10, Sec. 5.1",
                    float(np.mean(diff)),
                    lt=0.0,
                    note=f"fraction of cells with quadratic < InfoNCE: {np.mean(diff < 0):.2f}",
                )
            )
        return out

    def plots(self, cfg, result, fig_dir: Path) -> list[Path]:
        t = result.tables["final"]
        rows = [
            (f"{loss} {'χ̄₊' if col == 'chi_plus' else 'χ̄₋'}", {"loss": loss, "col": col})
            for loss in cfg.losses
            for col in ("chi_plus", "chi_minus")
        ]
        return [
            plot_chi_grid(
                t,
                fig_dir / "fig10.png",
                series="activation",
                rows=rows,
                Ps=sorted(cfg.Ps),
                betas=sorted(cfg.betas),
                title="χ̄± vs β, quadratic loss vs InfoNCE (Fig. 10)",
            )
        ]


register(Fig10)
