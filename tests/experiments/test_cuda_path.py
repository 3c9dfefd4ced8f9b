"""Every experiment runs with --device cuda when CUDA is available (skipped on CPU-only machines)."""

import pytest
import torch

from ssldyn.lab import all_experiments, run_experiment

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


@pytest.mark.parametrize("name", [e.name for e in all_experiments() if ".zz-" not in e.name])
def test_quick_run_on_cuda(name, tmp_path):
    out = run_experiment(name, quick=True, device="cuda", out=tmp_path)
    assert out.run.config_record["device"] == "cuda"
    assert out.claims, "no claims measured"
