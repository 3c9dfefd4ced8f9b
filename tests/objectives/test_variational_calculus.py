"""First/second variation of eq. (4) (``variational`` Prop. 3.1, App. A.3) against autograd and closed forms."""

import math

import pytest
import torch

from ssldyn.data.sphere import circle_points_even
from ssldyn.objectives import latent_measure_nt_xent
from ssldyn.objectives.variational_calculus import (
    augmented_first_variation,
    augmented_loss,
    first_variation,
    measure_loss,
    second_variation,
    sphere_stationarity,
    stationarity_probe,
    symmetry_condition_gap,
)

DT = torch.float64
PAIRS = [{}, {"temperature": 0.2}, {"psi": lambda t: torch.log1p(2 * t), "eta": lambda t: 1.0 / (1.0 + t)}]


def test_measure_loss_written_out():
    g = torch.Generator().manual_seed(0)
    y, w = torch.randn(5, 3, generator=g, dtype=DT), torch.rand(5, generator=g, dtype=DT)
    w = w / w.sum()
    tau = 0.3
    ref = sum(
        w[i] * math.log1p(sum(w[j] * math.exp(-float(((y[i] - y[j]) ** 2).sum()) / 2 / tau) for j in range(5)))
        for i in range(5)
    )
    assert float(measure_loss(y, w, temperature=tau)) == pytest.approx(float(ref), rel=1e-14)


def test_measure_loss_on_the_sphere_is_prop_2_1_without_the_indicator():
    # on S^{d−1}, e^{−‖x−y‖²/(2τ)} = e^{(cos − 1)/τ}; with Ψ(t) = log(1 + 2t) and the self-pairs removed this is
    # latent_measure_nt_xent(positive_term=True) up to the j = i term — checked via the identity at n → large
    z = torch.nn.functional.normalize(torch.randn(6, 3, generator=torch.Generator().manual_seed(7), dtype=DT), dim=1)
    ours = measure_loss(z, temperature=0.5, psi=lambda t: torch.log1p(2 * (t - 1.0 / 6)))  # remove j = i: η(0)/n
    ref = latent_measure_nt_xent(z, temperature=0.5, positive_term=True)
    assert float(ours) == pytest.approx(float(ref), rel=1e-12)


@pytest.mark.parametrize("kw", PAIRS)
def test_first_variation_eq7_equals_autograd(kw):
    g = torch.Generator().manual_seed(1)
    y, w = torch.randn(3, 7, 4, generator=g, dtype=DT), torch.rand(3, 7, generator=g, dtype=DT) + 0.1  # ensembles
    yr = y.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(measure_loss(yr, w, **kw).sum(), yr)
    wn = w / w.sum(-1, keepdim=True)
    torch.testing.assert_close(first_variation(y, w, **kw), grad / wn[..., None], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kw", PAIRS)
def test_second_variation_equals_autograd(kw):
    g = torch.Generator().manual_seed(2)
    y, h = torch.randn(6, 3, generator=g, dtype=DT), torch.randn(6, 3, generator=g, dtype=DT)
    s = torch.zeros((), dtype=DT, requires_grad=True)
    (d1,) = torch.autograd.grad(measure_loss(y + s * h, **kw), s, create_graph=True)
    (d2,) = torch.autograd.grad(d1, s)
    val, scale = second_variation(y, h, return_scale=True, **kw)
    assert float(val) == pytest.approx(float(d2), rel=1e-11)
    assert float(scale) >= abs(float(val))


def test_eq6_derived_form_equals_autograd_and_printed_form_does_not():
    g = torch.Generator().manual_seed(3)
    m, n = 3, 5
    F = torch.randn(m, n, 2, generator=g, dtype=DT)
    Fr = F.clone().requires_grad_(True)
    (gF,) = torch.autograd.grad(augmented_loss(Fr, temperature=0.4), Fr)
    auto = gF * m * n
    torch.testing.assert_close(augmented_first_variation(F, temperature=0.4), auto, rtol=1e-12, atol=1e-13)
    printed = augmented_first_variation(F, temperature=0.4, printed=True)
    assert (printed - auto).abs().max() > 1e-2 * auto.abs().max()  # the erratum
    # invariant f (the same values under every T): both forms agree and reduce to eq. (7)
    inv = F[:1].expand(m, n, 2).clone()
    a, b = augmented_first_variation(inv), augmented_first_variation(inv, printed=True)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-15)
    torch.testing.assert_close(a[1], first_variation(F[0]), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 7, 20])
def test_evenly_spaced_points_are_stationary_with_one_multiplier(k):
    st = sphere_stationarity(circle_points_even(k), temperature=0.3)
    assert st.residual < 1e-13 and st.multiplier_spread < 1e-13 and st.stationary_residual < 1e-13
    if k > 1:
        assert st.scale > 0 and bool((st.multipliers < 0).all())  # repulsion: ∇L points inwards


def test_random_measure_is_not_stationary_and_probe_agrees():
    z = torch.randn(8, 3, generator=torch.Generator().manual_seed(4), dtype=DT)
    st = sphere_stationarity(z)
    assert st.residual > 1e-2 and st.stationary_residual == max(st.residual, st.multiplier_spread)
    assert stationarity_probe()(z) == pytest.approx(st.residual)
    # a tangential residual: moving against it on the sphere lowers the loss
    y = torch.nn.functional.normalize(z, dim=1)
    tang = st.gradient - st.multipliers[:, None] * y
    step = torch.nn.functional.normalize(y - 1e-4 * tang, dim=1)
    assert float(measure_loss(step)) < float(measure_loss(y))


def test_eq8_as_printed_fails_for_evenly_spaced_points():
    # ∫h(x_i, ·) = c x_i for evenly spaced points: the printed gap is max‖x_i − x_k‖ = 2 (K = 4), √3 (K = 3)
    assert symmetry_condition_gap(circle_points_even(4)) == pytest.approx(2.0, rel=1e-12)
    assert symmetry_condition_gap(circle_points_even(3)) == pytest.approx(math.sqrt(3), rel=1e-12)
    assert symmetry_condition_gap(circle_points_even(1)) == 0.0


def test_constant_map_has_zero_gradient():
    c = torch.tensor([[0.3, -1.2, 2.0]], dtype=DT).expand(5, 3)
    assert float(first_variation(c).abs().max()) == 0.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: measure_loss(torch.ones(3, 2, dtype=DT), temperature=0.0), "temperature"),
        (lambda: measure_loss(torch.tensor([[float("nan"), 0.0]], dtype=DT)), "NaN"),
        (lambda: first_variation(torch.ones(3, 2, dtype=DT), torch.ones(4, dtype=DT)), "weights"),
        (lambda: first_variation(torch.ones(3, 2, dtype=DT), -torch.ones(3, dtype=DT)), "weights"),
        (lambda: second_variation(torch.ones(3, 2, dtype=DT), torch.ones(2, 2, dtype=DT)), "h must have"),
        (lambda: sphere_stationarity(torch.ones(2, 3, 2, dtype=DT)), r"\(n, d\)"),
        (lambda: measure_loss(torch.ones(3, 2, dtype=DT), psi=3), "psi"),
    ],
)
def test_bad_input_is_one_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_one_measure_functions_refuse_ensemble_axes_they_would_mix():
    """augmented_loss took F (E, m, n, d) and returned one number that was neither a member's value nor their mean
    (1.20 against 1.04 and 1.64); sphere_stationarity / symmetry_condition_gap crashed on (..., n) weights."""
    g = torch.Generator().manual_seed(0)
    F = torch.randn(2, 3, 4, 2, generator=g, dtype=torch.float64)
    members = [float(augmented_loss(F[e])) for e in range(2)]
    assert len(set(members)) == 2  # the members differ: a mixed scalar would be neither
    for fn in (augmented_loss, augmented_first_variation):
        with pytest.raises(ValueError, match=r"F must have shape \(m, n, d\)"):
            fn(F)
    pts = torch.randn(5, 3, generator=g, dtype=torch.float64)
    w2 = torch.full((2, 5), 0.2, dtype=torch.float64)
    for fn in (sphere_stationarity, symmetry_condition_gap):
        with pytest.raises(ValueError, match=r"weights must have shape \(5,\)"):
            fn(pts, w2)
        fn(pts, w2[0])  # one measure's weights are fine


def test_symmetry_gap_of_evenly_spaced_points_is_their_diameter():
    """The docstring's example, computed: evenly spaced points give max ‖y_i − y_k‖ (2 for 4 points, √3 for 3)."""
    for n, expected in ((4, 2.0), (3, math.sqrt(3.0))):
        assert symmetry_condition_gap(circle_points_even(n, dtype=torch.float64)) == pytest.approx(expected, rel=1e-12)
