"""χ± scores (`nonlinearity` eq. 16, 180, 181) on hand-made filters, against explicit loops."""

import numpy as np
import pytest
import torch

from ssldyn.probes.chi import best_match, chi_scores


def _loops(W, U, rel, absolute):
    K, M, _ = W.shape
    T = U.shape[0]
    cp, cm = [], []
    for k in range(K):
        best = []
        for a in range(T):
            cos = [float(W[k, m] @ U[a] / (np.linalg.norm(W[k, m]) * np.linalg.norm(U[a]))) for m in range(M)]
            best.append(max(abs(c) if absolute else c for c in cos))
        cp.append(np.mean([best[a] for a in range(T) if rel[k, a]]))
        cm.append(np.mean([best[a] for a in range(T) if not rel[k, a]]))
    return np.mean(cp), np.mean(cm)


def test_perfect_filters_score_one_and_zero():
    T = 6
    U = torch.eye(T) * torch.tensor([0.1, 0.1, 0.1, 10, 10, 10])[:, None]  # ζ = 10 magnitudes
    rel = torch.zeros(2, T, dtype=torch.bool)
    rel[0, [0, 4]] = True
    rel[1, [2]] = True
    W = torch.zeros(2, 3, T)
    W[0, 0, 0], W[0, 1, 4], W[0, 2, 4] = 3.0, 0.5, 2.0  # RF 0 learns tokens 0 and 4
    W[1, 0, 2], W[1, 1, 2], W[1, 2, 2] = 1.0, 1.0, 1.0  # RF 1 learns token 2 three times
    cp, cm = chi_scores(W, U, rel)
    assert cp.item() == 1.0 and cm.item() == 0.0


def test_random_filters_match_loops_and_linear_uses_abs():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(3, 4, 5))
    U = rng.normal(size=(7, 5))
    rel = rng.random((3, 7)) < 0.4
    rel[:, 0], rel[:, 1] = True, False
    for absolute in (False, True):
        cp, cm = chi_scores(torch.tensor(W), torch.tensor(U), torch.tensor(rel), absolute=absolute)
        ep, em = _loops(W, U, rel, absolute)
        assert abs(cp.item() - ep) < 1e-12 and abs(cm.item() - em) < 1e-12
    # a sign-flipped filter counts for linear (|cos|) but not otherwise
    Wf = torch.zeros(1, 1, 2)
    Wf[0, 0, 0] = -1.0
    r = torch.tensor([[True, False]])
    assert chi_scores(Wf, torch.eye(2), r, absolute=True)[0].item() == 1.0
    assert chi_scores(Wf, torch.eye(2), r, absolute=False)[0].item() == -1.0


def test_ensemble_axis_and_padded_filters():
    W = torch.zeros(2, 1, 3, 2)  # (E, K, M_pad, d)
    W[0, 0, 0] = torch.tensor([1.0, 0.0])
    W[0, 0, 1] = torch.tensor([-1.0, 0.0])
    W[1, 0, 0] = torch.tensor([0.0, 1.0])
    mask = torch.tensor([[[1, 1, 0]], [[1, 0, 0]]])  # member 1 has one real filter
    U = torch.eye(2).expand(2, 2, 2)
    c = best_match(W, U, absolute=torch.tensor([False, True]), filter_mask=mask)
    np.testing.assert_allclose(c.numpy(), [[[1.0, 0.0]], [[0.0, 1.0]]])


def test_filters_and_embedding_of_different_d_are_one_error_naming_the_function():
    # used to fail inside torch.matmul ("Expected size for first two dimensions of batch2 tensor ...")
    W, U, rel = torch.randn(2, 3, 5), torch.randn(7, 4), torch.zeros(2, 7, dtype=torch.bool)
    for fn, call in (("chi_scores", lambda w, u: chi_scores(w, u, rel)), ("best_match", best_match)):
        with pytest.raises(
            ValueError,
            match=rf"^{fn}: W \(\.\.\., K, M, d\) and embedding \(\.\.\., n_tokens, d\) need one d, "
            r"got \(2, 3, 5\) and \(7, 4\)$",
        ):
            call(W, U)
        with pytest.raises(ValueError, match=rf"^{fn}: W .* need one d, got \(3, 5\) and \(7, 5\)$"):
            call(W[0], torch.randn(7, 5))  # W without its M axis
        with pytest.raises(
            ValueError, match=rf"^{fn}: the leading axes \(\.\.\.\) of W and embedding do not broadcast"
        ):
            call(W.expand(3, 2, 3, 5), torch.randn(2, 7, 5))
    # a matching d still agrees with the loops
    U5 = torch.randn(7, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    W5 = torch.randn(2, 3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    rel5 = torch.arange(14).view(2, 7) % 3 == 0
    cp, cm = chi_scores(W5, U5, rel5)
    ep, em = _loops(W5.numpy(), U5.numpy(), rel5.numpy(), False)
    assert abs(cp.item() - ep) < 1e-12 and abs(cm.item() - em) < 1e-12
