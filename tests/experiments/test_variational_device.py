"""`variational.*` on CUDA: the same data as on the CPU (drawn by CPU generators), the same claim outcomes.

Skipped on machines without CUDA (the CPU numbers themselves are pinned by the per-experiment tests and by
tests/experiments/test_determinism.py).
"""

import numpy as np
import pytest
import torch

from ssldyn.lab import run_experiment

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")

# float64 closed forms: CUDA and CPU agree to rounding
CLOSED_FORM = ["variational.fig3", "variational.ill-posed"]


def _pair(name, tmp_path):
    cpu = run_experiment(name, quick=True, seeds=1, device="cpu", out=tmp_path / "cpu").run
    gpu = run_experiment(name, quick=True, seeds=1, device="cuda", out=tmp_path / "cuda").run
    return cpu, gpu


@pytest.mark.parametrize(
    "name",
    ["variational.fig3", "variational.ill-posed", "variational.invariance", "variational.kernel", "variational.fig5"],
)
def test_cuda_run_reproduces_the_cpu_claims(name, tmp_path):
    cpu, gpu = _pair(name, tmp_path)
    assert gpu.config_record["device"] == "cuda"
    c_cpu = {c.id: c for c in cpu.claims}
    c_gpu = {c.id: c for c in gpu.claims}
    assert sorted(c_cpu) == sorted(c_gpu)
    assert {k: c.passed for k, c in c_gpu.items()} == {k: c.passed for k, c in c_cpu.items()}
    if name in CLOSED_FORM:
        for k in c_cpu:
            assert c_gpu[k].measured == pytest.approx(c_cpu[k].measured, rel=1e-5, abs=1e-9), k
    if name == "variational.fig5":  # data drawn on the CPU and moved: bitwise the same inputs
        a_cpu, a_gpu = cpu.result().arrays, gpu.result().arrays
        np.testing.assert_array_equal(a_gpu["x"], a_cpu["x"])
        np.testing.assert_array_equal(a_gpu["labels"], a_cpu["labels"])
