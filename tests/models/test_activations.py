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
    with pytest.raises(ValueError, match=r"activation 'gelu': allowed values are 'linear', 'relu', .*'tanh'"):
        get_activation("gelu")


def test_the_activation_names_type_lists_exactly_the_known_activations():
    """``ActivationName`` (the ``Literal`` of the signatures) and the lookup table name the same six, in order."""
    assert ACTIVATION_NAMES == tuple(ACTIVATIONS) == ("linear", "relu", "leaky_relu", "quadratic", "sigmoid", "tanh")
