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


# --- traps: training-mode BatchNorm/Dropout, memory, bad input -----------------------------------------------------
import math  # noqa: E402

import pytest  # noqa: E402

from ssldyn.kernels import ntk as ntk_mod  # noqa: E402


def _cnn(dropout: bool = False):
    layers = [nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten()]
    layers += [nn.Dropout(0.5)] if dropout else []
    return nn.Sequential(*layers, nn.Linear(3 * 4 * 4, 2)).double()


@pytest.mark.parametrize("dropout", [False, True])
def test_training_mode_batchnorm_or_dropout_asks_for_eval(dropout):
    net = _cnn(dropout)
    x = torch.randn(3, 1, 4, 4, dtype=torch.float64)
    names = "BatchNorm2d, Dropout" if dropout else "BatchNorm2d"
    with pytest.raises(ValueError, match=rf"training mode and has {names}: .* call model.eval\(\) first"):
        empirical_ntk(net, None, x)
    net.eval()  # eval mode: running statistics, no dropout -> a well-defined kernel, equal to finite differences
    with torch.no_grad():
        net[1].running_mean.uniform_(-0.5, 0.5)
        net[1].running_var.uniform_(0.5, 2.0)
    params = [p for p in net.parameters()]
    J = []
    for xi in x:  # per-sample Jacobian by finite differences of the eval-mode network
        cols = []
        with torch.no_grad():
            for p in params:
                flat = p.view(-1)
                for k in range(flat.numel()):
                    old = flat[k].item()
                    flat[k] = old + 1e-6
                    up = net(xi[None])[0]
                    flat[k] = old - 1e-6
                    dn = net(xi[None])[0]
                    flat[k] = old
                    cols.append((up - dn) / 2e-6)
        J.append(torch.stack(cols, -1))
    J = torch.stack(J)  # (n, d, P)
    torch.testing.assert_close(empirical_ntk(net, None, x), torch.einsum("iaP,jbP->ijab", J, J), atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("mode", ["trace", "diagonal"])
def test_trace_and_diagonal_jacobian_modes_work_in_chunks(monkeypatch, mode):
    model = MLP(3, 4, hidden=7, depth=3, activation="tanh", dtype=torch.float64)
    x = torch.randn(11, 3, dtype=torch.float64)
    K = empirical_ntk(model, None, x)  # the full kernel (all Jacobians at once)
    seen = []
    real = ntk_mod._jac

    def spy(f, p, xx, chunk_size=None):
        seen.append(xx.shape[0])
        return real(f, p, xx, chunk_size)

    monkeypatch.setattr(ntk_mod, "_jac", spy)
    out = empirical_ntk(model, None, x, mode=mode, chunk_size=4)
    ref = K.diagonal(dim1=-2, dim2=-1).sum(-1) if mode == "trace" else K[torch.arange(11), torch.arange(11)]
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)
    assert max(seen) <= 4 and sum(seen) >= 11  # never the Jacobians of more than one chunk of samples per call
    # with x2: rectangular blocks, each chunk of either side at most 4 samples
    if mode == "trace":
        seen.clear()
        x2 = torch.randn(6, 3, dtype=torch.float64)
        Kx = empirical_ntk(model, None, x, x2, mode="trace", chunk_size=4)
        monkeypatch.setattr(ntk_mod, "_jac", real)
        Kf = empirical_ntk(model, None, x, x2)
        torch.testing.assert_close(Kx, Kf.diagonal(dim1=-2, dim2=-1).sum(-1), atol=1e-12, rtol=1e-12)
        assert max(seen) <= 4


def test_full_kernel_falls_back_to_chunks_and_reports_memory_it_cannot_have(monkeypatch):
    model = MLP(3, 2, hidden=50, depth=3, activation="tanh", dtype=torch.float64)  # P = 2852 parameters
    x = torch.randn(40, 3, dtype=torch.float64)
    K = empirical_ntk(model, None, x)
    P = sum(p.numel() for p in model.parameters())
    jac_all = 40 * 2 * P * 8  # bytes of all Jacobians (1.8 MB)
    kernel = 40 * 40 * 4 * 8
    seen = []
    real = ntk_mod._jac
    monkeypatch.setattr(ntk_mod, "_jac", lambda f, p, xx, c=None: seen.append(xx.shape[0]) or real(f, p, xx, c))
    # a budget below the Jacobians of all samples but above two chunks: computed in blocks, same kernel
    K2 = empirical_ntk(model, None, x, chunk_size=8, max_memory=jac_all // 2)
    torch.testing.assert_close(K2, K, atol=1e-12, rtol=1e-12)
    assert max(seen) <= 8
    with pytest.raises(
        ValueError,
        match=r"the full kernel of 40×40 samples .* needs 50 KiB \(51200 bytes\), more than the 50 KiB \(51199 bytes\) available",
    ):
        empirical_ntk(model, None, x, max_memory=kernel - 1)
    with pytest.raises(ValueError, match=r"Jacobian chunks of 32 samples .* lower chunk_size"):
        empirical_ntk(model, None, x, mode="trace", max_memory=kernel + 10 * 2 * P * 8)


def test_bad_inputs_are_clear_value_errors():
    model = MLP(3, 2, hidden=4, depth=2, dtype=torch.float64)
    x = torch.randn(5, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^empirical_ntk: x1 is empty"):
        empirical_ntk(model, None, x[:0])
    with pytest.raises(ValueError, match=r"^empirical_ntk: x2 is empty"):
        empirical_ntk(model, None, x, x[:0])
    bad = x.clone()
    bad[1, 2] = math.nan
    for impl in ("jacobian", "ntk-vp"):
        with pytest.raises(ValueError, match=r"^empirical_ntk: x1 has 1 non-finite value"):
            empirical_ntk(model, None, bad, implementation=impl)
    with pytest.raises(ValueError, match="chunk_size"):
        empirical_ntk(model, None, x, chunk_size=0)


def test_the_diagonal_kernel_checks_its_jacobian_chunks_with_either_implementation():
    """mode='diagonal' is always built from Jacobian chunks: with implementation='ntk-vp' it skipped the max_memory
    check that 'jacobian' makes (and ran on a budget the same chunks exceed)."""
    model = MLP(3, 3, hidden=40, depth=3, activation="tanh", dtype=torch.float64)
    x = torch.randn(8, 3, dtype=torch.float64)
    P = sum(p.numel() for p in model.parameters())
    budget = 8 * 3 * 3 * 8 + 3 * P * 8  # the kernel and one sample's Jacobian, not a chunk of 8
    for impl in ("jacobian", "ntk-vp"):
        with pytest.raises(ValueError, match=r"Jacobian chunks of 8 samples"):
            empirical_ntk(model, None, x, mode="diagonal", implementation=impl, max_memory=budget)
    full = empirical_ntk(model, None, x)
    K = empirical_ntk(model, None, x, mode="diagonal", implementation="ntk-vp", chunk_size=1, max_memory=budget)
    torch.testing.assert_close(K, torch.stack([full[i, i] for i in range(8)]), rtol=1e-12, atol=1e-12)


def test_params_pick_the_parameters_and_unknown_names_are_an_error():
    """The kernel w.r.t. the last layer's weight alone is δ_kl h(x_i)·h(x_j) (f = W₂h + b₂, written out); a name
    the module does not have used to be ignored by functional_call (an all-zero kernel), inputs in the params slot
    gave a dict-update error."""
    g = torch.Generator().manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x = torch.randn(5, 3, dtype=torch.float64, generator=g)
    with torch.no_grad():
        h = torch.tanh(net[0](x))  # (5, 4) hidden features
    for impl in ("jacobian", "ntk-vp"):
        K = empirical_ntk(net, {"2.weight": net[2].weight.detach()}, x, implementation=impl)  # (5, 5, 2, 2)
        torch.testing.assert_close(K, (h @ h.T)[:, :, None, None] * torch.eye(2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^empirical_ntk: params 'weight' is not a parameter of the Sequential; "
                       r"its parameters are 0\.bias, 0\.weight, 2\.bias, 2\.weight$"):  # fmt: skip
        empirical_ntk(net, {"weight": net[2].weight.detach()}, x)
    with pytest.raises(ValueError, match=r"^empirical_ntk: params must be a mapping name -> tensor or None, got "
                       r"Tensor \(inputs go after it"):  # fmt: skip
        empirical_ntk(net, x, x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^empirical_ntk: params\['2\.weight'\] is a float, not a tensor$"):
        empirical_ntk(net, {"2.weight": 1.0}, x)  # type: ignore[dict-item]
