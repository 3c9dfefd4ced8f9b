"""Seeds as an ensemble axis vs one seed at a time, for every experiment that batches its seeds.

For each experiment with ``batch_seeds = True`` (or those given with ``--only``) its quick run
with S seeds (default 3) is computed twice in this process: batched (``run`` gets all seeds at
once and trains them as ensemble members) and one seed at a time (the same experiment with
``batch_seeds`` switched off: ``run`` gets one seed per call). Both must give the same per-seed
claim values (the ensemble contract: member i equals the one-seed run with seed i); the script
reports the largest relative difference and the time ratio.

Prints one JSON line:
  per_experiment    {name: {"batched_s", "one_at_a_time_s", "speedup", "max_rel_diff"}}
  total_batched_s, total_one_at_a_time_s, speedup   over all experiments measured

Usage: python benchmarks/seeds.py [--seeds 3] [--only EXP ...] [--threads 1] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time


def _values(claims) -> dict[str, list]:
    return {c.id: list(c.values) for c in claims}


def _max_rel_diff(a: dict[str, list], b: dict[str, list]) -> float:
    worst = 0.0
    for cid, va in a.items():
        for x, y in zip(va, b.get(cid, [])):
            try:
                x, y = float(x), float(y)
            except (TypeError, ValueError):
                worst = max(worst, 0.0 if x == y else 1.0)
                continue
            if math.isfinite(x) and math.isfinite(y):
                worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-12))
            elif not (math.isnan(x) and math.isnan(y)) and x != y:
                worst = max(worst, 1.0)
    return worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    import torch

    from ssldyn.lab.registry import all_experiments, get_experiment
    from ssldyn.lab.runner import compute_run, plan_run

    torch.set_num_threads(args.threads)
    exps = [get_experiment(n) for n in args.only] if args.only else [e for e in all_experiments() if e.batch_seeds]
    per, tb, to = {}, 0.0, 0.0
    for exp in exps:
        spec = plan_run(exp.name, quick=True, seeds=args.seeds, device=args.device)
        t0 = time.perf_counter()
        batched = compute_run(spec, executor="inline")
        t_b = time.perf_counter() - t0
        saved = exp.__dict__.get("batch_seeds")
        exp.batch_seeds = False
        try:
            t0 = time.perf_counter()
            single = compute_run(spec, executor="inline")
            t_o = time.perf_counter() - t0
        finally:
            if saved is None:
                del exp.batch_seeds
            else:
                exp.batch_seeds = saved
        per[exp.name] = {
            "batched_s": round(t_b, 2),
            "one_at_a_time_s": round(t_o, 2),
            "speedup": round(t_o / max(t_b, 1e-9), 2),
            "max_rel_diff": float(f"{_max_rel_diff(_values(batched.claims), _values(single.claims)):.3g}"),
        }
        tb, to = tb + t_b, to + t_o
    print(json.dumps({
        "benchmark": "seeds",
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "device": args.device,
        "seeds": args.seeds,
        "threads": args.threads,
        "per_experiment": per,
        "total_batched_s": round(tb, 2),
        "total_one_at_a_time_s": round(to, 2),
        "speedup": round(to / max(tb, 1e-9), 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
