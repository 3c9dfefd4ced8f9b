"""Figures of the token-generator grids (`nonlinearity` Fig. 4, 9, 10, 11): χ̄± vs β panels.

One panel per (row, P): one curve (mean ± std over the seeds) per series value (an activation, a BN variant), each
with its own colour, line style and marker (:func:`series_style`); optionally a faint comparison curve of another
selection (Fig. 10: InfoNCE beside the quadratic loss) and the untrained values at t = 0 as thin dotted lines (the
claims' controls: χ̄₊ is a max over M = β·P filters, so it rises with β before any training).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ssldyn.experiments.nonlinearity.token_grid import select

CHI_PLUS = r"$\bar{\chi}_+$"
CHI_MINUS = r"$\bar{\chi}_-$"
#: the χ̄₋ axis label where the signed eq. 181 score is plotted for every activation (what the claims read)
CHI_MINUS_SIGNED = f"{CHI_MINUS} (signed, eq. 181)"

#: the BN variants' names in figures (Fig. 11, Table 1)
BN_LABELS = {
    "off": "no BN",
    "mean_only": "BN (mean-backprop, Def. 5)",
    "standard": "BN (standard: μ and σ² backprop)",
    "var_only": "BN (σ² backprop, μ not)",
    "none": "BN (neither μ nor σ² backprop)",
}
#: colour index (into PALETTE), line style, marker, line width of each activation: fixed, so that an activation
#: looks the same in every figure; no activation is dotted (dotted lines are the t = 0 values)
_ACT_STYLES: dict[str, tuple[int, Any, str, float]] = {
    "linear": (0, "-", "o", 2.6),
    "relu": (1, "-", "s", 1.5),
    "leaky_relu": (3, "--", "^", 1.5),
    "quadratic": (2, "-.", "D", 1.5),
    "tanh": (4, (0, (7, 2)), "v", 1.5),
    "sigmoid": (6, (0, (5, 1.5, 1, 1.5, 1, 1.5)), "P", 1.5),
}
_BN_STYLES: dict[str, tuple[int, Any, str, float]] = {
    "mean_only": (1, "-", "s", 1.8),
    "off": (0, "--", "o", 1.5),
    "standard": (2, "-.", "D", 1.5),
    "var_only": (3, (0, (7, 2)), "^", 1.5),
    "none": (4, (0, (5, 1.5, 1, 1.5, 1, 1.5)), "v", 1.5),
}
_FALLBACK = [("-", "o"), ("--", "s"), ("-.", "^"), ((0, (7, 2)), "D")]


def series_style(name: Any, index: int) -> dict[str, Any]:
    """Colour, line style, marker and width of one curve (``name``: an activation or BN variant; else by
    ``index``)."""
    from ssldyn.viz.common import PALETTE

    key = str(name)
    if key in _ACT_STYLES or key in _BN_STYLES:
        c, ls, marker, lw = _ACT_STYLES.get(key) or _BN_STYLES[key]
    else:
        c, (ls, marker), lw = index, _FALLBACK[index % len(_FALLBACK)], 1.5
    return {"color": PALETTE[c % len(PALETTE)], "ls": ls, "marker": marker, "lw": lw}


def series_order(names: Sequence[Any]) -> list[Any]:
    """The series in a fixed order (the style tables' order first, then sorted)."""
    known = [*_ACT_STYLES, *_BN_STYLES]
    return sorted(names, key=lambda n: (known.index(str(n)) if str(n) in known else len(known), str(n)))


@dataclass(frozen=True, eq=False)
class ChiRow:
    """One panel row of :func:`plot_chi_grid`.

    Attributes:
        label: the panel titles' prefix (the loss and the paper's figure / row).
        sel: the rows of the table this panel row shows (column -> value).
        col: the χ column (``{col}_mean`` and ``{col}_std`` are plotted).
        ylabel: the y axis label.
        ref: a second selection drawn faint (same colour, thin, hollow markers) for comparison.
        frame: the row's own table (default: the grid's table).
        init: draw the t = 0 values (thin dotted) when the grid gets an ``init`` table.
        hlines: horizontal reference lines (grey).
    """

    label: str
    sel: Mapping[str, Any] = field(default_factory=dict)
    col: str = "chi_plus"
    ylabel: str = CHI_PLUS
    ref: Mapping[str, Any] | None = None
    frame: pd.DataFrame | None = None
    init: bool = True
    hlines: tuple[float, ...] = ()


def _curve(ax, d: pd.DataFrame, col: str, style: dict, kind: str, name: Any, label: str | None = None) -> None:
    """One curve vs β of ``d`` (one row per β): ``kind`` = main (mean ± std), ref (faint) or init (dotted)."""
    if d.empty:
        return
    d = d.sort_values("beta")
    x, y = d["beta"].to_numpy(), d[f"{col}_mean"].to_numpy()
    if kind == "init":
        (line,) = ax.plot(x, y, color=style["color"], ls=":", lw=1.0, alpha=0.9)
    else:
        faint = kind == "ref"
        yerr = d[f"{col}_std"].fillna(0).to_numpy() if f"{col}_std" in d else None
        bars = ax.errorbar(
            x, y, yerr=yerr, color=style["color"], ls=style["ls"], marker=style["marker"],
            lw=style["lw"] * (0.55 if faint else 1.0), ms=3.5 if faint else 4, capsize=2,
            mfc="none" if faint else style["color"], alpha=0.45 if faint else 1.0, label=label,
        )  # fmt: skip
        line = bars.lines[0]
    line.set_gid(f"{kind}:{name}")


def _legend_handles(names, labels, ref_label, main_label, with_init) -> tuple[list, list[str]]:
    """Legend entries: one per series, then the encodings (main / comparison / t = 0) in black."""
    from matplotlib.lines import Line2D

    handles, texts = [], []
    for i, n in enumerate(names):
        s = series_style(n, i)
        handles.append(Line2D([], [], color=s["color"], ls=s["ls"], marker=s["marker"], lw=s["lw"], ms=4))
        texts.append(labels.get(n, str(n)))
    if main_label:
        handles.append(Line2D([], [], color="k", marker="o", lw=1.5, ms=4))
        texts.append(main_label)
    if ref_label:
        handles.append(Line2D([], [], color="k", marker="o", lw=0.8, ms=3.5, mfc="none", alpha=0.45))
        texts.append(ref_label)
    if with_init:
        handles.append(Line2D([], [], color="k", ls=":", lw=1.0))
        texts.append("t = 0 (untrained filters)")
    return handles, texts


def plot_chi_grid(
    t: pd.DataFrame,
    path: Path,
    *,
    series: str,
    rows: Sequence[ChiRow],
    Ps: Sequence[int],
    betas: Sequence[int],
    title: str = "",
    init: pd.DataFrame | None = None,
    labels: Mapping[Any, str] | None = None,
    ref_label: str | None = None,
    main_label: str | None = None,
) -> Path:
    """Panels (row: a :class:`ChiRow`, column: P) of χ vs β, one curve (mean ± std) per value of ``series``.

    ``t``: pooled table (``{col}_mean``, ``{col}_std`` per setting; :func:`~._token_seeds.pooled_final`); ``init``:
    the same at t = 0, drawn thin dotted; ``labels``: legend text per series value; ``ref_label`` / ``main_label``:
    legend text of the rows' comparison curves (``ChiRow.ref``) and of the main ones. The legend sits right of the
    top-right panel. Each curve's line carries the gid ``"{main|ref|init}:{series value}"``.
    """
    from ssldyn.viz.common import new_figure, save_figure

    labels = dict(labels or {})
    fig, axes = new_figure(ncols=len(Ps), nrows=len(rows), size=(3.0, 2.5))
    names = series_order(list(pd.unique(t[series])))
    drew_init = False
    for ri, row in enumerate(rows):
        frame = t if row.frame is None else row.frame
        for ci, P in enumerate(Ps):
            ax = axes[ri][ci]
            for h in row.hlines:
                ax.axhline(h, color="0.5", lw=0.8, ls="--" if h else "-", zorder=0)
            for si, name in enumerate(names):
                style = series_style(name, si)
                d = select(frame, {**row.sel, series: name, "P": P})
                if d.empty:
                    continue
                _curve(ax, d, row.col, style, "main", name)
                if row.ref is not None:
                    _curve(ax, select(t, {**row.ref, series: name, "P": P}), row.col, style, "ref", name)
                if init is not None and row.init:
                    _curve(ax, select(init, {**row.sel, series: name, "P": P}), row.col, style, "init", name)
                    drew_init = True
            ax.set_xscale("log")
            ax.minorticks_off()
            ax.set_xticks(list(betas))
            ax.set_xticklabels([str(b) for b in betas])
            ax.set_title(f"{row.label}, P = {P}", fontsize=7.5)
            ax.set_xlabel(r"$\beta$ (M = $\beta$P filters per RF)", fontsize=8)
            ax.set_ylabel(row.ylabel)
    handles, texts = _legend_handles(names, labels, ref_label if any(r.ref for r in rows) else None, main_label,
                                     drew_init)  # fmt: skip
    axes[0][-1].legend(handles, texts, fontsize=7, loc="upper left", bbox_to_anchor=(1.03, 1.0), frameon=False)
    if title:
        fig.suptitle(wrap_title(title, len(Ps)), fontsize=9)
    return save_figure(fig, path)


def wrap_title(title: str, ncols: int, inches: float = 3.0) -> str:
    """``title`` wrapped to the width of ``ncols`` panels of ``inches`` (about 13 characters an inch at 9 pt;
    mathtext counted by its source, so lines come out shorter)."""
    import textwrap

    width = max(60, int(13 * (inches * ncols + 1.5)))  # + the legend right of the panels
    return "\n".join(textwrap.fill(line, width) for line in title.split("\n"))
