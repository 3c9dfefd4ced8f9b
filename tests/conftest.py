"""Test set-up: deterministic, single-threaded torch per xdist worker (2 workers on 2 cores)."""

import os

import pytest
import torch

os.environ.setdefault("MPLBACKEND", "Agg")
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
