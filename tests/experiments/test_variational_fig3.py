import math

import numpy as np
import pytest

from ssldyn.experiments.variational.fig3 import k_point_loss, min_sq_distance, threshold
from ssldyn.lab import run_experiment


@pytest.mark.parametrize("k,n,tau", [(3, 9, 0.5), (4, 10, 0.2), (1, 5, 1.0), (6, 6, 0.1)])
def test_k_point_loss_matches_explicit_sample_sum(k, n, tau):
    # n explicit samples, split as equally as possible over K points of S^1; eq. (1) for an invariant map:
    # E_x log(1 + 2 E_y[1_{x≠y} e^{sim/τ}] / e^{1/τ}), the indicator meaning "another sample".
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    ang = np.concatenate([[2 * math.pi * i / k] * m for i, m in enumerate(sizes)])
    total = 0.0
    for i in range(n):
        s = sum(math.exp(math.cos(ang[i] - ang[j]) / tau) for j in range(n) if j != i) / n
        total += math.log(1 + 2 * s / math.exp(1 / tau))
    assert k_point_loss(k, n, tau, positive_term=True) == pytest.approx(total / n, rel=1e-10)


def test_min_sq_distance():
    assert min_sq_distance(4) == pytest.approx(2.0)  # neighbours at 90°: |(1,0)-(0,1)|² = 2
    assert min_sq_distance(6) == pytest.approx(1.0)


def test_threshold_is_where_relative_excess_reaches_tol():
    tau, n, tol = 0.2, 20000, 1e-3
    d = threshold(tau, n, 200, 1000, tol, True)
    l_inf = k_point_loss(1000, n, tau, True)
    # K just below / above the threshold bracket tol
    ks = [k for k in range(2, 201) if min_sq_distance(k) <= d]
    k_above = ks[0] - 1
    assert (k_point_loss(k_above, n, tau, True) - l_inf) / l_inf > tol
    assert (k_point_loss(ks[0], n, tau, True) - l_inf) / l_inf <= tol


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.fig3", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert all(c.passed for c in claims.values()), {k: (c.measured, c.expected) for k, c in claims.items()}
    assert claims["c-linear"].measured >= 0.98
    assert (out.run.path / "figures" / "fig3.png").is_file()
