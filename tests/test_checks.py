"""ssldyn.checks: one rule for "a finite number > 0" / ">= 0", and the callers that now share it.

Several callers used to test ``not x > 0`` only, which lets ``inf`` through (an infinite
temperature, learning rate or noise scale gives a finite-looking but meaningless result).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ssldyn.checks import integer, nonnegative, positive, real, unit_interval


@pytest.mark.parametrize("value", [0.5, 3, np.float32(0.25), np.int64(2), torch.tensor(0.5), torch.tensor([2.0])])
def test_real_numbers_are_accepted_as_python_floats(value):
    out = positive(value, "x")
    assert type(out) is float
    assert out == float(np.asarray(value.item() if isinstance(value, torch.Tensor) else value))


@pytest.mark.parametrize("value", [True, "0.1", None, [1.0], torch.tensor(True)])
def test_what_is_not_a_real_number_is_refused(value):
    with pytest.raises(ValueError, match=r"^f: x must be a real number, got "):
        real(value, "x", where="f")


def test_a_tensor_with_more_than_one_element_is_refused():
    with pytest.raises(ValueError, match=r"^x must be a scalar, got a tensor of shape \(2,\)$"):
        real(torch.ones(2), "x")
    with pytest.raises(ValueError, match=r"^x must be a scalar, got a tensor of shape \(2, 1\)$"):
        real(np.ones((2, 1)), "x")


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, -math.inf, math.nan])
def test_positive_refuses_zero_negative_and_non_finite(bad):
    with pytest.raises(ValueError, match=r"^lr must be a finite number > 0, got "):
        positive(bad, "lr")


@pytest.mark.parametrize("bad", [-1e-12, math.inf, math.nan])
def test_nonnegative_refuses_negative_and_non_finite(bad):
    with pytest.raises(ValueError, match=r"^g: s must be a finite number >= 0, got "):
        nonnegative(bad, "s", where="g")
    assert nonnegative(0, "s") == 0.0


def test_unit_interval_closed_and_half_open():
    assert unit_interval(0, "p") == 0.0 and unit_interval(1, "p") == 1.0 and unit_interval(np.float32(0.5), "p") == 0.5
    assert unit_interval(0.0, "momentum", include_one=False) == 0.0
    for bad in (-0.01, 1.01, math.nan, math.inf):
        with pytest.raises(ValueError, match=r"^f: p must be in \[0, 1\], got "):
            unit_interval(bad, "p", where="f")
    with pytest.raises(ValueError, match=r"^momentum must be in \[0, 1\), got 1.0$"):
        unit_interval(1.0, "momentum", include_one=False)
    with pytest.raises(ValueError, match=r"^p must be a real number, got True$"):
        unit_interval(True, "p")


def test_integer_takes_integral_types_only():
    assert integer(np.int64(3), "n") == 3 and type(integer(np.int64(3), "n")) is int
    assert integer(2, "batch", minimum=2) == 2
    for bad in (0, -1, 2.0, True, "3", None):
        with pytest.raises(ValueError, match=r"^M: n must be an integer >= 1, got "):
            integer(bad, "n", where="M")
    with pytest.raises(ValueError, match=r"^batch must be an integer >= 2, got 1$"):
        integer(1, "batch", minimum=2)


def _callers():
    from ssldyn.data.circle_mixture import CircleMixture
    from ssldyn.data.clustered import ball_noise, clustered_data
    from ssldyn.data.moons import half_moons, make_views
    from ssldyn.data.tokens import TokenSpec, token_magnitudes
    from ssldyn.dynamics.alpha_cl_mixture import gaussian_mixture_relu_A
    from ssldyn.dynamics.manifold import ManifoldGD

    x = np.random.default_rng(0).normal(size=(6, 2))
    return [
        ("ManifoldGD: lr", lambda v: ManifoldGD([torch.zeros(3, 2, requires_grad=True)], lr=v)),
        ("CircleMixture: kappa", lambda v: CircleMixture((0.0,), kappa=v)),
        ("TokenSpec: zeta", lambda v: TokenSpec(K=4, n_tokens=4, P=2, G=1, L=1, zeta=v)),
        (
            "gaussian_mixture_relu_A: sigma",
            lambda v: gaussian_mixture_relu_A(torch.ones(2), torch.zeros(1, 2), torch.ones(1), v),
        ),
        ("ball_noise: radius", lambda v: ball_noise(4, 2, v)),
        ("make_views: noise_var", lambda v: make_views(x, noise_var=v)),
        ("half_moons: noise", lambda v: half_moons(20, noise=v)),
        (r"half_moons: extra_stds\[1\]", lambda v: half_moons(20, extra_stds=(1.0, v))),
        ("clustered_data: center_norm", lambda v: clustered_data([3, 3], 2, 4, 0.1, center_norm=v)),
        ("token_magnitudes: zeta", lambda v: token_magnitudes(4, v)),
    ]


@pytest.mark.parametrize("where, build", _callers(), ids=lambda c: c if isinstance(c, str) else "")
def test_the_callers_refuse_an_infinite_value(where, build):
    """An infinite temperature-like argument used to pass the callers' own ``not x > 0``."""
    with pytest.raises(ValueError, match=rf"^{where} must be a finite number (> 0|>= 0), got inf"):
        build(math.inf)
    with pytest.raises(ValueError, match=rf"^{where} must be a finite number"):
        build(math.nan)


def test_linear_probe_c_follows_scikit_learn():
    """C = inf is scikit-learn's unregularised fit (linear_probe_accuracy accepts it): so does LinearProbe."""
    from ssldyn.probes.monitors import LinearProbe

    assert LinearProbe([0, 1] * 4, C=math.inf).C == math.inf
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match=r"^LinearProbe: C must be > 0 \(inf: no regularisation\), got "):
            LinearProbe([0, 1] * 4, C=bad)
