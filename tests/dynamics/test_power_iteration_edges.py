"""``alpha_cl.power_iteration``: a dead filter stays where it is, and the last
iteration is always logged."""

import torch

from ssldyn.dynamics.alpha_cl import make_A_fn, power_iteration, uniform_contrastive_covariance

D = torch.float64


def test_power_iteration_keeps_a_dead_relu_filter_where_it_is():
    # documented: "A member with A(w)w = 0 (e.g. a dead ReLU filter) stays where it is" (not mapped to 0 / NaN)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(200, 3, generator=g, dtype=D) * torch.tensor([1.0, 2.0, 0.5], dtype=D)
    x[:, 0] = -x[:, 0].abs() - 0.1  # every wᵀx < 0 for w = e_0: the gated input of e_0 is 0, so A(e_0) = 0
    w0 = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.1]], dtype=D)
    A_fn = make_A_fn(x, "relu")
    assert float(A_fn(w0[:1]).abs().max()) == 0.0
    res = power_iteration(w0, A_fn, steps=300, tol=1e-12, warn_unconverged=False)
    assert torch.equal(res.state[0], w0[0])  # the dead member did not move (unit norm, not zero)
    # the live member converged to a fixed point of eq. PI: A(w)w ∥ w with a positive Rayleigh quotient
    w1 = res.state[1]
    aw = A_fn(w1[None])[0] @ w1
    torch.testing.assert_close(aw / aw.norm(), w1, rtol=0, atol=1e-9)
    assert abs(float(w1.norm()) - 1.0) < 1e-12


def test_power_iteration_logs_the_last_iteration_also_with_explicit_steps():
    # "the logged iterations (the last one always)": every=[0] still records the final discrepancy
    g = torch.Generator().manual_seed(4)
    x = torch.randn(100, 4, generator=g, dtype=D) * torch.tensor([3.0, 2.9, 1.0, 0.5], dtype=D)
    A_fn = make_A_fn(x, "linear")
    w0 = torch.randn(4, generator=g, dtype=D)
    res = power_iteration(w0, A_fn, steps=6, tol=0.0, every=[0], warn_unconverged=False)
    steps, disc = res.trajectory.series("discrepancy")
    assert steps.tolist() == [0, 5]
    # the value at step 5 is ‖w(6) − w(5)‖ of eq. PI written out with the fixed linear operator
    A = uniform_contrastive_covariance(x)
    ws = [w0 / w0.norm()]
    for _ in range(6):
        v = A @ ws[-1]
        ws.append(v / v.norm())
    assert abs(float(disc[-1]) - float((ws[6] - ws[5]).norm())) < 1e-12
