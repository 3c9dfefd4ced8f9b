"""Shared references of the dynamics tests."""

import pytest
import torch


def _sgd_step_by_hand(module: torch.nn.Module, loss: torch.Tensor, lr: float) -> None:
    """One plain SGD step written out, in place: ``p ← p − lr·∂loss/∂p`` for every parameter of ``module`` (the
    tests' reference for what a trainer's ``torch.optim.SGD`` step must do)."""
    params = list(module.parameters())
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        for p, g in zip(params, grads):
            p -= lr * g


@pytest.fixture
def sgd_step_by_hand():
    """:func:`_sgd_step_by_hand`, for the tests that replay a trainer's updates."""
    return _sgd_step_by_hand
