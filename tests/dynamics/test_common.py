"""The shared pieces of ssldyn.dynamics.common: epoch batches (and their checkpoint state), eval mode."""

import numpy as np
import pytest
import torch
from torch import nn

from ssldyn.dynamics.common import EpochBatches, eval_mode, minibatches


def test_epoch_batches_are_slices_of_one_permutation_per_epoch_drawn_when_the_epoch_starts():
    g = torch.Generator().manual_seed(5)
    batches = EpochBatches(10, 3, generator=g)
    first = [next(batches) for _ in range(3)]  # one epoch: 3 batches of 3, the last sample dropped
    other = torch.rand(2, generator=g)  # another use of the generator between the epochs
    second = next(batches)
    ref = torch.Generator().manual_seed(5)  # written out: randperm, the other draw, randperm
    perm1 = torch.randperm(10, generator=ref)
    assert torch.equal(torch.rand(2, generator=ref), other)
    perm2 = torch.randperm(10, generator=ref)
    assert [b.tolist() for b in first] == [perm1[3 * i : 3 * i + 3].tolist() for i in range(3)]
    assert second.tolist() == perm2[:3].tolist()


def test_minibatches_are_epochs_of_seeded_permutations_written_out():
    got = list(minibatches(10, 3, 7, generator=torch.Generator().manual_seed(5)))
    ref = torch.Generator().manual_seed(5)
    perms = [torch.randperm(10, generator=ref) for _ in range(3)]  # epochs 1-3; 3 batches each, 1 sample dropped
    assert [b.tolist() for b in got] == [perms[t // 3][3 * (t % 3) : 3 * (t % 3) + 3].tolist() for t in range(7)]


def test_epoch_batches_resume_from_their_state_as_an_uninterrupted_run():
    whole = EpochBatches(7, 2, generator=torch.Generator().manual_seed(1))
    ref = [next(whole).tolist() for _ in range(8)]
    g = torch.Generator().manual_seed(1)
    part = EpochBatches(7, 2, generator=g)
    head = [next(part).tolist() for _ in range(4)]  # 3 batches of epoch 1, 1 of epoch 2
    state, gen_state = part.state_dict(), g.get_state()
    g2 = torch.Generator()
    g2.set_state(gen_state)
    resumed = EpochBatches(7, 2, generator=g2)
    resumed.load_state_dict(state)
    assert head + [next(resumed).tolist() for _ in range(4)] == ref


class _Recorder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(2)
        self.seen: list[bool] = []

    def forward(self, x):
        self.seen.append(self.training)
        return self.bn(x)


def test_eval_mode_sets_eval_in_the_block_and_restores_each_mode_also_after_an_error():
    a, b = _Recorder(), _Recorder()
    b.eval()
    with eval_mode(a, None, b):
        a(torch.randn(3, 2))
        assert not a.training and not a.bn.training and not b.training
    assert a.seen == [False] and a.training and a.bn.training and not b.training
    with pytest.raises(RuntimeError, match="inside"):
        with eval_mode(a):
            raise RuntimeError("inside")
    assert a.training and a.bn.training


def test_module_placement_helpers():
    """Inputs follow the model: floating inputs take its floating dtype, integer inputs keep theirs."""
    import torch

    from ssldyn.dynamics.common import module_device, module_dtype, to_module

    net = torch.nn.Linear(3, 2).double()
    assert module_device(net) == torch.device("cpu") and module_dtype(net) == torch.float64
    assert module_device(torch.nn.ReLU()) == torch.device("cpu") and module_dtype(torch.nn.ReLU()) is None
    x, idx = torch.randn(4, 3), torch.arange(4)
    assert to_module(x, module_device(net), module_dtype(net)).dtype == torch.float64
    assert to_module(idx, module_device(net), module_dtype(net)).dtype == torch.int64
    assert to_module(x, module_device(net), None).dtype == torch.float32


def test_a_per_sample_loss_is_one_error_not_a_silent_sum():
    # a loss of shape (n,) or (n, d) would be optimised as its sum and logged as n members
    from ssldyn.dynamics import function_space_flow, train_weight_space, vanilla_gradient_descent

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    x, z0 = torch.randn(12, 4), torch.randn(6, 2)
    with pytest.raises(ValueError, match=r"^loss_fn: expected a scalar tensor for embeddings \(12, 2\), got \(12,\)"):
        train_weight_space(net, x, lambda z: (z**2).sum(-1), steps=2, lr=0.1)
    with pytest.raises(ValueError, match=r"^loss_fn: expected a scalar tensor for embeddings \(12, 2\), got \(12, 2\)"):
        train_weight_space(net, x, lambda z: z, steps=2, lr=0.1)
    with pytest.raises(ValueError, match=r"^loss_fn: expected a scalar tensor for embeddings \(6, 2\), got \(6,\)"):
        function_space_flow(z0, lambda z: (z**2).sum(-1), torch.eye(6), steps=2, lr=0.1)
    with pytest.raises(ValueError, match=r"or one value per member \(3,\) for embeddings \(3, 6, 2\), got \(3, 6\)"):
        vanilla_gradient_descent(z0.expand(3, 6, 2), lambda z: (z**2).sum(-1), steps=2, lr=0.1)
    # the engine itself: any step whose loss has more than one axis
    from ssldyn.dynamics.engine import run

    with pytest.raises(ValueError, match=r"^step 0: the loss must be a scalar or one value per ensemble member"):
        run(torch.zeros(2), lambda s, t: (s, torch.zeros(3, 2)), steps=2)
    # what is allowed: a scalar, or one value per member; the same flow as summing by hand
    a = vanilla_gradient_descent(z0.expand(3, 6, 2), lambda z: (z**2).sum((-1, -2)), steps=2, lr=0.1).state
    b = vanilla_gradient_descent(z0.expand(3, 6, 2), lambda z: (z**2).sum(), steps=2, lr=0.1).state
    torch.testing.assert_close(a, b)


def test_per_member_of_a_one_member_observable_is_one_member():
    """The flows drop the member axis of a one-member ensemble (observable (n, d)); per_member iterated over its n rows
    and logged n "members" of one row each. Reference: the probe on the member's embeddings z = x Wᵀ, by hand."""
    from ssldyn.dynamics import per_member, train_weight_space
    from ssldyn.models.ensemble import EnsembleLinear

    x = torch.randn(10, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    spread = lambda z: float(z.std(0).mean())  # noqa: E731 - a probe of one member (n, d) -> float
    for E in (1, 2):
        net = EnsembleLinear(4, 3, E, seeds=list(range(E)), dtype=torch.float64)
        want = [spread(x @ W.T) for W in net.weight.detach().clone()]  # step 0: the initial weights
        res = train_weight_space(net, x, lambda z: -z.std(-2).mean(-1), steps=1, lr=0.1, every=None,
                                 probes={"spread": per_member(spread)}, output="raw")  # fmt: skip
        f = res.trajectory.to_frame()
        s = f[(f.probe == "spread") & (f.step == 0)]
        assert s.member.tolist() == list(range(E))
        assert s.value.tolist() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("shape", [(4, 2, 3, 3), (4, 5, 3)], ids=["feature-map", "sequence"])
def test_embed_refuses_outputs_whose_sample_axis_is_not_the_second_to_last(shape):
    """embed concatenated the batches along axis −2, the sample axis only of (n, d) and (E, n, d): a feature map was
    concatenated along H, a plain (n, T, d) along T, so the result depended on batch_size."""
    from ssldyn.dynamics import embed

    x = torch.randn(*shape)
    with pytest.raises(
        ValueError, match=r"embed: the model's output must be \(b, d\) or \(E, b, d\) for a batch of b=2"
    ):
        embed(nn.Identity(), x, batch_size=2)
    with pytest.raises(ValueError, match=r"got \(2,\)"):  # one number per sample: was an IndexError
        embed(nn.Flatten(0), torch.randn(4, 1), batch_size=2)
    x2 = torch.randn(5, 3)  # (n, d): batches of 2, 2, 1 are the one forward
    torch.testing.assert_close(embed(nn.Identity(), x2, batch_size=2), x2, rtol=0, atol=0)


@pytest.mark.parametrize("batch_size, match", [(2.5, r"batch_size must be an integer >= 1, got 2.5"),
                                               (0, r"batch_size must be an integer >= 1, got 0"),
                                               (11, r"batch_size=11: must be in \[1, n=10\]")])  # fmt: skip
def test_minibatches_take_an_integer_batch_size_in_1_to_n(batch_size, match):
    """A float batch size passed the range check and failed inside the slicing of the first batch (a TypeError)."""
    with pytest.raises(ValueError, match=rf"^minibatches: {match}"):
        next(minibatches(10, batch_size, 3))


# ---------------------------------------------------------------------------- from the mutation audit of the engine
@pytest.mark.parametrize(
    "every, match",
    [(0, r"^every must be >= 1 \(an interval of steps\), got 0"),
     ([0, True], r"^run: every: the steps True are not integers in 0\.\.steps=5"),
     ([0, 2.5], r"^run: every: the steps 2\.5 are not integers in 0\.\.steps=5")],
)  # fmt: skip
def test_a_schedule_that_is_no_interval_nor_integer_steps_is_one_error(every, match):
    """every=0 was a bare range() error; a bool or a fractional step would be logged at another step than asked."""
    from ssldyn.dynamics.engine import run

    with pytest.raises(ValueError, match=match):
        run(0, lambda s, t: (s + 1, torch.tensor(1.0)), steps=5, every=every)


def test_a_probe_returning_a_matrix_is_one_error_not_members():
    """A probe value (2, 2) would be stored as four members; only a float or one value per member (E,) is logged."""
    from ssldyn.dynamics.common import log_value
    from ssldyn.dynamics.trajectory import Trajectory

    for value in (torch.ones(2, 2), np.ones((2, 2))):
        with pytest.raises(ValueError, match=r"^probe 'm': expected a float or a per-member \(E,\)"):
            log_value(Trajectory(), 0, "m", value)


def test_embed_concatenates_an_ensembles_batches_along_the_sample_axis():
    """An ensemble's output (E, b, d): batches of 2, 2, 1 samples are one forward of all 5 (by hand: x and 2x)."""
    from ssldyn.dynamics import embed

    class TwoMembers(nn.Module):
        def forward(self, x):
            return torch.stack([x, 2 * x])  # (E=2, b, d)

    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(embed(TwoMembers(), x, batch_size=2), torch.stack([x, 2 * x]), rtol=0, atol=0)


def test_minibatches_take_a_batch_of_all_samples():
    """batch_size = n is allowed: every batch is a whole seeded permutation."""
    got = list(minibatches(4, 4, 2, generator=torch.Generator().manual_seed(3)))
    ref = torch.Generator().manual_seed(3)
    assert [b.tolist() for b in got] == [torch.randperm(4, generator=ref).tolist() for _ in range(2)]
