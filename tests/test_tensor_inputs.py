"""Tensor inputs of the wrong shape get one ValueError naming the function and the shape it needs.

Each case used to fail inside torch (an IndexError or a broadcasting RuntimeError that names no argument)
or, for the second view of the α-CL covariance, to broadcast silently where the shapes allowed it.
"""

from __future__ import annotations

import pytest
import torch

from ssldyn.data import preprocess
from ssldyn.dynamics import (
    eigh_ascending,
    gated_covariance,
    make_A_fn,
    pointwise_gradient,
    q_ode_rhs,
    retract,
    vanilla_gradient_descent,
)
from ssldyn.kernels import predicted_cluster_flow

D = torch.float64


def _t(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=D)


CASES = {
    "gated_covariance x_pos": (lambda: gated_covariance(_t(10, 4), _t(4), x_pos=_t(9, 4)),
                               r"x_pos: the second view must have the shape of x \(10, 4\), got \(9, 4\)"),
    "make_A_fn x_pos": (lambda: make_A_fn(_t(10, 4), x_pos=_t(10, 3)), r"x_pos: the second view must have the shape"),
    "q_ode_rhs q": (lambda: q_ode_rhs(_t(4), _t(4)), r"q_ode: q must have shape \(\.\.\., d, z\), got \(4,\)"),
    "eigh_ascending": (lambda: eigh_ascending(_t(4, 3)), r"eigh_ascending: C must be square \(\.\.\., d, d\)"),
    "retract": (lambda: retract(_t(4)), r"polar_retract: W must be a matrix \(\.\.\., n, p\), got shape \(4,\)"),
    "retract qr": (lambda: retract(_t(4), "qr"), r"qr_retract: W must be a matrix"),
    "vanilla_gradient_descent": (lambda: vanilla_gradient_descent(_t(5), lambda z: (z**2).sum(), steps=1, lr=0.1),
                                 r"function_space_flow: z0 must be \(n, d\) or \(E, n, d\), got shape \(5,\)"),
    "pointwise_gradient": (lambda: pointwise_gradient(lambda z: (z**2).sum((-2, -1)), _t(5, 2), torch.tensor([3])),
                           r"pointwise_gradient: z and queries must be floating \(n, d\) of the same shape"),
    "preprocess": (lambda: preprocess(_t(5)), r"preprocess: X must be image rows \(N, D\), got shape \(5,\)"),
    "predicted_cluster_flow grads": (
        lambda: predicted_cluster_flow(_t(4, 2), torch.tensor([0, 1, 1]), _t(2, 3), 0.5),
        r"predicted_cluster_flow: grads must be \(n=3, d\)"),
    "predicted_cluster_flow labels": (
        lambda: predicted_cluster_flow(_t(3, 2), torch.tensor([0, 1, 2]), _t(2, 3), 0.5),
        r"predicted_cluster_flow: labels must be cluster indices in 0\.\.1, got 0\.\.2"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_wrong_shapes_are_one_error_naming_the_function(case):
    call, message = CASES[case]
    with pytest.raises(ValueError, match=message):
        call()


def test_the_checked_functions_still_answer_right_on_good_input():
    """The closed forms next to the checks: eq. (9)'s right-hand side written out, eigh's reconstruction, the
    polar factor of a wide matrix (rows orthonormal), and pointwise_gradient = n ∂𝓛/∂z at queries = z."""
    q, lam = _t(4, 2), torch.tensor([0.5, -1.0, 2.0, 0.1], dtype=D)
    L = torch.diag(lam)
    torch.testing.assert_close(q_ode_rhs(q, lam), -2 * (2 * L @ q - L @ q @ q.T @ q - q @ q.T @ L @ q))
    C = _t(5, 5)
    w, V = eigh_ascending(C)
    torch.testing.assert_close(V @ torch.diag(w) @ V.T, (C + C.T) / 2)
    R = retract(_t(2, 4))
    torch.testing.assert_close(R @ R.T, torch.eye(2, dtype=D))
    z = _t(5, 2)

    def loss(b: torch.Tensor) -> torch.Tensor:
        return (b**3).sum((-2, -1)) / b.shape[-2]  # mean over samples

    torch.testing.assert_close(pointwise_gradient(loss, z, z), 3 * z**2)  # n · (3 z² / n)
