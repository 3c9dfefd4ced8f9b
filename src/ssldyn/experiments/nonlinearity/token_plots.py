"""Figures of the token-generator grids (`nonlinearity` Fig. 4, 9, 10, 11): χ̄± vs β panels."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd


def plot_chi_grid(
    t: pd.DataFrame,
    path: Path,
    *,
    series: str,
    rows: Sequence[tuple[str, dict]],
    Ps: Sequence[int],
    betas: Sequence[int],
    title: str = "",
) -> Path:
    """Panels (row: a selection + a χ column, column: P) of χ vs β, one curve (mean ± std) per ``series``."""
    from ssldyn.viz.common import PALETTE, new_figure, save_figure

    fig, axes = new_figure(ncols=len(Ps), nrows=len(rows), size=(3.0, 2.5))
    for ri, (label, sel) in enumerate(rows):
        sel = dict(sel)
        col = sel.pop("col", "chi_plus")
        sub = t
        for k, v in sel.items():
            sub = sub.loc[sub[k] == v]
        for ci, P in enumerate(Ps):
            ax = axes[ri][ci]
            for si, (name, d) in enumerate(sub.loc[sub["P"] == P].groupby(series)):
                d = d.sort_values("beta")
                ax.errorbar(
                    d["beta"],
                    d[f"{col}_mean"],
                    yerr=d[f"{col}_std"].fillna(0),
                    marker="o",
                    ms=3,
                    capsize=2,
                    color=PALETTE[si % len(PALETTE)],
                    label=str(name),
                )
            ax.set_xscale("log")
            ax.minorticks_off()
            ax.set_xticks(list(betas))
            ax.set_xticklabels([str(b) for b in betas])
            ax.set_title(f"{label}, P={P}", fontsize=8)
            ax.set_xlabel("β")
            ax.set_ylabel("χ̄₊" if col == "chi_plus" else "χ̄₋")
            if ri == 0 and ci == 0:
                ax.legend(fontsize=6)
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, path)
