import math

import pytest
import torch

from ssldyn.data.latent import (
    FIG8_ANGLES,
    circle_points,
    latent_categorical,
    latent_summation_support,
    random_orthonormal_basis,
)
from ssldyn.dynamics.alpha_cl import (
    alpha_covariance,
    gated_covariance,
    gated_input,
    gaussian_alpha_fn,
    make_A_fn,
    one_layer_energy,
    power_iteration,
    sphere_euler_step,
    sphere_flow,
    sphere_tangent,
    uniform_contrastive_covariance,
)
from ssldyn.dynamics.guards import NonFiniteLossError
from ssldyn.models.activations import get_activation
from ssldyn.objectives import contrastive_covariance

D = torch.float64


def gen(s=0):
    return torch.Generator().manual_seed(s)


def test_uniform_fast_path_matches_objectives():
    a = torch.randn(30, 4, generator=gen(), dtype=D)
    ap = a + 0.2 * torch.randn(30, 4, generator=gen(1), dtype=D)
    torch.testing.assert_close(uniform_contrastive_covariance(a, ap), contrastive_covariance(a, ap))
    torch.testing.assert_close(uniform_contrastive_covariance(a), contrastive_covariance(a, a))
    # weights = duplicated rows
    w = torch.tensor([2.0, 1.0, 1.0], dtype=D) / 4
    b = a[:3]
    torch.testing.assert_close(
        uniform_contrastive_covariance(b, weights=w), contrastive_covariance(b[[0, 0, 1, 2]], b[[0, 0, 1, 2]])
    )


def test_eq8_categorical_population_and_sampled():
    U = random_orthonormal_basis(6, 4, generator=gen(2))
    probs = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=D)
    A_pop = make_A_fn(U.T.contiguous(), "relu", weights=probs)
    for m in range(4):
        ref = probs[m] * (1 - probs[m]) * torch.outer(U[:, m], U[:, m])  # eq. 8
        torch.testing.assert_close(A_pop(U[:, m]), ref, atol=1e-13, rtol=0)
    x, _ = latent_categorical(40_000, U, probs, generator=gen(3))
    A = make_A_fn(x, "relu")(U[:, 0])
    assert float((A - 0.24 * torch.outer(U[:, 0], U[:, 0])).abs().max()) < 0.01  # sampling error ~ 1/sqrt(N)


@pytest.mark.parametrize("q", [0.1, 0.3, 0.45])
def test_eq9_summation_population(q):
    d = 5
    U = random_orthonormal_basis(d, d, generator=gen(4))
    qs = torch.full((d,), q, dtype=D)
    qs[1] = 0.25
    xs, ps = latent_summation_support(U, qs)
    A_fn = make_A_fn(xs, "relu", weights=ps)
    for m in range(d):
        u = U[:, m]
        P = torch.outer(u, u)
        ref = (1 - qs[m]) ** 2 * P + qs[m] * (torch.eye(d, dtype=D) - P)  # eq. 9
        torch.testing.assert_close(A_fn(u), ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("act", ["linear", "relu", "leaky_relu", "quadratic"])
def test_lemma3_gradient_matches_autograd(act):
    """∂E/∂w = c·A(w)w for h(x) = c·h'(x)x (Lemma 3, eq. 47), α fixed (stop-gradient), with augmentation."""
    N, d = 25, 4
    x = torch.randn(N, d, generator=gen(5), dtype=D)
    xp = x + 0.3 * torch.randn(N, d, generator=gen(6), dtype=D)
    alpha = torch.rand(N, N, generator=gen(7), dtype=D)
    w = torch.randn(d, generator=gen(8), dtype=D)
    for a, xx in [(None, None), (alpha, xp), (None, xp)]:
        wr = w.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(one_layer_energy(x, wr, act, x_pos=xx, alpha=a), wr)
        ref = get_activation(act).c * gated_covariance(x, w, act, x_pos=xx, alpha=a) @ w
        torch.testing.assert_close(g, ref, atol=1e-12, rtol=1e-9)


def test_gated_covariance_ensemble_and_alpha_fn():
    N, d = 20, 3
    x = torch.randn(N, d, generator=gen(9), dtype=D)
    W = torch.randn(4, d, generator=gen(10), dtype=D)
    afn = gaussian_alpha_fn(x, "relu", temperature=0.5)
    A = gated_covariance(x, W, "relu", alpha=afn)  # (4, d, d)
    for e in range(4):
        xt = x * (x @ W[e] > 0).to(D)[:, None]
        f = torch.relu(x @ W[e])
        alpha = torch.exp(-((f[:, None] - f[None, :]) ** 2) / (2 * 0.5))
        torch.testing.assert_close(A[e], _eq3_double_sum(xt, xt, xt, xt, alpha), rtol=1e-12, atol=1e-14)  # eq. 3
        # eq. 6 per member: x̃ = x·h'(wᵀx), for ReLU the rows with wᵀx > 0 and zero rows elsewhere
        assert torch.equal(gated_input(x, W)[e], xt) and torch.equal(gated_input(x, W[e]), xt)
    leaky = gated_input(x, W, "leaky_relu")  # h'(u) = 1 for u > 0, the negative slope below
    slope = -float(get_activation("leaky_relu")(torch.tensor(-1.0, dtype=D)))  # h(u) = slope·u for u < 0
    assert 0 < slope < 1
    gate = torch.where(x @ W.T > 0, torch.tensor(1.0, dtype=D), torch.tensor(slope, dtype=D))  # (N, E)
    torch.testing.assert_close(leaky, x * gate.T[..., None], rtol=0, atol=0)


def test_power_iteration_linear_finds_top_pca_from_every_start():
    x = torch.randn(500, 5, generator=gen(11), dtype=D) * torch.tensor([3.0, 2.0, 1.0, 1.0, 0.5], dtype=D)
    A_fn = make_A_fn(x, "linear")
    res = power_iteration(torch.randn(8, 5, generator=gen(12), dtype=D), A_fn, steps=500, tol=1e-12)
    top = torch.linalg.eigh(uniform_contrastive_covariance(x))[1][:, -1]
    assert bool(res.trajectory.meta["converged"].all()) and res.trajectory.meta["shifted"] == {}
    assert torch.allclose((res.state @ top).abs(), torch.ones(8, dtype=D), atol=1e-9)
    steps, disc_all = res.trajectory.series_members("discrepancy")  # (T, E)
    disc = disc_all[:, 0]
    assert disc.shape == (res.trajectory.meta["iterations"],) and steps.tolist() == list(range(len(disc)))
    assert disc.shape[0] > 3 and float(disc[-1]) < 1e-12
    assert res.trajectory.last("discrepancy") == pytest.approx(float(disc[-1]))


def test_power_iteration_relu_returns_to_each_pattern():
    d = 6
    U = random_orthonormal_basis(d, d, generator=gen(13))
    xs, ps = latent_summation_support(U, 0.2)
    w0 = U.T + 0.15 * torch.randn(d, d, generator=gen(14), dtype=D)
    res = power_iteration(w0, make_A_fn(xs, "relu", weights=ps), steps=100)
    cos = (res.state * U.T).sum(-1)
    assert torch.allclose(cos, torch.ones(d, dtype=D), atol=1e-10)


def test_sphere_flow_energy_increases_to_top_eigvec():
    x = torch.randn(300, 3, generator=gen(15), dtype=D) * torch.tensor([2.0, 1.0, 0.5], dtype=D)
    res = sphere_flow(torch.tensor([[0.3, 1.0, 1.0]], dtype=D), make_A_fn(x, "linear"), steps=400, dt=0.05)
    _, e = res.trajectory.series("energy")
    assert (e[1:] - e[:-1] >= -1e-12).all()
    lam, vec = torch.linalg.eigh(uniform_contrastive_covariance(x))
    assert abs(float(res.state[0] @ vec[:, -1])) > 1 - 1e-8
    assert e[-1] == pytest.approx(0.5 * float(lam[-1]), rel=1e-8)


def test_bad_inputs():
    with pytest.raises(ValueError, match="w"):
        gated_covariance(torch.randn(5, 3, dtype=D), torch.randn(4, dtype=D))
    with pytest.raises(ValueError, match="NaN"):
        gated_covariance(torch.full((5, 3), math.nan, dtype=D), torch.randn(3, dtype=D))


# --- indefinite operators (augmentation, App. B.5) and bad operators ------------------------------------------------
def _rotate_planes(x, a, planes, g):
    """One augmented view x' = R(t)x (eq. 106): a rotation by t ~ U[−a, a] in each coordinate plane."""
    y = x.clone()
    for i, j in planes:
        t = (torch.rand(x.shape[0], generator=g, dtype=D) * 2 - 1) * a
        y[:, i] = t.cos() * x[:, i] - t.sin() * x[:, j]
        y[:, j] = t.sin() * x[:, i] + t.cos() * x[:, j]
    return y


def _augmented_latent():
    """Latent categorical data (d = 6) and a second view rotated by up to π in three planes: A = C_α[x, x']
    is indefinite with its largest-magnitude eigenvalue negative (as the digits with SimCLR views of the issue)."""
    g = gen(21)
    d = 6
    U = random_orthonormal_basis(d, d, generator=g)
    x, _ = latent_categorical(4000, U, torch.tensor([0.45, 0.2, 0.12, 0.1, 0.08, 0.05], dtype=D), generator=g)
    x_pos = _rotate_planes(x, math.pi, [(0, 1), (2, 3), (4, 5)], g)
    return x, x_pos, g


def test_power_iteration_on_an_indefinite_A_converges_to_the_top_eigenvector():
    x, x_pos, g = _augmented_latent()
    A = uniform_contrastive_covariance(x, x_pos)  # the constant A(w) of the linear activation, float64
    lam, vec = torch.linalg.eigh(A)
    assert lam[0] < 0 < lam[-1] and -lam[0] > 3 * lam[-1]  # indefinite, the negative end dominates
    A_fn = make_A_fn(x, "linear", x_pos=x_pos)
    w0 = torch.randn(16, 6, generator=g, dtype=D)
    res = power_iteration(w0, A_fn, steps=500)
    # the plain eq. PI would lock onto vec[:, 0] (sign flip every step, orthogonal to the top eigenvector)
    assert bool(res.trajectory.meta["converged"].all()) and len(res.trajectory.meta["shifted"]) == 16
    torch.testing.assert_close((res.state @ vec[:, -1]).abs(), torch.ones(16, dtype=D), atol=1e-9, rtol=0)
    assert res.trajectory.last("rayleigh") == pytest.approx(float(lam[-1]), rel=1e-8)  # wᵀA w at the fixed point
    always = power_iteration(w0, A_fn, steps=500, shift=True)
    torch.testing.assert_close((always.state @ vec[:, -1]).abs(), torch.ones(16, dtype=D), atol=1e-9, rtol=0)
    lo, hi = f"{float(lam[0]):.4g}", f"{float(lam[-1]):.4g}"
    with pytest.raises(ValueError, match=rf"A\(w\) is indefinite \(eigenvalues {lo} … {hi} at step \d+, member \d+\)"):
        power_iteration(w0, A_fn, steps=500, shift=False)


def test_power_iteration_on_rotation_augmented_circle_points():
    # App. B.5's setting: the nine circle points of Fig. 8, one view rotated by t ~ U[−π, π] (the full SO(2))
    g = gen(22)
    x = circle_points(FIG8_ANGLES)[torch.randint(0, 9, (3000,), generator=g)]
    x_pos = _rotate_planes(x, math.pi, [(0, 1)], g)
    A = uniform_contrastive_covariance(x, x_pos)
    lam, vec = torch.linalg.eigh(A)
    assert lam[0] < 0 < lam[1] and -lam[0] > lam[1]
    res = power_iteration(torch.randn(8, 2, generator=g, dtype=D), make_A_fn(x, "linear", x_pos=x_pos), steps=100)
    assert bool(res.trajectory.meta["converged"].all())
    torch.testing.assert_close((res.state @ vec[:, -1]).abs(), torch.ones(8, dtype=D), atol=1e-9, rtol=0)


def test_power_iteration_and_sphere_flow_reject_nan_operators():
    x = torch.randn(50, 3, generator=gen(23), dtype=D)
    w0 = torch.randn(4, 3, generator=gen(24), dtype=D)
    base = make_A_fn(x, "relu")
    nan_A = lambda w: base(w) * math.nan  # noqa: E731
    # used to return w0 unchanged with converged=True
    with pytest.raises(ValueError, match=r"A_fn\(w0\) contains NaN/inf"):
        power_iteration(w0, nan_A)
    with pytest.raises(ValueError, match=r"A_fn\(w0\) contains NaN/inf"):
        sphere_flow(w0, nan_A, steps=5)
    calls = {"n": 0}

    def late_nan(w):  # finite for 3 iterations, then NaN
        calls["n"] += 1
        return base(w) * (math.nan if calls["n"] > 3 else 1.0)

    with pytest.raises(NonFiniteLossError, match=r"^Rayleigh quotient wᵀA\(w\)w of member 0 became nan at step 3"):
        power_iteration(w0, late_nan, tol=0.0)
    with pytest.raises(ValueError, match="the weights come first"):
        power_iteration(base, w0)
    with pytest.raises(ValueError, match=r"^w0: 1 non-finite"):
        power_iteration(torch.tensor([math.nan, 1.0, 0.0], dtype=D), base)


def test_power_iteration_warns_when_it_ends_unconverged_and_names_the_fix():
    import warnings as _w

    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 5, generator=g, dtype=torch.float64)
    A_fn = make_A_fn(x, "relu")
    w0 = torch.randn(3, 5, generator=g, dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match=r"did not converge in 2 iterations .* raise steps, loosen tol"):
        res = power_iteration(w0, A_fn, steps=2, tol=1e-12)
    assert not res.trajectory.meta["converged"].all()
    with _w.catch_warnings():
        _w.simplefilter("error")
        power_iteration(w0, A_fn, steps=2, tol=1e-12, warn_unconverged=False)
        done = power_iteration(w0, make_A_fn(x, "linear"), steps=2000, tol=1e-8)  # A = Cov(x): converges
    assert done.trajectory.meta["converged"].all()


def test_power_iteration_meta_lists_shifted_members_for_shift_true():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(100, 4, generator=g, dtype=torch.float64)
    res = power_iteration(torch.randn(2, 4, generator=g, dtype=torch.float64), make_A_fn(x, "relu"), steps=300,
                          shift=True, warn_unconverged=False)  # fmt: skip
    assert res.trajectory.meta["shifted"] == {"member 0": "from step 0", "member 1": "from step 0"}


def _diag_fn(b=0.8):
    """A state-dependent diagonal operator ``a(w) = w² + b·(1, 2, …, d)/d`` (positive, distinct entries)."""

    def a(w):
        d = w.shape[-1]
        return w**2 + b * torch.arange(1, d + 1, dtype=w.dtype) / d  # (E, d)

    return a


def test_sphere_flow_diagonal_equals_the_dense_operator_and_eq7_written_out():
    """``diagonal=True`` (``A(w)w = a ⊙ w``) against ``diag_embed(a)`` and against the projected Euler step of
    eq. 7 written out member by member with Python floats."""
    a = _diag_fn()
    w0 = torch.randn(6, 4, generator=gen(31), dtype=D)
    diag = sphere_flow(w0, a, steps=30, dt=0.1, every=10, diagonal=True)
    dense = sphere_flow(w0, lambda w: torch.diag_embed(a(w)), steps=30, dt=0.1, every=10)
    torch.testing.assert_close(diag.state, dense.state, rtol=0, atol=1e-14)
    for name in ("energy", "grad_norm"):
        torch.testing.assert_close(torch.as_tensor(diag.trajectory.series_members(name)[1]),
                                   torch.as_tensor(dense.trajectory.series_members(name)[1]), rtol=0, atol=1e-14)  # fmt: skip
    for e in range(6):
        w = [float(v) for v in w0[e]]
        n = math.sqrt(sum(v * v for v in w))
        w = [v / n for v in w]
        for _ in range(30):
            aw = [(wl**2 + 0.8 * (lv + 1) / 4) * wl for lv, wl in enumerate(w)]  # A(w)w
            waw = sum(x * y for x, y in zip(aw, w))
            w = [wl + 0.1 * (x - waw * wl) for x, wl in zip(aw, w)]  # w + dt·P⊥_w A(w)w
            n = math.sqrt(sum(v * v for v in w))
            w = [v / n for v in w]
        torch.testing.assert_close(diag.state[e], torch.tensor(w, dtype=D), rtol=0, atol=1e-13)
    one = sphere_flow(w0[0], a, steps=30, dt=0.1, diagonal=True).state  # (d,) in, (d,) out
    torch.testing.assert_close(one, diag.state[0], rtol=0, atol=0)


def test_power_iteration_diagonal_equals_the_dense_operator_with_and_without_shift():
    w0 = torch.randn(5, 4, generator=gen(32), dtype=D)
    a = _diag_fn()
    for shift in (None, True):
        diag = power_iteration(w0, a, steps=50, shift=shift, diagonal=True, warn_unconverged=False)
        dense = power_iteration(w0, lambda w: torch.diag_embed(a(w)), steps=50, shift=shift, warn_unconverged=False)
        torch.testing.assert_close(diag.state, dense.state, rtol=0, atol=1e-14)
        assert diag.trajectory.meta["shifted"] == dense.trajectory.meta["shifted"]
    # an indefinite diagonal (eigenvalues -3, 1, 2, 0.5): the shift switches on; shift=False names the range
    indef = torch.tensor([-3.0, 1.0, 2.0, 0.5], dtype=D)
    auto = power_iteration(w0, lambda w: indef, steps=400, diagonal=True, tol=1e-12)
    dense = power_iteration(w0, lambda w: torch.diag(indef), steps=400, tol=1e-12)
    torch.testing.assert_close(auto.state, dense.state, rtol=0, atol=1e-12)
    torch.testing.assert_close(auto.state.abs(), torch.tensor([0.0, 0, 1, 0], dtype=D).expand(5, 4), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=r"eigenvalues -3 … 2 at step"):
        power_iteration(torch.tensor([1.0, 0.1, 0.1, 0.1], dtype=D), lambda w: indef, diagonal=True, shift=False)


@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 4), (3, 5), (4, 4, 1)])
def test_diagonal_operators_of_the_wrong_shape_are_refused(shape):
    w0 = torch.randn(3, 4, generator=gen(33), dtype=D)
    A = torch.ones(shape, dtype=D)
    for flow in (sphere_flow, power_iteration):
        with pytest.raises(ValueError, match=r"A_fn\(w\) must return \(E, d\) = \(3, 4\) for w of shape \(3, 4\)"):
            flow(w0, lambda w: A, steps=3, diagonal=True)
    for ok in ((3, 4), (1, 4), (4,)):  # per member, shared, shared without the member axis
        sphere_flow(w0, lambda w, s=ok: torch.ones(s, dtype=D), steps=2, diagonal=True)


def _eq3_double_sum(a, a_pos, b, b_pos, alpha):
    """Eq. 3 written out: ``(1/2N²) Σ_ij α_ij [(a_i − a_j)(b_i − b_j)ᵀ − (a_i − a_i')(b_i − b_i')ᵀ]``."""
    n = a.shape[0]
    out = torch.zeros(a.shape[1], b.shape[1], dtype=a.dtype)
    for i in range(n):
        for j in range(n):
            out += alpha[i, j] * (torch.outer(a[i] - a[j], b[i] - b[j]) - torch.outer(a[i] - a_pos[i], b[i] - b_pos[i]))
    return out / (2 * n * n)


def test_alpha_covariance_is_eq3_for_any_alpha_and_the_weighted_covariance_for_a_population():
    n = 7
    a = torch.randn(n, 3, generator=gen(40), dtype=D)
    ap = a + 0.3 * torch.randn(n, 3, generator=gen(41), dtype=D)
    b = torch.randn(n, 2, generator=gen(42), dtype=D)
    bp = b + 0.3 * torch.randn(n, 2, generator=gen(43), dtype=D)
    ones = torch.ones(n, n, dtype=D)
    alpha = torch.rand(n, n, generator=gen(44), dtype=D)
    close = dict(rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(alpha_covariance(a, ap), _eq3_double_sum(a, ap, a, ap, ones), **close)  # O(N) path
    torch.testing.assert_close(alpha_covariance(a), _eq3_double_sum(a, a, a, a, ones), **close)  # no augmentation
    torch.testing.assert_close(alpha_covariance(a, ap, b=b, b_pos=bp), _eq3_double_sum(a, ap, b, bp, ones), **close)
    torch.testing.assert_close(alpha_covariance(a, b=b), _eq3_double_sum(a, a, b, b, ones), **close)
    torch.testing.assert_close(alpha_covariance(a, ap, alpha=alpha), _eq3_double_sum(a, ap, a, ap, alpha), **close)
    torch.testing.assert_close(
        alpha_covariance(a, ap, alpha=alpha, b=b, b_pos=bp), _eq3_double_sum(a, ap, b, bp, alpha), **close
    )
    # population weights: Σ_i p_i a_i b_iᵀ − (Σ p a)(Σ p b)ᵀ, written out
    p = torch.rand(n, generator=gen(45), dtype=D)
    p = p / p.sum()
    ma, mb = sum(p[i] * a[i] for i in range(n)), sum(p[i] * b[i] for i in range(n))
    ref = sum(p[i] * torch.outer(a[i], b[i]) for i in range(n)) - torch.outer(ma, mb)
    torch.testing.assert_close(alpha_covariance(a, weights=p, b=b), ref, **close)
    with pytest.raises(ValueError, match="weights: only supported with uniform alpha"):
        alpha_covariance(a, alpha=alpha, weights=p)
    with pytest.raises(ValueError, match="give both positive views or neither"):
        alpha_covariance(a, ap, b=b)


def test_sphere_tangent_and_euler_step_are_the_projection_and_the_renormalised_step():
    w = torch.randn(4, 5, generator=gen(46), dtype=D)
    w = w / w.norm(dim=-1, keepdim=True)
    v = torch.randn(4, 5, generator=gen(47), dtype=D)
    proj = torch.stack([(torch.eye(5, dtype=D) - torch.outer(wi, wi)) @ vi for wi, vi in zip(w, v)])  # (I − wwᵀ)v
    torch.testing.assert_close(sphere_tangent(w, v), proj, rtol=1e-12, atol=1e-14)
    assert float((sphere_tangent(w, v) * w).sum(-1).abs().max()) < 1e-14  # tangent at w
    w0, v0 = w.clone(), v.clone()
    step = sphere_euler_step(w, v, 0.3)
    ref = torch.stack([(wi + 0.3 * vi) / math.sqrt(float(((wi + 0.3 * vi) ** 2).sum())) for wi, vi in zip(w, v)])
    torch.testing.assert_close(step, ref, rtol=1e-12, atol=1e-14)
    assert torch.equal(w, w0) and torch.equal(v, v0)  # the inputs are left as they are


def test_one_layer_energy_checks_the_batch_as_make_A_fn_does():
    """one_layer_energy dropped `weights` when an `alpha` was given (the energy of the unweighted batch, no error) and
    broadcast a second view x_pos (1, d) against x (N, d); make_A_fn and gated_covariance refuse both."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 3, generator=g, dtype=D), torch.randn(3, generator=g, dtype=D)
    p = torch.full((6,), 1 / 6, dtype=D)
    A = torch.ones(6, 6, dtype=D)
    with pytest.raises(ValueError, match=r"weights: only supported with uniform alpha \(alpha=None\)"):
        one_layer_energy(x, w, alpha=A, weights=p)
    with pytest.raises(ValueError, match=r"weights: only supported with uniform alpha"):
        one_layer_energy(x, w, alpha=gaussian_alpha_fn(x), weights=p)
    with pytest.raises(ValueError, match=r"x_pos: the second view must have the shape of x \(6, 3\), got \(1, 3\)"):
        one_layer_energy(x, w, x_pos=x[:1])
    # the uniform weights are still taken: the energy of the uniform population is that of the batch
    assert float(one_layer_energy(x, w, weights=p)) == pytest.approx(float(one_layer_energy(x, w)), rel=1e-12)


def test_alpha_covariance_with_an_alpha_tensor_needs_b_pos_with_a_pos_and_b():
    """With an alpha tensor, a_pos and b but no b_pos, b_pos defaulted to b: (b − b_pos) = 0 and the intra-view term of
    C_α[a, b] was dropped silently (alpha=None refused it)."""
    g = torch.Generator().manual_seed(1)
    a, a_pos, b = (torch.randn(5, k, generator=g, dtype=D) for k in (3, 3, 2))
    for alpha in (None, torch.ones(5, 5, dtype=D)):
        with pytest.raises(ValueError, match=r"a_pos, b_pos: give both positive views or neither"):
            alpha_covariance(a, a_pos, alpha=alpha, b=b)
        with pytest.raises(ValueError, match=r"a_pos, b_pos: give both positive views or neither"):
            alpha_covariance(a, alpha=alpha, b=b, b_pos=b)
        with pytest.raises(ValueError, match=r"b_pos: given without b"):
            alpha_covariance(a, a_pos, alpha=alpha, b_pos=b)


def test_power_iteration_without_iterations_reports_no_member_converged():
    """steps=0 reported every member converged although no discrepancy was measured (converged: "the last discrepancy
    below tol"). With no iteration no member is converged; no warning (zero iterations were asked for)."""
    import warnings

    w0 = torch.randn(2, 3, generator=torch.Generator().manual_seed(0), dtype=D)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = power_iteration(w0, lambda w: torch.eye(3, dtype=D), steps=0)
    assert res.trajectory.meta["converged"].tolist() == [False, False] and res.trajectory.meta["iterations"] == 0
    torch.testing.assert_close(res.state, w0 / w0.norm(dim=-1, keepdim=True), rtol=0, atol=0)  # w(0), normalised
    # one iteration of the identity: w(1) = w(0), discrepancy 0 < tol: converged
    assert power_iteration(w0, lambda w: torch.eye(3, dtype=D), steps=1).trajectory.meta["converged"].all()


def test_a_tensor_in_the_activation_slot_is_one_short_error():
    """make_A_fn(x, x_pos) put the second view into the (positional) activation slot and the error printed the whole
    tensor (2.5k characters for 50×3). The positional order is kept (the experiments call make_A_fn(x, "relu")); the
    error names the type and shape, says what is allowed and that x_pos is keyword-only."""
    x = torch.randn(50, 3, dtype=torch.float64)
    x_pos = x + 0.1
    for call, who in ((lambda: make_A_fn(x, x_pos), "make_A_fn"),
                      (lambda: one_layer_energy(x, torch.ones(3, dtype=torch.float64), x_pos), "one_layer_energy"),
                      (lambda: gated_covariance(x, torch.ones(3, dtype=torch.float64), x_pos), "gated_covariance")):  # fmt: skip
        with pytest.raises(ValueError) as err:
            call()
        msg = str(err.value)
        assert msg == (f"{who}: activation must be a name ('linear', 'relu', 'leaky_relu', 'quadratic', 'sigmoid', "
                       "'tanh') or an Activation, got type Tensor of shape (50, 3); the second view is keyword-only: "
                       "x_pos=...")  # fmt: skip
    with pytest.raises(ValueError, match=r"^gated_input: activation must be a name .* got type int$"):
        gated_input(x, torch.ones(3, dtype=torch.float64), 3)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match=r"^make_A_fn: activation 'gelu': allowed values are 'linear', 'relu'"):
        make_A_fn(x, "gelu")  # pyright: ignore[reportArgumentType]
    w = torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64)  # the keyword form: A(w) = C[x̃^w] of the linear map = Cov
    A = make_A_fn(x, "linear", x_pos=x)(w)
    xc = x - x.mean(0)
    torch.testing.assert_close(A, xc.T @ xc / 50, rtol=1e-12, atol=1e-12)
