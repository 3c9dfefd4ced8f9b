"""nonlinearity.lemma2: the smallest eigenvalue of the symmetric part (hand-worked matrices, numpy) and eq. 4 summed
over Lemma 1's explicit features (plain loops over the ordered entries of eq. 20, the double-sum C_∞)."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest
import torch

from ssldyn.experiments.nonlinearity.lemma2 import _min_eig


def test_min_eig_is_the_smallest_eigenvalue_of_the_symmetric_part_hand_worked():
    # [[0, 2], [0, 0]]: its own eigenvalues are 0, 0; the symmetric part [[0, 1], [1, 0]] has −1 and 1
    assert float(_min_eig(torch.tensor([[0.0, 2.0], [0.0, 0.0]], dtype=torch.float64))) == pytest.approx(
        -1.0, abs=1e-15
    )
    # the transpose has the same symmetric part (an eigvalsh reading only the lower triangle would see 0 and 2)
    assert float(_min_eig(torch.tensor([[0.0, 0.0], [2.0, 0.0]], dtype=torch.float64))) == pytest.approx(
        -1.0, abs=1e-15
    )
    # diag(3, −2, 5): the smallest, not the first eigenvalue nor the smallest in absolute value
    assert float(_min_eig(torch.diag(torch.tensor([3.0, -2.0, 5.0], dtype=torch.float64)))) == pytest.approx(-2.0)
    # a PSD matrix of rank 1: 0 (to round-off)
    v = torch.tensor([[1.0], [2.0], [-1.0]], dtype=torch.float64)
    assert abs(float(_min_eig(v @ v.T))) < 1e-14


def test_min_eig_batched_against_numpy():
    rng = np.random.default_rng(1)
    C = rng.normal(size=(2, 3, 4, 4))
    got = _min_eig(torch.tensor(C)).numpy()
    ref = np.array([[np.linalg.eigvalsh(0.5 * (c + c.T)).min() for c in row] for row in C])
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
    # the min over unit vectors of xᵀCx (Rayleigh quotient of the non-symmetric C) is the same number
    x = rng.normal(size=(20000, 4))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = np.einsum("ni,ij,nj->n", x, C[0, 0], x)
    assert q.min() >= ref[0, 0] - 1e-12 and q.min() == pytest.approx(ref[0, 0], abs=0.05)


# ---- eq. 4 summed over Lemma 1's explicit features (eq. 20-22, Def. 2)


def _atoms(seed: int, n: int, d: int):
    g = torch.Generator().manual_seed(seed)
    x0 = torch.rand(n, d, generator=g, dtype=torch.float64) * 2
    probs = torch.rand(n, generator=g, dtype=torch.float64) + 0.1
    m = torch.randn(n, 3, generator=g, dtype=torch.float64)
    return x0 - x0.min(0).values, probs / probs.sum(), m  # y >= 0 with a zero in every coordinate


def _c_inf(y, probs, m, tau):
    """C_∞ of eq. 3 with Gaussian α: ½ Σ_ab p_a p_b K_ab (m_a − m_b)(m_a − m_b)ᵀ, a plain double loop."""
    out = torch.zeros(m.shape[1], m.shape[1], dtype=torch.float64)
    for a in range(len(y)):
        for b in range(len(y)):
            kab = math.exp(-float(((y[a] - y[b]) ** 2).sum()) / (2 * tau))
            out += 0.5 * float(probs[a] * probs[b]) * kab * torch.outer(m[a] - m[b], m[a] - m[b])
    return out


def test_multi_indices_are_the_distinct_entries_of_allchoose():
    from ssldyn.experiments.nonlinearity.lemma2 import _multi_indices

    for d, k in ((1, 4), (2, 0), (3, 5), (4, 7)):
        b = _multi_indices(k, d)
        assert b.shape == (math.comb(k + d - 1, d - 1), d)
        assert (b >= 0).all() and (b.sum(1) == k).all() and len({tuple(r) for r in b}) == len(b)
        # with multiplicities k!/∏b_i! they count the d^k ordered products of AllChoose(y, k) (eq. 20)
        mult = [math.factorial(k) // math.prod(math.factorial(int(i)) for i in r) for r in b]
        assert sum(mult) == d**k
        assert Counter(tuple(sorted(Counter(t).items())) for t in itertools.product(range(d), repeat=k)) == Counter(
            {tuple((i, int(c)) for i, c in enumerate(r) if c): w for r, w in zip(b, mult, strict=True)}
        )


def test_eq4_explicit_against_a_plain_loop_over_the_ordered_features_of_eq20():
    """Every ordered entry y_{i₁}…y_{i_k} of AllChoose (d^k of them), its z_l, p̃_l and variance, one at a time."""
    from ssldyn.experiments.nonlinearity.lemma2 import _eq4_explicit

    y, probs, m = _atoms(0, 6, 3)
    tau, order = 0.6, 6
    sq = torch.zeros(3, 3, dtype=torch.float64)
    lin = torch.zeros(3, 3, dtype=torch.float64)
    lam = []
    for k in range(order + 1):
        part = torch.zeros(3, 3, dtype=torch.float64)
        for t in itertools.product(range(3), repeat=k):
            phi = [
                math.exp(-float((y[a] ** 2).sum()) / (2 * tau))
                * math.prod(float(y[a, i]) for i in t)
                / math.sqrt(math.factorial(k) * tau**k)
                for a in range(len(y))
            ]
            z = sum(float(probs[a]) * phi[a] for a in range(len(y)))
            if z == 0:
                continue
            pt = [float(probs[a]) * phi[a] / z for a in range(len(y))]
            mu = sum(pt[a] * m[a] for a in range(len(y)))
            var = sum(pt[a] * torch.outer(m[a] - mu, m[a] - mu) for a in range(len(y)))
            part += z**2 * var
            lin += z * var
        sq += part
        lam.append(float(torch.linalg.eigvalsh(part)[0]))
    got_sq, got_lin, got_lam = _eq4_explicit(y, probs, m, tau, order, block=7)  # small blocks: the split is tested
    torch.testing.assert_close(got_sq, sq, rtol=1e-11, atol=1e-15)
    torch.testing.assert_close(got_lin, lin, rtol=1e-11, atol=1e-15)
    np.testing.assert_allclose(got_lam.numpy(), lam, rtol=1e-8, atol=1e-15)


def test_eq4_explicit_reaches_c_inf_and_the_z_weighted_sum_does_not():
    """Eq. 4 holds to the remainder bound at the chosen order; the same variances weighted by z_l are far off."""
    from ssldyn.experiments.nonlinearity.lemma2 import _eq4_explicit, _eq4_order_for, _eq4_tail_bound

    y, probs, m = _atoms(1, 9, 3)
    tau = 0.7
    lim = _c_inf(y, probs, m, tau)
    scale = float(lim.norm())
    order, bound, capped = _eq4_order_for(y, probs, m, tau, 1e-12 * scale, 10**6)
    assert not capped and bound <= 1e-12 * scale < _eq4_tail_bound(y, probs, m, tau, order - 1)
    sq, lin, lam = _eq4_explicit(y, probs, m, tau, order)
    assert float((sq - lim).norm()) / scale < 1e-11
    assert float(lam.min()) > -1e-14 * scale  # every order's part is a sum of variances: PSD
    assert float((lin - lim).norm()) / scale > 0.1  # the wrong power of z_l does not give C_∞
    # truncated early, the error is below the remainder bound (the bound is a bound) and far above round-off
    sq5, _, _ = _eq4_explicit(y, probs, m, tau, 5)
    err5 = float((sq5 - lim).norm())
    assert 1e-6 * scale < err5 <= _eq4_tail_bound(y, probs, m, tau, 5)
    # capped by the feature budget C(K + d, d): the order stops where the next one would exceed it
    k_cap, bound_cap, capped = _eq4_order_for(y, probs, m, tau, 1e-12 * scale, math.comb(6 + 3, 3))
    assert capped and k_cap == 6 and bound_cap == pytest.approx(_eq4_tail_bound(y, probs, m, tau, 6))
