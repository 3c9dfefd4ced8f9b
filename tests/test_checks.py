"""ssldyn.checks: one rule for "a finite number > 0" / ">= 0", and the callers that now share it.

Several callers used to test ``not x > 0`` only, which lets ``inf`` through (an infinite
temperature, learning rate or noise scale gives a finite-looking but meaningless result).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ssldyn.checks import choice, integer, nonnegative, positive, probabilities, real, unit_interval
from ssldyn.dynamics import ManifoldGD
from ssldyn.models import TwoLayerNet
from ssldyn.objectives import info_nce
from ssldyn.probes import knn_accuracy


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


def test_probability_vectors_along_the_last_axis():
    """Finite, >= 0, each row summing to 1 within atol; NaN (for which ``p < 0`` and ``|Σp − 1| > atol`` are
    both false) is refused, float32 round-off of a normalised vector is not."""
    p = torch.rand(3, 1000, generator=torch.Generator().manual_seed(0))
    p32 = p / p.sum(-1, keepdim=True)  # float32: each row sums to 1 up to ~1e-7
    assert probabilities(p32, "p") is p32
    with pytest.raises(ValueError, match=r"^f: p must sum to 1 along its last axis \(off by 2\)"):
        probabilities(torch.tensor([1.0, 2.0]), "p", where="f")  # counts, not probabilities
    with pytest.raises(ValueError, match=r"must be finite and >= 0"):
        probabilities(torch.tensor([1.5, -0.5]), "p")  # sums to 1, but a negative "probability"
    with pytest.raises(ValueError, match=r"must be finite and >= 0"):
        probabilities(torch.tensor([float("nan"), 1.0]), "p")
    with pytest.raises(ValueError, match=r"must be a floating tensor \(\.\.\., m\)"):
        probabilities(torch.tensor([0, 1]), "p")
    with pytest.raises(ValueError, match=r"off by 0\.01"):
        probabilities(torch.tensor([[0.5, 0.5], [0.5, 0.51]], dtype=torch.float64), "p")  # the second row


def test_probability_inputs_share_the_check():
    """The latent models' probabilities and the population weights of the α-CL covariances: a NaN z_probs of
    TwoRFModel used to pass (the hand-written check compared only), unnormalised or signed population weights
    gave a matrix that is not the covariance of any population, without a word."""
    from ssldyn.data import TwoRFModel, latent_categorical
    from ssldyn.dynamics import gated_covariance
    from ssldyn.dynamics.two_layer_alpha_cl import thm5_closed_form

    pats, pp = torch.randn(2, 3, 4), torch.full((2, 2, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"^TwoRFModel: z_probs must be finite and >= 0"):
        TwoRFModel(pats, pp, torch.tensor([float("nan"), 1.0]))
    with pytest.raises(ValueError, match=r"^TwoRFModel: pattern_probs \(each \(k, c\) row\) must sum to 1"):
        TwoRFModel(pats, torch.full((2, 2, 3), 0.5), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"^latent_categorical: probs must sum to 1"):
        latent_categorical(5, torch.eye(3), torch.tensor([0.5, 0.5, 0.5]))
    x, w = torch.randn(10, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^contrastive covariance: weights must sum to 1"):
        gated_covariance(x, w, weights=torch.ones(10, dtype=torch.float64))  # counts
    xk, z = torch.randn(6, 2, 3, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"^eq\. 15: weights \(per RF\) must sum to 1"):
        thm5_closed_form(torch.randn(2, 3, dtype=torch.float64), xk, z, weights=torch.ones(6, 2, dtype=torch.float64))
    # normalised weights are accepted and give the weighted covariance Σ p_i x̃_i x̃_iᵀ − m mᵀ
    p = torch.rand(10, dtype=torch.float64)
    p = p / p.sum()
    xt = x * (x @ w > 0).to(x.dtype)[:, None]  # ReLU gate: x̃ = x h'(wᵀx)
    m = p @ xt
    ref = (p[:, None] * xt).T @ xt - torch.outer(m, m)
    torch.testing.assert_close(gated_covariance(x, w, weights=p), ref, rtol=1e-12, atol=1e-14)


def test_one_rule_for_options():
    """choice: the value back if allowed, else one line in one format for every option of the library (there were
    four: 'allowed values are a, b', '... 'a', 'b'', '; allowed ...', 'must be one of ..., got ...')."""
    assert choice("qr", "retraction", ("polar", "qr")) == "qr"
    assert choice(None, "project", (None, "sphere")) is None
    with pytest.raises(ValueError, match=r"^f: mode 'x': allowed values are 'a', 'b'$"):
        choice("x", "mode", ("a", "b"), where="f")
    with pytest.raises(ValueError, match=r"^mode \(a Tensor of shape \(2,\)\): allowed values are 'a'$"):
        choice(torch.tensor([1, 2]), "mode", ("a",))  # a tensor compares element-wise: not an option, no crash
    # a slipped positional tensor is named by type and shape, never printed (it was thousands of characters)
    with pytest.raises(
        ValueError, match=r"^f: activation \(a ndarray of shape \(100, 4\)\): allowed values are 'relu'$"
    ):
        choice(np.zeros((100, 4)), "activation", ("relu",), where="f")
    with pytest.raises(ValueError, match=r"^mode np\.float64\(0\.5\): allowed"):  # a NumPy scalar: its repr
        choice(np.float64(0.5), "mode", ("a",))
    with pytest.raises(ValueError, match=r"^mode 'x{76}\.\.\.: allowed"):  # a long repr is cut at 80
        choice("x" * 200, "mode", ("a",))
    from ssldyn.errors import UserError

    with pytest.raises(UserError, match=r"^split 'val': allowed values are 'train', 'test'$"):
        choice("val", "split", ("train", "test"), error=UserError)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ManifoldGD([torch.zeros(2, 2)], 0.1, mode="p"),  # pyright: ignore[reportArgumentType]
         r"^ManifoldGD: mode 'p': allowed values are 'projected', 'riemannian'$"),
        (lambda: knn_accuracy([[0.0]], [0], [[0.0]], [0], metric="l1"),  # pyright: ignore[reportArgumentType]
         r"^knn_accuracy: metric 'l1': allowed values are 'cosine', 'euclidean'$"),
        (lambda: TwoLayerNet(2, 3, 1, regime="free"),  # pyright: ignore[reportArgumentType]
         r"^TwoLayerNet: regime 'free': allowed values are "),
        (lambda: info_nce(torch.ones(4, 2), torch.ones(4, 2), similarity="l2"),  # pyright: ignore[reportArgumentType]
         r"^info_nce: similarity 'l2': allowed values are 'cosine', 'sqdist', 'dot'$"),
    ],
)  # fmt: skip
def test_the_library_options_share_the_rule(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_integer_settings_share_the_rule():
    """Hand-written int checks either truncated a float (int(2.5) = 2 passed: TokenSpec K, take n, a chunk size)
    or refused a NumPy integer (isinstance(n, int)); the one rule does neither."""
    from ssldyn.data.sphere import fibonacci_sphere
    from ssldyn.data.tokens import TokenSpec
    from ssldyn.dynamics import LossGuard
    from ssldyn.models.activations import monomial
    from ssldyn.objectives import alpha_uniform

    with pytest.raises(ValueError, match=r"^TokenSpec: K must be an integer >= 1, got 2\.5$"):
        TokenSpec(K=2.5)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match=r"^LossGuard: check_every must be an integer >= 1, got 2\.5$"):
        LossGuard(check_every=2.5)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match=r"^monomial: power p must be an integer >= 1, got 1\.5$"):
        monomial(1.5)  # pyright: ignore[reportArgumentType]
    assert alpha_uniform(np.int64(3)).shape == (3, 3)  # was "n must be a positive int"
    assert fibonacci_sphere(np.int64(4)).shape == (4, 3)


def test_more_settings_share_the_rules():
    """PlainGD's lr let inf through (``not lr >= 0``); make_views truncated p = 1.5 to one positive."""
    from ssldyn.data.moons import make_views
    from ssldyn.dynamics import PlainGD

    with pytest.raises(ValueError, match=r"^PlainGD: lr must be a finite number >= 0, got inf$"):
        PlainGD([torch.zeros(2, requires_grad=True)], lr=math.inf)
    with pytest.raises(ValueError, match=r"^make_views: p must be an integer >= 1, got 1\.5$"):
        make_views(np.zeros((4, 2)), p=1.5)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match=r"^make_views: q must be an integer >= 0, got -1$"):
        make_views(np.zeros((4, 2)), q=-1)
