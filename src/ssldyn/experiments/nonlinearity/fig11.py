"""`nonlinearity` Fig. 11: BatchNorm vs no BatchNorm under input non-uniformity ζ (ReLU, InfoNCE).

App. E.2: ``‖u_a‖ = 1/ζ`` for half of the tokens and ζ for the others; ζ ∈ {2, 5, 10}; grid
β × P, 3 seeds. "For larger non-uniformity, BN yields better matching score χ̄₊ in the
over-parameterization region (large β) and multiple tokens per RF (large P)."
BN here is the paper's mean-backprop BN (Def. 5). Protocol choices as in ``nonlinearity.fig4``
(lr 0.02 of the documented command).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field

from ssldyn.experiments.nonlinearity.token_grid import (
    BN,
    Act,
    TokenTrainConfig,
    cell,
    final_table,
    grid_frame,
    make_runs,
    train_grid,
)
from ssldyn.experiments.nonlinearity.token_plots import plot_chi_grid
from ssldyn.lab import Experiment, Result, check, register
from ssldyn.lab.claims import Claim


class Fig11Config(TokenTrainConfig):
    """Fig. 11 grid (`nonlinearity` App. E.2): ζ × {BN, no BN} × β × P × seeds, ReLU, InfoNCE."""

    zetas: list[float] = Field([2.0, 5.0, 10.0], description="non-uniformity ζ")
    betas: list[int] = Field([1, 2, 5, 10], description="over-parameterisation β")
    Ps: list[int] = Field([1, 3, 5, 10], description="tokens per allowed set")
    bn: BN = Field("mean_only", description="the BN variant compared with no BN (Def. 5)")
    activation: Act = Field("relu", description="activation (Fig. 11: ReLU)")


class Fig11(Experiment):
    name = "nonlinearity.fig11"
    paper = "nonlinearity"
    figure = "Fig. 11"
    description = "BatchNorm vs no BatchNorm under token-magnitude non-uniformity ζ (ReLU)"
    Config = Fig11Config
    quick = {"steps": 500, "log_every": 100, "seeds": 1, "zetas": [10.0], "betas": [1, 5], "Ps": [1, 3]}
    est_seconds = (15, 900)

    def run(self, cfg, ctx) -> Result:
        runs = make_runs(
            activations=[cfg.activation],
            betas=cfg.betas,
            Ps=cfg.Ps,
            zetas=cfg.zetas,
            seeds=[ctx.seed + i for i in range(cfg.seeds)],
            bns=[cfg.bn, "off"],
            base=cfg.base_run(),
        )
        traj = train_grid(cfg, ctx, runs)
        res = Result()
        res.tables["chi"] = grid_frame(runs, traj)
        res.tables["final"] = final_table(res.tables["chi"])
        res.summary["runs"] = len(runs)
        res.notes.append("lr = 0.02 (documented command) instead of the paper's 2e-3; BN = mean-only (Def. 5).")
        return res

    def claims(self, cfg, result) -> list[Claim]:
        t = result.tables["final"]
        z = max(cfg.zetas)
        cells = [(b, P) for b in cfg.betas if b > 1 for P in cfg.Ps if P > 1]
        if not cells:
            return []
        diffs = [cell(t, zeta=z, bn=cfg.bn, beta=b, P=P) - cell(t, zeta=z, bn="off", beta=b, P=P) for b, P in cells]
        return [
            check(
                "bn-helps-at-large-zeta",
                f"At large non-uniformity (ζ = {z:g}) BN yields higher χ̄₊ for β > 1 and P > 1 (fraction of "
                "(β, P) cells with χ̄₊(BN) > χ̄₊(no BN)).",
                "Fig. 11, App. E.2",
                float(np.mean(np.array(diffs) > 0)),
                ge=0.75,
                note=f"mean difference {np.mean(diffs):+.3f}",
            )
        ]

    def plots(self, cfg, result, fig_dir: Path) -> list[Path]:
        t = result.tables["final"]
        rows = [(f"ζ={z:g}", {"zeta": z}) for z in cfg.zetas]
        return [
            plot_chi_grid(
                t,
                fig_dir / "fig11.png",
                series="bn",
                rows=rows,
                Ps=sorted(cfg.Ps),
                betas=sorted(cfg.betas),
                title="χ̄₊ with / without BN under non-uniformity ζ",
            )
        ]


register(Fig11)
