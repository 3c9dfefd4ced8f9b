"""generalized_contrastive_loss with a user η and the default Ψ = log1p (the one path the loop tests missed)."""

import math

import numpy as np
import pytest
import torch

from ssldyn.objectives import generalized_contrastive_loss


def _ref(z1, z2, psi, eta, symmetric):
    """variational eq. (4) on a batch: mean_i Ψ(mean_j η(‖a_i-b_j‖²/2) / η(‖a_i-b_i‖²/2)), float64 loops."""

    def one(a, b):
        n = len(a)
        return float(
            np.mean(
                [
                    psi(
                        sum(eta(0.5 * np.sum((a[i] - b[j]) ** 2)) for j in range(n))
                        / n
                        / eta(0.5 * np.sum((a[i] - b[i]) ** 2))
                    )
                    for i in range(n)
                ]
            )
        )

    a, b = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    return 0.5 * (one(a, b) + one(b, a)) if symmetric else one(a, b)


@pytest.mark.parametrize("symmetric", [True, False])
def test_user_eta_with_default_psi_matches_loop_reference(symmetric):
    g = torch.Generator().manual_seed(11)
    z1, z2 = torch.randn(6, 3, generator=g, dtype=torch.float64), torch.randn(6, 3, generator=g, dtype=torch.float64)
    eta = lambda t: 1.0 / (1.0 + t)  # noqa: E731  (maximal at 0)
    got = generalized_contrastive_loss(z1, z2, eta=eta, symmetric=symmetric)  # psi=None: Ψ = log1p
    want = _ref(z1.numpy(), z2.numpy(), math.log1p, lambda t: 1.0 / (1.0 + t), symmetric)
    assert got.item() == pytest.approx(want, rel=1e-12)
