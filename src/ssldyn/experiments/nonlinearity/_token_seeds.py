"""The run's seeds as the token grid's seed axis (`nonlinearity` Sec. 5, App. E.2).

Every token experiment trains its grid for all ``ctx.seeds`` at once (``batch_seeds``: one grid
run per seed, batched into the same ensembles and cached per run) and returns one
:class:`~ssldyn.lab.Result` per seed holding that seed's rows. The lab stacks the seeds (adding
the ``seed`` column); claims are measured per seed and evaluated over the seeds. Figures that
the paper shows as mean ± std over repetitions use ``result.seed_results``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import pandas as pd

from ssldyn.contract import Result
from ssldyn.experiments.nonlinearity.token_grid import CHI, SETTING_KEYS, cell, final_table

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


def finals(result: Result, table: str = "final") -> pd.DataFrame:
    """The final χ̄± of every seed (``result.seed_results``, or the one result), with a ``rep`` column
    (``table="init"``: the values at t = 0)."""
    return stack_seeds(result.seed_results or [result], table)


def pooled_final(result: Result, table: str = "final") -> pd.DataFrame:
    """Mean and std over seeds of the final χ̄± per setting (the paper's "mean/std over 3 runs"; ``table="init"``:
    of the values at t = 0, the untrained filters)."""
    f = finals(result, table)
    g = f.groupby(SETTING_KEYS)[[f"{c}_mean" for c in CHI]]
    t = g.agg(["mean", "std", "count"])
    t.columns = [f"{a.removesuffix('_mean')}_{b}" for a, b in t.columns]
    return t.reset_index()


def over_parameterised_cells(betas: Sequence[int], Ps: Sequence[int]) -> list[tuple[int, int]]:
    """The ``(β, P)`` cells with ``β > 1`` and ``P > 1`` (over-parameterised, several tokens per RF), sorted."""
    return [(b, P) for b in sorted(betas) if b > 1 for P in sorted(Ps) if P > 1]


#: sign patterns beyond this many are sampled (a fixed generator) rather than enumerated
MAX_PATTERNS = 20_000
#: the sign-flip null's quantile on the claim's side: the upper quartile, the reading of a typical relabelling there
NULL_LEVEL = 0.75


def balanced_signs(n: int) -> np.ndarray:
    """``(K, n)`` balanced ±1 vectors: half +1, half −1 (odd ``n``: one entry 0, each position in turn).

    All ``C(n, n/2)`` of them (``n · C(n − 1, (n − 1)/2)`` for odd ``n``) while that is at most
    :data:`MAX_PATTERNS`, else :data:`MAX_PATTERNS` drawn uniformly with a fixed generator (the same on every
    call). Enumerated, each vector's negative is in the set.
    """
    m = n // 2  # the number of +1 (and of −1)
    count = math.comb(n - (n % 2), m) * (n if n % 2 else 1)
    if count > MAX_PATTERNS:
        base = np.array([1.0] * m + [-1.0] * m + [0.0] * (n % 2))  # (n,)
        rng = np.random.default_rng(0)
        return np.stack([rng.permutation(base) for _ in range(MAX_PATTERNS)])  # (K, n)
    out = []
    for z in range(n) if n % 2 else [None]:
        rest = [i for i in range(n) if i != z]
        for plus in itertools.combinations(rest, m):
            s = -np.ones(n)
            s[list(plus)] = 1.0
            if z is not None:
                s[z] = 0.0
            out.append(s)
    return np.stack(out)  # (K, n)


def flip_patterns(cells: Sequence[tuple[int, int]]) -> np.ndarray | None:
    """``(K, n)`` the sign patterns of the sign-flip null over the ``(β, P)`` cells of a full grid: ``s_c = u_β v_P``
    for every pair of balanced vectors ``u`` over the β values and ``v`` over the P values
    (:func:`balanced_signs`). Each pattern swaps the two arms in the cells where β's half and P's half differ, so
    it sums to 0 along every β and every P: an effect the cells share and any additive trend in β or P cancel
    exactly, whichever cell holds what; on an odd side one β (or P) sits out, each in turn. ``None`` when the
    cells are not a full grid of at least 2 × 2 (the control is then "not measured"). The single β × P
    checkerboard is one of these patterns.
    """
    betas = sorted({b for b, _ in cells})
    Ps = sorted({P for _, P in cells})
    if len(betas) < 2 or len(Ps) < 2 or len(set(cells)) != len(cells) or len(cells) != len(betas) * len(Ps):
        return None
    U, V = balanced_signs(len(betas)), balanced_signs(len(Ps))  # (Ku, R), (Kv, C)
    total = len(U) * len(V)  # the pairs (u, v), numbered u-major: never listed, only indexed
    idx = (
        np.arange(total)
        if total <= MAX_PATTERNS
        else np.random.default_rng(0).choice(total, MAX_PATTERNS, replace=False)
    )
    a, b = np.divmod(idx, len(V))  # (K,), (K,)
    rows = [betas.index(beta) for beta, _ in cells]
    cols = [Ps.index(P) for _, P in cells]
    return U[a][:, rows] * V[b][:, cols]  # (K, n)


def sign_flip_null(
    d: np.ndarray,
    cells: Sequence[tuple[int, int]],
    *,
    tail: Literal["upper", "lower"],
    reduce: Callable[..., np.ndarray] = np.mean,
) -> float | None:
    """The sign-flip null of a between-arm difference ``d`` per cell: the upper quartile (``tail="upper"``; the
    lower one for ``"lower"``) of ``mean_c s_c d_c`` over the patterns ``s`` of :func:`flip_patterns`, or ``None``
    where the cells admit none.

    ``mean_c s_c d_c`` is the same difference with the two arms swapped in half of the cells. The effect the cells
    share and additive trends in β or P cancel in every pattern; what is left is the cells' noise and the β × P
    interaction of the trained values. The quartile on the claim's side is what a typical relabelling reads
    there — one realisation of the null, as the other controls (the same reading at t = 0, on the linear
    network) are one, and judged by the same rule: the claim reads VACUOUS when it passes. Over all patterns, not
    one, so which cell holds an effect does not decide the control (a single checkerboard did: an effect in one
    corner cell read as its own null). It tests the cells' noise, not the paper's mechanism. Claims that compare
    two arms trained from the same filters take it because their difference at t = 0 is 0 by construction and so
    could never hold.

    Args:
        d: ``(n,)`` per cell of ``cells``, or ``(n, k)`` for ``k`` comparisons per cell, combined per pattern by
            ``reduce`` over axis 1 (``np.mean``; ``np.max`` for "the largest of the k", e.g. ReLU minus each other
            activation when the reading is ReLU minus the lowest other).
        cells: the ``(β, P)`` of each row of ``d``.
        tail: ``"upper"`` for a claim that the difference is large (``gt``), ``"lower"`` for small (``lt``).
    """
    S = flip_patterns(cells)
    if S is None:
        return None
    d = np.asarray(d, dtype=float)
    flipped = S @ d / len(cells)  # (K,) or (K, k)
    if flipped.ndim == 2:
        flipped = reduce(flipped, axis=1)  # (K,)
    return float(np.quantile(flipped, NULL_LEVEL if tail == "upper" else 1.0 - NULL_LEVEL))


def cell_diffs(
    t: pd.DataFrame, a: dict, b: dict, cells: Sequence[tuple[int, int]], col: str = "chi_plus_mean"
) -> np.ndarray:
    """``cell(a) − cell(b)`` per ``(β, P)`` cell ``(n,)`` (one seed's final table)."""
    return np.array([cell(t, col, beta=bb, P=P, **a) - cell(t, col, beta=bb, P=P, **b) for bb, P in cells])


def mean_diff(t: pd.DataFrame, a: dict, b: dict, cells: Sequence[tuple[int, int]], col: str = "chi_plus_mean") -> float:
    """Mean over ``(β, P)`` cells of ``cell(a) − cell(b)`` (one seed's final table)."""
    return float(np.mean(cell_diffs(t, a, b, cells, col)))
