"""The command line's summary of a sweep: swept values as columns, each claim per grid point.

``ssldyn run EXP --sweep tau=0.2,0.5,1.0 --seeds 2`` ends with two tables:

* runs — one row per grid point: the swept values, status, time, claims passed, the run hash;
* claims — one block per claim, one row per grid point: the swept values, the statistic with
  its 95 % interval over seeds (``0.61 ± 0.05``; ``[lo, hi]`` when not symmetric), the seeds for
  which the relation holds, and the verdict (PASS, FAIL, INCONCLUSIVE, VACUOUS or NOT RUN, as
  ``ssldyn run`` shows it for one run).

Both fit the terminal without breaking a word: when the swept keys do not fit as separate
columns they are joined into one ``grid point`` column (``tau=0.2, width=10``); when the claims
still do not fit, the thresholds go above the table, and then each claim gets a table of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ssldyn.contract.claims import verdict_words
from ssldyn.lab.study import Study, point_text, value_text
from ssldyn.lab.textlayout import longest_word

__all__ = ["estimate_text", "sweep_tables", "print_sweep_summary", "report_command"]


#: the style of each verdict's word (keyed by the CSS class of :func:`~ssldyn.contract.claims.verdict_words`)
_VERDICT_STYLES = {"pass": "green", "fail": "red", "inc": "yellow", "vac": "red", "nr": "dim"}


def _g(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}"


def estimate_text(estimate: float, lo: float, hi: float) -> str:
    """``0.612 ± 0.051`` for a symmetric interval, ``0.9997 [0.9995, 1]`` otherwise, ``0.612`` without one.

    The estimate is printed with enough significant digits to stay inside its printed interval
    (:func:`ssldyn.contract.claims.format_estimate`; never ``0.9997 [1, 1]``); with ``±`` it is
    printed to within the half width.
    """
    from ssldyn.contract.claims import format_estimate

    if estimate is None or not math.isfinite(estimate):
        return "n/a"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
        return _g(estimate)
    up, down = hi - estimate, estimate - lo
    if abs(up - down) <= 1e-3 * max(abs(up), abs(down), 1e-300):
        d = 4
        while d < 17 and abs(float(_g(estimate, d)) - estimate) > up / 2:
            d += 1
        return f"{_g(estimate, d)} ± {_g(up, 2)}"
    return format_estimate(estimate, lo, hi)


def _axis_cells(study: Study, digest: str, joined: bool) -> list[str]:
    vals = study.values_of(digest)
    if joined:
        return [point_text({k: vals[k] for k in study.keys})]
    return [value_text(vals[k]) for k in study.keys]


def _widths(columns: list[list[str]], no_wrap: list[bool], width: int) -> list[int] | None:
    """Column widths (cells only) that fit ``width`` without breaking a word, or ``None``.

    A ``SIMPLE_HEAD`` table takes 2 characters of padding per column, 1 between columns and 1 at
    each edge. Every
    column gets at least its longest word (its longest cell when it must not wrap); spare width
    goes first to the columns that need least of it to show whole cells.
    """
    need = [max(len(c) if nw else longest_word(c) for c in col) for col, nw in zip(columns, no_wrap)]
    natural = [max(len(c) for c in col) for col in columns]
    spare = width - 2 - (len(columns) - 1) - 2 * len(columns) - sum(need)
    if spare < 0:
        return None
    widths = list(need)
    for i in sorted(range(len(widths)), key=lambda i: natural[i] - need[i]):  # whole cells for most columns
        add = min(spare, natural[i] - need[i])
        widths[i] += add
        spare -= add
    return widths


def _table(heads: list[str], rows: list[list[Text]], no_wrap: list[bool], widths: list[int] | None,
           sections: list[bool]) -> Table:  # fmt: skip
    table = Table(box=box.SIMPLE_HEAD)
    for i, (h, nw) in enumerate(zip(heads, no_wrap)):
        table.add_column(h, no_wrap=nw, overflow="fold", width=None if widths is None else widths[i])
    for row, end in zip(rows, sections):
        table.add_row(*row, end_section=end)
    return table


def _grid_table(study: Study, lead: list[tuple[str, bool]], tail: list[tuple[str, bool]],
                cells: list[tuple[str, list[Text], list[Text]]], sections: list[bool], width: int,
                must_fit: bool = False) -> Table | None:  # fmt: skip
    """A table ``lead columns | swept keys | tail columns``, one row per ``(hash, lead cells, tail cells)``.

    The swept keys are separate columns when everything fits ``width`` with whole words, else
    one joined ``grid point`` column; ``lead``/``tail`` are ``(header, no_wrap)``.
    """
    for joined in (False, True):
        keys = ["grid point"] if joined else study.keys
        heads = [h for h, _ in lead] + keys + [h for h, _ in tail]
        no_wrap = [nw for _, nw in lead] + [False] * len(keys) + [nw for _, nw in tail]
        rows = [lc + [Text(c) for c in _axis_cells(study, h, joined)] + tc for h, lc, tc in cells]
        widths = _widths([[hd, *(r[i].plain for r in rows)] for i, hd in enumerate(heads)], no_wrap, width)
        if widths is not None:
            break
    if widths is None and must_fit:
        return None
    return _table(heads, rows, no_wrap, widths, sections)


def sweep_tables(study: Study, items: Sequence[Any], results: Any, width: int = 80) -> list[tuple[str, Table]]:
    """``(title, table)`` of the runs and of the claims of a sweep (rich tables, no word broken at ``width``).

    ``items`` are the executor's outcomes (one per grid point, in grid order), ``results`` a
    :class:`ssldyn.results.Results` holding the finished runs.
    """
    by_hash = {it.spec.digest: it for it in items}
    points = [p["hash"] for p in study.points]
    claims = results.select(hashes=points).claims
    run_cells = []
    for h in points:
        it = by_hash.get(h)
        cl = claims[claims["hash"] == h].drop_duplicates("claim")
        status = it.status if it is not None else "missing"
        t = "-" if it is None or it.status == "cached" else f"{it.seconds:.1f} s"
        style = "green" if len(cl) and cl["passed"].all() else "red"
        passed = Text(f"{int(cl['passed'].sum())}/{len(cl)}", style=style) if len(cl) else Text("-")
        run_cells.append((h, [], [Text(status), Text(t), passed, Text(h)]))
    tail = [("status", False), ("time", False), ("claims", True), ("run", True)]
    runs = _grid_table(study, [], tail, run_cells, [False] * len(run_cells), width)
    assert runs is not None  # must_fit=False: always a table
    tables: list[tuple[str, Table]] = [(f"{study.experiment}: {study.title} · {len(points)} runs", runs)]
    if claims.empty:
        return tables
    claim_cells, sections, cell_claims = [], [], []
    for cid in dict.fromkeys(claims["claim"]):
        hashes = [h for h in points if ((claims["hash"] == h) & (claims["claim"] == cid)).any()]
        previous = ""
        for i, h in enumerate(hashes):
            c = claims[(claims["hash"] == h) & (claims["claim"] == cid)]
            first = c.iloc[0]
            if first["status"] == "not-run":
                measured, verdict = Text("not run"), Text("NOT RUN", style="dim")
            else:
                text = estimate_text(first["estimate"], first["lo"], first["hi"])
                measured = Text(f"{text} of seeds" if first["statistic"] == "fraction of seeds" else text)
                cls, word = verdict_words(str(first["status"] or "") or ("pass" if first["passed"] else "fail"))
                verdict = Text(word, style=_VERDICT_STYLES.get(cls, "red"))
            seeds = Text(f"{int(c['seed_passed'].sum())}/{len(c)}")
            expected = str(first.get("expected", "") or "")
            threshold = Text(expected if i == 0 or expected != previous else "")  # repeated only where it changes
            previous = expected
            claim_cells.append((h, [Text(cid if i == 0 else "")], [threshold, measured, seeds, verdict]))
            sections.append(i == len(hashes) - 1)
            cell_claims.append(cid)
    tail = [("threshold", False), ("measured", False), ("seeds", True), ("", True)]
    measured = claims[claims["status"] != "not-run"]
    what = " or ".join(dict.fromkeys(str(s) for s in measured["statistic"] if s)) or "mean"
    title = f"claims per grid point ({what} ± 95% interval over seeds):"
    table = _grid_table(study, [("claim", True)], tail, claim_cells, sections, width, must_fit=True)
    if table is not None:
        return [*tables, (title, table)]
    # too narrow for a threshold column: the thresholds go above the table
    per_claim = {}
    for cid in dict.fromkeys(claims["claim"]):
        exp = list(dict.fromkeys(str(x) for x in claims.loc[claims["claim"] == cid, "expected"]))
        per_claim[cid] = f"{cid} {exp[0]}" if len(exp) == 1 else f"{cid}: {len(exp)} thresholds, one per grid point"
    slim = [(h, lead, tc[1:]) for h, lead, tc in claim_cells]
    table = _grid_table(study, [("claim", True)], tail[1:], slim, sections, width, must_fit=True)
    if table is not None:
        title = f"claims per grid point ({what} ± 95% interval over seeds); thresholds: {'; '.join(per_claim.values())}"
        return [*tables, (title, table)]
    # still too narrow (a long verdict word such as INCONCLUSIVE): one table per claim, the claim above it
    for cid, text in per_claim.items():
        cells = [(h, [], tc) for (h, _, tc), c in zip(slim, cell_claims) if c == cid]
        one = _grid_table(study, [], tail[1:], cells, [False] * len(cells), width)
        assert one is not None  # must_fit=False: always a table
        tables.append((f"claim {text} per grid point ({what} ± 95% interval over seeds):", one))
    return tables


def report_command(out: Any) -> str:
    """The command that rebuilds the report of the store ``out`` (``ssldyn report`` alone for the default store)."""
    import shlex
    from pathlib import Path

    from ssldyn.lab.runner import DEFAULT_OUT

    return "ssldyn report" if Path(out) == Path(DEFAULT_OUT) else f"ssldyn report {shlex.quote(str(out))}"


def print_sweep_summary(console: Console, study: Study, items: Sequence[Any], results: Any, out: Any) -> None:
    """Print the sweep's runs and claims tables, then failed runs' errors and the study's place in the report
    of the store ``out``."""
    for title, table in sweep_tables(study, items, results, width=console.width):
        console.print(title, markup=False, highlight=False)
        console.print(table)
    for it in items:
        if it.status == "failed":
            console.print(f"failed ({point_text(study.values_of(it.spec.digest))}): {it.error}", markup=False,
                          highlight=False)  # fmt: skip
    n_pass = sum(1 for it in items if it.run is not None)
    console.print(f"study {study.id}: {n_pass}/{len(items)} runs finished · `{report_command(out)}` shows its page",
                  markup=False, highlight=False)  # fmt: skip


def sweep_summary(console: Console, out: Any, specs: Sequence[Any], keys: Sequence[str], items: Sequence[Any]) -> Study:
    """Store the sweep as a study (``<out>/<experiment>/studies/<id>.json``) and print its summary."""
    from ssldyn.lab.results import load
    from ssldyn.lab.study import record_study

    study = record_study(out, specs, keys)
    print_sweep_summary(console, study, items, load(out, specs[0].experiment), out)
    return study


def after_runs(console: Console, out: Any, items: Sequence[Any], tensorboard: bool = False) -> None:
    """Refresh ``<out>/<experiment>/runs.csv`` for the experiments run; write TensorBoard scalars if asked."""
    from ssldyn.lab.results import load
    from ssldyn.lab.study import write_index

    exps = sorted({it.spec.experiment for it in items})
    if not exps:
        return
    res = load(out, exps)
    write_index(out, res, exps)
    if tensorboard:
        from ssldyn.lab.tensorboard import write_scalars

        logdir = write_scalars(out, res.select(hashes=[it.spec.digest for it in items if it.run is not None]))
        console.print(f"tensorboard: tensorboard --logdir {logdir}", markup=False, highlight=False, soft_wrap=True)
