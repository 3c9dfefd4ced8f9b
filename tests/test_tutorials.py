"""The tutorials run as notebooks (jupytext + nbclient), each at a size that takes well under a minute.

They need the ``docs`` extra (jupytext, nbclient, ipykernel); ``.ci/run`` installs it and runs
this file after the main test run."""

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "tutorials").glob("*.py"))
MISSING = [m for m in ("jupytext", "nbclient", "ipykernel") if importlib.util.find_spec(m) is None]


def test_the_three_tutorials_are_there():
    assert {p.stem for p in TUTORIALS} >= {"monitor_simclr", "ntk_function_space", "alpha_cl_features"}


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason=f"needs the docs extra (pip install -e '.[docs]'): missing {MISSING}")
@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs_as_a_notebook(path, tmp_path):
    src = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    env = {"MPLBACKEND": "Agg", "PYTHONPATH": src}
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(path)
    assert sum(c.cell_type == "code" for c in nb.cells) >= 3
    old = dict(os.environ)
    os.environ.update(env)  # the kernel inherits the environment (src on the path, Agg backend)
    try:
        NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
