import math

import numpy as np
import pytest
import torch

from ssldyn.dynamics.function_space import (
    NetworkKernel,
    function_space_flow,
    pointwise_gradient,
    project_sphere,
    vanilla_gradient_descent,
)
from ssldyn.dynamics.guards import LossGuard, NonFiniteLossError
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.dynamics.weight_space import train_weight_space
from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.models.mlp import MLP


def _loss(z):  # a mean over samples of a contrastive-type term, written out here (not from the library)
    u = z / z.norm(dim=-1, keepdim=True)
    s = torch.exp(u @ u.mT / 0.5)  # (..., n, n)
    return torch.log(s.sum(-1) - s.diagonal(dim1=-2, dim2=-1)).mean(-1)


def _fd_grad(f, z, h=1e-6):
    g = torch.zeros_like(z)
    for idx in range(z.numel()):
        e = torch.zeros_like(z).view(-1)
        e[idx] = h
        e = e.view_as(z)
        g.view(-1)[idx] = (f(z + e) - f(z - e)) / (2 * h)
    return g


def _twin_mlps(seed: int, hidden: int):
    """Inputs ``x (6, 3)``, a tanh MLP ``net``, its copy ``ref`` (the same weights) and ``z0 = net(x)``, float64."""
    torch.manual_seed(seed)
    x = torch.randn(6, 3, dtype=torch.float64)
    net = MLP(3, 2, hidden=hidden, depth=2, activation="tanh", dtype=torch.float64)
    ref = MLP(3, 2, hidden=hidden, depth=2, activation="tanh", dtype=torch.float64)
    ref.load_state_dict(net.state_dict())
    return x, net, ref, net(x)[0].detach()


def test_prop41_one_weight_step_equals_kernel_step_up_to_eta_squared():
    torch.manual_seed(0)
    x = torch.randn(6, 3, dtype=torch.float64)
    model = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=torch.float64)
    z0 = model(x)[0].detach()
    g = _fd_grad(_loss, z0)  # ∂𝓛/∂z by finite differences
    K = empirical_ntk(model, None, x)
    errs = []
    for eta in (1e-2, 5e-3, 2.5e-3):
        m = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=torch.float64)
        m.load_state_dict(model.state_dict())
        train_weight_space(m, x, _loss, steps=1, lr=eta, output="raw", every=None)
        dz = m(x)[0].detach() - z0
        pred = -eta * torch.einsum("ijab,jb->ia", K, g)
        errs.append(((dz - pred).norm() / pred.norm()).item())
    # relative error O(η): halves when η halves
    assert 1.7 < errs[0] / errs[1] < 2.3 and 1.7 < errs[1] / errs[2] < 2.3
    assert errs[-1] < 0.05


def test_vanilla_gd_is_eq14_projected():
    z0 = project_sphere(torch.randn(5, 2, dtype=torch.float64))
    z1 = vanilla_gradient_descent(z0, _loss, steps=1, lr=0.1).state
    grad_L = 5 * _fd_grad(_loss, z0)  # ∇L(z_i) = n ∂𝓛/∂z_i
    expected = z0 - 0.1 * grad_L
    expected = expected / expected.norm(dim=1, keepdim=True)
    assert torch.allclose(z1, expected, atol=1e-7)


def test_fixed_kernel_flow_step_and_snapshots():
    z0 = torch.randn(4, 2, dtype=torch.float64)
    A = torch.randn(8, 8, dtype=torch.float64)
    K = (A @ A.T).view(4, 2, 4, 2).permute(0, 2, 1, 3)  # (n, n, d, d) PSD kernel
    res = function_space_flow(z0, _loss, K, steps=1, lr=0.05, snapshot_every=1)
    traj, z1 = res.trajectory, res.state
    g = _fd_grad(_loss, z0)
    expected = z0 - 0.05 * torch.einsum("ijab,jb->ia", K, g)
    assert torch.allclose(z1, expected, atol=1e-8)
    assert torch.allclose(torch.as_tensor(traj.snapshots("neg_grad")[0]), -4 * g, atol=1e-6)
    assert traj.series("loss")[0].tolist() == [0, 1]


def test_network_kernel_flow_tracks_the_trained_network():
    x, net, ref, z0 = _twin_mlps(seed=1, hidden=16)
    nk = NetworkKernel(net, x, refresh_every=1)
    z_flow = function_space_flow(z0, _loss, nk, steps=20, lr=1e-3).state
    train_weight_space(ref, x, _loss, steps=20, lr=1e-3, output="raw", every=None)
    z_net = ref(x)[0].detach()
    moved = (z_net - z0).norm()
    assert (z_flow - z_net).norm() / moved < 0.02  # same flow up to O(η) per step
    assert nk.evaluations == 20


def test_pointwise_gradient_off_sample_by_finite_differences():
    z = torch.randn(5, 2, dtype=torch.float64)
    assert torch.allclose(pointwise_gradient(_loss, z, z), 5 * _fd_grad(_loss, z), atol=1e-6)
    q = torch.randn(5, 2, dtype=torch.float64)
    pg = pointwise_gradient(_loss, z, q)
    for i in (0, 3):

        def f(u, i=i):
            zz = z.clone()
            zz[i] = u
            return _loss(zz)

        assert torch.allclose(pg[i], 5 * _fd_grad(f, q[i]), atol=1e-6)


# --- guards: NaN input data before the flow, non-finite loss during it --------------------------------------------


def _quartic(z):  # 𝓛 = (1/n) Σ_i ‖z_i‖⁴, so ∇L(z_i) = n ∂𝓛/∂z_i = 4‖z_i‖² z_i
    return (z.pow(2).sum(-1) ** 2).mean(-1)


def _quartic_divergence_reference(z0: np.ndarray, lr: float, max_steps: int = 200):
    """eq. (14) without projection, written out in numpy: (first step with a non-finite loss, last finite loss)."""
    z, last = z0.copy(), None
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(max_steps):
            r2 = (z**2).sum(1, keepdims=True)  # (n, 1)
            loss = float(np.mean(r2[:, 0] ** 2))
            if not math.isfinite(loss):
                return k, last
            last = loss
            z = z - lr * 4.0 * r2 * z
    raise AssertionError("the reference did not diverge")


def test_vanilla_gd_with_a_huge_step_raises_at_the_divergence_step():
    z0 = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    lr = 1.0  # ‖z‖ ↦ ‖z‖·|1 − 4σ‖z‖²|: grows like ‖z‖³ until the loss overflows
    k_ref, last_ref = _quartic_divergence_reference(z0.numpy(), lr)
    assert k_ref >= 3  # several finite steps before the overflow
    traj = Trajectory()
    with pytest.raises(NonFiniteLossError) as e:
        vanilla_gradient_descent(z0, _quartic, steps=k_ref + 10, lr=lr, project=None, trajectory=traj)
    err = e.value
    assert err.step == k_ref and not math.isfinite(err.value)
    assert err.last_finite == pytest.approx(last_ref, rel=1e-9)
    assert f"at step {k_ref} (last finite value: {err.last_finite:.6g})" in str(err)
    # the last finite value is the loss at step k-1: the final loss of the same flow run for k-1 steps
    t_short = vanilla_gradient_descent(z0, _quartic, steps=k_ref - 1, lr=lr, project=None).trajectory
    assert err.last_finite == t_short.last("loss")
    # the trajectory of the failed run holds steps 0..k-1, nothing from the non-finite step
    steps, losses = traj.series("loss")
    assert steps.tolist() == list(range(k_ref)) and np.isfinite(losses).all()


def test_nan_injected_into_the_kernel_raises_one_step_later():
    z0 = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    A = torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    K = (A @ A.T).view(4, 2, 4, 2).permute(0, 2, 1, 3) / 8  # (n, n, d, d) PSD kernel
    K_nan = K.clone()
    K_nan[1, 2, 0, 1] = math.nan
    k0 = 5  # the kernel handed out at step k0 holds a NaN: z_{k0+1} is the first non-finite iterate

    def kernel(step, z):
        return K_nan if step == k0 else K

    with pytest.raises(NonFiniteLossError) as e:
        function_space_flow(z0, _loss, kernel, steps=20, lr=0.05)
    assert e.value.step == k0 + 1 and math.isnan(e.value.value)
    # last finite value: the loss at step k0, i.e. the final loss of the flow run for k0 steps (kernel never NaN)
    t_short = function_space_flow(z0, _loss, K, steps=k0, lr=0.05).trajectory
    assert e.value.last_finite == t_short.last("loss")
    # and a check that can fail: the finite loss at k0 differs from the one at step 0
    assert t_short.last("loss") != t_short.series("loss")[1][0]


def test_nan_input_raises_value_error_before_any_step():
    calls = {"loss": 0, "kernel": 0}

    def loss_fn(z):
        calls["loss"] += 1
        return _loss(z)

    def kernel(step, z):
        calls["kernel"] += 1
        return torch.eye(4, dtype=z.dtype)

    z0 = torch.randn(4, 2, dtype=torch.float64)
    bad = z0.clone()
    bad[2, 0] = math.nan
    traj = Trajectory()
    with pytest.raises(ValueError, match=r"^z0: 1 non-finite value"):
        function_space_flow(bad, loss_fn, kernel, steps=3, lr=0.1, trajectory=traj)
    with pytest.raises(ValueError, match=r"^z0: 1 non-finite value"):
        vanilla_gradient_descent(bad, loss_fn, steps=3, lr=0.1, trajectory=traj)
    K = torch.eye(4, dtype=torch.float64)
    K[0, 3] = math.inf
    with pytest.raises(ValueError, match=r"^kernel: 1 non-finite value"):
        function_space_flow(z0, loss_fn, K, steps=3, lr=0.1, trajectory=traj)
    x = torch.randn(4, 3, dtype=torch.float64)
    x[1, 1] = math.nan
    net = MLP(3, 2, hidden=4, depth=2, dtype=torch.float64)
    w0 = [p.detach().clone() for p in net.parameters()]
    with pytest.raises(ValueError, match=r"^x \(inputs of the NetworkKernel\): 1 non-finite"):
        function_space_flow(z0, loss_fn, NetworkKernel(net, x), steps=3, lr=0.1, trajectory=traj)
    assert calls == {"loss": 0, "kernel": 0} and len(traj) == 0
    assert all(torch.equal(p, q) for p, q in zip(net.parameters(), w0))


def test_deferred_guard_reports_what_an_eager_guard_reports():
    # the accelerator mode tracks the losses on the device and checks them later; it must name the same
    # step and last finite value as an eager check at every step
    losses = [torch.tensor(v, dtype=torch.float64) for v in (3.0, 2.5, 2.25, 2.0, math.inf, math.nan)]
    ref = LossGuard(lazy=False)
    with pytest.raises(NonFiniteLossError) as e_ref:
        for s, v in enumerate(losses):
            ref.update(s, v)
    g = LossGuard(lazy=True, check_every=32)
    for s, v in enumerate(losses):
        g.update(s, v)  # deferred: no check before check()
    with pytest.raises(NonFiniteLossError) as e:
        g.check()
    assert (e.value.step, e.value.last_finite) == (e_ref.value.step, e_ref.value.last_finite) == (4, 2.0)
    assert str(e.value) == str(e_ref.value)


@pytest.mark.parametrize(
    "kw", [dict(steps=-1, lr=0.1), dict(steps=3, lr=-0.1), dict(steps=3, lr=0.0), dict(steps=2.5, lr=0.1)]
)
def test_flow_rejects_negative_steps_and_non_positive_lr(kw):
    z0 = torch.randn(4, 2, dtype=torch.float64)
    K = torch.eye(4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^(steps must be an int >= 0|lr must be a finite number > 0)"):
        function_space_flow(z0, _loss, K, **kw)
    with pytest.raises(ValueError, match=r"^(steps must be an int >= 0|lr must be a finite number > 0)"):
        vanilla_gradient_descent(z0, _loss, **kw)


def test_network_kernel_rejects_bad_arguments():
    net = MLP(3, 2, hidden=4, depth=2, dtype=torch.float64)
    with pytest.raises(ValueError, match="refresh_every must be an integer >= 1"):
        NetworkKernel(net, torch.randn(4, 3, dtype=torch.float64), refresh_every=0)
    with pytest.raises(ValueError, match="x must be a non-empty tensor"):
        NetworkKernel(net, torch.randn(0, 3, dtype=torch.float64))


def test_a_kernel_with_leading_axes_other_than_those_of_z0_is_refused():
    """An ensemble kernel (3, 5, 5) for one z0 (5, 2) was accepted and broadcast the state to (3, 5, 2) at the first
    step (the loss still reduced to a scalar, so nothing flagged it)."""
    z0 = torch.randn(5, 2, dtype=torch.float64)
    K = torch.eye(5, dtype=torch.float64).expand(3, 5, 5)
    loss = lambda z: z.pow(2).sum(-1).mean(-1)  # noqa: E731 - () or (E,)
    msg = r"kernel of shape \(3, 5, 5\) does not fit z0 of shape \(5, 2\): its leading \(ensemble\) axes \(3,\)"
    with pytest.raises(ValueError, match=msg):
        function_space_flow(z0, loss, K, steps=2, lr=0.1)
    with pytest.raises(ValueError, match=r"leading \(ensemble\) axes \(3,\) must be none or those of z0 \(2,\)"):
        function_space_flow(torch.randn(2, 5, 2, dtype=torch.float64), loss, K, steps=2, lr=0.1)
    with pytest.raises(ValueError, match=r"the kernel at step 0 of shape \(3, 5, 5\)"):  # a kernel callable's too
        function_space_flow(z0, loss, lambda t, z: K, steps=2, lr=0.1)
    # a shared kernel (n, n) for an ensemble, and an ensemble kernel (E, n, n, d, d) for (E, n, d), keep their shapes
    z3 = torch.randn(3, 5, 2, dtype=torch.float64)
    assert function_space_flow(z3, loss, K[0], steps=2, lr=0.1).state.shape == (3, 5, 2)
    K4 = torch.einsum("eij,ab->eijab", K, torch.eye(2, dtype=torch.float64))  # (3, 5, 5, 2, 2)
    torch.testing.assert_close(function_space_flow(z3, loss, K4, steps=2, lr=0.1).state,
                               function_space_flow(z3, loss, K, steps=2, lr=0.1).state)  # fmt: skip


def _quadratic_loss(z):  # 𝓛(z) = (1/n) Σ_i ‖z_i‖², so ∂𝓛/∂z = 2z/n
    return z.pow(2).sum(-1).mean(-1)


def test_a_kernel_of_another_dtype_runs_in_the_dtype_of_z0():
    """A float32 kernel (torch.eye(n) is float32) with float64 embeddings failed at step 0 inside the matmul; the
    kernel runs in the dtype (and on the device) of z0, as documented. Reference: the Euler steps written out,
    z ← z − σ K (2z/n), with the kernel in float64."""
    n, sigma, steps = 5, 0.1, 4
    g = torch.Generator().manual_seed(3)
    z0 = torch.randn(n, 2, generator=g, dtype=torch.float64)
    B = torch.randn(n, n, generator=g)
    K32 = B @ B.T / n  # (n, n) float32
    ref = z0.clone()
    for _ in range(steps):
        ref = ref - sigma * K32.double() @ (2 * ref / n)  # (n, 2)
    fixed = function_space_flow(z0, _quadratic_loss, K32, steps=steps, lr=sigma)
    torch.testing.assert_close(fixed.state, ref, rtol=1e-12, atol=1e-14)
    assert fixed.state.dtype == torch.float64
    call = function_space_flow(z0, _quadratic_loss, lambda t, z: K32 if t == 0 else None, steps=steps, lr=sigma)
    torch.testing.assert_close(call.state, ref, rtol=1e-12, atol=1e-14)


def test_non_floating_z0_or_a_complex_kernel_is_one_value_error():
    """An integer z0 failed with autograd's "only Tensors of floating point dtype can require gradients"."""
    with pytest.raises(ValueError, match=r"^function_space_flow: z0 must be a floating tensor .*, got torch.int64"):
        function_space_flow(torch.ones(4, 2, dtype=torch.long), _quadratic_loss, torch.eye(4), steps=2, lr=0.1)
    with pytest.raises(ValueError, match=r"^function_space_flow: kernel must be a real tensor, got torch.complex64"):
        function_space_flow(torch.ones(4, 2), _quadratic_loss, torch.eye(4, dtype=torch.complex64), steps=2, lr=0.1)


def _sphere_pair(lr, steps=20):
    """The flow with a NetworkKernel(output="sphere") and projection, and train_weight_space(output="sphere") from the
    same weights: (flow state, the flow network's normalised outputs, the weight-space network's, start)."""
    x, net, ref, z0 = _twin_mlps(seed=1, hidden=16)
    nk = NetworkKernel(net, x, output="sphere")
    z_flow = function_space_flow(z0, _loss, nk, steps=steps, lr=lr, project="sphere").state
    train_weight_space(ref, x, _loss, steps=steps, lr=lr, every=None)  # output="sphere", its default
    with torch.no_grad():
        z_ref = ref(x)[0]
        z_own = net(x)[0]
    return z_flow, z_own / z_own.norm(dim=-1, keepdim=True), z_ref / z_ref.norm(dim=-1, keepdim=True), z0


def test_sphere_network_kernel_flow_follows_sphere_weight_space_training_to_lr_squared():
    """project="sphere" used to run the kernel and the weight step of the *raw* outputs while only z was projected:
    the end points were ~80% apart. With NetworkKernel(output="sphere") both follow normalize(model(x)). Reference:
    train_weight_space(output="sphere") from the same weights. One Euler step of the kernel flow and one weight
    step differ by O(lr²), so at a fixed number of steps the gap is O(lr²·steps): halving lr quarters it (measured
    ratios 4.0 and 3.9), while the distance moved only halves. The flow's state stays the normalised outputs of its
    own network (the weights it advances) to the same order."""
    gaps, own, moved = [], [], []
    for lr in (1e-4, 5e-5, 2.5e-5):
        z_flow, z_own, z_ref, z0 = _sphere_pair(lr)
        gaps.append((z_flow - z_ref).norm().item())
        own.append((z_flow - z_own).norm().item())
        moved.append((z_ref - project_sphere(z0)).norm().item())
        assert torch.allclose(z_flow.norm(dim=-1), torch.ones(6, dtype=torch.float64))
    for errs in (gaps, own):
        assert 3.0 < errs[0] / errs[1] < 5.0 and 3.0 < errs[1] / errs[2] < 5.0  # O(lr²) at fixed steps
    assert 1.8 < moved[0] / moved[1] < 2.2  # the path itself is O(lr·steps): it did move
    assert gaps[-1] / moved[-1] < 3e-3 and own[-1] / moved[-1] < 3e-3  # 1e-3 measured (0.98 with the raw kernel)


def test_sphere_network_kernel_is_the_ntk_of_the_normalised_outputs():
    """K of f = normalize(g) written out from the raw NTK of g: J_f,i = P_i J_g,i / ‖g_i‖ with P_i = I − f_i f_iᵀ, so
    K_f,ij = P_i K_g,ij P_j / (‖g_i‖ ‖g_j‖)."""
    torch.manual_seed(2)
    x = torch.randn(5, 3, dtype=torch.float64)
    net = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=torch.float64)
    K_raw = empirical_ntk(net, None, x)  # (n, n, d, d)
    g = net(x)[0].detach()  # (n, d)
    r = g.norm(dim=-1)  # (n,)
    f = g / r[:, None]
    P = torch.eye(2, dtype=torch.float64) - f[:, :, None] * f[:, None, :]  # (n, d, d)
    expected = torch.einsum("iab,ijbc,jdc->ijad", P, K_raw, P) / (r[:, None, None, None] * r[None, :, None, None])
    nk = NetworkKernel(net, x, output="sphere")
    torch.testing.assert_close(nk(0, f), expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(nk.outputs(), f, rtol=1e-14, atol=0.0)


def test_project_must_match_the_network_kernel_output():
    x = torch.randn(4, 3, dtype=torch.float64)
    net = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=torch.float64)
    z0 = net(x)[0].detach()
    with pytest.raises(ValueError, match=r"^function_space_flow: project='sphere' with a NetworkKernel of "
                                         r"output='raw'.*NetworkKernel\(\.\.\., output='sphere'\)"):  # fmt: skip
        function_space_flow(z0, _loss, NetworkKernel(net, x), steps=2, lr=1e-3, project="sphere")
    with pytest.raises(ValueError, match=r"^function_space_flow: project=None with a NetworkKernel of output='sphere'"):
        function_space_flow(z0, _loss, NetworkKernel(net, x, output="sphere"), steps=2, lr=1e-3)
    with pytest.raises(ValueError, match=r"^NetworkKernel: output 'unit': allowed values are 'raw', 'sphere'$"):
        NetworkKernel(net, x, output="unit")  # pyright: ignore[reportArgumentType]


def test_explicit_steps_beyond_steps_are_refused_and_the_ends_are_logged():
    """A step beyond ``steps`` in every=[...] / snapshot_every=[...] was dropped silently (never logged)."""
    z0 = torch.randn(4, 2, dtype=torch.float64)
    K = torch.eye(4, dtype=torch.float64)
    for kw in (dict(every=[0, 3, 5]), dict(snapshot_every=[2, 7]), dict(every=[-1, 2])):
        name = next(iter(kw))
        with pytest.raises(
            ValueError, match=rf"^function_space_flow: {name}: the steps .* not integers in 0\.\.steps=3"
        ):
            function_space_flow(z0, _quadratic_loss, K, steps=3, lr=0.1, **kw)
    res = function_space_flow(z0, _quadratic_loss, K, steps=3, lr=0.1, every=[0, 3], snapshot_every=iter([0, 3]))
    assert res.trajectory.series("loss")[0].tolist() == [0, 3]  # step 0 and steps are valid
    assert sorted(res.trajectory.snapshots("z")) == [0, 3]  # a generator is read once
    x = torch.randn(6, 3, dtype=torch.float64)
    net = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^train_weight_space: every: the steps 4 are not integers in 0\.\.steps=2"):
        train_weight_space(net, x, _loss, steps=2, lr=1e-3, every=[0, 4])


def test_a_vector_probe_of_one_model_is_refused_not_logged_as_members():
    """A probe returning (d,) for a single model was stored as members 0..d−1 (series() showed coordinate 0)."""
    z0 = torch.randn(5, 3, dtype=torch.float64)
    K = torch.eye(5, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^function_space_flow: probe 'mean_vec' returned shape \(3,\) \(3 value\(s\)\) "
                                         r"for a single model; allowed: a float"):  # fmt: skip
        function_space_flow(z0, _quadratic_loss, K, steps=1, lr=0.1, probes={"mean_vec": lambda z: z.mean(0)})
    z3 = torch.randn(2, 5, 3, dtype=torch.float64)  # an ensemble of 2: one value per member, reference written out
    res = function_space_flow(
        z3, _quadratic_loss, K, steps=1, lr=0.1, every=None, probes={"sq": lambda z: z.pow(2).sum((1, 2))}
    )
    np.testing.assert_allclose(res.trajectory.series_members("sq")[1][0], z3.pow(2).sum((1, 2)).numpy(), rtol=1e-14)
    with pytest.raises(
        ValueError, match=r"probe 'v' returned shape \(3,\) .* an ensemble of 2 members; allowed: one value"
    ):
        function_space_flow(z3, _quadratic_loss, K, steps=1, lr=0.1, probes={"v": lambda z: z[0].mean(0)})
    x = torch.randn(6, 3, dtype=torch.float64)
    net = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^train_weight_space: probe 'm' returned shape \(2,\)"):
        train_weight_space(net, x, _loss, steps=1, lr=1e-3, probes={"m": lambda z: z.mean(0)})


def _unscaled_loss(z):  # a mean over pairs, not invariant to the scale of z (written out here), unlike _loss
    return ((z.unsqueeze(-2) - z.unsqueeze(-3)) ** 2).sum(-1).neg().exp().mean((-1, -2))


# a NetworkKernel moves its network's weights along the weight flow (advance), and project="sphere" projects the
# starting embeddings too
def test_network_kernel_moves_the_weights_by_a_gradient_step_of_the_loss(sgd_step_by_hand):
    # at step 0 the flow's z is the network's output, so advance(g, lr) = −lr Σ_i J_iᵀ g_i is exactly one GD step
    # of 𝓛(model(x)) on the weights (reference: the hand-written SGD step)
    x, net, ref, z0 = _twin_mlps(seed=2, hidden=8)
    w0 = [p.detach().clone() for p in net.parameters()]
    function_space_flow(z0, _unscaled_loss, NetworkKernel(net, x, refresh_every=1), steps=1, lr=0.05)
    sgd_step_by_hand(ref, _unscaled_loss(ref(x)[0]), 0.05)
    assert max(float((q.detach() - p0).abs().max()) for q, p0 in zip(ref.parameters(), w0)) > 1e-4  # a real step
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-10, atol=1e-12)


def test_network_kernel_flow_and_its_network_stay_together_over_many_steps(sgd_step_by_hand):
    x, net, ref, z0 = _twin_mlps(seed=1, hidden=16)
    w0 = [p.detach().clone() for p in net.parameters()]
    z_flow = function_space_flow(z0, _unscaled_loss, NetworkKernel(net, x, refresh_every=1), steps=20, lr=0.05).state
    for _ in range(20):
        sgd_step_by_hand(ref, _unscaled_loss(ref(x)[0]), 0.05)
    dw_ref = torch.cat([(q.detach() - p0).reshape(-1) for q, p0 in zip(ref.parameters(), w0)])
    dw_net = torch.cat([(p.detach() - p0).reshape(-1) for p, p0 in zip(net.parameters(), w0)])
    assert float((dw_net - dw_ref).norm()) < 0.05 * float(dw_ref.norm())  # the weights followed GD
    z_net = net(x)[0].detach()
    assert float((z_flow - z_net).norm()) < 0.05 * float((z_net - z0).norm())  # and the kernel followed the weights


def test_sphere_projection_applies_to_the_starting_embeddings():
    # z0 off the sphere: eq. (14) starts from P_C(z0), so step 1 is P(P(z0) − σ n ∂𝓛/∂z |_{P(z0)}) and the loss
    # logged at step 0 is 𝓛(P(z0))
    g = torch.Generator().manual_seed(5)
    z0 = 3.0 * torch.randn(5, 2, generator=g, dtype=torch.float64)
    u0 = z0 / z0.norm(dim=1, keepdim=True)
    res = vanilla_gradient_descent(z0, _unscaled_loss, steps=1, lr=0.1)
    want = u0 - 0.1 * 5 * _fd_grad(_unscaled_loss, u0)
    want = want / want.norm(dim=1, keepdim=True)
    torch.testing.assert_close(res.state, want, rtol=0, atol=1e-7)
    assert abs(res.trajectory.series("loss")[1][0] - float(_unscaled_loss(u0))) < 1e-12
    # with steps = 0 the state is the projected start
    torch.testing.assert_close(function_space_flow(z0, _unscaled_loss, torch.eye(5, dtype=torch.float64), steps=0, lr=0.1,
                                                   project="sphere").state, u0, rtol=0, atol=1e-15)  # fmt: skip
