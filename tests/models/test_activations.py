import numpy as np
import pytest
import torch

from ssldyn.models.activations import ACTIVATION_NAMES, ACTIVATIONS, get_activation, monomial


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_derivative_matches_autograd(name):
    act = get_activation(name)
    x = torch.linspace(-2, 2, 41, dtype=torch.float64)
    x = x[x.abs() > 1e-9]  # ReLU-type kinks at 0 are defined by convention
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(act(xg).sum(), xg)
    torch.testing.assert_close(act.deriv(x), g)


FORMULAS = {  # h written out in numpy (the docstrings: leaky slope 0.05, quadratic x²)
    "linear": lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "leaky_relu": lambda x: np.where(x > 0, x, 0.05 * x),
    "quadratic": lambda x: x**2,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_values_are_the_formulas_and_derivatives_are_finite_differences(name):
    """h against numpy, h' against central differences of the numpy h (away from the kinks at 0)."""
    act = get_activation(name)
    x = np.linspace(-3, 3, 61)
    x = x[np.abs(x) > 1e-9]
    np.testing.assert_allclose(act(torch.from_numpy(x)).numpy(), FORMULAS[name](x), rtol=1e-14, atol=1e-15)
    h = 1e-6
    fd = (FORMULAS[name](x + h) - FORMULAS[name](x - h)) / (2 * h)
    np.testing.assert_allclose(act.deriv(torch.from_numpy(x)).numpy(), fd, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_homogeneity_flag(name):
    act = get_activation(name)
    x = torch.linspace(-2, 2, 41, dtype=torch.float64)
    holds = act.c is not None and torch.allclose(act(x), act.c * act.deriv(x) * x)
    assert holds == act.homogeneous


def test_relu_derivative_at_zero_is_zero_and_values():
    assert get_activation("relu").deriv(torch.zeros(1)).item() == 0.0
    assert get_activation("leaky_relu")(torch.tensor([-1.0])).item() == pytest.approx(-0.05)
    assert monomial(3)(torch.tensor([2.0])).item() == 8.0
    xm = np.linspace(-2, 2, 9)
    m3 = monomial(3)  # h = x³, h' = 3x², h = (1/3)·h'·x
    np.testing.assert_allclose(m3(torch.from_numpy(xm)).numpy(), xm**3, rtol=1e-15)
    np.testing.assert_allclose(m3.deriv(torch.from_numpy(xm)).numpy(), 3 * xm**2, rtol=1e-15)
    assert m3.homogeneous and m3.c == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match=r"activation 'gelu': allowed values are 'linear', 'relu', .*'tanh'"):
        get_activation("gelu")


def test_the_activation_names_type_lists_exactly_the_known_activations():
    """``ActivationName`` (the ``Literal`` of the signatures) and the lookup table name the same six, in order."""
    assert ACTIVATION_NAMES == tuple(ACTIVATIONS) == ("linear", "relu", "leaky_relu", "quadratic", "sigmoid", "tanh")
