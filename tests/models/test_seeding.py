"""One seeding rule for every ensemble model (ssldyn.models.seeding).

``seeds=[s_e]``: member e equals the one-member model built with ``seeds=[s_e]``; ``generator=g``:
members are drawn from g one after another, so member e equals the one-member model built from g
in the state it has after e members — i.e. building E one-member models in a row from one
generator gives the ensemble; members always differ unless the same seed is given twice.
"""

import pytest
import torch

from ssldyn.models import MLP, AveragingNet, DeepLinearNet, EnsembleLinear, TwoLayerNet, build_simclr_net
from ssldyn.models.seeding import member_generators

D = torch.float64

BUILDERS = {
    "EnsembleLinear": lambda E, **kw: EnsembleLinear(3, 4, E, bias=True, dtype=D, **kw),
    "MLP": lambda E, **kw: MLP(3, 2, hidden=5, depth=3, ensemble=E, dtype=D, **kw),
    "AveragingNet": lambda E, **kw: AveragingNet(3, 2, 4, ensemble=E, bias=True, dtype=D, **kw),
    "TwoLayerNet": lambda E, **kw: TwoLayerNet(3, 6, 2, "tanh", "unconstrained", ensemble=E, dtype=D, **kw),
    "TwoLayerNet-orth": lambda E, **kw: TwoLayerNet(3, 6, 2, "linear", "orthogonal", ensemble=E, dtype=D, **kw),
    "DeepLinearNet": lambda E, **kw: DeepLinearNet(3, [5, 5], 2, ensemble=E, dtype=D, **kw),
    "SimCLRNet-conv": lambda E, **kw: build_simclr_net(
        "conv", (1, 8, 8), E, widths=(3, 4), proj_hidden=5, proj_dim=3, **kw
    ),
    "SimCLRNet-mlp": lambda E, **kw: build_simclr_net(
        "mlp", (1, 8, 8), E, hidden=(6,), feature_dim=4, proj_hidden=5, proj_dim=3, **kw
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


def test_seeding_arguments_are_checked():
    with pytest.raises(ValueError, match="one seed per member"):
        member_generators(3, seeds=[1, 2])
    with pytest.raises(ValueError, match="one int per member"):
        member_generators(3, seeds=7)  # an int would be copied to every member: identical members
    with pytest.raises(ValueError, match="not both"):
        member_generators(2, seeds=[1, 2], generator=torch.Generator())
    with pytest.raises(ValueError, match="one int per member"):
        build_simclr_net("mlp", (1, 4, 4), 2, seeds=0)
    with pytest.raises(TypeError):  # generator, dtype, device are keyword-only
        EnsembleLinear(3, 4, 2, False, "torch", 1.0, torch.Generator())


def test_build_simclr_net_dtype_and_device():
    net = build_simclr_net("mlp", (1, 4, 4), 2, seeds=[0, 1], hidden=(3,), feature_dim=2, dtype=D, device="meta")
    assert {p.dtype for p in net.parameters()} == {D} and {p.device.type for p in net.parameters()} == {"meta"}
