import pytest
import torch

from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.models.mlp import MLP
from ssldyn.models.shifted import ShiftedModel


def test_shifted_model_starts_at_z0_with_the_same_kernel_and_moves_like_the_model():
    x = torch.randn(6, 3, dtype=torch.float64)
    z0 = torch.randn(6, 2, dtype=torch.float64)
    g = MLP(3, 2, hidden=5, depth=3, activation="tanh", dtype=torch.float64)
    g_out0 = g(x).detach()
    f = ShiftedModel(g, x, z0)
    assert torch.allclose(f(x)[0], z0, atol=1e-14)
    assert torch.allclose(empirical_ntk(f, None, x), empirical_ntk(g, None, x), atol=1e-12)
    with torch.no_grad():
        for p in g.parameters():
            p.add_(0.01)
    # f(w) = z0 + g(w) - g(w0), written out
    assert torch.allclose(f(x), z0 + g(x) - g_out0, atol=1e-12)
    # single training rows get their own offset; unseen inputs none
    assert torch.allclose(f(x[2:3])[0], (z0 + g(x) - g_out0)[0, 2:3], atol=1e-12)
    y = torch.randn(4, 3, dtype=torch.float64)
    assert torch.equal(f(y), g(y))


def test_shifted_model_notices_in_place_changes_of_the_training_tensor():
    # the training tensor is recognised by identity (no value comparison, no host sync on CUDA) only while unchanged
    x = torch.randn(5, 3, dtype=torch.float64)
    z0 = torch.randn(5, 2, dtype=torch.float64)
    g = MLP(3, 2, hidden=4, depth=2, activation="tanh", dtype=torch.float64)
    f = ShiftedModel(g, x, z0)
    assert torch.allclose(f(x)[0], z0, atol=1e-14)
    with torch.no_grad():
        x[1:] += 1.0  # rows 1..4 are no longer training inputs; row 0 still is
    expected = g(x).detach()
    expected[0, 0] += z0[0] - g(f.x_ref).detach()[0, 0]  # offset z0_0 − g(x_0) on row 0 only
    assert torch.allclose(f(x), expected, atol=1e-12)


def test_repeated_training_rows_with_equal_z0_get_one_offset_on_every_batch():
    # rows 0, 1 and 3 are one input: a sub-batch or a single row used to get the sum of their offsets
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0], [1.0, 2.0], [3.0, -1.0]], dtype=torch.float64)
    z0 = torch.tensor([[10.0, 11.0], [10.0, 11.0], [30.0, 31.0], [10.0, 11.0], [50.0, 51.0]], dtype=torch.float64)
    g = MLP(2, 2, hidden=4, depth=2, activation="tanh", dtype=torch.float64, seeds=[0])
    g_out0 = g(x).detach()  # (1, 5, 2)
    f = ShiftedModel(g, x, z0)
    assert torch.allclose(f(x)[0], z0, atol=1e-13)
    assert torch.allclose(f(x.clone())[0], z0, atol=1e-13)  # the same values, not the training tensor itself
    for i in range(5):
        assert torch.allclose(f(x[i : i + 1])[0], z0[i : i + 1], atol=1e-13), i
    sub = torch.tensor([3, 2, 0])
    assert torch.allclose(f(x[sub])[0], z0[sub], atol=1e-13)
    assert torch.allclose(empirical_ntk(f, None, x), empirical_ntk(g, None, x), atol=1e-12)
    with torch.no_grad():
        for p in g.parameters():
            p.add_(0.02)
    # f(w, x_i) = z0_i + g(w, x_i) − g(w_0, x_i), written out row by row
    want = z0 + g(x).detach()[0] - g_out0[0]  # (5, 2)
    assert torch.allclose(f(x[sub])[0], want[sub], atol=1e-12)
    assert torch.allclose(f(x[1:2])[0], want[1:2], atol=1e-12)


def test_repeated_training_rows_with_different_z0_are_one_error_naming_x_and_z0():
    x = torch.tensor([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0]])
    g = MLP(2, 2, hidden=4, depth=2, seeds=[0])
    with pytest.raises(ValueError, match=r"^ShiftedModel: rows 0 and 2 of x are equal but their rows of z0 differ"):
        ShiftedModel(g, x, torch.tensor([[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]]))
    # per member: equal rows on member 0 but not on member 1
    z0 = torch.tensor([[[1.0, 1.0], [2.0, 2.0], [1.0, 1.0]], [[1.0, 1.0], [2.0, 2.0], [1.0, 1.5]]])
    g2 = MLP(2, 2, hidden=4, depth=2, ensemble=2, seeds=[0, 1])
    with pytest.raises(ValueError, match=r"^ShiftedModel: rows 0 and 2 of x are equal"):
        ShiftedModel(g2, x, z0)
    f = ShiftedModel(g2, x, z0[:1].expand(2, 3, 2))  # equal rows on every member: fine
    assert torch.allclose(f(x[2:3]), z0[:1, 2:3].expand(2, 1, 2), atol=1e-6)


def test_per_member_training_inputs_start_at_z0_without_the_row_check():
    # (E, n, D) inputs, one data set per member (variational's flows): the rows of x are not the samples of z0,
    # so repeated samples within a member (clustered data with delta = 0) are no error; f(x) = z0 on every member
    x = torch.randn(3, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x[:, 1] = x[:, 0]
    z0 = torch.randn(3, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    g = MLP(2, 2, hidden=4, depth=2, ensemble=3, seeds=[0, 1, 2], dtype=torch.float64)
    g_out0 = g(x).detach()  # (3, 4, 2)
    f = ShiftedModel(g, x, z0)
    assert torch.allclose(f(x), z0, atol=1e-13) and torch.allclose(f(x.clone()), z0, atol=1e-13)
    with torch.no_grad():
        for p in g.parameters():
            p.add_(0.01)
    assert torch.allclose(f(x), z0 + g(x).detach() - g_out0, atol=1e-12)


def test_per_member_sub_batches_and_shared_rows_get_each_members_offset():
    # per-member training sets with distinct rows: f(w, x) = z0_e,i + g_e(w, x) − g_e(w0, x) where x = x_e,i, member by
    # member; a shared row gets the offset on the members whose training set holds it, no offset on the others
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 5, 2, dtype=torch.float64, generator=gen)  # (E, n, D)
    z0 = torch.randn(3, 5, 2, dtype=torch.float64, generator=gen)
    g = MLP(2, 2, hidden=4, depth=2, ensemble=3, seeds=[0, 1, 2], dtype=torch.float64)
    g_out0 = g(x).detach()  # (3, 5, 2)
    f = ShiftedModel(g, x, z0)
    with torch.no_grad():
        for p in g.parameters():
            p.add_(0.01)
    want = z0 + g(x).detach() - g_out0  # (E, n, d): the model on its own training rows, written out
    sub = [[4, 0], [1, 1], [3, 2]]  # member e's rows sub[e]
    xb = torch.stack([x[e, sub[e]] for e in range(3)])  # (E, 2, D)
    got = f(xb).detach()
    for e in range(3):
        torch.testing.assert_close(got[e], want[e, sub[e]], rtol=0, atol=1e-12)
    # a shared (m, D) input: row 0 is member 1's training row 3, row 1 is no member's
    xs = torch.stack([x[1, 3], torch.tensor([9.0, 9.0], dtype=torch.float64)])  # (2, D)
    got, plain = f(xs).detach(), g(xs).detach()  # (E, 2, d)
    torch.testing.assert_close(got[1, 0], want[1, 3], rtol=0, atol=1e-12)
    torch.testing.assert_close(got[[0, 2]], plain[[0, 2]], rtol=0, atol=0)  # not their training rows: no offset
    torch.testing.assert_close(got[:, 1], plain[:, 1], rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"^ShiftedModel: input must be \(E=3, m, 2\) or \(m, 2\), got \(2, 4, 2\)"):
        f(torch.zeros(2, 4, 2, dtype=torch.float64))


def test_per_member_repeated_rows_with_different_z0_accept_only_the_whole_input():
    # member 0's rows 0 and 1 are equal with different z0 rows: the whole input starts at z0, a sub-batch is ambiguous
    x = torch.randn(2, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x[0, 1] = x[0, 0]
    z0 = torch.randn(2, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    g = MLP(2, 2, hidden=4, depth=2, ensemble=2, seeds=[0, 1], dtype=torch.float64)
    f = ShiftedModel(g, x, z0)
    torch.testing.assert_close(f(x.clone()).detach(), z0, rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match=r"^ShiftedModel: built on per-member inputs \(2, 3, 2\) with equal rows"):
        f(x[:, :2])
    z0[0, 1] = z0[0, 0]  # equal rows, equal z0: sub-batches are well defined again
    f = ShiftedModel(g, x, z0)
    torch.testing.assert_close(f(x[:, 1:]).detach(), z0[:, 1:], rtol=0, atol=1e-13)
