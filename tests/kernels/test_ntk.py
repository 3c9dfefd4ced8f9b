import torch
from torch import nn

from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.models.mlp import MLP


def _fd_jacobian(model, x, h=1e-6):
    """Central finite differences of the flattened outputs w.r.t. all parameters: (n, d, P)."""
    params = [p for p in model.parameters()]
    cols = []
    with torch.no_grad():
        for p in params:
            flat = p.view(-1)
            for k in range(flat.numel()):
                old = flat[k].item()
                flat[k] = old + h
                up = model(x)
                flat[k] = old - h
                dn = model(x)
                flat[k] = old
                cols.append((up - dn) / (2 * h))
    J = torch.stack(cols, -1)
    return J.reshape(J.shape[-3], J.shape[-2], -1) if J.dim() == 4 else J


def test_both_implementations_equal_finite_difference_kernel_on_a_user_module():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).double()
    x1, x2 = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64)
    J1, J2 = _fd_jacobian(model, x1), _fd_jacobian(model, x2)  # (n, d, P)
    ref = torch.einsum("iaP,jbP->ijab", J1, J2)
    Kj = empirical_ntk(model, None, x1, x2, implementation="jacobian")
    Kv = empirical_ntk(model, None, x1, x2, implementation="ntk-vp")
    assert Kj.shape == (4, 3, 2, 2)
    assert torch.allclose(Kj, ref, atol=1e-7)
    assert torch.allclose(Kj, Kv, atol=1e-10)


def test_trace_and_diagonal_modes_and_functional_form():
    model = MLP(2, 3, hidden=4, depth=3, activation="tanh", dtype=torch.float64)
    x = torch.randn(5, 2, dtype=torch.float64)
    K = empirical_ntk(model, None, x)
    for impl in ("jacobian", "ntk-vp"):
        T = empirical_ntk(model, None, x, implementation=impl, mode="trace")
        assert torch.allclose(T, K.diagonal(dim1=-2, dim2=-1).sum(-1), atol=1e-10)
    D = empirical_ntk(model, None, x, mode="diagonal")
    assert torch.allclose(D, K[torch.arange(5), torch.arange(5)], atol=1e-12)
    # a plain function of (params, x) and a subset of parameters
    params = {"w": torch.randn(3, 2, dtype=torch.float64)}
    Kf = empirical_ntk(lambda p, xx: torch.tanh(xx @ p["w"].T), params, x)
    s = 1 - torch.tanh(x @ params["w"].T) ** 2  # (n, d): ∂f^k/∂w_k = s_k x
    ref = torch.diag_embed(s[:, None, :] * s[None, :, :]) * (x @ x.T)[..., None, None]
    assert torch.allclose(Kf, ref, atol=1e-12)


def test_ensemble_gives_one_kernel_per_member():
    model = MLP(2, 2, hidden=3, depth=2, ensemble=3, activation="tanh", dtype=torch.float64)
    x = torch.randn(4, 2, dtype=torch.float64)
    K = empirical_ntk(model, None, x)
    Kv = empirical_ntk(model, None, x, implementation="ntk-vp")
    assert K.shape == (3, 4, 4, 2, 2) and torch.allclose(K, Kv, atol=1e-10)
    for e in range(3):
        single = MLP(2, 2, hidden=3, depth=2, activation="tanh", dtype=torch.float64)
        with torch.no_grad():
            for ls, le in zip(single.layers, model.layers):
                ls.weight.copy_(le.weight[e : e + 1])
                ls.bias.copy_(le.bias[e : e + 1])
        assert torch.allclose(empirical_ntk(single, None, x), K[e], atol=1e-12)
