"""Wall time of `ssldyn reproduce --quick` with its seeds, against one-run-at-a-time in the same run
(and, with --full, of every experiment at paper scale).

Issue 21's targets: `reproduce --quick` with 3 seeds per claim <= 120 s on the 2-core CPU from an
empty output directory; paper-scale `reproduce` with 5 seeds (all experiments but `LONG` below,
as the issue states the target) <= 45 min on that CPU and <= 5 min on one H100. Issue 31's: every
experiment at paper scale, `LONG` included (`--full --all`), <= 60 min on the 2-core CPU.

Prints one JSON line:
  quick_total_s          wall time of a fresh `reproduce --quick` (new output dir, --jobs JOBS)
  quick_sequential_s     the baseline: the same command with --jobs 1 (new output dir), unless --no-baseline
  speedup_vs_sequential  quick_sequential_s / quick_total_s
  cached_total_s         the first command again (every run comes from the store)
  quick_per_exp_s        run time of each experiment inside the fresh run (meta.json)
  quick_claims           claims passed / evaluated in the fresh run (from the store)
  quick_failed           experiment:claim of each failed claim
  full_total_s, full_per_exp_s, full_claims, full_failed   (--full) the same at paper scale (seeds: 5, or the
                         paper's own count where an experiment declares one)

Usage: python benchmarks/reproduce.py [--device cpu|cuda] [--jobs N] [--no-baseline]
                                      [--full [--all]] [--only EXP ...] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# left out of the --full total unless --all (issue 21's CPU target excludes them: SimCLR for 3000 steps,
# and 50,000 sequential steps)
LONG = ("variational.fig1", "nonlinearity.fig12")


def _experiments() -> list[str]:
    from ssldyn.lab import manifest

    return [e["name"] for e in manifest.experiments()]


def _reproduce(out: Path, quick: bool, only: list[str], env: dict, device: str, jobs: int) -> float:
    cmd = [sys.executable, "-m", "ssldyn.lab.cli", "reproduce", "--out", str(out), "--device", device]
    cmd += ["--jobs", str(jobs)] + (["--quick"] if quick else [])
    for e in only:
        cmd += ["--only", e]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=False, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _per_exp(out: Path) -> dict[str, float]:
    """Run time of each experiment's run in the store (``meta.json``, read through ``ssldyn.results``)."""
    from ssldyn.results import load

    return dict(sorted((r.experiment, r.meta["run_seconds"]) for r in load(out).records))


def _claims(out: Path) -> tuple[str, list[str]]:
    """Claims passed / evaluated (not-run claims left out) over the store's runs, and ``experiment:claim``
    of every claim that failed, so that two measurements compare claim by claim."""
    from ssldyn.results import load

    evaluated = [(r.experiment, c) for r in load(out).records for c in r.claims if c.status in ("pass", "fail")]
    failed = sorted(f"{e}:{c.id}" for e, c in evaluated if c.status == "fail")
    return f"{len(evaluated) - len(failed)}/{len(evaluated)}", failed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--jobs", type=int, default=None, help="runs at the same time (default: the CPU cores; 1 on cuda)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the --jobs 1 baseline")
    ap.add_argument("--full", action="store_true", help="also time every experiment at paper scale (slow)")
    ap.add_argument("--all", action="store_true", help=f"--full includes {', '.join(LONG)}")
    ap.add_argument("--only", action="append", default=[], help="restrict to these experiments")
    ap.add_argument("--threads", type=int, default=None, help="SSLDYN_THREADS (default: the lab's choice)")
    args = ap.parse_args()
    jobs = args.jobs if args.jobs is not None else (1 if args.device == "cuda" else os.cpu_count() or 1)
    env = dict(os.environ)
    if args.threads is not None:
        env["SSLDYN_THREADS"] = str(args.threads)
    rec: dict = {
        "benchmark": "reproduce",
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "device": args.device,
        "jobs": jobs,
    }
    with tempfile.TemporaryDirectory() as tmp:
        q = Path(tmp) / "quick"
        fresh = _reproduce(q, True, args.only, env, args.device, jobs)
        rec["quick_total_s"] = round(fresh, 1)
        if not args.no_baseline:
            seq = _reproduce(Path(tmp) / "quick-seq", True, args.only, env, args.device, 1)
            rec["quick_sequential_s"] = round(seq, 1)
            rec["speedup_vs_sequential"] = round(seq / max(fresh, 1e-9), 2)
        rec["cached_total_s"] = round(_reproduce(q, True, args.only, env, args.device, jobs), 1)
        rec["quick_claims"], rec["quick_failed"] = _claims(q)
        rec["quick_per_exp_s"] = _per_exp(q)
        if args.full:
            only = args.only or [e for e in _experiments() if args.all or e not in LONG]
            f = Path(tmp) / "full"
            total = _reproduce(f, False, only, env, args.device, jobs)
            rec["full_experiments"] = len(only)
            rec["full_total_s"] = round(total, 1)
            rec["full_claims"], rec["full_failed"] = _claims(f)
            rec["full_per_exp_s"] = _per_exp(f)
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
