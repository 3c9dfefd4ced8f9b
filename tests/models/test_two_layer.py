import numpy as np
import pytest
import torch

from ssldyn.dynamics.manifold import orthogonality_error
from ssldyn.models.two_layer import DeepLinearNet, TwoLayerNet
from ssldyn.objectives import simple_contrastive


def test_forward_is_w2t_phi_w1x_per_member():
    net = TwoLayerNet(3, 7, 2, activation="tanh", regime="unconstrained", ensemble=2, dtype=torch.float64)
    x = torch.randn(5, 3, dtype=torch.float64)
    out = net(x)
    for e in range(2):
        W1, W2 = net.W1[e].detach().numpy(), net.W2[e].detach().numpy()
        ref = np.stack([W2.T @ np.tanh(W1 @ xi) for xi in x.numpy()])
        np.testing.assert_allclose(out[e].detach().numpy(), ref, atol=1e-12)
        np.testing.assert_allclose(net.forward_linear(x)[e].detach().numpy(), x.numpy() @ (W2.T @ W1).T, atol=1e-12)


def test_orthogonal_init_and_scaled_factor():
    net = TwoLayerNet(4, 30, 3, regime="orthogonal", ensemble=3, dtype=torch.float64)
    assert orthogonality_error(net.W1).max() < 1e-12 and orthogonality_error(net.W2).max() < 1e-12
    sc = TwoLayerNet(4, 30, 3, regime="scaled", init="normal", ensemble=2, dtype=torch.float64)
    ref = [
        np.linalg.norm(sc.W1[e].detach().numpy(), 2) ** 2 * np.linalg.norm(sc.W2[e].detach().numpy(), 2) ** 2
        for e in range(2)
    ]
    np.testing.assert_allclose(sc.loss_scale().detach().numpy(), ref, rtol=1e-10)
    with pytest.raises(ValueError, match="width"):
        TwoLayerNet(5, 4, 2, regime="orthogonal")


def test_frobenius_regime_keeps_norm_bounds():
    net = TwoLayerNet(3, 10, 2, regime="frobenius", frobenius=(0.5, 2.0), ensemble=2, seeds=[0, 1], dtype=torch.float64)
    with torch.no_grad():
        net.W1.mul_(10)
        net.W2.mul_(10)
        net.W2[1].mul_(1e-3)  # member 1's W2 now lies inside its ball ‖W2‖_F <= 2
    W1, W2 = net.W1.detach().numpy().copy(), net.W2.detach().numpy().copy()
    assert np.linalg.norm(W2[1]) < 2.0 < np.linalg.norm(W2[0]) and np.linalg.norm(W1[0]) > 0.5
    net.project_()
    # Euclidean projection onto {‖W‖_F <= c} (Prop. 2), per member: W·min(1, c/‖W‖_F), written out in numpy
    for e in range(2):
        for got, W, c in ((net.W1[e], W1[e], 0.5), (net.W2[e], W2[e], 2.0)):
            np.testing.assert_allclose(got.detach().numpy(), W * min(1.0, c / np.linalg.norm(W)), rtol=1e-13)
    np.testing.assert_array_equal(net.W2[1].detach().numpy(), W2[1])  # inside the ball: untouched


@pytest.mark.parametrize("act,regime", [("sigmoid", "orthogonal"), ("tanh", "unconstrained")])
def test_width_and_seed_ensemble_equals_separate_runs(act, regime):
    widths, seeds = [6, 12, 9], [3, 4, 5]
    x = torch.randn(8, 3, dtype=torch.float64)
    xp, xn = x + 0.1 * torch.randn_like(x), x.flip(0)
    ens = TwoLayerNet(3, 12, 2, act, regime, ensemble=3, widths=widths, seeds=seeds, dtype=torch.float64)
    singles = [TwoLayerNet(3, w, 2, act, regime, seeds=[s], dtype=torch.float64) for w, s in zip(widths, seeds)]

    def step(net):
        net.zero_grad()
        simple_contrastive(net(x), net(xp), net(xn)).sum().backward()
        net.mask_grads_()
        with torch.no_grad():
            for W in net.weights():
                W -= 0.05 * W.grad
        net.project_()

    for _ in range(5):
        step(ens)
        for s in singles:
            step(s)
    out = ens(x)
    for e, s in enumerate(singles):
        np.testing.assert_allclose(out[e].detach().numpy(), s(x)[0].detach().numpy(), atol=1e-10)
        np.testing.assert_allclose(ens.W1[e, widths[e] :].detach().numpy(), 0.0)


def test_deep_linear_product_and_orthogonality():
    net = DeepLinearNet(3, [8, 8, 8], 2, regime="orthogonal", ensemble=2, dtype=torch.float64)
    A = net.end_to_end()
    for e in range(2):
        Ws = [W[e].detach().numpy() for W in net.layers]
        ref = Ws[3].T @ Ws[2] @ Ws[1] @ Ws[0]
        np.testing.assert_allclose(A[e].detach().numpy(), ref, atol=1e-12)
    # orthonormal columns of W3 W2 W1 (a product of Stiefel matrices)
    P = net.layers[2] @ net.layers[1] @ net.layers[0]
    assert orthogonality_error(P).max() < 1e-12
    x = torch.randn(4, 3, dtype=torch.float64)
    np.testing.assert_allclose(net(x)[1].detach().numpy(), x.numpy() @ A[1].detach().numpy().T, atol=1e-12)


def test_device_argument_builds_the_same_weights_there():
    from ssldyn.dynamics.manifold import random_stiefel

    kw = dict(ensemble=2, widths=[5, 8], seeds=[3, 4], dtype=torch.float64)
    a = TwoLayerNet(3, 8, 2, "tanh", "orthogonal", **kw)
    b = TwoLayerNet(3, 8, 2, "tanh", "orthogonal", device="cpu", **kw)
    assert torch.equal(a.W1, b.W1) and torch.equal(a.W2, b.W2) and torch.equal(a.mask, b.mask)
    m = TwoLayerNet(3, 8, 2, "tanh", "orthogonal", device="meta", **kw)
    assert {t.device.type for t in list(m.parameters()) + list(m.buffers())} == {"meta"}
    dl = DeepLinearNet(3, [6, 6], 2, device="meta")
    assert {p.device.type for p in dl.parameters()} == {"meta"}
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    random_stiefel(7, 3, 2, generator=g1, dtype=torch.float64)
    assert random_stiefel(7, 3, 2, generator=g2, dtype=torch.float64, device="meta").device.type == "meta"
    # drawn with the CPU generator whatever the device: both calls consumed the same stream
    assert torch.equal(torch.randn(1, generator=g1), torch.randn(1, generator=g2))


def test_normal_init_uses_the_fan_in_of_each_layer():
    """W1 ~ N(0, 1/d) (u = W2ᵀφ(W1x) sums d inputs), W2 ~ N(0, 1/h) (it sums h hidden units), not 1/z.

    The old init drew W2 from N(0, 1/z): the output variance then grew like h/z.
    """
    d, h, z = 3, 4000, 2
    net = TwoLayerNet(d, h, z, "tanh", "unconstrained", ensemble=2, seeds=[0, 1], dtype=torch.float64)
    v1, v2 = net.W1.detach().var().item(), net.W2.detach().var().item()
    # sample variances of 2·h·d and 2·h·z normal entries: relative standard error sqrt(2/N) < 2%
    assert abs(v1 * d - 1) < 0.06 and abs(v2 * h - 1) < 0.06, (v1 * d, v2 * h)
    # masked members use their own width: a width-100 member equals a single width-100 net
    ens = TwoLayerNet(d, 400, z, "tanh", "unconstrained", ensemble=2, widths=[100, 400], seeds=[5, 6])
    single = TwoLayerNet(d, 100, z, "tanh", "unconstrained", seeds=[5])
    assert torch.equal(ens.W2[0, :100], single.W2[0]) and torch.equal(ens.W1[0, :100], single.W1[0])
    # output variance of u = W2ᵀ tanh(W1 x) stays O(1) as h grows (it grew like h/z before)
    x = torch.randn(500, d, dtype=torch.float64)
    var = [TwoLayerNet(d, w, z, "tanh", ensemble=40, dtype=torch.float64)(x).pow(2).mean().item() for w in (100, 3000)]
    assert 0.7 < var[1] / var[0] < 1.4, var  # E[u²] over 40 members × 500 points: a few % MC error


def test_deep_linear_normal_init_fan_in():
    d, h, z = 4, 2000, 3
    net = DeepLinearNet(d, [h, h], z, regime="unconstrained", init="normal", dtype=torch.float64)
    v = [W.detach().var().item() for W in net.layers]
    assert abs(v[0] * d - 1) < 0.1 and abs(v[1] * h - 1) < 0.05 and abs(v[2] * h - 1) < 0.1, v


def test_two_layer_and_deep_linear_nets_name_a_wrong_input_shape():
    net = TwoLayerNet(4, 5, 2, ensemble=2)
    deep = DeepLinearNet(4, [5, 5], 2, ensemble=2)
    for m, name in ((net, "TwoLayerNet"), (deep, "DeepLinearNet")):
        for bad in (torch.randn(5, 6), torch.randn(3, 5, 4), torch.randn(2, 5, 6), torch.randn(4)):
            with pytest.raises(ValueError, match=rf"^{name}: input must be \(B, d=4\) or \(E=2, B, d=4\), got"):
                m(bad)
        x = torch.randn(5, 4)
        assert torch.equal(m(x), m(x.expand(2, 5, 4)))  # a shared batch is every member's batch


@pytest.mark.parametrize("cls, args", [(TwoLayerNet, (3, 5, 2)), (DeepLinearNet, (3, [5], 2))])
def test_unknown_init_and_regime_are_one_error_naming_the_class(cls, args):
    """``init`` and ``regime`` are checked when the net is built, with the class and the allowed values named."""
    name = cls.__name__
    with pytest.raises(ValueError, match=rf"^{name}: init 'xavier': allowed values are None, 'orthogonal', 'normal'$"):
        cls(*args, init="xavier")
    with pytest.raises(ValueError, match=rf"^{name}: regime 'free': allowed values are 'unconstrained', "):
        cls(*args, regime="free")
