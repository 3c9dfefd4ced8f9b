"""`nonlinearity` Table 1: backpropagating (or not) the BatchNorm statistics μ_k and σ_k², ζ = 10.

App. E.2: the forward pass is the same, only the gradient through μ_k and/or σ_k² is kept or
stopped (vanilla BN, σ-only, μ-only = Def. 5, none). ReLU, InfoNCE, β ∈ {1, 2, 5, 10} ×
P ∈ {1, 3, 5, 10}, 3 seeds, mean ± std. Claim: "if σ_k² is not backpropagated, then the
matching score χ̄₊ is actually better". Protocol choices as in ``nonlinearity.fig4``
(lr 0.02 of the documented command).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import Field

from ssldyn.experiments.nonlinearity.token_grid import (
    TokenTrainConfig,
    cell,
    final_table,
    grid_frame,
    make_runs,
    train_grid,
)
from ssldyn.lab import Experiment, Result, check, register
from ssldyn.lab.claims import Claim

# the paper's column order: (μ backprop?, σ² backprop?)
COLUMNS = [
    ("none", "μ no bp, σ² no bp"),
    ("var_only", "μ no bp, σ² bp"),
    ("mean_only", "μ bp, σ² no bp"),
    ("standard", "μ bp, σ² bp"),
]


class Table1Config(TokenTrainConfig):
    """Table 1 (`nonlinearity` App. E.2): four BN-backprop variants at ζ = 10, ReLU, InfoNCE."""

    zeta: float = Field(10.0, gt=0, description="non-uniformity ζ (Table 1: 10)")
    betas: list[int] = Field([1, 2, 5, 10], description="over-parameterisation β")
    Ps: list[int] = Field([1, 3, 5, 10], description="tokens per allowed set")


def render_table(t: pd.DataFrame, betas, Ps) -> pd.DataFrame:
    """The paper's layout: rows (β, P), one column per variant, "mean ± std"."""
    rows = []
    for b in betas:
        for P in Ps:
            row = {"beta": b, "P": P}
            for mode, label in COLUMNS:
                m, s = cell(t, bn=mode, beta=b, P=P), cell(t, "chi_plus_std", bn=mode, beta=b, P=P)
                row[label] = f"{m:.2f} ± {s:.2f}" if np.isfinite(s) else f"{m:.2f} (1 seed)"
            rows.append(row)
    return pd.DataFrame(rows)


class Table1(Experiment):
    name = "nonlinearity.table1"
    paper = "nonlinearity"
    figure = "Table 1"
    description = "χ̄₊ with the four BN gradient variants (μ / σ² backpropagated or not), ζ = 10"
    Config = Table1Config
    quick = {"steps": 400, "log_every": 100, "seeds": 1, "betas": [5], "Ps": [3, 5]}
    est_seconds = (20, 600)

    def run(self, cfg, ctx) -> Result:
        runs = make_runs(
            activations=["relu"],
            betas=cfg.betas,
            Ps=cfg.Ps,
            zetas=[cfg.zeta],
            seeds=[ctx.seed + i for i in range(cfg.seeds)],
            bns=[m for m, _ in COLUMNS],
            base=cfg.base_run(),
        )
        traj = train_grid(cfg, ctx, runs)
        res = Result()
        res.tables["chi"] = grid_frame(runs, traj)
        res.tables["final"] = final_table(res.tables["chi"])
        res.tables["table1"] = render_table(res.tables["final"], cfg.betas, cfg.Ps)
        res.notes.append("lr = 0.02 (documented command) instead of the paper's 2e-3.")
        return res

    def claims(self, cfg, result) -> list[Claim]:
        t = result.tables["final"]
        cells = [(b, P) for b in cfg.betas for P in cfg.Ps]
        no_var = np.mean([cell(t, bn=m, beta=b, P=P) for m in ("none", "mean_only") for b, P in cells])
        var = np.mean([cell(t, bn=m, beta=b, P=P) for m in ("var_only", "standard") for b, P in cells])
        best = np.mean(
            [
                cell(t, bn="mean_only", beta=b, P=P)
                >= max(cell(t, bn=m, beta=b, P=P) for m in ("var_only", "standard"))
                for b, P in cells
            ]
        )
        return [
            check(
                "no-var-backprop-better",
                "Not backpropagating σ_k² gives the better matching score χ̄₊ overall (mean χ̄₊ over cells of "
                "the σ²-detached variants minus the σ²-backpropagated ones).",
                "Table 1, App. E.2",
                float(no_var - var),
                gt=0.0,
                note=f"mean-only BN ≥ both σ²-backprop variants in {best:.0%} of cells",
            )
        ]

    def plots(self, cfg, result, fig_dir: Path) -> list[Path]:
        from ssldyn.viz.common import new_figure, save_figure

        tab = result.tables["table1"]
        fig, axes = new_figure(size=(8.0, 0.32 * (len(tab) + 2)))
        ax = axes[0][0]
        ax.axis("off")
        cols = ["β", "P"] + [label for _, label in COLUMNS]
        cells = [[str(r["beta"]), str(r["P"])] + [r[label] for _, label in COLUMNS] for _, r in tab.iterrows()]
        tb = ax.table(cellText=cells, colLabels=cols, loc="center")
        tb.auto_set_font_size(False)
        tb.set_fontsize(7)
        ax.set_title(f"χ̄₊ (mean ± std over {cfg.seeds} seeds), ζ = {cfg.zeta:g}, ReLU, InfoNCE", fontsize=8)
        return [save_figure(fig, fig_dir / "table1.png")]


register(Table1)
