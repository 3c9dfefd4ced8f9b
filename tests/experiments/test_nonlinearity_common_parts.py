"""nonlinearity._common.discriminative_model (Thm. 5, App. D) against its probability table written out by hand."""

import numpy as np
import pytest
import torch

from ssldyn.experiments.nonlinearity._common import discriminative_model


def test_discriminative_model_probability_table_hand_worked():
    """P = 5, p_disc = 0.5, p_other = 0.2: given z = 1 pattern 0 has 0.5 and pattern 1 0.2, given z = 0 the reverse;
    the other three share (1 − 0.7)/3 = 0.1 for both z; z uniform; the patterns are the standard basis."""
    m = discriminative_model(3, 5, 0.5, 0.2)
    probs = m.pattern_probs.numpy()  # (K, C, P), C index = z
    z0, z1 = [0.2, 0.5, 0.1, 0.1, 0.1], [0.5, 0.2, 0.1, 0.1, 0.1]
    for k in range(3):
        np.testing.assert_allclose(probs[k, 0], z0, rtol=1e-15)
        np.testing.assert_allclose(probs[k, 1], z1, rtol=1e-15)
    np.testing.assert_array_equal(m.z_probs.numpy(), [0.5, 0.5])
    np.testing.assert_array_equal(m.patterns.numpy(), np.broadcast_to(np.eye(5), (3, 5, 5)))
    assert m.patterns.dtype == torch.float64 and m.noise == 0.0
    # the class-conditional mean difference E[x_k | z = 1] − E[x_k | z = 0] = (p_disc − p_other)(e_0 − e_1): Δ_k
    delta = (probs[:, 1] - probs[:, 0]) @ np.eye(5)
    np.testing.assert_allclose(delta, np.broadcast_to([0.3, -0.3, 0, 0, 0], (3, 5)), atol=1e-15)


def test_discriminative_model_scales_each_rf_and_the_marginals():
    scales = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    m = discriminative_model(3, 4, 0.45, 0.05, scales)
    for k, c in enumerate([1.0, 2.0, 0.5]):
        np.testing.assert_array_equal(m.patterns[k].numpy(), c * np.eye(4))
    # marginal P[pattern a] = ½(P[a|z=0] + P[a|z=1]): (0.25, 0.25, 0.25, 0.25) at these defaults (p_disc + p_other
    # = 2/P), unequal otherwise
    marg = (m.z_probs[None, :, None] * m.pattern_probs).sum(1).numpy()
    np.testing.assert_allclose(marg, 0.25, rtol=1e-15)
    marg2 = (0.5 * discriminative_model(1, 4, 0.6, 0.15).pattern_probs.sum(1)).numpy()[0]
    np.testing.assert_allclose(marg2, [0.375, 0.375, 0.125, 0.125], rtol=1e-14)
    assert m.pattern_probs.sum(-1).numpy() == pytest.approx(np.ones((3, 2)), abs=1e-15)
