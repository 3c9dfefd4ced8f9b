"""Bad input to the flows is one clear ValueError before any step (issue 32, item 13; issue 30: meta["shifted"])."""

from __future__ import annotations

import pytest
import torch

from ssldyn.dynamics.alpha_cl import power_iteration
from ssldyn.dynamics.function_space import function_space_flow


def _loss(z):
    return 0.5 * (z**2).sum(-1).mean(-1)


@pytest.mark.parametrize("K", [torch.eye(5), torch.ones(5, 5, 2, 2), torch.ones(10, 10, 3, 3), torch.ones(10)])
def test_function_space_flow_kernel_must_fit_z0(K):
    with pytest.raises(ValueError, match=r"kernel of shape .* does not fit z0 of shape \(10, 2\)"):
        function_space_flow(torch.randn(10, 2), _loss, K, steps=3, lr=0.1)


def test_function_space_flow_z0_must_be_2d_or_3d():
    with pytest.raises(ValueError, match=r"z0 must be \(n, d\) or \(E, n, d\)"):
        function_space_flow(torch.randn(10), _loss, torch.eye(10), steps=3, lr=0.1)


@pytest.mark.parametrize("K", [torch.eye(10), torch.eye(10)[:, :, None, None] * torch.eye(2), torch.eye(10)[None]])
def test_function_space_flow_accepts_matching_kernels(K):
    """z ← z − lr K ∂𝓛/∂z with ∂𝓛/∂z = z / n for 𝓛 = ½ mean ‖z‖²: one step multiplies z by (1 − lr/n)."""
    z0 = torch.randn(10, 2, dtype=torch.float64)
    res = function_space_flow(z0, _loss, K.double(), steps=1, lr=0.5)
    torch.testing.assert_close(res.state.reshape(10, 2), z0 * (1 - 0.5 / 10))


@pytest.mark.parametrize("A", [torch.eye(5).expand(3, 5, 5), torch.ones(3, 4), torch.eye(4).expand(2, 4, 4),
                               torch.eye(4)[None, None]])  # fmt: skip
def test_power_iteration_refuses_a_mis_shaped_operator(A):
    with pytest.raises(ValueError, match=r"A_fn\(w\) must return \(E, d, d\) = \(3, 4, 4\)"):
        power_iteration(torch.randn(3, 4), lambda w: A, steps=5)


def test_power_iteration_accepts_shared_operators_and_finds_the_top_eigenvector():
    A = torch.diag(torch.tensor([3.0, 2.0, 1.0, 0.5], dtype=torch.float64))
    w0 = torch.ones(3, 4, dtype=torch.float64)
    for shaped in (A, A[None], A.expand(3, 4, 4)):
        res = power_iteration(w0, lambda w, s=shaped: s, steps=200, tol=1e-12)
        torch.testing.assert_close(res.state.abs(), torch.tensor([1.0, 0, 0, 0], dtype=torch.float64).expand(3, 4),
                                   atol=1e-8, rtol=0)  # fmt: skip


def test_meta_shifted_is_filled_for_shift_true():
    A = torch.diag(torch.tensor([3.0, 2.0, 1.0, 0.5]))
    res = power_iteration(torch.randn(3, 4), lambda w: A, steps=5, shift=True, warn_unconverged=False)
    assert res.trajectory.meta["shifted"] == {f"member {m}": "from step 0" for m in range(3)}
    res = power_iteration(
        torch.randn(3, 4), lambda w: A, steps=5, warn_unconverged=False
    )  # positive definite: never shifted
    assert res.trajectory.meta["shifted"] == {}


@pytest.mark.parametrize("cmd", ["show", "run"])
def test_cli_echo_of_a_huge_experiment_name_is_cut(cmd, tmp_path, capsys):
    from ssldyn.lab.cli import main

    name = "x" * 120_000
    argv = [cmd, name] + (["--out", str(tmp_path), "--dry-run"] if cmd == "run" else [])
    with pytest.raises(SystemExit) as ex:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert ex.value.code == 2 and err.startswith("error: unknown experiment") and len(err) < 400


def test_function_space_flow_checks_a_kernel_callables_answer():
    """A kernel callable's kernel is checked when it arrives (was torch's matmul error mid-flow)."""
    with pytest.raises(ValueError, match=r"the kernel at step 0 of shape \(4, 4\) does not fit z of shape \(10, 2\)"):
        function_space_flow(torch.randn(10, 2), _loss, lambda t, z: torch.eye(4), steps=3, lr=0.1)
    with pytest.raises(ValueError, match=r"the kernel at step 1 of shape float does not fit z"):
        function_space_flow(torch.randn(10, 2), _loss, lambda t, z: torch.eye(10) if t == 0 else 1.0, steps=3, lr=0.1)
