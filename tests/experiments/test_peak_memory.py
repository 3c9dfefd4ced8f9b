"""Every experiment estimates its peak memory from its config before computing (issue 32, item 11).

The estimate (``Experiment.peak_memory(cfg, n_seeds) -> (bytes, key)``) is what ``ssldyn run
--dry-run`` prints and what refuses a run that cannot fit. It is checked against the peak resident
size of a real run: each experiment runs at quick scale in a fresh interpreter (tasks in-process,
``workers=1``, so the one process holds the whole run) and the lab records the peak it measured in
``meta["memory"]``. The estimate must bound the measured peak from above, without being a blanket
allowance (at most 3× the measured peak). The same quick run checks that every figure it wrote has a caption
(``Experiment.caption``: the experiment's ``captions.md`` section, stored in ``meta["captions"]``; tests/lab/test_captions.py tests the mechanism).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssldyn.lab.registry import all_experiments, load_all
from ssldyn.lab.runner import estimate_memory
from ssldyn.lab.study import config_value

load_all()
BUILTIN = sorted(c.name for c in all_experiments() if c.__module__.startswith("ssldyn.experiments."))
SRC = Path(__file__).resolve().parents[2] / "src"

MEASURE = """
import json, sys
from ssldyn.lab.runner import compute_run, plan_run
spec = plan_run(sys.argv[1], quick=True)
run = compute_run(spec, executor="inline", workers=1)
print("MEMORY " + json.dumps(run.meta["memory"]))
print("UNCAPTIONED " + json.dumps(sorted(set(run.figures) - set(run.meta["captions"]))))
"""


@pytest.mark.parametrize("name", BUILTIN)
def test_every_experiment_estimates_its_own_peak_from_the_config(name):
    from ssldyn.lab.registry import get_experiment

    cls = get_experiment(name)
    assert callable(getattr(cls, "peak_memory", None)), f"{name} declares no peak_memory(cfg, n_seeds)"
    for cfg in (cls.quick_config(), cls.default_config()):
        est, key = estimate_memory(cls, cfg, 3)
        assert est >= 300 * 2**20, f"{name}: {est} bytes is below the interpreter + torch baseline"
        assert key, f"{name}: the estimate names no config key"
        assert config_value(cfg.model_dump(), key) is not None, f"{name}: {key!r} is not a key of its config"


@pytest.mark.slow
@pytest.mark.parametrize("name", BUILTIN)
def test_estimate_bounds_the_measured_peak_of_a_quick_run(name):
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", MEASURE, name], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("MEMORY "))
    mem = json.loads(line[len("MEMORY ") :])
    est, measured = mem["estimated"], mem["measured_peak"]
    line = next(x for x in out.stdout.splitlines() if x.startswith("UNCAPTIONED "))
    assert json.loads(line[len("UNCAPTIONED ") :]) == [], f"{name}: figures without a caption (declare `captions`)"
    if measured is None:
        pytest.skip("this platform reports no peak resident size")
    assert measured <= est, f"{name}: measured peak {measured / 2**30:.2f} GiB above the estimate {est / 2**30:.2f} GiB"
    assert est <= 3 * measured, (
        f"{name}: estimate {est / 2**30:.2f} GiB is over 3× the measured {measured / 2**30:.2f} GiB"
    )
