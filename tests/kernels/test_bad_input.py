"""Bad input to the kernels is one clear ValueError, never a raw error or a silent wrong answer
(issue 32, item 13; issue 30, item 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from ssldyn.kernels import averaging_net_kernel, block_structure, empirical_ntk, relu_infinite_width_kernel
from ssldyn.kernels.closed_form import cluster_coefficients, predicted_cluster_flow


def _mlp(dtype=torch.float32, D=3, d=2):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, 4), nn.Tanh(), nn.Linear(4, d)).to(dtype)


def test_float64_inputs_to_a_float32_model_are_cast_like_training_does():
    model = _mlp(torch.float32)
    x64 = torch.randn(5, 3, dtype=torch.float64)
    K = empirical_ntk(model, None, x64)  # was a raw dtype RuntimeError
    assert K.dtype == torch.float32 and K.shape == (5, 5, 2, 2)
    torch.testing.assert_close(K, empirical_ntk(model, None, x64.float()), rtol=0, atol=0)
    # the cast is the one a float32 forward would see: compare with the float64 kernel of the same net
    K64 = empirical_ntk(model.double(), None, x64)
    torch.testing.assert_close(K.double(), K64, rtol=1e-5, atol=1e-6)


def test_parameters_of_mixed_dtypes_are_an_error():
    model = _mlp()
    model[2].double()
    with pytest.raises(ValueError, match="several dtypes .*model.double"):
        empirical_ntk(model, None, torch.randn(4, 3))


def test_wrong_feature_count_is_one_clear_error():
    with pytest.raises(ValueError, match=r"cannot be applied to samples of shape \(5,\) \(x1 \(4, 5\)"):
        empirical_ntk(_mlp(D=3), None, torch.randn(4, 5))


def test_x1_and_x2_with_different_sample_shapes_are_an_error():
    with pytest.raises(ValueError, match="same sample shape"):
        empirical_ntk(_mlp(D=3), None, torch.randn(4, 3), torch.randn(4, 5))


def test_3d_input_is_not_silently_read_as_an_ensemble():
    """(n, a, D) through an MLP gives (n, a, d): before, that was taken for an (E, n, d) ensemble output
    and a (2, 2, 2, 2) 'kernel' came back."""
    with pytest.raises(ValueError, match=r"returned \(1, 2, 2\) for one sample .* must return \(1, d\) or \(E, 1, d\)"):
        empirical_ntk(_mlp(D=3), None, torch.randn(2, 2, 3))


def test_dropout_only_error_does_not_talk_about_batchnorm():
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.1), nn.Linear(4, 2)).train()
    with pytest.raises(ValueError) as info:
        empirical_ntk(model, None, torch.randn(4, 3))
    msg = str(info.value)
    assert "Dropout is random" in msg and "BatchNorm" not in msg and "model.eval()" in msg
    bn = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).train()
    with pytest.raises(ValueError, match="BatchNorm1d: BatchNorm couples the samples") as info:
        empirical_ntk(bn, None, torch.randn(4, 3))
    assert "Dropout" not in str(info.value)


def test_valid_input_still_gives_the_kernel_of_its_definition():
    """Guard against a check that rejects good input: K_ij = J_i J_jᵀ from autograd rows."""
    model = _mlp(torch.float64)
    x = torch.randn(3, 3, dtype=torch.float64)
    K = empirical_ntk(model, None, x)
    params = [p for p in model.parameters()]
    rows = []
    for i in range(3):
        for k in range(2):
            g = torch.autograd.grad(model(x[i : i + 1])[0, k], params)
            rows.append(torch.cat([t.flatten() for t in g]))
    J = torch.stack(rows).view(3, 2, -1)
    torch.testing.assert_close(K, torch.einsum("iap,jbp->ijab", J, J))


NAN = float("nan")


@pytest.mark.parametrize(
    "call",
    [
        lambda: averaging_net_kernel(torch.randn(4, 3), torch.tensor([[NAN, 0.0, 1.0]]), d=2),
        lambda: averaging_net_kernel(torch.full((4, 3), NAN), torch.randn(2, 3), d=2),
        lambda: relu_infinite_width_kernel(torch.tensor([[1.0, NAN]])),
        lambda: relu_infinite_width_kernel(torch.randn(2, 2), torch.tensor([[math.inf, 0.0]])),
        lambda: cluster_coefficients(torch.randn(4, 3), torch.tensor([[NAN, 0.0, 0.0]]), d=2),
        lambda: predicted_cluster_flow(torch.tensor([[NAN, 0.0]]), torch.tensor([0]), torch.ones(1, 3), 0.5),
        lambda: predicted_cluster_flow(torch.zeros(1, 2), torch.tensor([0]), torch.ones(1, 3), NAN),
        lambda: block_structure(torch.tensor([[1.0, NAN], [NAN, 1.0]]), torch.tensor([0, 1])),
    ],
)
def test_closed_forms_refuse_nan_inputs(call):
    with pytest.raises(ValueError, match="non-finite|must be finite"):
        call()


def test_block_structure_error_names_the_class_counts():
    K = torch.eye(3) + 0.1
    with pytest.raises(ValueError, match=r"class counts \{0: 1, 1: 1, 2: 1\}"):
        block_structure(K, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"class counts \{4: 3\}"):
        block_structure(K, torch.tensor([4, 4, 4]))


def test_ntk_class_blocks_error_names_the_class_counts():
    from ssldyn.dynamics.monitors import NTKClassBlocks

    mon = NTKClassBlocks(_mlp(), torch.randn(3, 3), [0, 1, 2], n_perm=0)
    with pytest.raises(ValueError, match=r"class counts \{0: 1, 1: 1, 2: 1\}"):
        mon._compute()


def test_relu_kernel_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"\(n1, D\) and \(n2, D\)"):
        relu_infinite_width_kernel(torch.randn(2, 3), torch.randn(2, 4))


def test_block_structure_needs_a_count_of_shuffles():
    K, labels = torch.eye(4) + 0.1, torch.tensor([0, 0, 1, 1])
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match=r"^block_structure: n_perm must be an integer >= 0"):
            block_structure(K, labels, n_perm=bad)


def test_cluster_limit_kernel_names_wrong_shapes_and_labels_out_of_range():
    from ssldyn.kernels import cluster_limit_kernel

    labels, centers, beta = torch.tensor([0, 1, 1]), torch.randn(2, 3), torch.rand(2, 2)
    K = cluster_limit_kernel(labels, centers, beta)  # the written-out blocks: 1[γ(i)=γ(j)] ‖ξ_q‖² diag(β_q)
    want = torch.zeros(3, 3, 2, 2)
    for i in range(3):
        for j in range(3):
            if labels[i] == labels[j]:
                want[i, j] = (centers[labels[i]] ** 2).sum() * torch.diag(beta[labels[i]])
    torch.testing.assert_close(K, want)
    with pytest.raises(
        ValueError, match=r"^cluster_limit_kernel: need labels \(n,\), centers \(N, D\) and beta \(N, d\)"
    ):
        cluster_limit_kernel(labels, centers, torch.rand(2))
    with pytest.raises(ValueError, match=r"^cluster_limit_kernel: need labels"):
        cluster_limit_kernel(labels, centers, torch.rand(3, 2))  # one β row per cluster
    with pytest.raises(
        ValueError, match=r"^cluster_limit_kernel: labels must be cluster indices in 0\.\.1, got 0\.\.2"
    ):
        cluster_limit_kernel(torch.tensor([0, 2]), centers, beta)


@pytest.mark.parametrize("d", [0, -1, 2.0, True])
def test_the_output_dimension_d_is_an_integer_ge_1(d):
    # a float d was torch.eye's / unflatten's TypeError, d = -1 torch's RuntimeError
    x = torch.randn(4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^relu_infinite_width_kernel: d must be an integer >= 1, got "):
        relu_infinite_width_kernel(x, d=d)
    with pytest.raises(ValueError, match=r"d \(the output dimension\) must be an integer >= 1, got "):
        averaging_net_kernel(torch.randn(6, 3, dtype=torch.float64), x, d=d)
    K = relu_infinite_width_kernel(x, d=np.int64(2))  # any integral type
    torch.testing.assert_close(K[..., 0, 0], relu_infinite_width_kernel(x), rtol=0, atol=0)
    assert float(K[..., 0, 1].abs().max()) == 0.0
