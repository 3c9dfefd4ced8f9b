"""Robustness maps: where a headline claim holds over the protocol knobs the paper leaves open.

An experiment declares :class:`~ssldyn.contract.claims.Robustness` records (``Experiment.robustness``):
headline claim ids and a grid of config values (initialisation, step size, grid, batch...).
:func:`plan_maps` turns them into run specs (quick preset by default, the map's ``base`` overrides
on top), the executor runs them like any sweep, each map is stored as a study of source
``robustness`` and :func:`map_rows` reads the verdict of each headline claim at every grid point
back from the store. ``ssldyn robustness EXP`` prints the table; the report shows it beside the
claim with a link to the study page (plots of each claim against each knob).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ssldyn.contract.claims import Robustness
from ssldyn.errors import UserError

__all__ = ["PlannedMap", "plan_maps", "claims_at", "map_rows", "holds_text"]


@dataclass
class PlannedMap:
    """One robustness map of one experiment, planned: the declaration and one run spec per grid point."""

    experiment: str
    robustness: Robustness
    specs: list[Any]
    points: list[dict[str, Any]]


def plan_maps(
    name: str, *, quick: bool = True, seed: int = 0, seeds: int | None = None, device: str = "cpu"
) -> list[PlannedMap]:
    """Run specs of every robustness map declared by experiment ``name`` (validated, nothing run)."""
    from ssldyn.contract.config import deep_merge
    from ssldyn.lab.registry import get_experiment
    from ssldyn.lab.runner import plan_run
    from ssldyn.lab.sweep import nest

    exp = get_experiment(name)
    if not exp.robustness:
        raise UserError(f"{name} declares no robustness map (see `ssldyn list`; maps are declared by headline claims)")
    out = []
    for rb in exp.robustness:
        specs, points = [], []
        for point in rb.grid():
            sets = deep_merge(nest(dict(rb.base or {})), nest(point))
            specs.append(plan_run(name, quick=quick, sets=sets, seed=seed, seeds=seeds, device=device))
            points.append(point)
        out.append(PlannedMap(name, rb, specs, points))
    return out


def claims_at(run: Any, ids: Sequence[str]) -> list[tuple[str, Any]]:
    """``[(claim id, Claim or None)]`` for each of ``ids`` in a finished run, in the order of ``ids``
    (``None`` where the run has no such claim, and for every id when ``run`` is ``None``: a grid point
    not run yet)."""
    found: dict[str, Any] = {}
    for c in run.claims if run is not None else ():
        found.setdefault(c.id, c)
    return [(cid, found.get(cid)) for cid in ids]


def map_rows(planned: PlannedMap, results: Any, failed: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per grid point: the knob values and, per headline claim, its verdict and statistic.

    ``results`` is a :class:`ssldyn.results.Results` holding the finished runs; ``failed`` maps the
    config hash of a run that failed to its error (status ``failed``, the error as the text); any
    other point not in ``results`` has status ``missing``.
    """
    by_hash = {r.hash: r for r in results.records}
    failed = failed or {}
    rows = []
    for point, spec in zip(planned.points, planned.specs):
        run = by_hash.get(spec.digest)
        row: dict[str, Any] = {"point": point, "hash": spec.digest, "claims": {}}
        for cid, c in claims_at(run, planned.robustness.claims):
            if c is not None:
                row["claims"][cid] = {"status": c.status, "text": c.measured_text(), "control": c.control_value}
            elif spec.digest in failed:
                row["claims"][cid] = {"status": "failed", "text": failed[spec.digest]}
            else:
                row["claims"][cid] = {"status": "missing", "text": "not run yet"}
        rows.append(row)
    return rows


def holds_text(rows: list[dict[str, Any]], claim: str) -> str:
    """``holds at 3/5 points; not at init_spread=10, init_spread=100 (fail, inconclusive)``."""
    done = [r for r in rows if r["claims"][claim]["status"] not in ("missing", "failed")]
    broken = len([r for r in rows if r["claims"][claim]["status"] == "failed"])
    if not done:
        return f"not run ({broken} failed)" if broken else "not run yet"
    ok = [r for r in done if r["claims"][claim]["status"] == "pass"]
    text = f"holds at {len(ok)}/{len(done)} points"
    bad = [r for r in done if r["claims"][claim]["status"] != "pass"]
    if bad:
        where = "; ".join(
            ", ".join(f"{k}={v}" for k, v in r["point"].items()) + f" ({r['claims'][claim]['status']})" for r in bad
        )
        text += f"; not at {where}"
    if broken:
        text += f"; {broken} point(s) failed"
    return text
