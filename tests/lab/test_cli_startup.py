"""Cold start: ``ssldyn --help``, ``list`` and ``show`` import no heavy module (no timing here;
the timing is ``benchmarks/startup.py``)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "pandas", "matplotlib", "kornia", "scipy", "sklearn", "ssldyn.experiments")
PROBE = """
import json, sys
from ssldyn.lab.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
heavy = [m for m in {heavy!r} if m in sys.modules]
print("\\n" + json.dumps({{"code": code, "heavy": heavy}}))
"""


def _probe(args):
    env = {k: v for k, v in os.environ.items() if k != "SSLDYN_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        [],
        ["list"],
        ["list", "--wide"],
        ["list", "--paper", "grassmann"],
        ["show", "grassmann.fig3"],
        ["run", "--help"],
        ["reproduce", "--help"],
    ],
)
def test_no_heavy_imports(args):
    res, out = _probe(args)
    assert res["code"] == 0, out
    assert res["heavy"] == [], f"ssldyn {' '.join(args)} imported {res['heavy']}"


def test_the_probe_sees_heavy_imports():
    """The check can fail: ``run --dry-run`` validates configs through the experiments (imports torch)."""
    res, out = _probe(["run", "grassmann.fig3", "--quick", "--dry-run"])
    assert res["code"] == 0, out
    assert "torch" in res["heavy"] and "ssldyn.experiments" in res["heavy"]
