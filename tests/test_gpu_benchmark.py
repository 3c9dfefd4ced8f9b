"""The CPU side of ``benchmarks/gpu.py``: reading the CPU figures from benchmarks/README.md, assembling the
table from given timings (speed-ups, targets), and the one-line skip without CUDA."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "gpu.py")
gpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu)

README_SNIPPET = """
quick: `quick_total_s` **71.6** (`--jobs 2`)
| `token_grid.py` | full 384-run grid | quiet machine: grid **659 s** extrapolated | meets |

| experiment | quick (3 seeds) | paper scale, CPU | paper scale, one H100 |
| --- | --- | --- | --- |
| `grassmann.fig2` | 0.9 s | 193.8 s (5 seeds) | not measured |
| `nonlinearity.fig12` | 3.6 s | 210.2 s (5 seeds; run alone afterwards) | not measured |
| `variational.fig1` | 16.9 s | not run (est. ~3 h on this CPU; H100 137 s with 1 seed) | not measured |

after the table: | `not.a-row` | 1 s | 2 s |
"""


def test_cpu_figures_are_read_from_the_table_and_the_totals():
    cpu = gpu.cpu_figures(README_SNIPPET)
    assert cpu["experiments"] == {
        "grassmann.fig2": {"quick": 0.9, "paper": 193.8},
        "nonlinearity.fig12": {"quick": 3.6, "paper": 210.2},
        "variational.fig1": {"quick": 16.9, "paper": None},  # "not run (... 137 s ...)" is no CPU figure
    }
    assert cpu["quick_total_s"] == 71.6 and cpu["token_grid_s"] == 659.0


def test_cpu_figures_of_the_committed_readme():
    cpu = gpu.cpu_figures(gpu.README.read_text(encoding="utf-8"))
    exps = cpu["experiments"]
    assert len(exps) >= 34 and all(n.split(".")[0] in ("grassmann", "nonlinearity", "variational") for n in exps)
    assert exps["nonlinearity.fig4"]["paper"] == pytest.approx(1465.8)
    assert exps["grassmann.fig2"]["quick"] == pytest.approx(0.9)
    assert cpu["quick_total_s"] is not None and cpu["token_grid_s"] is not None


def test_table_from_given_timings():
    cpu = gpu.cpu_figures(README_SNIPPET)
    measured = {
        "quick": {"total_s": 80.0, "per_exp_s": {"grassmann.fig2": 0.3, "new.exp": 1.0},
                  "claims": {"grassmann.fig2": "3/3"}, "claims_total": "190/200"},
        "paper": {"total_s": 250.0, "per_exp_s": {"grassmann.fig2": 19.38, "nonlinearity.fig12": 10.51},
                  "claims": {"nonlinearity.fig12": "2/3"}, "claims_total": "200/210"},
        "token_grid": {"grid_wall_s": 16.5, "grid_extrapolated": False},
        "fig12": {"wall_s": 19.0, "claims": "3/3"},
    }  # fmt: skip
    rows = {(r["experiment"], r["preset"]): r for r in gpu.assemble_table(cpu, measured)}
    r = rows[("grassmann.fig2", "paper")]
    assert (r["cpu_s"], r["gpu_s"], r["speedup"]) == (193.8, 19.38, 10.0) and "target_s" not in r
    assert rows[("grassmann.fig2", "quick")]["speedup"] == 3.0 and rows[("grassmann.fig2", "quick")]["claims"] == "3/3"
    assert rows[("nonlinearity.fig12", "paper")]["speedup"] == 20.0
    assert rows[("nonlinearity.fig12", "paper")]["claims"] == "2/3"
    new = rows[("new.exp", "quick")]  # measured, but no CPU figure recorded: no speed-up
    assert new["cpu_s"] is None and new["gpu_s"] == 1.0 and new["speedup"] is None
    fig1 = rows[("variational.fig1", "paper")]  # neither figure
    assert fig1["cpu_s"] is None and fig1["gpu_s"] is None and fig1["speedup"] is None
    # aggregates and their targets
    quick = rows[("reproduce --quick", "quick")]
    assert quick["target_s"] == 71.6 and quick["meets"] is False and quick["claims"] == "190/200"  # 80 s > 71.6 s
    assert quick["speedup"] == pytest.approx(71.6 / 80.0, abs=0.005)
    paper = rows[("reproduce (paper scale, all experiments)", "paper")]
    assert paper["target_s"] == 300.0 and paper["meets"] is True
    assert paper["cpu_s"] is None  # fig1 has no paper-scale CPU figure, so no CPU total
    grid = rows[("token grid (384 runs, 5000 steps)", "paper")]
    assert (grid["cpu_s"], grid["gpu_s"], grid["target_s"], grid["meets"]) == (659.0, 16.5, 15.0, False)
    assert grid["speedup"] == pytest.approx(659.0 / 16.5, abs=0.005)
    f12 = rows[("nonlinearity.fig12 alone", "paper")]
    assert (f12["gpu_s"], f12["meets"], f12["claims"]) == (19.0, True, "3/3")
    f1 = rows[("variational.fig1 alone", "paper")]
    assert f1["gpu_s"] is None and f1["meets"] is None and f1["target_s"] == 30.0


def test_a_paper_total_needs_every_cpu_figure():
    cpu = {"experiments": {"a.x": {"quick": 1.0, "paper": 10.0}, "a.y": {"quick": 2.0, "paper": 30.0}},
           "quick_total_s": None, "token_grid_s": None}  # fmt: skip
    rows = gpu.assemble_table(cpu, {"paper": {"total_s": 4.0}})
    paper = next(r for r in rows if r["experiment"].startswith("reproduce (paper"))
    assert (paper["cpu_s"], paper["speedup"]) == (40.0, 10.0)
    quick = next(r for r in rows if r["experiment"] == "reproduce --quick")
    assert quick["cpu_s"] is None and quick["speedup"] is None and "target_s" not in quick


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available: the script measures instead of skipping")
def test_without_cuda_one_json_line_says_skipped_and_why():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py")], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["benchmark"] == "gpu" and rec["skipped"] is True and rec["reason"]


def test_a_step_is_bounded_by_what_is_left_of_the_deadline():
    clock = gpu._Clock(timeout_s=100.0, deadline_s=2.0)
    assert 1.5 < clock.bound() <= 2.0  # the deadline, not the per-step timeout
    assert gpu._Clock(timeout_s=3.0, deadline_s=50.0).bound() == 3.0  # the per-step timeout
    assert gpu._Clock(timeout_s=3.0, deadline_s=None).bound() == 3.0
    wall, rc, out = gpu._timed([sys.executable, "-c", "pass"], 0.0)  # nothing left: not started
    assert (wall, rc) == (0.0, 124) and "not started" in out


def test_a_step_cut_off_keeps_its_output_and_reads_124():
    code = "import sys, time; print('started', flush=True); time.sleep(30)"
    wall, rc, out = gpu._timed([sys.executable, "-c", code], 3.0)
    assert rc == 124 and wall < 20 and "started" in out and "timed out after 3 s" in out


def test_bad_order_is_one_error_naming_the_steps():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--order", "tests,tests"],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2 and "--order 'tests,tests': each step at most once" in done.stderr


def test_a_subset_of_the_paper_reproduce_is_compared_with_its_own_cpu_sum_and_no_target():
    cpu = gpu.cpu_figures(README_SNIPPET)
    only = ["grassmann.fig2", "nonlinearity.fig12"]
    rows = gpu.assemble_table(cpu, {"paper": {"total_s": 40.4, "only": only}})
    sub = next(r for r in rows if r["experiment"].startswith("reproduce (paper"))
    assert sub["experiment"] == "reproduce (paper scale, 2 experiments: --only)"
    assert sub["cpu_s"] == pytest.approx(193.8 + 210.2) and sub["speedup"] == pytest.approx(404.0 / 40.4, abs=0.005)
    assert "target_s" not in sub  # the 300 s target is for all experiments
    assert gpu.reproduce_args("paper", Path("/s"), only) == [
        "reproduce", "--device", "cuda", "--jobs", "1", "--out", "/s", "--only", "grassmann.fig2", "--only",
        "nonlinearity.fig12",
    ]  # fmt: skip
    assert gpu.reproduce_args("quick", Path("/s")) == [
        "reproduce", "--device", "cuda", "--jobs", "1", "--out", "/s", "--quick"
    ]  # fmt: skip
