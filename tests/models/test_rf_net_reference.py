"""Independent-reference checks beside tests/models/test_rf_net.py (test audit, 2026-12-06).

``test_automatic_token_path_follows_the_cost_model`` writes the cost model out but checks six shapes far from the
crossover, where a changed constant (e.g. 2 memory passes instead of 3 per sample) gives the same choice. Here the
choice is compared with the written-out model on a dense grid that brackets the crossover in M (the measured one is
M ≈ 3 at Sec. 5's shapes), so every term's constant moves some decision."""

import itertools

from ssldyn.models.rf_net import token_path


def _cost(path, K, M, N, T, out):  # memory passes + matmul FLOPs / 8, per member and step (the docstring's model)
    if path == "table":
        return K * out * (2 * N + 2 * T) + 3 * 2 * T * K * M * out / 8
    return 3 * 2 * N * K * M + 2 * 2 * N * K * M * out / 8


def test_token_path_is_the_cheaper_path_of_the_cost_model_on_a_dense_grid():
    flips = set()
    for K, M, N, T, out in itertools.product((4, 10), range(1, 13), (8, 32, 128, 512), (6, 20, 80), (5, 20, 50)):
        want = "table" if _cost("table", K, M, N, T, out) <= _cost("samples", K, M, N, T, out) else "samples"
        assert token_path(K, M, N, T, out) == want, (K, M, N, T, out)
        flips.add(want)
    assert flips == {"table", "samples"}  # the grid crosses over
