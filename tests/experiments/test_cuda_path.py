"""Every experiment runs with --device cuda when CUDA is available (skipped on CPU-only machines).

Besides finishing with its claims measured, the run must actually have computed on the GPU:
CUDA memory was allocated during the run (an experiment that silently stays on the CPU
allocates none).
"""

import pytest
import torch

from ssldyn.lab import all_experiments, run_experiment

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


@pytest.mark.parametrize("name", [e.name for e in all_experiments() if ".zz-" not in e.name])
def test_quick_run_on_cuda(name, tmp_path, monkeypatch):
    monkeypatch.setenv("SSLDYN_CACHE_DIR", "off")  # no cached token runs: train on the GPU
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    out = run_experiment(name, quick=True, seeds=1, device="cuda", out=tmp_path)
    assert out.run.config_record["device"] == "cuda"
    assert out.claims, "no claims measured"
    assert torch.cuda.max_memory_allocated() > 0, f"{name} allocated no CUDA memory: it computed on the CPU"
