"""block_structure's class contrast: a written-out reference, its exact permutation null, and the
separation of true from shuffled labels on a user network's NTK (issue 18: the old statistic gave
0.389 with true labels vs 0.43 shuffled)."""

import itertools

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from ssldyn.kernels import block_structure, empirical_ntk


def _reference(K: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """within / between / contrast with explicit loops over pairs."""
    n = len(y)
    kn = [[K[i, j] / np.sqrt(K[i, i] * K[j, j]) for j in range(n)] for i in range(n)]
    within = [kn[i][j] for i in range(n) for j in range(n) if i != j and y[i] == y[j]]
    between = [kn[i][j] for i in range(n) for j in range(n) if y[i] != y[j]]
    off = [kn[i][j] for i in range(n) for j in range(n) if i != j]
    w, b = float(np.mean(within)), float(np.mean(between))
    return w, b, (w - b) / float(np.std(off, ddof=1))


def _random_kernel(n: int, seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).normal(size=(n, n + 3))
    return a @ a.T + 0.1 * np.eye(n)


def test_class_contrast_matches_the_written_out_formula():
    K = _random_kernel(9, 0)
    y = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    out = block_structure(torch.tensor(K), torch.tensor(y))
    w, b, c = _reference(K, y)
    assert out["within"] == pytest.approx(w, abs=1e-12)
    assert out["between"] == pytest.approx(b, abs=1e-12)
    assert out["contrast"] == pytest.approx(c, abs=1e-12)


def test_matrix_valued_kernel_uses_the_trace_over_outputs():
    rng = np.random.default_rng(1)
    J = rng.normal(size=(7, 3, 11))  # per-sample Jacobians (n, d, P)
    K4 = np.einsum("iaP,jbP->ijab", J, J)  # (n, n, d, d)
    y = np.array([0, 1, 0, 1, 0, 1, 1])
    out = block_structure(torch.tensor(K4), torch.tensor(y))
    w, b, c = _reference(np.einsum("ijaa->ij", K4), y)
    assert (out["within"], out["between"]) == pytest.approx((w, b), abs=1e-12)
    assert out["contrast"] == pytest.approx(c, abs=1e-12)


def test_shuffled_labels_give_exactly_zero_in_expectation():
    # E over all relabellings of (within − between) is 0: enumerate every permutation of 7 labels
    K = _random_kernel(7, 2)
    y = np.array([0, 0, 0, 1, 1, 2, 2])
    gaps = []
    for perm in itertools.permutations(range(7)):
        out = block_structure(torch.tensor(K), torch.tensor(y[list(perm)]))
        gaps.append(out["within"] - out["between"])
    assert abs(np.mean(gaps)) < 1e-12
    assert np.std(gaps) > 1e-3  # ... while single relabellings do differ


def test_contrast_separates_true_from_shuffled_labels_on_a_user_ntk():
    digits = load_digits()
    x = torch.tensor(digits.data[:100], dtype=torch.float32) / 16.0  # (100, 64) pixels in [0, 1]
    y = torch.tensor(digits.target[:100])
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 8))  # a user's plain network
    K = empirical_ntk(net, None, x, mode="trace")  # (100, 100)
    g = torch.Generator().manual_seed(1)
    true = block_structure(K, y, n_perm=200, generator=g)
    shuffled = [block_structure(K, y[torch.randperm(100, generator=g)], n_perm=200, generator=g) for _ in range(5)]
    assert true["contrast"] > 1.0 and true["z"] > 10.0  # pixels of one digit are closer under the NTK
    assert all(abs(s["contrast"]) < 0.2 and abs(s["z"]) < 4.0 for s in shuffled)
    # the max-based O(δ) ratio is not a class statistic on such a kernel: it cannot separate them
    assert min(s["off_ratio"] for s in shuffled) < 1.5 * true["off_ratio"]


def test_bad_inputs_are_named():
    K = torch.eye(4)
    with pytest.raises(ValueError, match="labels must have shape"):
        block_structure(K, torch.tensor([0, 1, 0]))
    with pytest.raises(ValueError, match="at least two classes"):
        block_structure(K, torch.tensor([0, 0, 0, 0]))
    with pytest.raises(ValueError, match="diagonal"):
        block_structure(torch.zeros(4, 4), torch.tensor([0, 0, 1, 1]))
