"""The probes' scalar settings are checked (ssldyn.checks): a bad one is one ValueError naming it.

Before, these gave a wrong answer without a word: a negative finite-difference step gave ρ = 0, a NaN
ε a LinAlgError, ``lme_test(tol=inf)`` said any vector is an LME, ``rankme(eps=-1)`` NaN,
``column_space_basis(tol=nan)`` an empty basis, ``distinct_filters(threshold=inf)`` every filter.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ssldyn.probes.alpha_cl import (
    irregularity,
    linear_stability,
    lme_test,
    local_roughness,
    prominent_maxima,
    stability_test,
)
from ssldyn.probes.filters import distinct_filters
from ssldyn.probes.rank import rankme
from ssldyn.probes.subspace import column_space_basis

D = torch.float64
A = torch.diag(torch.tensor([3.0, 1.0, 0.5], dtype=D))  # a constant A(w): e1 is its LME, λ_gap = 2


def A_fn(w):
    return A if w.dim() == 1 else A.expand(w.shape[0], 3, 3)


W = torch.tensor([1.0, 0.0, 0.0], dtype=D)
Z = torch.randn(10, 3, generator=torch.Generator().manual_seed(0), dtype=D)

CASES = [
    ("local_roughness: eps must be a finite number > 0", lambda v: local_roughness(A_fn, W, eps=v), (0.0, -1e-4)),
    ("linear_stability: eps must be a finite number > 0", lambda v: linear_stability(A_fn, W, eps=v), (0.0, -1e-6)),
    ("stability_test: eps must be a finite number > 0", lambda v: stability_test(A_fn, W, eps=v), (0.0,)),
    ("stability_test: tol must be a finite number >= 0", lambda v: stability_test(A_fn, W, tol=v), (-1e-6,)),
    ("lme_test: tol must be a finite number >= 0", lambda v: lme_test(A_fn, W, tol=v), (-1e-6,)),
    ("lme_test: gap_tol must be a finite number >= 0", lambda v: lme_test(A_fn, W, gap_tol=v), (-1.0,)),
    ("irregularity: L \\(the Lipschitz constant\\) must be", lambda v: irregularity(A_fn, W, v), (-1.0,)),
    ("irregularity: kappa must be", lambda v: irregularity(A_fn, W, 1.0, kappa=v), (-1.0,)),
    ("prominent_maxima: rel_prominence must be", lambda v: prominent_maxima(np.sin(np.arange(50.0)), v), (-0.1,)),
    ("rankme: eps must be a finite number > 0", lambda v: rankme(Z, eps=v), (0.0, -1.0)),
    ("column_space_basis: tol must be a finite number >= 0", lambda v: column_space_basis(Z, tol=v), (-1.0,)),
    ("distinct_filters: threshold must be in \\[0, 1\\]", lambda v: distinct_filters(Z, v), (-0.1, 1.5)),
]


@pytest.mark.parametrize("message, call, bad", CASES, ids=[c[0].split(":")[0] + "-" + c[0].split()[1] for c in CASES])
def test_a_bad_scalar_setting_is_one_error_naming_it(message, call, bad):
    for value in (*bad, math.nan, math.inf):
        with pytest.raises(ValueError, match=rf"^{message}"):
            call(value)


def test_the_checked_probes_still_measure_what_they_did():
    # a constant A(w) is perfectly smooth: ρ = 0, and e1 (top eigenvector, gap 2) is a stable LME
    assert float(local_roughness(A_fn, W)) == 0.0
    t = stability_test(A_fn, W)
    assert t.is_lme and t.stable and t.gap == pytest.approx(2.0) and t.rho == 0.0
    assert not lme_test(A_fn, torch.tensor([0.0, 1.0, 0.0], dtype=D)).is_lme  # e2: an eigenvector, not the top one
    # F(w) = P⊥ A w has Jacobian eigenvalues λ_j − λ_1 = −2, −2.5 on the tangent space at e1
    assert linear_stability(A_fn, W) == pytest.approx(-2.0, abs=1e-6)
    assert distinct_filters(torch.eye(3, dtype=D), 1.0) == 3 and distinct_filters(torch.eye(3, dtype=D), 0.0) == 0
    assert column_space_basis(torch.ones(4, 2, dtype=D)).shape == (4, 1)  # rank 1 at the default tol
    assert column_space_basis(torch.eye(4, 2, dtype=D), tol=0.0).shape == (4, 2)  # tol = 0 is allowed
