"""The closed-form contrastive gradient at small temperatures (T < 0.05 takes the
max-shifted softmax branch, which no test reached)."""

import pytest
import torch

from ssldyn.dynamics.ensemble_trainer import contrastive_loss_and_grad


def _infonce_written_out(z1, z2, t):
    """InfoNCE with view-1 negatives and cosine similarity, written out in float64 (one member):
    S_ij = ẑ1_i·ẑ1_j (i ≠ j), S_ii = ẑ1_i·ẑ2_i; L = mean_i [−S_ii/T + log Σ_j exp(S_ij/T)]."""
    u1, u2 = z1 / z1.norm(dim=-1, keepdim=True), z2 / z2.norm(dim=-1, keepdim=True)
    S = u1 @ u1.T
    S = S - torch.diag(S.diagonal()) + torch.diag((u1 * u2).sum(-1))
    return (-S.diagonal() / t + torch.logsumexp(S / t, dim=-1)).mean()


@pytest.mark.parametrize("t", [0.01, 0.03, 0.049, 0.05, 0.2])
@pytest.mark.parametrize("kinds", [[True, True, True], [True, False, True]])  # the whole-ensemble alias and slices
def test_closed_form_infonce_gradient_at_every_temperature(t, kinds):
    g = torch.Generator().manual_seed(7)
    z = torch.randn(3, 2, 12, 4, generator=g, dtype=torch.float64)
    losses, dz = contrastive_loss_and_grad(z, kinds, t)
    for e, infonce in enumerate(kinds):
        if not infonce:
            continue
        ze = z[e].clone().requires_grad_(True)
        ref = _infonce_written_out(ze[0], ze[1], t)
        (g_ref,) = torch.autograd.grad(ref, ze)
        torch.testing.assert_close(losses[e], ref.detach(), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(dz[e], g_ref, rtol=1e-8, atol=1e-10)
