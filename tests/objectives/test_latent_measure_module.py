"""LatentMeasureNTXent forwards positive_term (the module test only used the default)."""

import math

import numpy as np
import pytest
import torch

from ssldyn.objectives import LatentMeasureNTXent


def test_module_with_positive_term_is_prop_2_1_divided_by_the_positive_pair():
    """L = Σ_i w_i log(1 + 2 Σ_{j≠i} w_j e^{(cos_ij − 1)/τ}), uniform w = 1/n, loops in float64."""
    y = torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    tau = 0.4
    Y = y.numpy() / np.linalg.norm(y.numpy(), axis=1, keepdims=True)
    n = len(Y)
    ref = sum(
        math.log1p(2 * sum(math.exp((Y[i] @ Y[j] - 1) / tau) / n for j in range(n) if j != i)) / n for i in range(n)
    )
    assert LatentMeasureNTXent(tau, positive_term=True)(y).item() == pytest.approx(ref, rel=1e-12)
