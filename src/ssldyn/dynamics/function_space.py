"""Function-space flows of ``variational`` Sec. 4.1: the kernel flow (Prop. 4.1) and vanilla GD (eq. 13–14).

Normalisation. For embeddings ``z = (z_1..z_n)`` and a loss 𝓛(z) that is a *mean* over
samples (eq. 9, ``𝓛 = (1/n) Σ_i L(z_i)``) write ``g_j = ∂𝓛/∂z_j`` and ``∇L(z_j) = n g_j``
(the paper's per-sample gradient; for contrastive losses ``L`` depends on all of ``z``, and
``n g_j`` is the gradient of the whole cost w.r.t. ``z_j``). Then, with step ``σ``,

* kernel flow, eq. (11)/(15):  ``z_i ← z_i − (σ/n) Σ_j K_ij ∇L(z_j) = z_i − σ Σ_j K_ij g_j``;
* vanilla GD, eq. (14):        ``z_i ← z_i − σ ∇L(z_i) = z_i − σ n g_i`` (K = I in eq. 13),

optionally followed by the projection onto the sphere (the constraint set C of Sec. 2).
The kernel is a fixed tensor (closed form, infinite width), or a :class:`NetworkKernel` that
re-evaluates the empirical NTK from the current weights every ``refresh_every`` steps while
moving the weights along ``ẇ = −Σ_i J_iᵀ g_i`` (the weight flow whose outputs the kernel
flow describes). Every flow reports into a :class:`~ssldyn.dynamics.Trajectory`.

The one dynamics contract (:mod:`ssldyn.dynamics`): the flows return
:class:`~ssldyn.dynamics.FlowResult` ``(state = final z, trajectory)``; probes receive the
embeddings ``z`` (``(n, d)``, or ``(E, n, d)`` with an ensemble kernel) and return a float or
``(E,)``; the loss 𝓛(z) is logged as ``loss`` at the ``every`` steps.

Guards: NaN/inf in the inputs (``z0``, a fixed kernel, the inputs of a :class:`NetworkKernel`)
and a bad ``steps``/``lr`` are a ``ValueError`` before any step; the loss 𝓛(z) of every step
goes through the :class:`~ssldyn.dynamics.guards.LossGuard`, so a diverging flow raises
:class:`~ssldyn.dynamics.guards.NonFiniteLossError` naming the step and the last finite loss.
Devices: everything runs on the device of ``z0`` (kernel and model there too); on CUDA the
guard defers its checks to the logged steps (no host sync per step) and names the same step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ssldyn.checks import choice, integer
from ssldyn.dynamics.common import (
    Probes,
    Track,
    check_embedding_loss,
    check_lr,
    check_schedule,
    check_steps,
    drop_singleton_member,
    member_checked_probes,
)
from ssldyn.dynamics.engine import run
from ssldyn.dynamics.guards import LossGuard, check_finite
from ssldyn.dynamics.trajectory import FlowResult, Trajectory

__all__ = [
    "embedding_loss_and_grad",
    "apply_kernel",
    "function_space_flow",
    "vanilla_gradient_descent",
    "NetworkKernel",
    "pointwise_gradient",
    "project_sphere",
]

LossFn = Callable[[Tensor], Tensor]


def project_sphere(z: Tensor) -> Tensor:
    """Rows onto the unit sphere S^{d-1}."""
    return z / z.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(z.dtype).tiny)


def embedding_loss_and_grad(loss_fn: LossFn, z: Tensor) -> tuple[Tensor, Tensor]:
    """``(𝓛(z), ∂𝓛/∂z)`` for embeddings ``z``; a loss with an ensemble axis ``(E,)`` is summed
    for the gradient (members are independent)."""
    z = z.detach().requires_grad_(True)
    with torch.enable_grad():
        loss = loss_fn(z)
        check_embedding_loss(loss, z)
        (g,) = torch.autograd.grad(loss.sum(), z)
    return loss.detach(), g


def apply_kernel(K: Tensor, g: Tensor) -> Tensor:
    """``(K g)_i = Σ_j K_ij g_j`` for ``K`` of shape ``(..., n, n, d, d)`` or ``(..., n, n)`` (times I_d)."""
    if K.dim() >= 4 and K.shape[-1] == g.shape[-1] and K.shape[-2] == g.shape[-1] and K.shape[-3] == g.shape[-2]:
        return torch.einsum("...ijab,...jb->...ia", K, g)
    return K @ g  # scalar kernel (..., n, n)


class _SphereOutputs(nn.Module):
    """``x -> normalize(model(x))``: the outputs of ``model`` projected row-wise onto S^{d-1} (with gradients)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        return project_sphere(self.model(x))


class NetworkKernel:
    """The empirical NTK of ``model`` on ``x``, re-evaluated every ``refresh_every`` steps.

    ``advance(g, lr)`` moves the weights by ``−lr Σ_i J_iᵀ g_i`` (one step of the weight flow
    whose output velocity is ``−K g``), so a refreshed kernel follows the trained network.

    With ``output="sphere"`` the network's map is ``f(x) = normalize(model(x))`` (the outputs on
    S^{d-1}, as ``train_weight_space(output="sphere")`` trains them): the kernel is the NTK of ``f``,
    ``K_ij = J_i J_jᵀ`` with ``J_i = ∂f(x_i)/∂w = P_i ∂model(x_i)/∂w / ‖model(x_i)‖`` and
    ``P_i = I − f_i f_iᵀ``, and :meth:`advance` moves the weights along ``−Σ_i J_iᵀ g_i`` of that ``f``. It is
    the kernel to use with ``function_space_flow(..., project="sphere")``, which requires it.

    Args:
        model: any ``nn.Module`` mapping ``x`` to ``(n, d)`` or ``(1, n, d)``.
        x: ``(n, ...)`` training inputs.
        refresh_every: recompute the kernel every this many steps (None: only at step 0, the
            "lazy" kernel).
        kernel: ``kernel(net, x) -> K`` with ``net`` the map ``f`` (``model`` itself, or the module
            ``normalize(model(·))`` with ``output="sphere"``); default the empirical NTK
            (:func:`ssldyn.kernels.empirical_ntk`). A closed form (e.g. of the averaging net)
            can be passed here.
        move_weights: update the weights in :meth:`advance` (False keeps them fixed).
        output: ``"raw"`` (``f = model``, the default) or ``"sphere"`` (``f = normalize(model)``).
    """

    def __init__(
        self,
        model: nn.Module,
        x: Tensor,
        *,
        refresh_every: int | None = 1,
        kernel: Callable[[nn.Module, Tensor], Tensor] | None = None,
        move_weights: bool = True,
        output: Literal["raw", "sphere"] = "raw",
    ) -> None:
        from ssldyn.kernels.ntk import empirical_ntk

        if refresh_every is not None:
            refresh_every = integer(refresh_every, "refresh_every", where="NetworkKernel")
        if not isinstance(x, Tensor) or x.dim() < 1 or x.shape[0] == 0:
            raise ValueError(f"NetworkKernel: x must be a non-empty tensor (n, ...), got {getattr(x, 'shape', x)!r}")
        self.output = choice(output, "output", ("raw", "sphere"), where="NetworkKernel")
        self.model, self.x, self.refresh_every = model, x, refresh_every
        self.net: nn.Module = _SphereOutputs(model) if output == "sphere" else model  # the map f whose NTK is K
        self.kernel = kernel or (lambda m, xx: empirical_ntk(m, None, xx))
        self.move_weights = move_weights
        self.evaluations = 0

    def __call__(self, step: int, z: Tensor) -> Tensor | None:
        """The kernel to use from ``step`` on, or None to keep the previous one."""
        if step == 0 or (self.refresh_every and step % self.refresh_every == 0):
            self.evaluations += 1
            return self.kernel(self.net, self.x).detach()
        return None

    def outputs(self) -> Tensor:
        """``f(x)``: ``(n, d)``, or ``(E, n, d)`` for ``E > 1`` (normalised with ``output="sphere"``)."""
        with torch.no_grad():
            return drop_singleton_member(self.net(self.x))  # (n, d), or (E, n, d) for E > 1

    def advance(self, g: Tensor, lr: float) -> None:
        """``w ← w − lr Σ_i J_iᵀ g_i`` with ``J_i = ∂f(x_i)/∂w`` and ``g (n, d)`` (or ``(E, n, d)``) = ∂𝓛/∂z."""
        if not self.move_weights:
            return
        params = [p for p in self.model.parameters() if p.requires_grad]
        with torch.enable_grad():
            out = drop_singleton_member(self.net(self.x))  # shaped as the embeddings z and g
            grads = torch.autograd.grad((out * g).sum(), params, allow_unused=True)
        with torch.no_grad():
            for p, gp in zip(params, grads):
                if gp is not None:
                    p.sub_(lr * gp)


def _check_kernel_shape(kernel: Any, z: Tensor, what: str, zname: str = "z") -> None:
    """A kernel ``(n, n)`` (times the identity in R^d) or ``(n, n, d, d)`` for embeddings ``z (..., n, d)``, with no
    leading axes (one kernel for every member), those of ``z`` (``(E, n, n, ...)`` for ``z (E, n, d)``) or singleton
    ones (a one-member ensemble's kernel): other leading axes would broadcast ``z`` to a new shape at the first step."""
    n, d = z.shape[-2:]
    if isinstance(kernel, Tensor) and kernel.is_complex():
        raise ValueError(f"function_space_flow: {what} must be a real tensor, got {kernel.dtype}")
    shape = tuple(kernel.shape) if isinstance(kernel, Tensor) else None
    full = shape is not None and len(shape) >= 4 and shape[-4:] == (n, n, d, d)  # the form apply_kernel takes
    if shape is None or not (full or (len(shape) >= 2 and shape[-2:] == (n, n))):
        got = shape if shape is not None else type(kernel).__name__
        raise ValueError(f"function_space_flow: {what} of shape {got} does not fit {zname} of shape {tuple(z.shape)}: "
                         f"expected (n, n) or (n, n, d, d) with n={n}, d={d}")  # fmt: skip
    lead, members = shape[:-4] if full else shape[:-2], tuple(z.shape[:-2])
    if lead and lead != members and any(k != 1 for k in lead):  # a one-member kernel (1, n, n) fits any z
        raise ValueError(f"function_space_flow: {what} of shape {shape} does not fit {zname} of shape "
                         f"{tuple(z.shape)}: its leading (ensemble) axes {lead} must be none or those of {zname} "
                         f"{members}")  # fmt: skip


def _check_inputs(z0: Tensor, kernel: Any) -> None:
    """NaN/inf in the flow's input data is a ``ValueError`` naming the input, before any step."""
    check_finite("z0", z0)
    if not isinstance(z0, Tensor) or z0.dim() not in (2, 3):
        raise ValueError(f"function_space_flow: z0 must be (n, d) or (E, n, d), got shape {tuple(z0.shape)}")
    if not z0.is_floating_point():
        raise ValueError(f"function_space_flow: z0 must be a floating tensor (e.g. float32, float64), got {z0.dtype}")
    if isinstance(kernel, Tensor):
        _check_kernel_shape(kernel, z0, "kernel", "z0")
        check_finite("kernel", kernel)
    elif isinstance(kernel, NetworkKernel):
        check_finite("x (inputs of the NetworkKernel)", kernel.x)


def function_space_flow(
    z0: Tensor,
    loss_fn: LossFn,
    kernel: Tensor | NetworkKernel | Callable[[int, Tensor], Tensor | None],
    *,
    steps: int,
    lr: float,
    project: Literal["sphere"] | None = None,
    probes: Probes | None = None,
    every: int | Iterable[int] | None = 1,
    snapshot_every: int | Iterable[int] | None = (),
    track: Track | None = None,
    guard: LossGuard | bool | None = None,
    trajectory: Trajectory | None = None,
) -> FlowResult[Tensor]:
    """Euler steps of ``ż_i = −(1/n) Σ_j K_ij ∇L(z_j) = −Σ_j K_ij ∂𝓛/∂z_j`` (Prop. 4.1, eq. 11/15).

    Args:
        z0: ``(n, d)`` initial embeddings (or ``(E, n, d)`` with an ``(E, n, n, ...)`` kernel).
        loss_fn: ``z -> 𝓛(z)``, the mean loss (scalar, or ``(E,)``).
        kernel: ``(n, n, d, d)`` / ``(n, n)`` fixed tensor; or a callable ``kernel(step, z)``
            returning a new kernel or None (keep); a :class:`NetworkKernel` also has its weights
            advanced along with ``z``. A kernel is used in the dtype and on the device of ``z0``.
        steps, lr: number of steps (>= 0) and step size σ (> 0).
        project: ``"sphere"`` to project every iterate onto S^{d-1}, or None. With a :class:`NetworkKernel`
            it must match the kernel's ``output``: ``project="sphere"`` needs ``NetworkKernel(..., output="sphere")``
            (the NTK of ``normalize(model(x))``; the flow then follows ``train_weight_space(output="sphere")``
            to ``O(lr²)`` per step) and ``project=None`` the raw outputs (``output="raw"``).
        probes: ``name -> probe(z)`` (a float for ``z (n, d)``, ``(E,)`` for ``z (E, n, d)``; anything else is a
            ``ValueError``) logged with ``loss`` at the ``every`` steps (int interval, explicit steps in
            ``0..steps``, or None: first and last step).
        snapshot_every: steps at which ``z`` and ``neg_grad`` = ``−∇L(z_i) = −n ∂𝓛/∂z_i`` are
            kept (same forms as ``every``; ``()`` none).
        track: progress wrapper of the step iterator.
        guard: the :class:`~ssldyn.dynamics.guards.LossGuard` of 𝓛(z) (None: a default one;
            False: none).
        trajectory: record into this trajectory (e.g. to keep the rows logged before an error).
    Returns:
        ``FlowResult(state=z_final, trajectory)``.
    Raises:
        ValueError: ``steps < 0``, ``lr <= 0``, a ``z0`` that is not a floating ``(n, d)`` / ``(E, n, d)``
            tensor, a complex kernel, an explicit step of ``every`` / ``snapshot_every`` outside ``0..steps``, a
            probe value that is neither a float nor ``(E,)``, ``project`` not matching a NetworkKernel's ``output``, NaN/inf in ``z0``, in a fixed ``kernel`` or in a
            NetworkKernel's inputs (before any step).
        NonFiniteLossError: the loss 𝓛(z) became NaN/inf at some step (names the step and the
            last finite loss; the trajectory holds the steps before it).
    """
    steps, lr = check_steps(steps), check_lr(lr)
    choice(project, "project", (None, "sphere"))
    every = check_schedule(every, steps, who="function_space_flow")
    snapshot_every = check_schedule(snapshot_every, steps, "snapshot_every", who="function_space_flow")
    _check_inputs(z0, kernel)
    if isinstance(kernel, NetworkKernel) and (project == "sphere") != (kernel.output == "sphere"):
        # the kernel and the weight update must be those of the map whose outputs the state follows
        raise ValueError(
            f"function_space_flow: project={project!r} with a NetworkKernel of output={kernel.output!r}: the flow's "
            "state would leave the network's outputs (the kernel and the weight step are those of the "
            f"{'raw' if kernel.output == 'raw' else 'normalised'} outputs); use project='sphere' with "
            "NetworkKernel(..., output='sphere') (the outputs normalize(model(x)), as train_weight_space(output="
            "'sphere')), or project=None with output='raw'"
        )
    z = z0.detach().clone()
    if project == "sphere":
        z = project_sphere(z)
    # a kernel runs in the dtype and on the device of z0 (a no-op when they already match)
    K: list[Tensor | None] = [kernel.to(dtype=z.dtype, device=z.device) if isinstance(kernel, Tensor) else None]
    grad: dict[int, Tensor] = {}  # ∂𝓛/∂z of the current step (for the snapshot neg_grad)

    def step(z: Tensor, t: int) -> tuple[Tensor, Tensor]:
        loss, g = embedding_loss_and_grad(loss_fn, z)
        grad.clear()
        grad[t] = g
        if t == steps:
            return z, loss
        if not isinstance(kernel, Tensor):
            new = kernel(t, z)
            if new is not None:
                _check_kernel_shape(new, z, f"the kernel at step {t}")
                K[0] = new.to(dtype=z.dtype, device=z.device)  # (..., n, n[, d, d]) as z
        if K[0] is None:
            raise ValueError("function_space_flow: the kernel callable returned None at step 0")
        z_next = z - lr * apply_kernel(K[0], g)
        if isinstance(kernel, NetworkKernel):
            kernel.advance(g, lr)
        return (project_sphere(z_next) if project == "sphere" else z_next), loss

    return run(
        z,
        step,
        steps=steps,
        every=every,
        probes=member_checked_probes(probes, "function_space_flow"),
        snapshots={"z": lambda z: z, "neg_grad": lambda z: -z.shape[-2] * next(iter(grad.values()))},
        snapshot_every=snapshot_every,
        track=track,
        guard=guard,
        trajectory=trajectory,
    )


def vanilla_gradient_descent(
    z0: Tensor, loss_fn: LossFn, *, steps: int, lr: float, project: Literal["sphere"] | None = "sphere", **kw: Any
) -> FlowResult[Tensor]:
    """eq. (14): ``z_i ← P_C(z_i − σ ∇L(z_i))`` with ``∇L(z_i) = n ∂𝓛/∂z_i`` (K = I, eq. 13).

    Same arguments and result as :func:`function_space_flow`; projected onto the sphere by default.
    """

    def identity_kernel(step: int, z: Tensor) -> Tensor | None:
        n = z.shape[-2]  # z0 was checked by function_space_flow before the first step
        return torch.eye(n, dtype=z.dtype, device=z.device) * n if step == 0 else None

    return function_space_flow(z0, loss_fn, identity_kernel, steps=steps, lr=lr, project=project, **kw)


def pointwise_gradient(loss_fn: LossFn, z: Tensor, queries: Tensor) -> Tensor:
    """Row ``i``: ``∇L`` at the query ``u_i`` put in place of ``z_i``, i.e. ``n ∂𝓛(z_{−i}, u_i)/∂u_i``.

    The gradient field of eq. (7) evaluated off the sample: vanilla GD (eq. 14) updates the
    embedding map at any input, e.g. at a perturbed ``T(x_i)``, by ``f ← f − σ ∇L(f)`` using
    the current embedded measure. Equals ``n ∂𝓛/∂z`` when ``queries = z``.

    ``z``, ``queries``: ``(n, d)``. ``loss_fn`` must accept a leading batch axis
    (``(n, n, d) -> (n,)``, the ensemble convention of :mod:`ssldyn.objectives`): the n
    substituted configurations are evaluated as one batch.
    """
    if z.dim() != 2 or not z.is_floating_point() or queries.shape != z.shape or not queries.is_floating_point():
        raise ValueError(f"pointwise_gradient: z and queries must be floating (n, d) of the same shape, got "
                         f"{tuple(z.shape)} {z.dtype} and {tuple(queries.shape)} {queries.dtype}")  # fmt: skip
    n = z.shape[-2]
    u = queries.detach().clone().requires_grad_(True)  # (n, d)
    eye = torch.eye(n, dtype=torch.bool, device=z.device)[..., None]  # (n, n, 1): batch b, row j
    with torch.enable_grad():
        batch = torch.where(eye, u[:, None, :], z.detach()[None, :, :])  # (n, n, d): z with row b := u_b
        losses = loss_fn(batch)  # (n,)
        (g,) = torch.autograd.grad(losses.sum(), u)
    return n * g
