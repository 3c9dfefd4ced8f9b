"""Importing the library's lower layers does not load its heavy optional dependencies (issue 31, item 4).

scikit-learn, pandas, matplotlib, kornia and pyarrow load on first use (a probe, ``Trajectory.to_frame``,
a figure, an augmentation, a parquet table), not on ``import ssldyn.dynamics`` / ``ssldyn.models`` /
``ssldyn.objectives``: a token run of 2000 steps trained for 2.4 s and spent ~1 s importing scikit-learn it
never used. Each check runs in a fresh interpreter, so modules imported by other tests do not hide a regression.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
HEAVY = ("sklearn", "pandas", "matplotlib", "kornia", "pyarrow")

_PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
heavy = {heavy!r}
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def _loaded_after_import(*modules: str) -> list[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("SSLDYN_PLUGINS", None)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *modules],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "module",
    [
        "ssldyn.dynamics",
        "ssldyn.models",
        "ssldyn.objectives",
        "ssldyn.dynamics.ensemble_trainer",  # what a token run imports before its first step
        "ssldyn.probes",
        "ssldyn.data",
        "ssldyn.kernels",
    ],
)
def test_importing_a_layer_loads_no_heavy_optional_dependency(module: str) -> None:
    assert _loaded_after_import(module) == [], f"import {module} loaded heavy optional dependencies"


def test_the_check_sees_a_heavy_import() -> None:
    """Control: the same probe reports pandas and scikit-learn once they are really used."""
    loaded = _loaded_after_import("ssldyn.dynamics", "pandas", "sklearn.linear_model")
    assert "pandas" in loaded and "sklearn" in loaded


def test_first_use_still_works() -> None:
    """The deferred imports load where they are used: ``to_frame`` gives the table, the probes train."""
    import numpy as np
    import torch

    from ssldyn.dynamics import Trajectory
    from ssldyn.probes import KNNProbe, LinearProbe

    tr = Trajectory()
    tr.log(0, loss=1.5)
    frame = tr.to_frame()
    assert list(frame.columns) == ["step", "member", "probe", "value"] and frame["value"].tolist() == [1.5]

    labels = np.repeat([0, 1], 20)
    z = torch.tensor(np.where(labels[:, None] == 0, -1.0, 1.0) * np.ones((40, 3)))  # separable by sign
    assert LinearProbe(labels, seed=0)(z) == 1.0
    assert KNNProbe(labels, k=3, seed=0)(z) == 1.0
