"""The run's seeds as the token grid's seed axis (`nonlinearity` Sec. 5, App. E.2).

Every token experiment trains its grid for all ``ctx.seeds`` at once (``batch_seeds``: one grid
run per seed, batched into the same ensembles and cached per run) and returns one
:class:`~ssldyn.lab.Result` per seed holding that seed's rows. The lab stacks the seeds (adding
the ``seed`` column); claims are measured per seed and evaluated over the seeds. Figures that
the paper shows as mean ± std over repetitions use ``result.seed_results``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ssldyn.contract import Result
from ssldyn.experiments.nonlinearity.token_grid import CHI, cell, final_table

SEED_COLUMNS = ("seed", "init")  # the grid's name for a run's seed (the lab owns "seed" in stored tables)


def seed_rows(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The rows of the grid's long table ``df`` for one seed, without the seed column."""
    col = next(c for c in SEED_COLUMNS if c in df.columns)
    part = df.loc[df[col] == seed].drop(columns=col).reset_index(drop=True)
    if part.empty:
        raise ValueError(f"token grid: no runs for seed {seed}")
    return part


def split_by_seed(df: pd.DataFrame, seeds: Sequence[int], build: Callable[[pd.DataFrame], Result]) -> list[Result]:
    """One :class:`Result` per seed from the grid's long table ``df`` (``build`` gets that seed's rows,
    without the seed column)."""
    return [build(seed_rows(df, s)) for s in seeds]


def per_seed_result(chi: pd.DataFrame, note: str) -> Result:
    """The tables of one seed: ``chi`` (every logged step), ``final`` (last step per setting) and ``init``
    (step 0, the untrained networks: the negative controls "at initialisation")."""
    res = Result(tables={"chi": chi, "final": final_table(chi), "init": final_table(chi, step=0)})
    res.notes.append(note)
    return res


def stack_seeds(results: Sequence[Result], table: str = "final") -> pd.DataFrame:
    """The table ``table`` of every seed's result stacked, with the seed's position as a ``rep`` column."""
    return pd.concat([r.tables[table].assign(rep=i) for i, r in enumerate(results)], ignore_index=True)


def finals(result: Result) -> pd.DataFrame:
    """The final χ̄± of every seed (``result.seed_results``, or the one result), with a ``rep`` column."""
    return stack_seeds(result.seed_results or [result])


def pooled_final(result: Result) -> pd.DataFrame:
    """Mean and std over seeds of the final χ̄± per setting (the paper's "mean/std over 3 runs")."""
    f = finals(result)
    keys = ["loss", "activation", "zeta", "bn", "beta", "P"]
    g = f.groupby(keys)[[f"{c}_mean" for c in CHI]]
    t = g.agg(["mean", "std", "count"])
    t.columns = [f"{a.removesuffix('_mean')}_{b}" for a, b in t.columns]
    return t.reset_index()


def over_parameterised_cells(betas: Sequence[int], Ps: Sequence[int]) -> list[tuple[int, int]]:
    """The ``(β, P)`` cells with ``β > 1`` and ``P > 1`` (over-parameterised, several tokens per RF), sorted."""
    return [(b, P) for b in sorted(betas) if b > 1 for P in sorted(Ps) if P > 1]


def flip_signs(cells: Sequence[tuple[int, int]]) -> np.ndarray | None:
    """The signs ``(n,)`` of the sign-flip null over ``(β, P)`` cells: a checkerboard over the sorted β and P
    values (+1 where their ranks sum to an even number), made balanced: where one sign outnumbers the other
    (an odd number of cells on a full grid), its last cells get 0, so the signs sum to 0. ``None`` when the
    cells do not span two β and two P values (on a line of cells the signs would alternate along one axis
    and keep its trend: no null).

    A between-arm difference ``d_c`` averaged with these signs, ``mean_c s_c d_c``, is the same statistic with
    the two arms swapped in half of the cells: an effect shared by the cells cancels, and on a full even grid
    so does a trend in β or P alone; what remains is the cell-to-cell noise and the β × P interaction of the
    trained values. It is the control of the token claims that compare two arms trained from the same
    filters, whose difference at t = 0 is 0 by construction and so could never hold.
    """
    betas = sorted({b for b, _ in cells})
    Ps = sorted({P for _, P in cells})
    if len(betas) < 2 or len(Ps) < 2:
        return None
    s = np.array([1.0 if (betas.index(b) + Ps.index(P)) % 2 == 0 else -1.0 for b, P in cells])  # (n,)
    while s.sum() != 0:
        s[np.flatnonzero(s == np.sign(s.sum()))[-1]] = 0.0
    return s


def flipped_mean(d: np.ndarray, cells: Sequence[tuple[int, int]]) -> float | None:
    """``mean_c s_c d_c`` with :func:`flip_signs` (``d (n,)`` per cell of ``cells``), or ``None`` where the cells
    admit no null (the control is then "not measured")."""
    s = flip_signs(cells)
    return None if s is None else float(np.mean(np.asarray(d) * s))


def cell_diffs(
    t: pd.DataFrame, a: dict, b: dict, cells: Sequence[tuple[int, int]], col: str = "chi_plus_mean"
) -> np.ndarray:
    """``cell(a) − cell(b)`` per ``(β, P)`` cell ``(n,)`` (one seed's final table)."""
    return np.array([cell(t, col, beta=bb, P=P, **a) - cell(t, col, beta=bb, P=P, **b) for bb, P in cells])


def mean_diff(t: pd.DataFrame, a: dict, b: dict, cells: Sequence[tuple[int, int]], col: str = "chi_plus_mean") -> float:
    """Mean over ``(β, P)`` cells of ``cell(a) − cell(b)`` (one seed's final table)."""
    return float(np.mean(cell_diffs(t, a, b, cells, col)))
