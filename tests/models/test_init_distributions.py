"""The documented initial distributions of ``EnsembleRFNet`` and the
``scaled`` factor of ``DeepLinearNet`` (references: moments of U(±b) by Monte Carlo, numpy's spectral norm)."""

import math

import numpy as np
import torch

from ssldyn.models.rf_net import EnsembleRFNet
from ssldyn.models.two_layer import DeepLinearNet


def test_rf_net_init_is_uniform_with_the_documented_bounds():
    # w_k ~ U(±1/√d_in), V ~ U(±1/√(K·M)) (nn.Linear's bounds): Var = b²/3, max |·| → b
    K, d_in, M = 3, 49, 40
    net = EnsembleRFNet(K, d_in, M, out_dim=20, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for values, b in (
        (net.W.detach().reshape(-1), 1 / math.sqrt(d_in)),
        (net.V.detach().reshape(-1), 1 / math.sqrt(K * M)),
    ):
        n = values.numel()
        assert float(values.abs().max()) <= b and float(values.abs().max()) > 0.99 * b
        var = float((values**2).mean())  # mean 0: E w² = b²/3, Var(w²) = b⁴(1/5 − 1/9)
        assert abs(var - b**2 / 3) < 5 * b**2 * math.sqrt((1 / 5 - 1 / 9) / n)


def test_deep_linear_scaled_factor_is_the_product_of_squared_spectral_norms():
    net = DeepLinearNet(4, [6, 5], 3, regime="scaled", init="normal", ensemble=2, dtype=torch.float64,
                        generator=torch.Generator().manual_seed(1))  # fmt: skip
    ref = [np.prod([np.linalg.norm(W[e].detach().numpy(), 2) ** 2 for W in net.layers]) for e in range(2)]
    np.testing.assert_allclose(net.loss_scale().detach().numpy(), ref, rtol=1e-10)
