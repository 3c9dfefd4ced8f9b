"""Wall time of `ssldyn reproduce --quick` (and, with --full, of each experiment at paper scale).

Prints one JSON line:
  quick_total_s        wall time of a fresh `reproduce --quick` (subprocess, new output dir)
  quick_per_exp_s      run time of each experiment inside it (from meta.json)
  cached_total_s       wall time of the same command again (every run comes from the store)
  ratio_fresh_vs_cached  the baseline comparison measured in the same run
  full_per_exp_s       (--full) run time of each experiment with its paper-scale defaults
  full_vs_quick_ratio  (--full) total full time / total quick time

Usage: python benchmarks/reproduce.py [--full] [--only EXP ...] [--threads N]
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


def _reproduce(out: Path, quick: bool, only: list[str], env: dict) -> float:
    cmd = [sys.executable, "-m", "ssldyn.lab.cli", "reproduce", "--out", str(out)] + (["--quick"] if quick else [])
    for e in only:
        cmd += ["--only", e]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=False, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _per_exp(out: Path) -> dict[str, float]:
    res = {}
    for meta in out.glob("*/*/meta.json"):
        m = json.loads(meta.read_text())
        res[m["experiment"]] = m["run_seconds"]
    return dict(sorted(res.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="also time every experiment at paper scale (slow)")
    ap.add_argument("--only", action="append", default=[], help="restrict to these experiments")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    env = {**os.environ, "SSLDYN_THREADS": str(args.threads)}
    with tempfile.TemporaryDirectory() as tmp:
        q = Path(tmp) / "quick"
        fresh = _reproduce(q, True, args.only, env)
        cached = _reproduce(q, True, args.only, env)
        rec = {
            "benchmark": "reproduce",
            "machine": f"{platform.machine()} {os.cpu_count()} cores",
            "threads": args.threads,
            "quick_total_s": round(fresh, 2),
            "cached_total_s": round(cached, 2),
            "ratio_fresh_vs_cached": round(fresh / max(cached, 1e-9), 2),
            "quick_per_exp_s": _per_exp(q),
        }
        if args.full:
            f = Path(tmp) / "full"
            total = _reproduce(f, False, args.only, env)
            rec["full_total_s"] = round(total, 1)
            rec["full_per_exp_s"] = _per_exp(f)
            rec["full_vs_quick_ratio"] = round(total / max(fresh, 1e-9), 1)
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
