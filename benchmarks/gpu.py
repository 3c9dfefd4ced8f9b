"""The GPU figures of issue 31 in one command: CUDA tests, `reproduce` quick and at paper scale, and the
token-grid / `nonlinearity.fig12` / `variational.fig1` benchmarks on one CUDA device, as ONE JSON table.

Without CUDA (no device, or a CPU build of torch) it prints one JSON line saying it was skipped and
why, and exits 0.

On a CUDA machine it runs, each step in a fresh process (so a crash in one does not lose the others):

1. ``pytest`` on the CUDA tests (``-k cuda`` over the test files that have them);
2. ``ssldyn reproduce --quick --device cuda --jobs 1`` from an empty store;
3. ``ssldyn reproduce --device cuda --jobs 1`` of ALL experiments at paper scale from an empty store;
4. ``benchmarks/token_grid.py --device cuda --steps 5000 --compile`` (the 384-run grid, measured, not extrapolated);
5. ``ssldyn run nonlinearity.fig12 --device cuda`` and ``ssldyn run variational.fig1 --device cuda`` alone,
   each from an empty store (wall time, start-up included).

and prints one JSON object (also written to ``--json PATH``) with a ``table``: one row per
experiment and per preset (quick, paper) plus the aggregate rows (``reproduce --quick``,
``reproduce`` paper scale, the token grid, fig12 alone, fig1 alone), each with

  cpu_s      the CPU figure recorded in benchmarks/README.md (the 2-core CPU; None where none is recorded)
  gpu_s      the time measured here (run time inside the run from meta.json for per-experiment rows,
             wall time of the whole command for aggregate rows)
  speedup    cpu_s / gpu_s (None when either is missing)
  claims     "passed/evaluated" of that run (not-run claims left out)
  target_s   the issue's target for the row, where it sets one; meets: gpu_s <= target_s

Targets (issue 31, one H100/H200): paper-scale reproduce of all experiments <= 300 s; the 384-run token
grid at 5000 steps <= 15 s; nonlinearity.fig12 <= 20 s; variational.fig1 <= 30 s; quick reproduce on
the GPU no slower than on the CPU (the README's quick_total_s).

Usage: python benchmarks/gpu.py [--json PATH] [--skip STEP ...] [--order STEP,...] [--timeout-s S]
                                [--deadline-s S] [--log-dir DIR] [--only EXP ...]
       STEP: tests, quick, paper, token_grid, fig12, fig1

A device lease is short, so the steps can be ordered (``--order``, default the order above) and
bounded together: ``--deadline-s`` is the wall-clock budget of the whole script, and each step's
process gets ``min(--timeout-s, what is left)``. A step cut off by its bound is recorded with
``rc`` 124; a reproduce cut off keeps the per-experiment figures of the runs it finished
(``partial: true``). With ``--json`` the object is written again after every step, so what was
measured survives the script being killed; ``--log-dir`` keeps each step's whole output.
``--only EXP`` (repeatable) limits the two reproduce steps to those experiments (``reproduce --only``),
for a lease too short for all of them; the paper-scale total is then that subset's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = Path(__file__).resolve().parent / "README.md"
STEPS = ("tests", "quick", "paper", "token_grid", "fig12", "fig1")
# the test files with CUDA tests (each skips itself without CUDA); -k cuda selects them
CUDA_TESTS = (
    "tests/experiments/test_cuda_path.py",
    "tests/experiments/test_variational_device.py",
    "tests/dynamics/test_ensemble_trainer.py",
    "tests/dynamics/test_ssl.py",
    "tests/lab/test_executors_tasks.py",
    "tests/lab/test_runner_store.py",
)
# aggregate rows: name -> (target seconds or None, how the CPU figure is found)
TARGETS_S = {
    "reproduce --quick": None,  # the target is the CPU figure itself: no slower than on the CPU
    "reproduce (paper scale, all experiments)": 300.0,
    "token grid (384 runs, 5000 steps)": 15.0,
    "nonlinearity.fig12 alone": 20.0,
    "variational.fig1 alone": 30.0,
}
_SECONDS = re.compile(r"(\d+(?:\.\d+)?)\s*s\b")


# --- the CPU figures recorded in benchmarks/README.md ---------------------------------------------
def _first_seconds(cell: str) -> float | None:
    """The first ``<number> s`` of a table cell (``"33.9 s (5 seeds)"`` -> 33.9); None for "not run" etc."""
    m = _SECONDS.search(cell.replace("*", ""))
    return float(m.group(1)) if m and not cell.strip().lower().startswith("not ") else None


def cpu_figures(readme: str) -> dict[str, Any]:
    """The CPU figures of ``benchmarks/README.md``.

    Returns ``{"experiments": {name: {"quick": s, "paper": s}}, "quick_total_s": s, "token_grid_s": s}``:
    per experiment from the table ``| experiment | quick (3 seeds) | paper scale, CPU | ... |`` (None where the
    cell records no time), ``quick_total_s`` from ``quick_total_s **N**`` and ``token_grid_s`` from the
    ``token_grid.py`` row (``grid **N s**``). Missing figures are None.
    """
    exps: dict[str, dict[str, float | None]] = {}
    header_seen = False
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] == "experiment" and cells[1].startswith("quick"):
            header_seen = True
            continue
        if header_seen and len(cells) >= 3 and re.fullmatch(r"`[\w.-]+`", cells[0]):
            exps[cells[0].strip("`")] = {"quick": _first_seconds(cells[1]), "paper": _first_seconds(cells[2])}
        elif header_seen and exps and not line.strip().startswith("|"):
            header_seen = False  # the table ended
    m = re.search(r"`quick_total_s`\s*\*\*(\d+(?:\.\d+)?)\*\*", readme)
    g = re.search(r"grid \*\*(\d+(?:\.\d+)?) s\*\*", readme)
    return {
        "experiments": exps,
        "quick_total_s": float(m.group(1)) if m else None,
        "token_grid_s": float(g.group(1)) if g else None,
    }


# --- the table ----------------------------------------------------------------------------------
def _row(name: str, preset: str, cpu_s: float | None, gpu_s: float | None, claims: str | None,
         target_s: float | None = None) -> dict[str, Any]:  # fmt: skip
    speedup = round(cpu_s / gpu_s, 2) if cpu_s is not None and gpu_s is not None and gpu_s > 0 else None
    row: dict[str, Any] = {
        "experiment": name,
        "preset": preset,
        "cpu_s": cpu_s,
        "gpu_s": None if gpu_s is None else round(gpu_s, 2),
        "speedup": speedup,
        "claims": claims,
    }
    if target_s is not None:
        row["target_s"] = target_s
        row["meets"] = None if gpu_s is None else gpu_s <= target_s
    return row


def assemble_table(cpu: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per experiment and preset, then the aggregate rows (see the module docstring).

    ``cpu``: :func:`cpu_figures`. ``measured``: what this run measured, each key optional —
    ``quick`` / ``paper``: ``{"total_s": s, "per_exp_s": {name: s}, "claims": {name: "p/n"}, "claims_total": "p/n",
    "only": [name, ...]}`` (``only``: the subset run with ``--only``; absent or empty: all);
    ``token_grid``: ``{"grid_wall_s": s, "grid_extrapolated": bool}``; ``fig12`` / ``fig1``:
    ``{"wall_s": s, "claims": "p/n"}``. A missing measurement gives ``gpu_s`` None (and ``meets`` None).
    """
    rows: list[dict[str, Any]] = []
    names = sorted(
        set(cpu["experiments"]) | {n for p in ("quick", "paper") for n in measured.get(p, {}).get("per_exp_s", {})}
    )
    for preset in ("quick", "paper"):
        m = measured.get(preset, {})
        for name in names:
            rows.append(_row(name, preset, cpu["experiments"].get(name, {}).get(preset),
                             m.get("per_exp_s", {}).get(name), m.get("claims", {}).get(name)))  # fmt: skip
    q, p = measured.get("quick", {}), measured.get("paper", {})
    quick_target = cpu.get("quick_total_s")
    rows.append(_row("reproduce --quick", "quick", quick_target, q.get("total_s"), q.get("claims_total"), quick_target))
    # a subset (gpu.py --only): its own CPU sum, and the all-experiments target does not apply
    only = p.get("only") or []
    paper_cpu = [cpu["experiments"].get(n, {}).get("paper") for n in only] or [
        v["paper"] for v in cpu["experiments"].values()
    ]
    paper_cpu_sum = round(sum(paper_cpu), 1) if paper_cpu and all(v is not None for v in paper_cpu) else None
    name = (
        f"reproduce (paper scale, {len(only)} experiments: --only)"
        if only
        else "reproduce (paper scale, all experiments)"
    )
    rows.append(_row(name, "paper", paper_cpu_sum, p.get("total_s"), p.get("claims_total"),
                     None if only else TARGETS_S["reproduce (paper scale, all experiments)"]))  # fmt: skip
    tg = measured.get("token_grid", {})
    rows.append(_row("token grid (384 runs, 5000 steps)", "paper", cpu.get("token_grid_s"), tg.get("grid_wall_s"),
                     None, TARGETS_S["token grid (384 runs, 5000 steps)"]))  # fmt: skip
    for key, name in (("fig12", "nonlinearity.fig12"), ("fig1", "variational.fig1")):
        m = measured.get(key, {})
        rows.append(_row(f"{name} alone", "paper", cpu["experiments"].get(name, {}).get("paper"), m.get("wall_s"),
                         m.get("claims"), TARGETS_S[f"{name} alone"]))  # fmt: skip
    return rows


# --- measuring (CUDA only) ----------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH")]))
    return env


def _timed(cmd: list[str], timeout_s: float) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    if timeout_s <= 0:
        return 0.0, 124, "not started: no time left before the deadline"
    try:
        done = subprocess.run(cmd, env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False)
        rc, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:

        def text(b: bytes | str | None) -> str:
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

        rc, out = 124, text(e.stdout) + text(e.stderr) + f"\ntimed out after {timeout_s:.0f} s"
    return time.perf_counter() - t0, rc, out


def _store_figures(out: Path) -> dict[str, Any]:
    """Run time (meta.json) and claims passed/evaluated per experiment of a store."""
    from ssldyn.results import load

    per_exp: dict[str, float] = {}
    claims: dict[str, str] = {}
    passed = evaluated = 0
    if not out.is_dir():
        return {"per_exp_s": per_exp, "claims": claims, "claims_total": None}
    for r in load(out).records:
        per_exp[r.experiment] = float(r.meta["run_seconds"])
        ev = [c for c in r.claims if c.status in ("pass", "fail")]
        claims[r.experiment] = f"{sum(c.status == 'pass' for c in ev)}/{len(ev)}"
        passed += sum(c.status == "pass" for c in ev)
        evaluated += len(ev)
    return {"per_exp_s": per_exp, "claims": claims, "claims_total": f"{passed}/{evaluated}"}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ssldyn.lab.cli", *args]


class _Clock:
    """The per-step bound: ``min(timeout_s, what is left of deadline_s)`` (no deadline: timeout_s)."""

    def __init__(self, timeout_s: float, deadline_s: float | None) -> None:
        self.timeout_s, self.t_end = timeout_s, None if deadline_s is None else time.perf_counter() + deadline_s

    def bound(self) -> float:
        return self.timeout_s if self.t_end is None else min(self.timeout_s, self.t_end - time.perf_counter())


def reproduce_args(preset: str, store: Path, only: Sequence[str] = ()) -> list[str]:
    """The ``ssldyn reproduce`` arguments of the ``quick`` / ``paper`` step (``only``: ``--only`` each)."""
    args = ["reproduce", "--device", "cuda", "--jobs", "1", "--out", str(store)]
    return args + (["--quick"] if preset == "quick" else []) + [a for e in only for a in ("--only", e)]


def measure(
    steps: list[str],
    clock: _Clock,
    log: dict[str, Any],
    on_step: Any = None,
    log_dir: Path | None = None,
    only: Sequence[str] = (),
) -> dict[str, Any]:
    """Run ``steps`` in order (each bounded by ``clock``); ``on_step(measured)`` after each one."""
    measured: dict[str, Any] = {}

    def keep(step: str, out: str) -> None:
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / f"{step}.log").write_text(out, encoding="utf-8")

    with tempfile.TemporaryDirectory() as tmp:
        for step in steps:
            print(f"[gpu.py] {step}: bound {clock.bound():.0f} s", file=sys.stderr, flush=True)
            if step == "tests":
                wall, rc, out = _timed([sys.executable, "-m", "pytest", "-q", "-k", "cuda", "-p", "no:cacheprovider",
                                        *CUDA_TESTS], clock.bound())  # fmt: skip
                tail = out.strip().splitlines()[-1] if out.strip() else ""
                log["tests"] = {"wall_s": round(wall, 1), "rc": rc, "summary": tail}
            elif step in ("quick", "paper"):
                store = Path(tmp) / step
                wall, rc, out = _timed(_cli(*reproduce_args(step, store, only)), clock.bound())
                figs = _store_figures(store)
                log[step] = {"rc": rc, "wall_s": round(wall, 1), "tail": out[-500:] if rc else ""}
                # a reproduce cut off by its bound keeps what it finished, but has no total time
                measured[step] = {"total_s": None if rc == 124 else wall, **figs, "partial": rc == 124,
                                  "only": list(only)}  # fmt: skip
            elif step == "token_grid":
                cmd = [sys.executable, str(ROOT / "benchmarks" / "token_grid.py"), "--device", "cuda", "--steps",
                       "5000", "--single-sample", "2", "--compile"]  # fmt: skip
                wall, rc, out = _timed(cmd, clock.bound())
                line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("{")), "{}")
                rec = json.loads(line)
                log["token_grid"] = {"rc": rc, "wall_s": round(wall, 1), "json": rec, "tail": out[-500:] if rc else ""}
                measured["token_grid"] = {k: v for k, v in rec.items() if k.startswith("grid_")}
            else:
                name = {"fig12": "nonlinearity.fig12", "fig1": "variational.fig1"}[step]
                store = Path(tmp) / step
                wall, rc, out = _timed(_cli("run", name, "--device", "cuda", "--out", str(store)), clock.bound())
                figs = _store_figures(store)
                log[step] = {"rc": rc, "run_s": figs["per_exp_s"].get(name), "tail": out[-500:] if rc else ""}
                if name in figs["per_exp_s"]:
                    measured[step] = {"wall_s": wall, "claims": figs["claims"].get(name)}
            keep(step, out)
            if on_step is not None:
                on_step(measured)
    return measured


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, default=None, help="also write the JSON object to this file")
    ap.add_argument("--skip", action="append", default=[], choices=STEPS, help="leave a step out")
    ap.add_argument("--order", default=",".join(STEPS), help="the steps, comma-separated, in the order to run them")
    ap.add_argument("--timeout-s", type=float, default=3600.0, help="bound on each step's process")
    ap.add_argument("--deadline-s", type=float, default=None, help="wall-clock budget of all the steps together")
    ap.add_argument("--log-dir", type=Path, default=None, help="keep each step's whole output here")
    ap.add_argument("--only", action="append", default=[], metavar="EXP", help="reproduce steps: only this experiment")
    args = ap.parse_args(argv)
    order = [s.strip() for s in args.order.split(",") if s.strip()]
    bad = [s for s in order if s not in STEPS]
    if bad or len(set(order)) != len(order):
        ap.error(f"--order {args.order!r}: each step at most once, allowed steps are {', '.join(STEPS)}")
    import torch

    if not torch.cuda.is_available():
        why = "torch is a CPU build" if torch.version.cuda is None else "no CUDA device is visible"
        print(json.dumps({"benchmark": "gpu", "skipped": True, "reason": f"{why} (torch {torch.__version__})"}))
        return 0
    log: dict[str, Any] = {}
    cpu = cpu_figures(README.read_text(encoding="utf-8"))

    def record(measured: dict[str, Any]) -> str:
        rec = {
            "benchmark": "gpu",
            "skipped": False,
            "device": torch.cuda.get_device_name(0),
            "machine": f"{platform.machine()} {os.cpu_count()} cores",
            "torch": torch.__version__,
            "table": assemble_table(cpu, measured),
            "steps": log,
        }
        text = json.dumps(rec)
        if args.json is not None:
            args.json.write_text(text + "\n", encoding="utf-8")
        return text

    steps = [s for s in order if s not in set(args.skip)]
    measured = measure(
        steps, _Clock(args.timeout_s, args.deadline_s), log, on_step=record, log_dir=args.log_dir, only=args.only
    )
    print(record(measured))
    return 0


if __name__ == "__main__":
    sys.exit(main())
