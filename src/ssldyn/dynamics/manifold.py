"""Training on the Stiefel manifold ``St(n, p) = {W ∈ R^{n×p}: WᵀW = I_p}`` (``grassmann`` Sec. 4).

The orthogonality constraints ``W1ᵀW1 = I_d``, ``W2ᵀW2 = I_z`` of eq. (8) are kept in two ways:

- **projected GD** (Sec. 4.2, eq. 11 as the text describes it): a Euclidean step
  ``W ← W − η∇L`` followed by a map back to the manifold, either the polar factor
  ``polar(X) = X (XᵀX)^{-1/2} = U Vᵀ`` (nearest point in Frobenius norm) or the Q factor of a
  QR decomposition with the *sign fix* ``diag(R) > 0`` (so that the map is continuous and
  the identity on the manifold). The printed eq. (11) has ``+η∇L`` (ascent); we use descent.
- **Riemannian GD**: project the Euclidean gradient ``G`` onto the tangent space and
  retract. ``tangent="stiefel"`` uses the embedded (Euclidean-metric) Riemannian gradient
  ``G − W sym(WᵀG)``; ``tangent="grassmann"`` uses the horizontal projection
  ``(I − WWᵀ)G`` of Edelman et al. (1998) that the proof of Thm. 2 uses — with it the
  output dynamics are exactly eq. (9).

To first order in η, projected GD with the polar map equals Riemannian GD with the Stiefel
tangent; its flow in q = VᵀW1ᵀW2 is ``q̇ = −(4Λq − 3qqᵀΛq − Λqqᵀq)``, which has the same
linearisation at q = 0 and the same fixed points as eq. (9) but is not identical to it
(see ``ssldyn.dynamics.q_ode``).

The retractions, :func:`random_stiefel`, :func:`orthogonality_error` and :func:`frobenius_project`
are defined with the models' constraint sets in :mod:`ssldyn.models.stiefel` (so models need not
import dynamics) and re-exported here. All functions take batched matrices ``(..., n, p)``. A "wide" matrix (n < p) is handled
through its transpose (orthonormal rows). Everything runs on the device of its inputs;
:func:`random_stiefel` draws on the CPU (seeded generators) and moves the result to ``device``.

Training loop (the one dynamics contract, :mod:`ssldyn.dynamics`): :func:`train_gd` is the
full-batch GD loop of the ``grassmann`` experiments (Stiefel steps with :class:`ManifoldGD`,
plain steps with :class:`PlainGD`, any torch LR scheduler with ``scheduler=``) and returns ``FlowResult(state=params, trajectory)``. The
input data are checked for NaN/inf before the first step (``ValueError``) and every loss goes
through the :class:`~ssldyn.dynamics.guards.LossGuard`, so a diverging run raises
:class:`~ssldyn.dynamics.guards.NonFiniteLossError` naming the step, the member and its last
finite loss. A non-finite Euclidean step is not retracted (the SVD would fail on NaN and map inf
to an arbitrary point): the matrix stays non-finite, so the next loss is non-finite and the guard
reports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, get_args

import numpy as np
import torch

from ssldyn.checks import choice, nonnegative, positive
from ssldyn.dynamics.common import Probes, Track, check_steps
from ssldyn.dynamics.engine import run
from ssldyn.dynamics.guards import LossGuard, check_finite
from ssldyn.dynamics.trajectory import FlowResult
from ssldyn.models.stiefel import (
    RETRACTIONS,
    Retraction,
    _tall,
    frobenius_project,
    orthogonality_error,
    polar_retract,
    qr_retract,
    random_stiefel,
    retract,
)

__all__ = [
    "RETRACTIONS",
    "TANGENTS",
    "polar_retract",
    "qr_retract",
    "retract",
    "retract_finite",
    "stiefel_tangent",
    "grassmann_tangent",
    "tangent_project",
    "random_stiefel",
    "orthogonality_error",
    "frobenius_project",
    "projected_gd_step_",
    "riemannian_gd_step_",
    "sgd_step_",
    "ManifoldGD",
    "PlainGD",
    "train_gd",
]

Tangent = Literal["stiefel", "grassmann"]
TANGENTS: tuple[str, ...] = get_args(Tangent)


def _sym(a: torch.Tensor) -> torch.Tensor:
    return 0.5 * (a + a.mT)


@_tall
def stiefel_tangent(W: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """Riemannian gradient on St(n, p) with the Euclidean metric: ``G − W sym(WᵀG)``."""
    return G - W @ _sym(W.mT @ G)


@_tall
def grassmann_tangent(W: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """Horizontal (Grassmann) projection ``(I − WWᵀ)G`` (Edelman et al. 1998; proof of Thm. 2)."""
    return G - W @ (W.mT @ G)


def tangent_project(W: torch.Tensor, G: torch.Tensor, tangent: Tangent | str = "stiefel") -> torch.Tensor:
    if tangent == "stiefel":
        return stiefel_tangent(W, G)
    if tangent == "grassmann":
        return grassmann_tangent(W, G)
    raise ValueError(f"tangent {tangent!r}: allowed values are {', '.join(TANGENTS)}")


def retract_finite(X: torch.Tensor, method: Retraction = "polar") -> torch.Tensor:
    """:func:`retract` of every finite matrix of ``X (..., n, p)``; a matrix with NaN/inf is returned
    unchanged, so the divergence shows up in the next loss instead of failing inside the SVD (NaN) or
    being mapped to an arbitrary orthonormal matrix (inf). The finiteness test adds no host sync (a mask,
    no branch on the host); the retraction itself may: the polar one's ``torch.linalg.svd`` synchronises
    a CUDA device with the CPU (PyTorch's documentation)."""
    ok = torch.isfinite(X).all(-1).all(-1)[..., None, None]  # (..., 1, 1)
    safe = torch.where(ok, X, torch.zeros_like(X))  # (..., n, p): finite stand-in for the bad matrices
    return torch.where(ok, retract(safe, method), X)


@torch.no_grad()
def projected_gd_step_(params: Iterable[torch.Tensor], lr: float, retraction: Retraction = "polar") -> None:
    """In place: ``W ← retract(W − η ∇W)`` for every parameter with a ``.grad`` (eq. 11, descent).

    A non-finite ``W − η∇W`` is kept as it is (see :func:`retract_finite`)."""
    for W in params:
        if W.grad is None:
            continue
        W.copy_(retract_finite(W - lr * W.grad, retraction))


@torch.no_grad()
def riemannian_gd_step_(
    params: Iterable[torch.Tensor], lr: float, tangent: Tangent = "stiefel", *, retraction: Retraction = "qr"
) -> None:
    """In place: ``W ← retract(W − η · P_W(∇W))`` with the tangent projection ``P_W`` (non-finite
    steps kept as they are, see :func:`retract_finite`)."""
    for W in params:
        if W.grad is None:
            continue
        W.copy_(retract_finite(W - lr * tangent_project(W, W.grad, tangent), retraction))


@torch.no_grad()
def sgd_step_(params: Iterable[torch.Tensor], lr: float) -> None:
    """In place: the plain Euclidean step ``W ← W − η ∇W`` for every parameter with a ``.grad``."""
    for W in params:
        if W.grad is not None:
            W -= lr * W.grad


class _GroupGD(torch.optim.Optimizer):
    """A full-batch GD optimizer: ``step()`` applies ``_update(group)`` to every parameter group (no state)."""

    def _update(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None):  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._update(group)
        return loss


class PlainGD(_GroupGD):
    """Plain Euclidean gradient descent ``W ← W − η ∇W`` (:func:`sgd_step_`) as a torch optimizer.

    The rate is ``param_groups[i]["lr"]``, so any torch LR scheduler drives it (``train_gd(scheduler=…)``).
    ``torch.optim.SGD`` (no momentum) computes the same step with a fused multiply-add
    (``W.add_(∇W, alpha=−η)``), which differs in the last bit; this one rounds ``η∇W`` first, as
    :func:`sgd_step_`. ``params``: tensors of any shape (batched ensembles ``(E, …)`` included).
    """

    def __init__(self, params: Iterable[torch.Tensor], lr: float) -> None:
        lr = nonnegative(lr, "lr", where="PlainGD")  # inf passed the hand-written check
        super().__init__(params, dict(lr=lr))

    def _update(self, group: dict[str, Any]) -> None:
        sgd_step_(group["params"], group["lr"])


def _stiefel_tolerance(dtype: torch.dtype) -> float:
    """The largest :func:`orthogonality_error` ``max |WᵀW − I|`` (relative to the unit entries of ``I``) of a matrix
    taken as on the manifold: ``max(1e-6, √ε)`` of ``dtype`` (1e-6 in float64, 3.5e-4 in float32), far above the
    round-off of a retraction (a few ε·√n) and far below any visible departure."""
    return max(1e-6, math.sqrt(torch.finfo(dtype).eps))


def _host_orthogonality_error(W: torch.Tensor) -> float:
    """:func:`orthogonality_error` ``max |WᵀW − I|`` of the worst matrix of ``W (..., n, p)``, computed once on the
    host in float64 with NumPy: a check of the start, not a step of the algorithm, so it adds no torch operation to
    what the update costs (``FlopCounterMode`` counts of an update stay those of the update)."""
    a = W.detach().to(device="cpu", dtype=torch.float64).numpy()  # (..., n, p)
    if a.shape[-2] < a.shape[-1]:
        a = np.swapaxes(a, -1, -2)  # wide: orthonormal rows
    gram = np.swapaxes(a, -1, -2) @ a  # (..., p, p)
    return float(np.abs(gram - np.eye(a.shape[-1])).max())


class ManifoldGD(_GroupGD):
    """Gradient descent that keeps every parameter on its Stiefel manifold.

    The retractions are the identity only on the manifold, so a start off it would be moved there by the first
    step whatever the gradient (a jump, not a descent step): every parameter must start with
    ``orthogonality_error(W) = max |WᵀW − I| <= max(1e-6, √ε)`` of its dtype (1e-6 in float64, 3.5e-4 in
    float32), else a ``ValueError`` (checked when a
    parameter group is added, i.e. at construction; on the host, one copy of each parameter).

    Args:
        params: matrices (batched ``(E, n, p)`` allowed) that already have orthonormal columns
            (or rows, when wide): e.g. ``retract(W)`` / ``polar_retract(W)`` or :func:`random_stiefel`.
        lr: learning rate η.
        mode: ``"projected"`` (Euclidean step then retraction, eq. 11) or ``"riemannian"``
            (tangent projection then retraction).
        retraction: ``"polar"`` or ``"qr"`` (QR with sign fix).
        tangent: ``"stiefel"`` or ``"grassmann"`` (Riemannian mode only).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        mode: Literal["projected", "riemannian"] = "projected",
        *,
        retraction: Retraction = "polar",
        tangent: Tangent = "stiefel",
    ) -> None:
        lr = positive(lr, "lr", where="ManifoldGD")
        choice(mode, "mode", ("projected", "riemannian"), where="ManifoldGD")
        choice(retraction, "retraction", RETRACTIONS, where="ManifoldGD")
        choice(tangent, "tangent", TANGENTS, where="ManifoldGD")
        super().__init__(params, dict(lr=lr, mode=mode, retraction=retraction, tangent=tangent))

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """A group of matrices on their Stiefel manifolds (see the class docstring), else one ``ValueError``."""
        params = param_group["params"]
        params = [params] if isinstance(params, torch.Tensor) else params  # a list (torch's Optimizer made it one)
        for i, W in enumerate(params):
            if not isinstance(W, torch.Tensor) or W.dim() < 2 or not W.is_floating_point():
                got = f"shape {tuple(W.shape)}, {W.dtype}" if isinstance(W, torch.Tensor) else type(W).__name__
                raise ValueError(f"ManifoldGD: parameter {i} must be a floating matrix (n, p) or a batch of them "
                                 f"(..., n, p), got {got}")  # fmt: skip
            err = _host_orthogonality_error(W)  # worst matrix of the batch
            tol = _stiefel_tolerance(W.dtype)
            if not err <= tol:  # NaN too
                raise ValueError(
                    f"ManifoldGD: parameter {i} of shape {tuple(W.shape)} does not start on the Stiefel manifold: "
                    f"orthogonality_error max|WᵀW − I| = {float(err):.3g} > {tol:.2g} (max(1e-6, √ε) of {W.dtype}); "
                    "the first retraction would jump to the manifold. Start from an orthonormal matrix, e.g. "
                    "W.copy_(retract(W)) / polar_retract(W), or random_stiefel"
                )
        super().add_param_group(param_group)

    def _update(self, group: dict[str, Any]) -> None:
        if group["mode"] == "projected":
            projected_gd_step_(group["params"], group["lr"], group["retraction"])
        else:
            riemannian_gd_step_(group["params"], group["lr"], group["tangent"], retraction=group["retraction"])


def train_gd(
    params: Iterable[torch.Tensor],
    loss_fn: Callable[[], torch.Tensor],
    *,
    update: Callable[[], Any] | torch.optim.Optimizer,
    steps: int,
    probes: Probes | None = None,
    snapshots: Mapping[str, Callable[[list[torch.Tensor]], torch.Tensor]] | None = None,
    every: int | Iterable[int] | None = None,
    after_step: Callable[[], Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    track: Track | None = None,
    guard: LossGuard | bool | None = None,
    scheduler: Any = None,
) -> FlowResult[list[torch.Tensor]]:
    """Full-batch gradient descent with the loss guard (the GD loop of the ``grassmann`` experiments).

    For ``k = 0, …, steps``: ``L_k = loss_fn()`` (a scalar or one value per member ``(E,)``) goes
    through the guard; at the logged steps (``every``: ``0, every, 2·every, …`` and the last; None:
    the first and the last) ``loss`` is logged per member, the probes ``probe(params) -> float |
    (E,)`` and the snapshots ``fn(params) -> Tensor`` (kept on their device, e.g. the embeddings
    ``model(x)``) are recorded; then, for ``k < steps``, the gradients of ``Σ_e L_k`` are computed,
    ``update()`` changes the parameters (``ManifoldGD(...).step`` for the Stiefel GD of eq. 11,
    ``PlainGD(params, lr).step`` for plain GD), ``after_step()`` re-imposes a constraint (e.g.
    ``TwoLayerNet.project_``) and ``scheduler.step()`` sets the next rate. Members train independently.

    Args:
        params: the trained tensors (the state; their gradients are reset before each backward pass).
        loss_fn: computes the loss of the current parameters.
        update: applies one update from the gradients: a callable, or a torch optimizer (its ``step()``).
        steps: number of updates (>= 0).
        probes, snapshots, every: what is recorded when (see above); the observable is ``params``.
        after_step: called after every update.
        scheduler: a torch LR scheduler of the optimizer ``update`` steps, stepped after ``after_step``
            (e.g. ``LambdaLR(PlainGD(params, lr=1.0), lambda k: η(k))``: the rate of update ``k`` is ``η(k)``).
            Pass that optimizer itself as ``update`` (a scheduler wraps its ``step`` when created).
        inputs: ``name -> data`` checked for NaN/inf before the first step.
        track: progress wrapper of the step iterator (e.g. ``ctx.track``).
        guard: the loss guard (None: a default :class:`~ssldyn.dynamics.guards.LossGuard`; False: none).
    Returns:
        ``FlowResult(state=params, trajectory)``; the final loss is ``trajectory`` ``loss`` at ``steps``.
    Raises:
        ValueError: ``steps < 0`` or NaN/inf in ``inputs`` (before any step).
        NonFiniteLossError: ``L_k`` became NaN/inf (names ``k``, the member and its ``L_{k−1}``).
    """
    steps = check_steps(steps)
    for name, x in (inputs or {}).items():
        check_finite(name, x)
    params = list(params)
    return run(
        params,
        lambda ps, k: (ps, loss_fn()),  # () or (E,)
        steps=steps,
        every=every,
        probes=probes,
        snapshots=snapshots,
        snapshot_every=every if snapshots else (),
        track=track,
        guard=guard,
        optimizer=_Update(params, update),
        after_update=after_step,
        scheduler=scheduler,
    )


class _Update:
    """``update()`` (or ``optimizer.step()``) as the optimizer the engine steps: gradients reset to None, then the
    update."""

    def __init__(self, params: list[torch.Tensor], update: Callable[[], Any] | torch.optim.Optimizer) -> None:
        self.params, self.update = params, update

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        if isinstance(self.update, torch.optim.Optimizer):
            self.update.step()  # looked up now: a scheduler created after train_gd's caller read it wraps it
        else:
            self.update()
