"""Receptive-field network: hand-derived backward vs autograd, BN variants vs formulas, init, seeding."""

import math

import pytest
import torch

from ssldyn.data.tokens import TokenGenerator, TokenSpec
from ssldyn.models.rf_net import EnsembleRFNet, token_path
from ssldyn.objectives import info_nce, quadratic_contrastive_loss

D = torch.float64


def _gens(seeds):
    return [torch.Generator().manual_seed(int(s)) for s in seeds]


def _loss(z):
    return info_nce(z[:, 0], z[:, 1], 0.1, negatives="view1")


def _grads(net, z_fn, loss):
    """``loss(z).sum()`` backpropagated from zero gradients -> (losses, dW, dVT)."""
    net.zero_grad(set_to_none=True)
    losses = loss(z_fn())
    losses.sum().backward()
    return losses.detach(), net.W.grad.clone(), net.VT.grad.clone()


@pytest.mark.parametrize("bn_stats", ["view", "joint"])
@pytest.mark.parametrize("path", ["table", "samples"])
def test_fast_path_matches_autograd_for_mixed_members(path, bn_stats):
    """Token path (both forms) = dense path = autograd through ``forward``: on each view alone
    (``bn_stats="view"``), or on the 2N samples of both views at once (``"joint"``, App. D eq. 164)."""
    spec = TokenSpec(K=4, n_tokens=6, P=2, G=5, L=2, zeta=3.0)
    gen = TokenGenerator(spec, 1)
    tok = gen.sample(1, 16)[0]  # (2, N, K)
    acts = ["relu", "relu", "linear", "quadratic", "leaky_relu", "sigmoid", "linear", "relu"]
    bns = ["off", "standard", "mean_only", "var_only", "none", "standard", "mean_only", "var_only"]
    E = len(acts)
    net = EnsembleRFNet(
        4,
        6,
        [3, 2, 3, 1, 3, 2, 3, 3],
        out_dim=5,
        ensemble=E,
        activation=acts,
        bn=bns,
        bn_stats=bn_stats,
        token_path=path,
        generator=_gens(range(E)),
        dtype=D,
    )
    U = gen.embedding.to(D).expand(E, -1, -1)
    loss_tok, gW, gV = _grads(net, lambda: net.forward_pair(tokens=tok.expand(E, -1, -1, -1), embedding=U), _loss)
    x = gen.embed(tok).to(D)  # (2, N, K, d)
    _, gW_dense, gV_dense = _grads(net, lambda: net.forward_pair(x.unsqueeze(0)), _loss)  # dense path
    torch.testing.assert_close(gW_dense, gW, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(gV_dense, gV, rtol=1e-10, atol=1e-10)
    per_view, _, _ = _grads(net, lambda: torch.stack([net(x[0]), net(x[1])], 1), _loss)  # autograd, per view
    joint, _, _ = _grads(net, lambda: net(x.flatten(0, 1)).unflatten(1, (2, -1)), _loss)  # autograd, all 2N
    assert (per_view - joint)[net.bn_on].abs().min() > 1e-4  # the two statistics differ on every BN member
    reference = {
        "view": lambda: torch.stack([net(x[0]), net(x[1])], 1),
        "joint": lambda: net(x.flatten(0, 1)).unflatten(1, (2, -1)),
    }
    ref, gW_ref, gV_ref = _grads(net, reference[bn_stats], _loss)
    torch.testing.assert_close(loss_tok, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gW, gW_ref, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(gV, gV_ref, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize(
    "mode,a,b", [("off", None, None), ("standard", 1, 1), ("mean_only", 1, 0), ("var_only", 0, 1), ("none", 0, 0)]
)
def test_bn_variant_gradients_match_hand_derivation(mode, a, b):
    # K = M = out = d_in = 1, linear activation: f1_n = w x_n, z_n = v f^bn_n, loss = Σ c_n z_n.
    torch.manual_seed(1)
    N, eps = 12, 1e-5
    x = torch.randn(N, dtype=D) + 0.5
    c = torch.randn(N, dtype=D)
    net = EnsembleRFNet(
        1, 1, 1, out_dim=1, ensemble=1, activation="linear", bn=mode, bn_eps=eps, generator=_gens([3]), dtype=D
    )
    w, v = net.W.detach().item(), net.V.detach().item()
    z = net(x.view(N, 1, 1))[0, :, 0]  # (N,)
    (c * z).sum().backward()
    f1 = w * x
    df_bn = c * v
    if mode == "off":
        df1 = df_bn
    else:
        mu, var = f1.mean(), f1.var(unbiased=False)
        s = 1 / math.sqrt(var + eps)
        f_bn = (f1 - mu) * s
        # written out: d/df1_n of Σ_j df_bn_j (f1_j − μ)s with μ, σ² (not) differentiated
        df1 = s * (df_bn - a * df_bn.mean() - b * f_bn * (df_bn * f_bn).mean())
    torch.testing.assert_close(net.W.grad.view(()), (df1 * x).sum(), rtol=1e-10, atol=1e-12)

    # the fast path (both views; second view = same batch) gives twice the per-view gradient
    def lin(zz):
        return (c * zz[:, 0, :, 0]).sum(-1) + (c * zz[:, 1, :, 0]).sum(-1)

    _, gW, _ = _grads(net, lambda: net.forward_pair(torch.stack([x, x]).view(1, 2, N, 1, 1)), lin)
    torch.testing.assert_close(gW.view(()), 2 * (df1 * x).sum(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("path", ["table", "samples"])
def test_quadratic_loss_gradients_through_fast_path(path):
    gen = TokenGenerator(TokenSpec(K=3, n_tokens=5, P=2, G=4, L=2), 0)
    tok = gen.sample(1, 10)[0]
    net = EnsembleRFNet(
        3,
        5,
        4,
        out_dim=3,
        ensemble=2,
        activation=["relu", "leaky_relu"],
        bn="standard",
        token_path=path,
        generator=_gens([0, 1]),
        dtype=D,
    )

    def q(z):
        return quadratic_contrastive_loss(z[:, 0], z[:, 1], 0.1)

    U = gen.embedding.to(D).expand(2, -1, -1)
    _, gW, gV = _grads(net, lambda: net.forward_pair(tokens=tok.expand(2, -1, -1, -1), embedding=U), q)
    x = gen.embed(tok).to(D)
    _, gW_ref, gV_ref = _grads(net, lambda: torch.stack([net(x[0]), net(x[1])], 1), q)
    torch.testing.assert_close(gW, gW_ref, rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(gV, gV_ref, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("inputs", ["dense", "tokens"])
def test_gradients_accumulate_like_autograd(inputs):
    """Two backward passes without zeroing add up (the old hand-written path overwrote ``.grad``)."""
    gen = TokenGenerator(TokenSpec(K=3, n_tokens=5, P=2, G=4, L=2), 2)
    tok1, tok2 = gen.sample(2, 8)  # two batches (2, N, K)
    net = EnsembleRFNet(3, 5, 3, out_dim=4, ensemble=2, bn="mean_only", generator=_gens([5, 6]), dtype=D)
    U = gen.embedding.to(D).expand(2, -1, -1)

    def z_of(tok):
        if inputs == "tokens":
            return net.forward_pair(tokens=tok.expand(2, -1, -1, -1), embedding=U)
        return net.forward_pair(gen.embed(tok).to(D).unsqueeze(0))

    _, gW1, gV1 = _grads(net, lambda: z_of(tok1), _loss)
    _, gW2, gV2 = _grads(net, lambda: z_of(tok2), _loss)
    net.zero_grad(set_to_none=True)
    _loss(z_of(tok1)).sum().backward()
    _loss(z_of(tok2)).sum().backward()  # accumulates
    torch.testing.assert_close(net.W.grad, gW1 + gW2, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(net.VT.grad, gV1 + gV2, rtol=1e-12, atol=1e-14)
    # a scaled loss scales the gradient (the upstream gradient is used, not assumed to be 1)
    _, gW3, _ = _grads(net, lambda: z_of(tok1), lambda z: 2.5 * _loss(z))
    torch.testing.assert_close(gW3, 2.5 * gW1, rtol=1e-12, atol=1e-14)


def test_any_optimizer_trains_through_the_fast_path():
    gen = TokenGenerator(TokenSpec(K=3, n_tokens=5, P=2, G=4, L=2), 3)
    net = EnsembleRFNet(3, 5, 3, out_dim=4, ensemble=2, bn="mean_only", generator=_gens([1, 2]), dtype=D)
    ref = EnsembleRFNet(3, 5, 3, out_dim=4, ensemble=2, bn="mean_only", generator=_gens([1, 2]), dtype=D)
    # (torch's SGD with momentum and weight decay; Adam would amplify round-off of near-zero gradients)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-3)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-3)
    U = gen.embedding.to(D).expand(2, -1, -1)
    W0 = net.W.detach().clone()
    for tok in gen.sample(4, 8):
        x = gen.embed(tok).to(D)  # (2, N, K, d)
        for o, z in (
            (opt, net.forward_pair(tokens=tok.expand(2, -1, -1, -1), embedding=U)),
            (ropt, torch.stack([ref(x[0]), ref(x[1])], 1)),
        ):
            o.zero_grad()
            _loss(z).sum().backward()
            o.step()
    assert (net.W.detach() - W0).abs().max() > 1e-3  # it trained
    torch.testing.assert_close(net.W, ref.W, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(net.VT, ref.VT, rtol=1e-9, atol=1e-12)


def test_members_equal_lone_networks_and_padding_is_inert():
    acts, Ms, seeds = ["relu", "linear", "quadratic"], [2, 5, 3], [11, 12, 13]
    ens = EnsembleRFNet(
        3, 4, Ms, out_dim=6, ensemble=3, activation=acts, bn="mean_only", generator=_gens(seeds), dtype=D
    )
    x = torch.randn(9, 3, 4, dtype=D)
    z = ens(x)
    for e in range(3):
        lone = EnsembleRFNet(
            3, 4, Ms[e], out_dim=6, ensemble=1, activation=acts[e], bn="mean_only", generator=_gens([seeds[e]]), dtype=D
        )
        torch.testing.assert_close(ens.W.detach()[e, :, : Ms[e]], lone.W.detach()[0])
        assert torch.all(ens.W.detach()[e, :, Ms[e] :] == 0)
        torch.testing.assert_close(z[e], lone(x)[0], rtol=1e-12, atol=1e-12)
    # init follows nn.Linear's bounds: |w| <= 1/sqrt(d_in), |v| <= 1/sqrt(K M)
    assert ens.W.abs().max() <= 1 / math.sqrt(4)
    assert ens.V.detach()[1].abs().max() <= 1 / math.sqrt(3 * 5)


def test_members_differ_unless_asked():
    """The old constructor copied one int seed to every member: ``EnsembleRFNet(3, 4, 2, ensemble=3)``
    built three identical networks."""
    net = EnsembleRFNet(3, 4, 2, ensemble=3)
    W = net.W.detach()
    assert not torch.equal(W[0], W[1]) and not torch.equal(W[1], W[2]) and not torch.equal(W[0], W[2])
    # one generator: members drawn one after the other, reproducibly
    a = EnsembleRFNet(3, 4, 2, ensemble=3, generator=torch.Generator().manual_seed(7))
    b = EnsembleRFNet(3, 4, 2, ensemble=3, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a.W, b.W) and torch.equal(a.VT, b.VT)
    assert not torch.equal(a.W[0], a.W[1])
    # member 1 continues the stream where member 0 stopped
    g = torch.Generator().manual_seed(7)
    EnsembleRFNet(3, 4, 2, ensemble=1, generator=g)
    second = EnsembleRFNet(3, 4, 2, ensemble=1, generator=g)
    assert torch.equal(a.W[1], second.W[0])
    # identical members only when asked: generators seeded alike
    same = EnsembleRFNet(3, 4, 2, ensemble=2, generator=_gens([4, 4]))
    assert torch.equal(same.W[0], same.W[1])
    # every dtype / device starts from the same numbers (drawn in float64)
    f32 = EnsembleRFNet(3, 4, 2, ensemble=2, generator=_gens([4, 5]), dtype=torch.float32)
    f64 = EnsembleRFNet(3, 4, 2, ensemble=2, generator=_gens([4, 5]), dtype=D)
    torch.testing.assert_close(f32.W.detach(), f64.W.detach().float(), rtol=0, atol=0)
    meta = EnsembleRFNet(3, 4, 2, ensemble=2, device="meta")
    assert meta.W.device.type == "meta" and meta.filter_mask.device.type == "meta"


def test_automatic_token_path_follows_the_cost_model():
    # the cost model written out (memory passes + matmul FLOPs / 8 per member-step)
    def cost(path, K, M, N, T, out):
        if path == "table":
            return K * out * (2 * N + 2 * T) + 3 * 2 * T * K * M * out / 8
        return 3 * 2 * N * K * M + 2 * 2 * N * K * M * out / 8

    for K, M, N, T, out in [(10, 1, 128, 20, 50), (10, 3, 128, 20, 50), (10, 10, 128, 20, 50), (10, 100, 128, 20, 50),
                            (10, 10, 16, 200, 50), (4, 2, 8, 6, 5)]:  # fmt: skip
        want = "table" if cost("table", K, M, N, T, out) <= cost("samples", K, M, N, T, out) else "samples"
        assert token_path(K, M, N, T, out) == want
    # Sec. 5 shapes: samples for M = 1, tables from M = 10 (the measured crossover is M ≈ 3)
    assert token_path(10, 1, 128, 20, 50) == "samples"
    assert token_path(10, 10, 128, 20, 50) == "table"
    # "auto" gives exactly what the chosen path gives
    gen = TokenGenerator(TokenSpec(K=10, n_tokens=20, P=1, G=40, L=5), 0)
    tok = gen.sample(1, 128)[0].expand(2, -1, -1, -1)
    U = gen.embedding.expand(2, -1, -1)
    for M, chosen in ((1, "samples"), (10, "table")):
        z = {}
        for path in ("auto", chosen, {"samples": "table", "table": "samples"}[chosen]):
            net = EnsembleRFNet(10, 20, M, ensemble=2, bn="mean_only", token_path=path, generator=_gens([0, 1]))
            z[path] = net.forward_pair(tokens=tok, embedding=U).detach()
        assert torch.equal(z["auto"], z[chosen])
        torch.testing.assert_close(z["table"], z["samples"], rtol=1e-4, atol=1e-5)  # same function, other float order


def test_activation_is_a_built_in_one_by_name_or_object():
    """The hand-derived backward knows the built-in activations only: a custom one (``monomial(3)``) is refused when
    the network is built (it used to fail in forward), with one error naming the allowed ones; the object
    ``get_activation`` returns is accepted alone or per member, as its name is."""
    from ssldyn.models.activations import get_activation, monomial

    x = torch.randn(2, 5, 3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # (E, B, K, d_in)
    by_name = EnsembleRFNet(3, 4, 2, out_dim=6, ensemble=2, activation="tanh", generator=_gens([1, 2]), dtype=D)
    for act in (get_activation("tanh"), [get_activation("tanh"), "tanh"]):
        net = EnsembleRFNet(3, 4, 2, out_dim=6, ensemble=2, activation=act, generator=_gens([1, 2]), dtype=D)
        assert net.acts == ["tanh", "tanh"] and torch.equal(net(x), by_name(x))
    allowed = r"allowed values are 'linear', 'relu', 'leaky_relu', 'quadratic', 'sigmoid', 'tanh'$"
    for bad in ([monomial(3)], monomial(3), ["relu", monomial(3)]):
        with pytest.raises(ValueError, match=r"^activation 'monomial3' \(a custom Activation\): .*" + allowed):
            EnsembleRFNet(3, 4, 2, out_dim=6, ensemble=len(bad) if isinstance(bad, list) else 1, activation=bad)
    with pytest.raises(ValueError, match=r"^activation 3: .*" + allowed):
        EnsembleRFNet(3, 4, 2, activation=3)  # type: ignore[arg-type]


def test_bad_inputs():
    with pytest.raises(ValueError, match="bn"):
        EnsembleRFNet(2, 3, 2, bn="weird")
    with pytest.raises(ValueError, match="activation"):
        EnsembleRFNet(2, 3, 2, activation="swish")
    with pytest.raises(ValueError, match="token_path"):
        EnsembleRFNet(2, 3, 2, token_path="fast")
    with pytest.raises(ValueError, match="generator"):
        EnsembleRFNet(2, 3, 2, ensemble=2, generator=_gens([1]))
    net = EnsembleRFNet(2, 3, 2)
    with pytest.raises(ValueError, match="x must be"):
        net(torch.randn(4, 3, 3))
    with pytest.raises(ValueError, match="x must be"):
        net.forward_pair(torch.randn(1, 2, 4, 3, 3))
    with pytest.raises(ValueError, match="inputs"):
        net.forward_pair(torch.randn(1, 2, 4, 2, 3, requires_grad=True))
    with pytest.raises(ValueError, match="embedding"):
        net.forward_pair(tokens=torch.zeros(1, 2, 4, 2, dtype=torch.long))


def test_seeds_give_each_member_the_lone_network_of_its_seed_and_hyperparameters_are_keyword_only():
    ens = EnsembleRFNet(3, 5, [2, 4], out_dim=6, ensemble=2, seeds=[11, 12], dtype=D)
    for e, (s, M) in enumerate([(11, 2), (12, 4)]):
        lone = EnsembleRFNet(3, 5, M, out_dim=6, seeds=[s], dtype=D)
        assert torch.equal(ens.W[e, :, :M], lone.W[0]) and torch.equal(ens.V[e, :, : 3 * 4].reshape(6, 3, 4)[:, :, :M],
                                                                       lone.V[0].reshape(6, 3, M))  # fmt: skip
    same = EnsembleRFNet(3, 5, [2, 4], out_dim=6, ensemble=2, generator=_gens([11, 12]), dtype=D)
    assert torch.equal(same.W, ens.W) and torch.equal(same.VT, ens.VT)
    with pytest.raises(ValueError, match="one seed per member"):
        EnsembleRFNet(3, 5, 2, ensemble=2, seeds=[1])
    with pytest.raises(ValueError, match="not both"):
        EnsembleRFNet(3, 5, 2, ensemble=1, seeds=[1], generator=torch.Generator())
    with pytest.raises(TypeError):
        EnsembleRFNet(3, 5, 2, 6)  # out_dim is keyword-only
