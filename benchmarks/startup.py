"""Cold start of the command line (``ssldyn --help``, ``list``, ``show EXP``) and of the library's imports.

Each command is a fresh Python process started the way the ``ssldyn`` console script starts
it (``from ssldyn.lab.cli import main; main()``). Baselines measured in the same run, in
turn with the commands (A B C ... A B C ...) so that drift on a shared machine hits all alike:
``python -c pass`` (the interpreter alone) and ``python -c "import torch"`` (what every
command paid before the manifest). The library's import cost (issue 31) is measured in the same
rounds: ``python -c "import ssldyn.dynamics"`` and ``python -c "import ssldyn.dynamics.ensemble_trainer"``
(what a token run imports before its first step) against ``import torch``, paired round by round.
Prints one JSON line:

  median_s / min_s     per command, over --runs interleaved rounds (after one warm-up round)
  over_python_s        median minus the median of ``python -c pass``
  torch_over_help      median(import torch) / median(ssldyn --help)
  over_torch_s         per library import: median over rounds of (its time - import torch's time in that round)
  targets              ssldyn --help <= 0.4 s, ssldyn list <= 0.8 s (medians, 2-core CPU);
                       import ssldyn.dynamics <= import torch + 0.3 s (paired median of over_torch_s)
  meets                whether each target is met in this run

Usage: python benchmarks/startup.py [--runs N] [--experiment EXP] [--imports-only]
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
TORCH = 'python -c "import torch"'
IMPORTS = ("ssldyn.dynamics", "ssldyn.dynamics.ensemble_trainer")
IMPORT_TARGET_OVER_TORCH_S = {"ssldyn.dynamics": 0.3}


def _import_name(module: str) -> str:
    return f'python -c "import {module}"'


def _commands(experiment: str, imports_only: bool = False) -> dict[str, list[str]]:
    py = sys.executable
    cmds = {"python -c pass": [py, "-c", "pass"], TORCH: [py, "-c", "import torch"]}
    if not imports_only:
        cmds["ssldyn --help"] = [py, "-c", ENTRY, "--help"]
        cmds["ssldyn list"] = [py, "-c", ENTRY, "list"]
        cmds[f"ssldyn show {experiment}"] = [py, "-c", ENTRY, "show", experiment]
    for module in IMPORTS:
        cmds[_import_name(module)] = [py, "-c", f"import {module}"]
    return cmds


def over_torch(times: dict[str, list[float]]) -> dict[str, float]:
    """Per library import: the median over rounds of (its time - ``import torch``'s time in the same round)."""
    return {
        module: statistics.median(t - b for t, b in zip(times[_import_name(module)], times[TORCH], strict=True))
        for module in IMPORTS
        if times.get(_import_name(module))
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
    ap.add_argument("--imports-only", action="store_true", help="time only the interpreter, torch and the imports")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "SSLDYN_PLUGINS"}
    env["COLUMNS"] = "80"
    cmds = _commands(args.experiment, args.imports_only)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for rnd in range(args.runs + 1):
        for name, cmd in cmds.items():
            t = _time(cmd, env)
            if rnd:  # round 0 warms the file cache and the bytecode
                times[name].append(t)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["python -c pass"]
    paired = over_torch(times)
    targets: dict[str, float] = {k: t for k, t in TARGETS.items() if k in med}
    meets = {k: med[k] <= t for k, t in targets.items()}
    for module, limit in IMPORT_TARGET_OVER_TORCH_S.items():
        targets[f"import {module} - import torch"] = limit
        meets[f"import {module} - import torch"] = paired[module] <= limit
    rec = {
        "benchmark": "startup",
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "runs": args.runs,
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "min_s": {k: round(min(v), 3) for k, v in times.items()},
        "over_python_s": {k: round(v - base, 3) for k, v in med.items() if k != "python -c pass"},
        "torch_over_help": round(med[TORCH] / med["ssldyn --help"], 2) if "ssldyn --help" in med else None,
        "over_torch_s": {k: round(v, 3) for k, v in paired.items()},
        "targets": targets,
        "meets": meets,
    }
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
