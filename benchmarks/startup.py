"""Cold start of the command line: ``ssldyn --help``, ``ssldyn list``, ``ssldyn show EXP``.

Each command is a fresh Python process started the way the ``ssldyn`` console script starts
it (``from ssldyn.lab.cli import main; main()``). Baselines measured in the same run, in
turn with the commands (A B C ... A B C ...) so that drift on a shared machine hits all alike:
``python -c pass`` (the interpreter alone) and ``python -c "import torch"`` (what every
command paid before the manifest). Prints one JSON line:

  median_s / min_s     per command, over --runs interleaved rounds (after one warm-up round)
  over_python_s        median minus the median of ``python -c pass``
  torch_over_help      median(import torch) / median(ssldyn --help)
  targets              ssldyn --help <= 0.4 s, ssldyn list <= 0.8 s (medians, 2-core CPU)
  meets                whether each target is met in this run

Usage: python benchmarks/startup.py [--runs N] [--experiment EXP]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ENTRY = "import sys; sys.argv[0] = 'ssldyn'; from ssldyn.lab.cli import main; main()"
TARGETS = {"ssldyn --help": 0.4, "ssldyn list": 0.8}


def _commands(experiment: str) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        'python -c "import torch"': [py, "-c", "import torch"],
        "ssldyn --help": [py, "-c", ENTRY, "--help"],
        "ssldyn list": [py, "-c", ENTRY, "list"],
        f"ssldyn show {experiment}": [py, "-c", ENTRY, "show", experiment],
    }


def _time(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="interleaved rounds (after one warm-up round)")
    ap.add_argument("--experiment", default="grassmann.fig3", help="the experiment for `ssldyn show`")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "SSLDYN_PLUGINS"}
    env["COLUMNS"] = "80"
    cmds = _commands(args.experiment)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for rnd in range(args.runs + 1):
        for name, cmd in cmds.items():
            t = _time(cmd, env)
            if rnd:  # round 0 warms the file cache and the bytecode
                times[name].append(t)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["python -c pass"]
    rec = {
        "benchmark": "startup",
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "runs": args.runs,
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "min_s": {k: round(min(v), 3) for k, v in times.items()},
        "over_python_s": {k: round(v - base, 3) for k, v in med.items() if k != "python -c pass"},
        "torch_over_help": round(med['python -c "import torch"'] / med["ssldyn --help"], 2),
        "targets": TARGETS,
        "meets": {k: med[k] <= t for k, t in TARGETS.items()},
    }
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
