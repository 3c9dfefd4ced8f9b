"""One seeding rule for every ensemble model (ssldyn.models.seeding).

``seeds=[s_e]``: member e equals the one-member model built with ``seeds=[s_e]``; ``generator=g``:
members are drawn from g one after another, so member e equals the one-member model built from g
in the state it has after e members — i.e. building E one-member models in a row from one
generator gives the ensemble; members always differ unless the same seed is given twice.
"""

import math

import pytest
import torch

from ssldyn.models import MLP, AveragingNet, DeepLinearNet, EnsembleLinear, TwoLayerNet, build_simclr_net
from ssldyn.models.seeding import draw_members, member_generators

D = torch.float64

BUILDERS = {
    "EnsembleLinear": lambda E, **kw: EnsembleLinear(3, 4, E, bias=True, dtype=D, **kw),
    "MLP": lambda E, **kw: MLP(3, 2, hidden=5, depth=3, ensemble=E, dtype=D, **kw),
    "AveragingNet": lambda E, **kw: AveragingNet(3, 2, 4, ensemble=E, bias=True, dtype=D, **kw),
    "TwoLayerNet": lambda E, **kw: TwoLayerNet(3, 6, 2, "tanh", "unconstrained", ensemble=E, dtype=D, **kw),
    "TwoLayerNet-orth": lambda E, **kw: TwoLayerNet(3, 6, 2, "linear", "orthogonal", ensemble=E, dtype=D, **kw),
    "DeepLinearNet": lambda E, **kw: DeepLinearNet(3, [5, 5], 2, ensemble=E, dtype=D, **kw),
    "SimCLRNet-conv": lambda E, **kw: build_simclr_net(
        "conv", (1, 8, 8), ensemble=E, widths=(3, 4), proj_hidden=5, proj_dim=3, **kw
    ),
    "SimCLRNet-mlp": lambda E, **kw: build_simclr_net(
        "mlp", (1, 8, 8), ensemble=E, hidden=(6,), feature_dim=4, proj_hidden=5, proj_dim=3, **kw
    ),
}


def members(model, E):
    """Per member, the drawn parameters (BatchNorm's deterministic ones left out)."""
    ps = [p.detach() for name, p in model.named_parameters() if "bn" not in name]
    assert all(p.shape[0] == E for p in ps)
    return [[p[e] for p in ps] for e in range(E)]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("name", list(BUILDERS))
def test_members_differ_and_follow_the_generator_sequence(name):
    build = BUILDERS[name]
    E = 3
    ens = build(E, generator=torch.Generator().manual_seed(5))
    ms = members(ens, E)
    assert not same(ms[0], ms[1]) and not same(ms[1], ms[2])  # members always differ
    g = torch.Generator().manual_seed(5)
    for e in range(E):  # one-member models built in a row from one generator = the ensemble's members
        single = build(1, generator=g)
        assert same(members(single, 1)[0], ms[e]), f"member {e}"
    # without any generator: members still differ (torch's default generator, drawn in sequence)
    torch.manual_seed(0)
    dflt = members(build(E), E)
    assert not same(dflt[0], dflt[1])


@pytest.mark.parametrize("name", list(BUILDERS))
def test_seeds_make_member_e_the_single_model_with_that_seed(name):
    build = BUILDERS[name]
    ens = build(3, seeds=[11, 4, 11])
    ms = members(ens, 3)
    for e, s in enumerate([11, 4, 11]):
        assert same(members(build(1, seeds=[s]), 1)[0], ms[e])
    assert same(ms[0], ms[2]) and not same(ms[0], ms[1])  # equal members only when asked (the same seed twice)


class _Recorder:
    """A member drawn as one uniform number per call: records ``(e, draw)`` in drawing order."""

    def __init__(self):
        self.calls = []

    def init_member(self, e, g):
        self.calls.append((e, float(torch.rand((), generator=g, dtype=D))))


def test_draw_members_is_the_rule_written_out():
    rec = _Recorder()
    draw_members(rec, 3, seeds=[4, 9, 5])  # member e from torch.Generator().manual_seed(seeds[e])
    want = [float(torch.rand((), generator=torch.Generator().manual_seed(s), dtype=D)) for s in (4, 9, 5)]
    assert rec.calls == list(zip(range(3), want))
    rec = _Recorder()
    draw_members(rec, 3, generator=torch.Generator().manual_seed(2))  # members in sequence from one generator
    assert rec.calls == list(zip(range(3), torch.rand(3, generator=torch.Generator().manual_seed(2), dtype=D).tolist()))
    rec = _Recorder()
    with pytest.raises(ValueError, match="one seed per member"):
        draw_members(rec, 3, seeds=[1, 2])
    assert rec.calls == []  # checked before anything is drawn


def test_members_are_the_draws_written_out():
    """Member e of seeds=[..., s, ...]: nn.Linear-style draws from torch.Generator().manual_seed(s), in order."""

    def uniform(g, bound, *shape):
        return torch.empty(*shape, dtype=D).uniform_(-bound, bound, generator=g)

    mlp = MLP(3, 2, hidden=5, depth=3, ensemble=2, seeds=[6, 2], dtype=D)  # layers 3 -> 5 -> 5 -> 2
    g = torch.Generator().manual_seed(2)
    want = []
    for a, b in [(3, 5), (5, 5), (5, 2)]:  # layer by layer: its weight, then its bias, U(±1/√fan_in)
        want += [uniform(g, 1 / math.sqrt(a), b, a), uniform(g, 1 / math.sqrt(a), b)]
    assert same(members(mlp, 2)[1], want)
    net = AveragingNet(3, 2, 4, ensemble=2, bias=True, init_std=0.5, seeds=[6, 2], dtype=D)  # B (8, 3), c (8,)
    g = torch.Generator().manual_seed(2)
    B = torch.empty(8, 3, dtype=D).normal_(0.0, 0.5, generator=g)
    uniform(g, 1 / math.sqrt(3), 8)  # the unused nn.Linear-style bias draw
    c = torch.empty(8, dtype=D).normal_(0.0, 0.5, generator=g)
    assert same(members(net, 2)[1], [B, c])


@pytest.mark.parametrize("name", ["EnsembleLinear", "MLP", "AveragingNet", "SimCLRNet-conv", "SimCLRNet-mlp"])
def test_init_member_redraws_member_e_as_the_constructor_did(name):
    ens = BUILDERS[name](2, seeds=[3, 8])
    before = [[p.clone() for p in m] for m in members(ens, 2)]
    with torch.no_grad():
        for p in ens.parameters():
            p.zero_()
    ens.init_member(1, torch.Generator().manual_seed(8))  # member 1 alone, from its seed
    after = members(ens, 2)
    assert same(after[1], before[1])
    assert all(float(p.abs().max()) == 0.0 for p in after[0])  # member 0 untouched


def test_seeding_arguments_are_checked():
    with pytest.raises(ValueError, match="one seed per member"):
        member_generators(3, seeds=[1, 2])
    with pytest.raises(ValueError, match="one int per member"):
        member_generators(3, seeds=7)  # an int would be copied to every member: identical members
    with pytest.raises(ValueError, match="not both"):
        member_generators(2, seeds=[1, 2], generator=torch.Generator())
    with pytest.raises(ValueError, match="one int per member"):
        build_simclr_net("mlp", (1, 4, 4), ensemble=2, seeds=0)
    with pytest.raises(TypeError):  # generator, dtype, device are keyword-only
        EnsembleLinear(3, 4, 2, False, "torch", 1.0, torch.Generator())


def test_build_simclr_net_dtype_and_device():
    net = build_simclr_net(
        "mlp", (1, 4, 4), ensemble=2, seeds=[0, 1], hidden=(3,), feature_dim=2, dtype=D, device="meta"
    )
    assert {p.dtype for p in net.parameters()} == {D} and {p.device.type for p in net.parameters()} == {"meta"}
