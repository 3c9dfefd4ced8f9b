"""``variational._flows_common``'s helpers: the record index at a flow time, hand-worked, and the uniformity of the
uniform optimum (Fig. 5 / 6's reference level) against the Wang–Isola uniformity written out in numpy on the
evenly spaced circle points and the Fibonacci lattice, and against the Bessel closed form of the continuous
uniform measure on S^{d−1}."""

import math

import numpy as np
import pytest
import torch
from scipy import special

from ssldyn.experiments.variational import _flows_common as fc


def test_index_at_time_hand_worked():
    times = np.array([0.0, 0.1, 0.2, 0.1 + 0.2, 1.0])  # 0.1 + 0.2 = 0.30000000000000004
    assert fc.index_at_time(times, 0.0) == 0
    assert fc.index_at_time(times, 0.05) == 0
    assert fc.index_at_time(times, 0.2) == 2  # a record exactly at t counts (≤), not the one before
    assert fc.index_at_time(times, 0.25) == 2
    assert fc.index_at_time(times, 0.3) == 3  # round-off: 0.30000000000000004 is "at" 0.3
    assert fc.index_at_time(times, 0.2 - 5e-10) == 2  # within the 1e-9 round-off
    assert fc.index_at_time(times, 0.2 - 1e-8) == 1  # beyond it
    assert fc.index_at_time(times, 0.99) == 3
    assert fc.index_at_time(times, 7.0) == 4  # past the end: the last record
    assert fc.index_at_time(np.array([0.0, 1.0, 1.0, 2.0]), 1.0) == 2  # repeated times: the last of them
    # before the first record there is none: an error, not −1 (which would index the last record)
    with pytest.raises(ValueError, match="before the first record"):
        fc.index_at_time(np.array([0.5, 1.0]), 0.1)
    with pytest.raises(ValueError, match="before the first record"):
        fc.index_at_time(np.array([]), 0.0)


def _uniformity(u: np.ndarray, t: float = 2.0) -> float:
    """Wang & Isola: log mean_{i≠j} exp(−t‖u_i − u_j‖²) of unit rows, written out."""
    n = len(u)
    sq = ((u[:, None, :] - u[None, :, :]) ** 2).sum(-1)
    off = ~np.eye(n, dtype=bool)
    return float(np.log(np.exp(-t * sq[off]).mean()))


def test_uniform_optimum_on_the_circle_hand_worked():
    # n = 2: one antipodal pair, ‖u_1 − u_2‖² = 4 → log e^{−8} = −8
    assert fc.uniform_optimum(2, 2) == pytest.approx(-8.0, abs=1e-12)
    # n = 4: from each point two neighbours at ‖·‖² = 2 and one opposite at 4 → log((2e^{−4} + e^{−8})/3)
    assert fc.uniform_optimum(4, 2) == pytest.approx(math.log((2 * math.exp(-4) + math.exp(-8)) / 3), abs=1e-12)
    for n in (3, 7, 50):
        a = 2 * np.pi * np.arange(n) / n
        want = _uniformity(np.stack([np.cos(a), np.sin(a)], 1))
        assert fc.uniform_optimum(n, 2) == pytest.approx(want, abs=1e-12)
    # many points approach the continuous measure on S¹, E = e^{−4} I₀(4), with the n self-pairs left out of the
    # mean: mean_{i≠j} = (n E − 1)/(n − 1) (the continuous value itself, log E, is 0.0096 higher at n = 400)
    n, E = 400, special.i0e(4.0)
    assert fc.uniform_optimum(n, 2) == pytest.approx(math.log((n * E - 1) / (n - 1)), abs=1e-9)


def test_uniform_optimum_on_the_sphere_is_the_fibonacci_lattice():
    for n in (5, 40):
        i = np.arange(n) + 0.5
        z = 1 - 2 * i / n
        phi = np.pi * (3 - np.sqrt(5)) * i  # the golden-angle form: a mirror image, the same distances
        r = np.sqrt(1 - z**2)
        u = np.stack([r * np.cos(phi), r * np.sin(phi), z], 1)
        assert fc.uniform_optimum(n, 3) == pytest.approx(_uniformity(u), abs=1e-12)
    # and it approaches the continuous S² value E e^{−4(1 − c)} = (1 − e^{−8})/8 (c uniform on [−1, 1]), self-pairs
    # left out as on the circle
    n, E = 600, (1 - math.exp(-8)) / 8
    assert fc.uniform_optimum(n, 3) == pytest.approx(math.log((n * E - 1) / (n - 1)), abs=1e-5)


@pytest.mark.parametrize("d", [4, 5, 8])
def test_uniform_optimum_in_higher_dimension_is_the_continuous_measure(d):
    """For d > 3 (n ignored): log E exp(−4(1 − c)) on S^{d−1}; E e^{a c} = Γ(ν + 1)(2/a)^ν I_ν(a), ν = d/2 − 1."""
    nu, a = d / 2 - 1, 4.0
    want = math.lgamma(nu + 1) + nu * math.log(2 / a) + math.log(special.ive(nu, a))  # ive = e^{−a} I_ν(a)
    assert fc.uniform_optimum(100, d) == pytest.approx(want, abs=1e-8)
    assert fc.uniform_optimum(7, d) == fc.uniform_optimum(100, d)


def test_stack_members_equals_members_initialised_alone():
    """Member i of the stacked ensemble has the parameters, and computes the output, of ``make(1, g_i)`` built alone
    from a generator with the same seed (member order kept: distinct seeds give distinct members)."""
    import torch

    from ssldyn.experiments.variational.fig5 import averaging_net_factory

    make = averaging_net_factory(5, "cpu")
    seeds = [11, 22, 33]
    ens = fc.stack_members(make, [torch.Generator().manual_seed(s) for s in seeds])
    singles = [make(1, torch.Generator().manual_seed(s)) for s in seeds]
    x = torch.randn(3, 8, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # (E, n, D)
    with torch.no_grad():
        out = ens(x)  # (E, n, d)
        for i, m in enumerate(singles):
            for k, v in m.state_dict().items():
                assert torch.equal(ens.state_dict()[k][i : i + 1], v), k
            assert torch.equal(out[i], m(x[i : i + 1])[0])
    assert not torch.equal(out[0], out[1])  # the seeds matter
    # a plain (n, D) input is broadcast to every member: member i's output is still its single's
    with torch.no_grad():
        flat = ens(x[0])
        for i, m in enumerate(singles):
            assert torch.equal(flat[i], m(x[0])[0])


def _small_members(n: int = 12, seed: int = 0) -> fc.Members:
    g = torch.Generator().manual_seed(seed)
    z0 = fc.random_embedding(n, 2, 0.5, g)[None]  # (1, n, 2)
    x = torch.randn(1, n, 2, generator=g, dtype=torch.float64)  # (1, n, 2)
    return fc.Members(x, torch.arange(n) % 3, z0)


def test_run_network_logs_the_loss_at_every_loss_every_step_and_the_embeddings_only_at_records():
    """``loss_every`` adds loss-only log points: the dense loss equals the loss of the same run recorded at every
    step, and the sparse records (embeddings, ``Run.loss``) are those of ``record``."""
    from ssldyn.experiments.variational.fig5 import averaging_net_factory

    m, loss = _small_members(), fc.flow_loss(0.5, positive_term=False)  # the printed form: its numbers below
    make = averaging_net_factory(10, "cpu")
    sparse = fc.run_network(make(1, torch.Generator().manual_seed(1)), m, loss=loss, lr=0.5, steps=8, record=[0, 8],
                            loss_every=range(9))  # fmt: skip
    dense = fc.run_network(make(1, torch.Generator().manual_seed(1)), m, loss=loss, lr=0.5, steps=8, record=range(9))
    assert sparse.steps.tolist() == [0, 8] and sparse.z.shape[0] == 2
    assert sparse.loss_steps.tolist() == list(range(9))
    np.testing.assert_array_equal(sparse.loss_log, dense.loss)  # (9, 1): the same run, every step
    np.testing.assert_array_equal(sparse.loss, dense.loss[[0, 8]])


def test_step_table_reads_the_loss_rise_at_every_iteration():
    """A step table run beyond the 400 dense records: its rise is the largest between consecutive iterations (the
    max over the dense loss log), which the records alone (every ⌊steps/400⌋-th iteration) could miss."""
    from ssldyn.experiments.variational.fig5 import averaging_net_factory

    m, loss = _small_members(seed=1), fc.flow_loss(0.5, positive_term=False)  # (the printed form)
    make = averaging_net_factory(10, "cpu")
    steps, lr = 1200, 0.9  # records: every step to 400, then every 3rd
    (row,) = fc.step_table(lambda: make(1, torch.Generator().manual_seed(2)), m, loss=loss, lrs=[lr],
                           time=steps * lr, main=None)  # fmt: skip
    every = fc.run_network(make(1, torch.Generator().manual_seed(2)), m, loss=loss, lr=lr, steps=steps,
                           record=range(steps + 1))  # fmt: skip
    assert row.steps == steps
    np.testing.assert_allclose(row.max_loss_increase, fc.max_loss_increase(every.loss), rtol=0, atol=0)
    on_records = fc.max_loss_increase(every.loss[fc.record_steps(steps, 400, 400)])
    assert on_records[0] != row.max_loss_increase[0]  # here the records alone read another rise (3.77e-2 + 1e-7)


def test_coherence_centred_removes_the_common_motion_hand_worked():
    """Two clusters moving by (1, ±0.1): uncentred every grouping is nearly aligned (the common motion), centred only
    the true clusters are (residuals (0, ±0.1)), and a grouping that mixes them cancels (variational Fig. 5's
    same-cluster-move-together and its permuted-label control)."""
    z0 = np.zeros((1, 4, 2))
    z1 = np.array([[[1.0, 0.1], [1.0, 0.1], [1.0, -0.1], [1.0, -0.1]]])  # points 0, 1: cluster A; 2, 3: cluster B
    true, mixed = [0, 0, 1, 1], [0, 1, 0, 1]
    u = np.array([1.0, 0.1]) / math.hypot(1.0, 0.1)  # unit displacement of A; B's is its mirror
    np.testing.assert_allclose(fc.coherence(z0, z1, true), [1.0], rtol=1e-15)
    np.testing.assert_allclose(fc.coherence(z0, z1, mixed), [u[0]], rtol=1e-15)  # resultant of u and its mirror
    np.testing.assert_allclose(fc.coherence(z0, z1, true, centred=True), [1.0], rtol=1e-15)
    np.testing.assert_allclose(fc.coherence(z0, z1, mixed, centred=True), [0.0], atol=1e-15)
