"""Weight-space gradient descent of any network on any loss of its embeddings (``variational`` eq. 9).

``w ← w − σ ∇_w 𝓛(f(w, x_1..x_n))``, with the outputs mapped to the sphere (the constraint set
``C = {f : R^D → S^{d-1}}`` of Sec. 2) by normalising inside the loss (``output="sphere"``,
the default) or used as they are (``output="raw"``). With ``augment`` the loss receives two
augmented views ``loss_fn(f(T x), f(T' x))`` (SimCLR); without, ``loss_fn(f(x))`` (an
invariant map, Prop. 2.1). Full batch by default, or minibatches of ``batch_size`` (seeded
epochs of permutations).

The one dynamics contract (:mod:`ssldyn.dynamics`): returns ``FlowResult(state=model,
trajectory)``. At the logged steps ``k`` (the state after ``k`` updates, ``k = 0..steps``) the
trajectory holds ``loss`` — the loss that is optimised, i.e. on the batch and views of update
``k + 1`` (at ``k = steps`` one more batch is drawn and evaluated, without an update and without
changing the model's buffers such as BatchNorm statistics) — and the probes of the
embeddings ``z = f(x)`` of the whole clean ``x`` (the observable; ``(n, d)``, or ``(E, n, d)``
for an ensemble with ``E > 1``). Snapshots ``z`` (and, full batch without augmentation, where
it is the gradient of the optimised loss, ``neg_grad = −∇L(z_i) = −n ∂𝓛/∂z_i``) as the
function-space flows, so the two can be compared side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

import torch
from torch import Tensor, nn

from ssldyn.checks import choice, integer, nonnegative, positive, unit_interval
from ssldyn.dynamics.common import (
    Augment,
    Probes,
    Track,
    check_embedding_loss,
    check_lr,
    check_schedule,
    check_steps,
    drop_singleton_member,
    member_checked_probes,
    minibatches,
)
from ssldyn.dynamics.engine import preserved_buffers, run
from ssldyn.dynamics.function_space import project_sphere
from ssldyn.dynamics.guards import LossGuard, check_finite
from ssldyn.dynamics.trajectory import FlowResult, Trajectory

__all__ = ["train_weight_space", "make_optimizer"]


def make_optimizer(
    params: Iterable[nn.Parameter],
    optimizer: Literal["sgd", "adam"] | Callable[[list[nn.Parameter]], torch.optim.Optimizer],
    lr: float,
    *,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> torch.optim.Optimizer:
    """``"sgd"`` (with ``momentum`` in [0, 1), ``weight_decay`` >= 0), ``"adam"``, or a factory ``params -> Optimizer``.

    ``lr``, ``momentum`` and ``weight_decay`` must be finite (torch refuses negative ones only: NaN or inf
    would train to NaN without a word).
    """
    params = list(params)
    if callable(optimizer):
        return optimizer(params)
    lr = positive(lr, "lr", where="make_optimizer")
    weight_decay = nonnegative(weight_decay, "weight_decay", where="make_optimizer")
    momentum = unit_interval(momentum, "momentum", where="make_optimizer", include_one=False)
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer {optimizer!r}: allowed values are 'sgd', 'adam' or a factory params -> Optimizer")


def _outputs(model: nn.Module, x: Tensor, output: Literal["sphere", "raw"]) -> Tensor:
    """``model(x)`` (``(E, n, d)`` or ``(n, d)``), normalised when ``output="sphere"`` (with gradients)."""
    z = model(x)
    return project_sphere(z) if output == "sphere" else z


def train_weight_space(
    model: nn.Module,
    x: Tensor,
    loss_fn: Callable[..., Tensor],
    *,
    steps: int,
    lr: float,
    optimizer: Literal["sgd", "adam"] | Callable[[list[nn.Parameter]], torch.optim.Optimizer] = "sgd",
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    output: Literal["sphere", "raw"] = "sphere",
    augment: Augment | None = None,
    batch_size: int | None = None,
    generator: torch.Generator | None = None,
    probes: Probes | None = None,
    every: int | Iterable[int] | None = 1,
    snapshot_every: int | Iterable[int] | None = (),
    track: Track | None = None,
    guard: LossGuard | bool | None = None,
    trajectory: Trajectory | None = None,
) -> FlowResult[nn.Module]:
    """Train ``model`` in place by gradient descent on ``loss_fn`` of its embeddings.

    Args:
        model: any ``nn.Module``; ``(n, ...) -> (n, d)`` or an ensemble ``(E, n, d)``.
        x: ``(n, ...)`` training inputs.
        loss_fn: ``loss_fn(z)`` (no augmentation) or ``loss_fn(z1, z2)`` (two views); a scalar,
            or ``(E,)`` one value per member (summed for the update: members train independently).
        steps, lr: number of updates (>= 0) and step size (> 0); ``optimizer`` ``"sgd"`` (with
            ``momentum``, ``weight_decay``), ``"adam"`` or a factory ``params -> Optimizer``.
        output: ``"sphere"`` (normalise the outputs; the sphere constraint of Sec. 2) or ``"raw"``.
        augment: ``augment(x, generator) -> view``; two views per step (None: no augmentation).
        batch_size: minibatch size (None: the full batch); batches are epochs of permutations
            drawn with ``generator``, which also drives ``augment``.
        probes: ``name -> probe(z)`` on the clean embeddings of ``x``: a float for one model, ``(E,)`` for an
            ensemble (anything else is a ``ValueError``).
        every, snapshot_every: the logged / snapshotted steps (int interval, explicit steps in ``0..steps``;
            ``every=None``: first and last; ``snapshot_every=()``: none).
        track: progress wrapper of the step iterator (e.g. ``ctx.track``).
        guard: the loss guard (None: a default :class:`~ssldyn.dynamics.guards.LossGuard`; False: none).
        trajectory: record into this trajectory.
    Returns:
        ``FlowResult(state=model, trajectory)``: ``loss`` (the optimised loss) and the probes per
        member at the logged steps; snapshots of member 0 (or all members when ``E > 1``).
    Raises:
        ValueError: bad arguments (an explicit step outside ``0..steps`` included) or NaN/inf in ``x`` (before
            training); a probe value that is neither a float nor ``(E,)``.
        NonFiniteLossError: the loss became NaN/inf (names the step and the last finite value).
    """
    steps, lr = check_steps(steps), check_lr(lr)
    choice(output, "output", ("sphere", "raw"))
    every = check_schedule(every, steps, who="train_weight_space")
    snapshot_every = check_schedule(snapshot_every, steps, "snapshot_every", who="train_weight_space")
    if not isinstance(x, Tensor) or x.dim() < 1 or x.shape[0] == 0:
        raise ValueError(f"x: expected a non-empty tensor (n, ...), got {getattr(x, 'shape', type(x).__name__)}")
    check_finite("x", x)
    n = x.shape[0]
    full = batch_size is None
    if batch_size is not None:  # an int in [1, n] (2.5 failed inside the slicing of the first batch)
        batch_size = integer(batch_size, "batch_size", where="train_weight_space")
        if batch_size > n:
            raise ValueError(f"train_weight_space: batch_size={batch_size}: must be in [1, n={n}] or None (full batch)")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, optimizer, lr, momentum=momentum, weight_decay=weight_decay)
    batches = None if batch_size is None else minibatches(n, batch_size, steps + 1, generator=generator)
    clean_grad = full and augment is None  # the optimised loss is the clean-input loss: snapshot its gradient
    cur: dict = {}  # the step's embeddings and loss, for the observable of the same step

    def step(model: nn.Module, t: int) -> tuple[nn.Module, Tensor]:
        xb = x if batches is None else x[next(batches).to(x.device)]  # (B, ...)
        if augment is not None:
            z1 = _outputs(model, augment(xb, generator), output)
            loss = loss_fn(z1, _outputs(model, augment(xb, generator), output))
            check_embedding_loss(loss, z1)
            cur.update(t=t, z=None, loss=loss)
            return model, loss
        z = _outputs(model, xb, output)  # (E, B, d) or (B, d); no graph at the final step
        if t == steps:
            z = z.requires_grad_(True)  # for the gradient ∂𝓛/∂z of the snapshot
        with torch.enable_grad():
            loss = loss_fn(z)
        check_embedding_loss(loss, z)
        cur.update(t=t, z=z, loss=loss, g=None)
        return model, loss

    def observed(model: nn.Module) -> tuple[Tensor, Tensor | None]:
        """``(z (E, n, d) or (n, d), −∇L(z_i) = −n ∂𝓛/∂z_i or None)`` of the clean inputs at this step."""
        if cur.get("obs_t") == cur["t"]:
            return cur["obs"]
        if clean_grad and cur["z"] is not None:
            z = cur["z"]
            with torch.enable_grad():
                (g,) = torch.autograd.grad(cur["loss"].sum(), z, retain_graph=cur["t"] != steps)  # ∂𝓛/∂z
            zc, neg = z.detach(), -z.shape[-2] * g
        else:
            with torch.no_grad(), preserved_buffers(model):
                zc, neg = _outputs(model, x, output), None
        # a one-member ensemble: that member's (n, d) (neg, when there is one, has the shape of zc)
        zc, neg = drop_singleton_member(zc), (None if neg is None else drop_singleton_member(neg))
        cur.update(obs_t=cur["t"], obs=(zc, neg))
        return zc, neg

    return run(
        model,
        step,
        steps=steps,
        every=every,
        probes=member_checked_probes(probes, "train_weight_space"),
        observe=lambda m: observed(m)[0],
        snapshots={"z": lambda m: observed(m)[0], "neg_grad": lambda m: observed(m)[1]},
        snapshot_every=snapshot_every,
        track=track,
        guard=guard,
        optimizer=opt,
        modules=model,
        trajectory=trajectory,
    )
