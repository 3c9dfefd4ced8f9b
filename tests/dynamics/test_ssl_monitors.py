"""The papers' monitors on a model: NTK class blocks, view alignment, the contrast matrix and the
q-ODE (grassmann Thm. 2, checked against Grassmann gradient descent written out), the α-CL
contrastive covariance (eq. 3 written out as a double sum)."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from ssldyn.dynamics.monitors import AlphaCLSpectrum, ContrastSpectrum, NTKClassBlocks, ViewAlignment
from ssldyn.dynamics.ssl import train_ssl
from ssldyn.models import MLP
from ssldyn.objectives import InfoNCE
from ssldyn.probes import alignment, uniformity

DT = torch.float64


def jitter(x, g):
    return x + 0.3 * torch.randn(x.shape, generator=g, dtype=x.dtype)


def _contrast_reference(k: np.ndarray, y: np.ndarray) -> float:
    kn = k / np.sqrt(np.outer(np.diag(k), np.diag(k)))
    off = ~np.eye(len(y), dtype=bool)
    same = y[:, None] == y[None, :]
    return (kn[same & off].mean() - kn[~same].mean()) / kn[off].std(ddof=1)


def test_ntk_monitor_of_a_linear_model_is_the_contrast_of_its_closed_form_kernel():
    # f(x) = W x + b with d outputs: the traced NTK is d (x_iᵀx_j + 1), whatever W is
    x = torch.randn(30, 5, generator=torch.Generator().manual_seed(0), dtype=DT)
    y = np.arange(30) % 3
    net = nn.Linear(5, 4).to(DT)
    mon = NTKClassBlocks(net, x, y, n_perm=0)
    want = _contrast_reference(4 * (x @ x.T + 1).numpy(), y)
    assert mon(None) == pytest.approx(want, abs=1e-10)


def test_ntk_monitor_separates_true_from_shuffled_labels_and_handles_batchnorm():
    digits = load_digits()
    x = torch.tensor(digits.images[:80], dtype=torch.float32)[:, None] / 16.0  # (80, 1, 8, 8)
    y = digits.target[:80]
    torch.manual_seed(0)
    net = nn.Sequential(  # a user's CNN with BatchNorm: empirical_ntk needs eval mode, the monitor sets it
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 8)
    )
    net.train()
    mon = NTKClassBlocks(net, x, y, n_perm=100, shuffled_control=True)
    vals = mon.values()
    other = NTKClassBlocks(net, x, np.random.default_rng(0).permutation(y), n_perm=100).values()
    assert net.training  # mode restored
    assert vals["contrast"] > 0.5 and vals["z"] > 5
    for shuffled in (other, {"contrast": vals["contrast_shuffled"], "z": vals["z_shuffled"]}):
        assert abs(shuffled["contrast"]) < 0.2 and abs(shuffled["z"]) < 4
    assert mon.shuffled.sort().values.tolist() == sorted(y.tolist())  # a relabelling with the same class sizes


def test_ntk_monitor_of_an_ensemble_gives_each_members_value():
    x = torch.randn(20, 4, generator=torch.Generator().manual_seed(1), dtype=DT)
    y = np.arange(20) % 2
    ens = MLP(4, 3, hidden=8, depth=2, ensemble=2, dtype=DT, generator=torch.Generator().manual_seed(2))
    out = NTKClassBlocks(ens, x, y, n_perm=0)(None)
    for e in range(2):
        one = MLP(4, 3, hidden=8, depth=2, ensemble=1, dtype=DT)
        with torch.no_grad():
            for p, q in zip(one.parameters(), ens.parameters()):
                p.copy_(q[e : e + 1])
        assert float(out[e]) == pytest.approx(NTKClassBlocks(one, x, y, n_perm=0)(None), abs=1e-10)


def test_view_alignment_uses_two_fixed_views():
    x = torch.randn(25, 4, generator=torch.Generator().manual_seed(0), dtype=DT)
    net = nn.Sequential(nn.Linear(4, 6), nn.Tanh()).to(DT)
    mon = ViewAlignment(net, x, jitter, seed=5)
    g = torch.Generator().manual_seed(5)
    v1, v2 = jitter(x, g), jitter(x, g)
    with torch.no_grad():
        want = {"alignment": alignment(net(v1), net(v2)), "uniformity": uniformity(net(v1))}
    assert mon.values() == pytest.approx(want, abs=1e-12)
    assert mon.values() == pytest.approx(want, abs=1e-12)  # the same views at every call


def _grassmann_C(h, hp, hn):
    n, p = h.shape
    Ct = sum(np.outer(h[i], hn[i] - hp[i]) for i in range(n))  # eq. (7): Σ_i x_i (x_i⁻ − x_i⁺)ᵀ
    return (Ct + Ct.T) / (2 * n)


def test_contrast_spectrum_is_eq7_of_the_features_with_another_samples_view_as_negative():
    x = torch.randn(12, 3, generator=torch.Generator().manual_seed(0), dtype=DT)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh()).to(DT)
    mon = ContrastSpectrum(net, x, jitter, seed=2)
    assert (mon.pi != torch.arange(12)).all()  # x⁻ is always another sample
    g = torch.Generator().manual_seed(2)
    xp = jitter(x, g)
    with torch.no_grad():
        h, hp = net(x).numpy(), net(xp).numpy()
    lam = np.linalg.eigvalsh(_grassmann_C(h, hp, hp[mon.pi.numpy()]))
    vals = mon.values()
    assert vals["lambda_min"] == pytest.approx(lam[0], abs=1e-12)
    assert vals["n_negative"] == (lam < 0).sum()
    np.testing.assert_allclose(mon.history[-1]["eigenvalues"][0], lam, atol=1e-12)


def _orthonormal(rows, cols, seed):
    a = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=DT)
    return torch.linalg.qr(a).Q  # (rows, cols), orthonormal columns


def test_qode_prediction_follows_grassmann_gradient_descent_of_an_orthogonal_linear_head():
    # grassmann Thm. 2: for u = W2ᵀ W1 h with W1ᵀW1 = I, W2ᵀW2 = I and the trace loss Tr(W2ᵀW1 C W1ᵀW2),
    # Ẇ = −(I − WWᵀ)∇_W L gives q̇ = eq. (9) for q = Vᵀ W1ᵀ W2; here written out as small Euler steps
    p, hdim, zdim = 4, 6, 2
    x = torch.randn(40, p, generator=torch.Generator().manual_seed(0), dtype=DT)
    backbone = nn.Identity()  # the features are the inputs: the head is the whole linear model
    W1, W2 = _orthonormal(hdim, p, 1), _orthonormal(hdim, zdim, 2)  # (h, d), (h, z)
    head = nn.Sequential(nn.Linear(p, hdim, bias=False), nn.Linear(hdim, zdim, bias=False)).to(DT)
    with torch.no_grad():
        head[0].weight.copy_(W1)
        head[1].weight.copy_(W2.T)
    mon = ContrastSpectrum(backbone, x, jitter, head=head, seed=0)
    vals = mon.values()
    C = torch.tensor(_grassmann_C(x.numpy(), mon.x_pos.numpy(), mon.x_neg.numpy()))
    lam, V = torch.linalg.eigh(C)
    assert vals["n_negative"] >= zdim  # the q-ODE has a non-trivial fixed point

    T, dt = 2.0, 1e-4
    for _ in range(int(T / dt)):
        G1 = 2 * W2 @ W2.T @ W1 @ C  # ∇_{W1} Tr(W2ᵀW1 C W1ᵀW2)
        G2 = 2 * W1 @ C @ W1.T @ W2  # ∇_{W2}
        W1 = W1 - dt * (torch.eye(hdim, dtype=DT) - W1 @ W1.T) @ G1
        W2 = W2 - dt * (torch.eye(hdim, dtype=DT) - W2 @ W2.T) @ G2
    q_gd = V.T @ W1.T @ W2  # (p, z)
    q_pred, u_pred = mon.predict(T)
    q0 = V.T @ _orthonormal(hdim, p, 1).T @ _orthonormal(hdim, zdim, 2)
    assert (q_pred[0] - q_gd).norm() < 1e-4 * (q_gd - q0).norm()  # Euler error O(dt) of a path of length O(1)
    torch.testing.assert_close(u_pred[0], x @ V @ q_pred[0])  # u_t(x̂) = q_tᵀ Vᵀ x̂ per row


def test_qode_alignment_is_one_for_a_head_on_the_predicted_subspace():
    x = torch.randn(40, 5, generator=torch.Generator().manual_seed(3), dtype=DT)
    head = nn.Linear(5, 2, bias=True).to(DT)
    mon = ContrastSpectrum(nn.Identity(), x, jitter, head=head, seed=1)
    mon.values()
    V = torch.linalg.eigh(mon.matrix()).eigenvectors
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[2.0, 1.0], [0.5, -1.0]], dtype=DT) @ V[:, :2].T)  # rows in span(v1, v2)
    assert mon.values()["qode_alignment"] == pytest.approx(1.0, abs=1e-12)
    with torch.no_grad():
        head.weight.copy_(V[:, 3:].T)  # rows orthogonal to v1, v2
    assert mon.values()["qode_alignment"] == pytest.approx(0.0, abs=1e-12)


def test_a_nonlinear_head_is_refused_for_the_head_predictions():
    x = torch.randn(10, 3, dtype=DT)
    with pytest.raises(ValueError, match="head is not linear"):
        ContrastSpectrum(nn.Identity(), x, jitter, head=nn.Sequential(nn.Linear(3, 2), nn.Tanh()).to(DT))
    with pytest.raises(ValueError, match="head is not linear"):
        AlphaCLSpectrum(nn.Identity(), x, jitter, head=nn.Sequential(nn.Linear(3, 2), nn.ReLU()).to(DT))


def _alpha_cl_C(f, fp, alpha):
    n = len(f)
    C = np.zeros((f.shape[1], f.shape[1]))
    for i in range(n):
        for j in range(n):  # eq. (3), the sum over all i, j
            C += alpha[i, j] * (np.outer(f[i] - f[j], f[i] - f[j]) - np.outer(f[i] - fp[i], f[i] - fp[i]))
    return C / (2 * n * n)


def test_alpha_cl_spectrum_is_eq3_of_the_features():
    x = torch.randn(15, 3, generator=torch.Generator().manual_seed(4), dtype=DT)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU()).to(DT)
    alpha = torch.rand(15, 15, generator=torch.Generator().manual_seed(5), dtype=DT)
    head = nn.Linear(4, 1).to(DT)
    mon = AlphaCLSpectrum(net, x, jitter, head=head, alpha=alpha, seed=6)
    g = torch.Generator().manual_seed(6)
    v1, v2 = jitter(x, g), jitter(x, g)
    with torch.no_grad():
        lam, V = np.linalg.eigh(_alpha_cl_C(net(v1).numpy(), net(v2).numpy(), alpha.numpy()))
    with torch.no_grad():
        head.weight.copy_(torch.tensor(V[:, -1:].T))  # the top eigenvector: the α-CL fixed point
    vals = mon.values()
    assert vals["lambda_1"] == pytest.approx(lam[-1], abs=1e-12)
    assert vals["gap"] == pytest.approx(lam[-1] - lam[-2], abs=1e-12)
    assert vals["head_alignment"] == pytest.approx(1.0, abs=1e-10)


def test_monitors_plug_into_train_ssl_and_share_one_computation_per_step():
    x = torch.randn(64, 6, generator=torch.Generator().manual_seed(0), dtype=DT)
    y = np.arange(64) % 2
    net, head = nn.Sequential(nn.Linear(6, 8), nn.Tanh()).to(DT), nn.Linear(8, 3).to(DT)
    spec = ContrastSpectrum(net, x[:32], jitter, head=head)
    ntk = NTKClassBlocks(net, x[:20], y[:20], n_perm=20)
    res = train_ssl(
        net,
        x,
        objective=InfoNCE(0.5),
        augment=jitter,
        steps=4,
        batch_size=16,
        head=head,
        every=2,
        probes={**spec.probes("contrast"), **ntk.probes("ntk")},
    )
    assert len(spec.history) == 3 and len(ntk.history) == 3  # steps 0, 2, 4: one computation each
    assert set(res.trajectory.probes) == {
        "loss",
        "contrast_lambda_min",
        "contrast_n_negative",
        "contrast_qode_alignment",
        "ntk_contrast",
        "ntk_z",
    }
    assert res.trajectory.last("contrast_lambda_min") == pytest.approx(float(spec.history[-1]["eigenvalues"][0, 0]))
    # the last logged values against the trained model, written out: eq. (7) of its features ...
    with torch.no_grad():
        h, hp = net(x[:32]).numpy(), net(spec.x_pos).numpy()
        W, b = net[0].weight, net[0].bias
        s = 1 - torch.tanh(x[:20] @ W.T + b) ** 2  # (20, 8): tanh'(pre-activation) of each output
    lam, V = np.linalg.eigh(_grassmann_C(h, hp, hp[spec.pi.numpy()]))
    assert res.trajectory.last("contrast_lambda_min") == pytest.approx(lam[0], abs=1e-12)
    assert res.trajectory.last("contrast_n_negative") == (lam < 0).sum()
    # ... the head alignment: mean over the 3 most negative eigenvectors of their norm projected on span(Aᵀ)
    Q = np.linalg.qr(head.weight.detach().numpy().T)[0]  # (8, 3) orthonormal basis of the head's row space
    align = np.mean([np.linalg.norm(Q.T @ V[:, k]) for k in range(3)])
    assert res.trajectory.last("contrast_qode_alignment") == pytest.approx(align, abs=1e-10)
    # ... and the NTK contrast of f(x) = tanh(Wx + b): K(x, x') = Σ_o tanh'_o(x) tanh'_o(x') (xᵀx' + 1)
    K = ((s @ s.T) * (x[:20] @ x[:20].T + 1)).numpy()
    assert res.trajectory.last("ntk_contrast") == pytest.approx(_contrast_reference(K, y[:20]), abs=1e-10)


def _view_alignment_written_out(model, mon):
    """Alignment and uniformity of the normalised outputs on the monitor's fixed views, per member."""
    with torch.no_grad():
        u, v = model(mon.v1), model(mon.v2)  # (n, d) or (E, n, d)
    u, v = u / u.norm(dim=-1, keepdim=True), v / v.norm(dim=-1, keepdim=True)
    u, v = (u, v) if u.dim() == 3 else (u[None], v[None])
    return [alignment(a, b) for a, b in zip(u, v)], [uniformity(a) for a in u]


def test_a_monitor_recomputes_at_every_step_of_train_gd_whose_observable_is_the_same_object():
    """The monitors cached their values on the identity of the observable; train_gd observes the same parameter list
    at every step, so every logged value after step 0 was the value of step 0."""
    from ssldyn.dynamics.manifold import PlainGD, train_gd

    x = torch.randn(32, 5, generator=torch.Generator().manual_seed(0), dtype=DT)
    model = nn.Linear(5, 3).to(DT)
    mon = ViewAlignment(model, x, jitter)
    params = list(model.parameters())
    seen = {}

    def written_out(ps):  # the reference: recomputed from the model at this step
        seen[len(seen)] = _view_alignment_written_out(model, mon)
        return 0.0

    res = train_gd(params, lambda: (model(x) - 1.0).pow(2).mean(), update=PlainGD(params, lr=0.2), steps=20,
                   every=5, probes={**mon.probes("va"), "ref": written_out})  # fmt: skip
    steps, unif = res.trajectory.series("va_uniformity")
    assert steps.tolist() == [0, 5, 10, 15, 20]
    np.testing.assert_allclose(unif, [seen[i][1][0] for i in range(5)], rtol=1e-12)
    np.testing.assert_allclose(res.trajectory.series("va_alignment")[1], [seen[i][0][0] for i in range(5)], rtol=1e-12)
    assert abs(unif[-1] - unif[0]) > 0.1  # the model moved: stale values were all equal


def test_a_monitor_recomputes_after_a_fused_ensemble_step_that_moves_no_version_counter():
    """The ensemble trainers observe the same network at every step and step it with EnsembleSGD's fused kernel,
    which moves no version counter: a key read a second time (the next step's probes) recomputes."""
    from ssldyn.dynamics import run
    from ssldyn.dynamics.ensemble_trainer import EnsembleSGD
    from ssldyn.models.ensemble import EnsembleLinear

    x = torch.randn(32, 5, generator=torch.Generator().manual_seed(1), dtype=DT)
    model = EnsembleLinear(5, 3, 2, bias=True, seeds=[0, 1], dtype=DT)
    mon = ViewAlignment(model, x, jitter)
    opt = EnsembleSGD(list(model.parameters()), lr=0.2)
    assert opt._fused  # the path that moves no version counter
    seen = {}

    def written_out(net):
        seen[len(seen)] = _view_alignment_written_out(net, mon)
        return torch.zeros(2)

    res = run(model, lambda m, t: (m, (m(x) - 1.0).pow(2).mean((-2, -1))), steps=20, every=5, optimizer=opt,
              probes={**mon.probes("va"), "ref": written_out})  # fmt: skip
    for e in range(2):
        unif = res.trajectory.series("va_uniformity", member=e)[1]
        np.testing.assert_allclose(unif, [seen[i][1][e] for i in range(5)], rtol=1e-12)
        align = res.trajectory.series("va_alignment", member=e)[1]
        np.testing.assert_allclose(align, [seen[i][0][e] for i in range(5)], rtol=1e-12)
        assert abs(unif[-1] - unif[0]) > 0.1
