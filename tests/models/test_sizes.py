"""Every model's constructor rejects a size that is not an integer >= 1 with one error naming the model and the size."""

import copy

import numpy as np
import pytest
import torch

from ssldyn.models import AveragingNet, ConvEncoder, DeepLinearNet, EnsembleLinear, MLPEncoder, TwoLayerNet
from ssldyn.models.encoders import ProjectionHead
from ssldyn.models.mlp import MLP
from ssldyn.models.rf_net import EnsembleRFNet


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: MLP(4, [8]), r"^MLP: out_dim must be an integer >= 1, got \[8\]$"),  # hidden passed as out_dim
        (lambda: MLP(4, 3, depth=0), r"^MLP: depth must be an integer >= 1, got 0$"),
        (lambda: MLP(4, 3, hidden=[8, -1, 3]), r"^MLP: hidden must be a list of integers >= 1, got \[8, -1, 3\]$"),
        (lambda: TwoLayerNet(4, 2.5, 2), r"^TwoLayerNet: h must be an integer >= 1, got 2\.5$"),
        (lambda: AveragingNet(4, 2, True), r"^AveragingNet: width must be an integer >= 1, got True$"),
        (lambda: EnsembleLinear(3, 2, 0), r"^EnsembleLinear: ensemble must be an integer >= 1, got 0$"),
        (
            lambda: ConvEncoder(1, widths=[]),
            r"^ConvEncoder: widths must be a list of integers >= 1 \(at least one\), got \[\]$",
        ),
        (lambda: ConvEncoder(1, widths=[8, 0]), r"^ConvEncoder: widths must be .*, got \[8, 0\]$"),
        (lambda: MLPEncoder(4, hidden=[8], out_dim=0), r"^MLPEncoder: out_dim must be an integer >= 1, got 0$"),
        (lambda: EnsembleRFNet(0, 4, 2), r"^EnsembleRFNet: K must be an integer >= 1, got 0$"),
        (
            lambda: ProjectionHead(0, hidden=4, out_dim=2),
            r"^ProjectionHead: in_dim must be an integer >= 1, got 0$",
        ),  # was ÷ 0
        (lambda: ProjectionHead(4, hidden=4, out_dim=-1), r"^ProjectionHead: out_dim must be an integer >= 1, got -1$"),
    ],
)
def test_a_bad_size_is_one_error_naming_the_model_and_the_size(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_integer_sizes_of_any_integral_type_build_the_same_model():
    a = MLP(np.int64(4), 3, hidden=(8,), depth=2, seeds=[0])
    b = MLP(4, 3, hidden=[8], depth=2, seeds=[0])
    x = torch.randn(5, 4)
    assert torch.equal(a(x), b(x))


@pytest.mark.parametrize(
    "model",
    [
        lambda: MLP(4, 3, hidden=8, depth=2, ensemble=2),
        lambda: AveragingNet(4, 2, 10, ensemble=2),
        lambda: EnsembleLinear(4, 3, 2),
    ],
)
def test_a_wrong_input_shape_is_one_error_naming_the_shapes_allowed(model):
    m = model()
    for bad in (torch.randn(5, 6), torch.randn(3, 5, 4)):  # wrong features; three members for two
        with pytest.raises(ValueError, match=r"^EnsembleLinear: input must be \(B, in=4\) or \(E=2, B, in=4\), got"):
            m(bad)
    x = torch.randn(5, 4)
    assert torch.equal(m(x), m(x.expand(2, 5, 4)))


@pytest.mark.parametrize(
    "build, match",
    [  # the init scales: NaN / inf used to give NaN / inf weights silently, a negative std torch's RuntimeError
        (
            lambda v: MLP(4, 3, hidden=8, depth=2, init="normal", gain=v),
            r"^MLP: gain must be a finite number >= 0, got ",
        ),
        (lambda v: AveragingNet(4, 2, 5, init_std=v), r"^AveragingNet: init_std must be a finite number >= 0, got "),
        (lambda v: EnsembleLinear(4, 3, init="normal", std=v), r"^EnsembleLinear: std must be a finite number >= 0"),
        # the Frobenius bounds of Prop. 2: a ball of radius <= 0 or inf is no constraint of the paper's
        (
            lambda v: TwoLayerNet(4, 6, 2, regime="frobenius", frobenius=(1.0, v)),
            r"^TwoLayerNet: frobenius c2 must be a finite",
        ),
        (lambda v: DeepLinearNet(4, [6], 2, "frobenius", frobenius=v), r"^DeepLinearNet: frobenius must be a finite"),
    ],
)
@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_a_bad_init_scale_or_bound_is_one_error(build, match, value):
    with pytest.raises(ValueError, match=match):
        build(value)


def test_zero_init_scales_still_build_a_zero_network():
    net = MLP(4, 3, hidden=8, depth=2, init="normal", gain=0.0, bias=False, seeds=[0])
    assert bool((net(torch.randn(5, 4)) == 0).all())
    with pytest.raises(ValueError, match=r"^TwoLayerNet: frobenius must be the bounds \(c1, c2\)"):
        TwoLayerNet(4, 6, 2, regime="frobenius", frobenius=1.0)


@pytest.mark.parametrize(
    "name, build",
    [
        ("TwoLayerNet", lambda dt: TwoLayerNet(4, 6, 2, "tanh", seeds=[0], dtype=dt)),
        ("TwoLayerNet", lambda dt: TwoLayerNet(4, 6, 2, "linear", seeds=[0], dtype=dt)),
        ("DeepLinearNet", lambda dt: DeepLinearNet(4, [6, 5], 2, "unconstrained", seeds=[0], dtype=dt)),
        ("EnsembleLinear", lambda dt: EnsembleLinear(4, 3, 2, bias=True, seeds=[0, 1], dtype=dt)),
        ("MLP", lambda dt: MLP(4, 3, hidden=8, depth=3, ensemble=2, seeds=[0, 1], dtype=dt)),
        ("AveragingNet", lambda dt: AveragingNet(4, 2, 5, ensemble=2, bias=True, seeds=[0, 1], dtype=dt)),
    ],
)
def test_an_input_of_another_dtype_is_one_error_naming_the_model_and_both_dtypes(name, build):
    # the data loaders (half_moons, make_views, ...) default to float64, the models to float32: this used to
    # fail inside torch with three different messages that named neither the model nor the fix
    m32 = build(torch.float32)
    m64 = copy.deepcopy(m32).to(torch.float64)  # the same weights in float64
    x = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with pytest.raises(
        ValueError,
        match=rf"^{name}: input dtype torch\.float64 differs from the parameters' dtype torch\.float32; "
        r"cast the input \(x\.to\(torch\.float32\)\) or build the model with dtype=torch\.float64$",
    ):
        m32(x)
    with pytest.raises(ValueError, match=rf"^{name}: input dtype torch\.float32 differs .* dtype torch\.float64;"):
        m64(x.float())
    with pytest.raises(ValueError, match=rf"^{name}: input dtype torch\.int64 differs .*; cast the input \(x\.to\("):
        m32(torch.ones(5, 4, dtype=torch.long))
    # either fix the message names works: the same weights in float64 give the float32 map up to its rounding
    torch.testing.assert_close(m32(x.float()).double(), m64(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "name, build, shape",
    [
        ("ConvEncoder", lambda: ConvEncoder(1, widths=[4, 6], ensemble=2, seeds=[0, 1]), (5, 1, 8, 8)),
        ("MLPEncoder", lambda: MLPEncoder(64, hidden=[8], out_dim=4, ensemble=2, seeds=[0, 1]), (5, 1, 8, 8)),
        ("EnsembleRFNet.forward", lambda: EnsembleRFNet(2, 3, 4, out_dim=5, ensemble=2, seeds=[0, 1]), (5, 2, 3)),
    ],
)
def test_the_encoders_and_the_rf_net_name_an_input_of_another_dtype(name, build, shape):
    m32 = build()
    m64 = copy.deepcopy(m32).to(torch.float64)  # the same weights in float64
    x = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=rf"^{name}: input dtype torch\.float64 differs from the parameters' dtype "
                       r"torch\.float32; cast the input"):  # fmt: skip
        m32(x)
    with pytest.raises(ValueError, match=rf"^{name}: input dtype torch\.float32 differs .* dtype torch\.float64;"):
        m64(x.float())
    torch.testing.assert_close(m32(x.float()).double(), m64(x), atol=1e-4, rtol=1e-4)  # the fix works


def test_the_rf_net_pair_paths_check_their_inputs_dtypes():
    net = EnsembleRFNet(2, 3, 4, out_dim=5, ensemble=2, seeds=[0, 1])
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 2, 6, 2, 3, dtype=torch.float64, generator=g)
    with pytest.raises(ValueError, match=r"^EnsembleRFNet\.forward_pair: input dtype torch\.float64 differs"):
        net.forward_pair(x)
    tokens = torch.randint(0, 7, (2, 2, 6, 2), generator=g)
    emb = torch.randn(2, 7, 3, dtype=torch.float64, generator=g)
    with pytest.raises(ValueError, match=r"^EnsembleRFNet\.forward_pair \(embedding\): input dtype torch\.float64"):
        net.forward_pair(tokens=tokens, embedding=emb)
    with pytest.raises(ValueError, match=r"^forward_pair: tokens are indices \(int32 or int64\), got torch\.float32"):
        net.forward_pair(tokens=tokens.float(), embedding=emb.float())
    # the token path equals the dense path on the gathered inputs (x_k = u_{tokens[k]})
    dense = torch.stack([emb.float()[e][tokens[e]] for e in range(2)])  # (E, 2, N, K, d_in)
    torch.testing.assert_close(net.forward_pair(tokens=tokens, embedding=emb.float()), net.forward_pair(dense))


def test_mixed_precision_autocast_still_runs_the_ensemble_layers():
    # under torch.autocast the hidden activations are bfloat16 while the weights stay float32: no dtype error
    net = MLP(4, 3, hidden=8, depth=3, seeds=[0])
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = net(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), net(x), atol=0.05, rtol=0.05)
