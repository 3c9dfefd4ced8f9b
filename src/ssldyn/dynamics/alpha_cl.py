"""One-layer α-CL dynamics (``nonlinearity`` Sec. 3, Lemma 3, eq. 6-7, eq. PI).

For a homogeneous activation ``h(x) = h'(x)·x`` the energy of one filter is
``E_α(w) = ½ C_α[h(wᵀx)] = ½ wᵀ A(w) w`` with

    x̃^w = x · h'(wᵀx)                     (gated input, eq. 6)
    A(w) = C_α[x̃^w]                        (Lemma 3; eq. 3 with any pairwise importance α)

and the gradient flow on the unit sphere is ``ẇ = P⊥_w A(w) w`` (eq. 7). Its fixed points are
found by the power iteration ``w ← A(w)w / ‖A(w)w‖`` (eq. PI).

Conventions: inputs ``x (N, d)`` (view 1) and optionally ``x_pos (N, d)`` (view 2, augmented);
weights ``w (d,)`` or an ensemble ``(E, d)`` of independent filters. ``alpha`` is ``None``
(uniform ``α ≡ 1``, computed in O(N) memory), an ``(N, N)``/``(E, N, N)`` tensor, or a callable
``w -> α`` (re-evaluated at the current ``w`` and treated as a constant: the stop-gradient of
eq. 2). ``weights (N,)`` (uniform α, no augmentation only) turns the batch into a weighted
population, i.e. the ``N → ∞`` limit ``A(w) = V[x̃^w]`` of Cor. 1 for a discrete distribution.

The one dynamics contract (:mod:`ssldyn.dynamics`): :func:`sphere_flow` and
:func:`power_iteration` take the weights ``w0`` (the state) and ``A_fn`` (the energy
``E_α = ½wᵀA(w)w``), return ``FlowResult(state=w, trajectory)`` and pass ``w`` (``(d,)`` or
``(E, d)``) to the probes.

Devices: everything runs on the device of the inputs (``x``, ``w0``; ``weights`` are moved to
the device of ``x``); tensors created here follow it. Both flows check ``w0`` (and the first
operator ``A(w0)``) for NaN/inf before the first step and guard the energy they ascend (the
α-CL loss is ``−E_α``): a non-finite value raises
:class:`~ssldyn.dynamics.guards.NonFiniteLossError` naming the step and the last finite value.
:func:`sphere_flow` defers the checks on an accelerator (no sync per step).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable

import numpy as np
import torch
from torch import Tensor

from ssldyn.checks import choice, nonnegative, probabilities
from ssldyn.dynamics.alpha_cl_mixture import population_contrastive_covariance
from ssldyn.dynamics.common import Probes, Track, check_lr, check_steps, step_schedule
from ssldyn.dynamics.engine import run
from ssldyn.dynamics.guards import LossGuard, check_finite
from ssldyn.dynamics.trajectory import FlowResult, Trajectory
from ssldyn.models.activations import ACTIVATION_NAMES, Activation, ActivationName, get_activation
from ssldyn.objectives import alpha_cl_energy, alpha_gaussian, contrastive_covariance

__all__ = [
    "gated_input",
    "uniform_contrastive_covariance",
    "alpha_covariance",
    "gated_covariance",
    "make_A_fn",
    "one_layer_energy",
    "gaussian_alpha_fn",
    "sphere_tangent",
    "sphere_grad",
    "sphere_euler_step",
    "sphere_flow",
    "power_iteration",
]

AFn = Callable[[Tensor], Tensor]
#: the pairwise weights α of eq. (5): None (uniform), an ``(N, N)`` / ``(E, N, N)`` tensor, or a map ``w -> α``
Alpha = Tensor | Callable[[Tensor], Tensor] | None


def _check_x(name: str, x: Tensor) -> Tensor:
    if not isinstance(x, Tensor) or x.dim() != 2 or not x.is_floating_point():
        raise ValueError(
            f"{name}: expected a floating tensor of shape (N, d), got "
            f"{type(x).__name__ if not isinstance(x, Tensor) else tuple(x.shape)}"
        )
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: contains NaN or inf")
    return x


def _check_views(x: Tensor, x_pos: Tensor | None) -> None:
    """The batch ``x (N, d)`` and its second view ``x_pos``, of the same shape (row i is sample i's view)."""
    _check_x("x", x)
    if x_pos is not None:
        _check_x("x_pos", x_pos)
        if x_pos.shape != x.shape:
            raise ValueError(f"x_pos: the second view must have the shape of x {tuple(x.shape)}, got "
                             f"{tuple(x_pos.shape)}")  # fmt: skip


def _population_weights(weights: Tensor, a: Tensor, a_pos: Tensor | None) -> Tensor:
    """Population ``weights (N,)`` of the rows of ``a (..., N, p)`` as ``a``'s dtype and device: probabilities, and
    only without augmentation (counts or signed weights give a matrix that is the covariance of no population)."""
    if a_pos is not None:
        raise ValueError("weights: only supported without augmentation (a_pos=None)")
    p = weights.to(dtype=a.dtype, device=a.device)
    if p.dim() != 1 or p.shape[0] != a.shape[-2]:
        raise ValueError(f"weights: expected shape (N,) with N={a.shape[-2]}, got {tuple(p.shape)}")
    return probabilities(p, "weights", where="contrastive covariance")


def _check_population(weights: Tensor | None, x: Tensor, x_pos: Tensor | None, alpha) -> Tensor | None:
    """The population weights of a batch, checked once where they enter (:func:`gated_covariance`,
    :func:`make_A_fn`), so that an evaluation of ``A(w)`` does not check them again."""
    if weights is None:
        return None
    if alpha is not None:
        raise ValueError("weights: only supported with uniform alpha (alpha=None)")
    return _population_weights(weights, x, x_pos)


def _check_w(w: Tensor, d: int) -> Tensor:
    if not isinstance(w, Tensor) or w.dim() not in (1, 2) or w.shape[-1] != d:
        raise ValueError(
            f"w: expected shape (d,) or (E, d) with d={d}, got "
            f"{tuple(w.shape) if isinstance(w, Tensor) else type(w).__name__}"
        )
    return w


ZERO_TOL = 1e-12


def _activation(activation: object, who: str, *, x_pos: bool = False) -> Activation:
    """:func:`~ssldyn.models.activations.get_activation` of a name or an :class:`Activation`; anything else (e.g. a
    tensor passed positionally where the keyword-only ``x_pos=`` was meant, ``x_pos=True`` says so) is one short
    ``ValueError`` naming its type (and shape), never printing its value."""
    if not isinstance(activation, (str, Activation)):
        shape = getattr(activation, "shape", None)
        got = type(activation).__name__ + (f" of shape {tuple(shape)}" if shape is not None else "")
        raise ValueError(
            f"{who}: activation must be a name ({', '.join(map(repr, ACTIVATION_NAMES))}) or an Activation, got type "
            f"{got}" + ("; the second view is keyword-only: x_pos=..." if x_pos and shape is not None else "")
        )
    if isinstance(activation, str):
        choice(activation, "activation", ACTIVATION_NAMES, where=who)
    return get_activation(activation)


def gated_input(
    x: Tensor, w: Tensor, activation: ActivationName | Activation = "relu", *, zero_tol: float = ZERO_TOL
) -> Tensor:
    """``x̃^w = x · h'(wᵀx)`` (eq. 6): ``x (N, d)``, ``w (d,) -> (N, d)`` or ``w (E, d) -> (E, N, d)``.

    Pre-activations with ``|wᵀx| <= zero_tol`` are set to exactly 0 before ``h'`` is applied, so
    the convention ``h'(0) = 0`` of App. B.1 survives round-off (e.g. ``u_mᵀu_m' ≈ 1e-17`` for an
    orthonormal ``U`` in the latent categorical model).
    """
    act = _activation(activation, "gated_input")
    _check_w(w, x.shape[-1])
    pre = x @ w.unsqueeze(-1)  # (N, 1) or (E, N, 1): wᵀx
    if zero_tol > 0:
        pre = torch.where(pre.abs() <= zero_tol, torch.zeros_like(pre), pre)
    return x * act.deriv(pre)  # (N, d) or (E, N, d)


def uniform_contrastive_covariance(a: Tensor, a_pos: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
    """``C_α[a]`` of eq. 3 for uniform ``α ≡ 1`` in O(N) memory.

    ``C = Cov(a) − (1/2N) Σ_i (a_i − a_i')(a_i − a_i')ᵀ`` (biased covariance of view 1; the
    intra term vanishes without augmentation). Equal to
    ``ssldyn.objectives.contrastive_covariance(a, a_pos)`` (tested) without its ``N × N`` matrix.
    With ``weights (N,)`` (probabilities, no augmentation) it is the weighted covariance
    ``Σ p_i a_i a_iᵀ − m mᵀ``.

    Args:
        a: ``(..., N, p)``; a_pos: same shape or None; weights: ``(N,)`` or None.

    Returns:
        ``(..., p, p)``.
    """
    if weights is not None:
        return population_contrastive_covariance(a, _population_weights(weights, a, a_pos))  # Σ p_i a_i a_iᵀ − m mᵀ
    n = a.shape[-2]
    ac = a - a.mean(-2, keepdim=True)  # (..., N, p)
    cov = ac.mT @ ac / n  # (..., p, p)
    if a_pos is None:
        return cov
    diff = a - a_pos  # (..., N, p)
    return cov - diff.mT @ diff / (2 * n)


def _alpha_at(alpha: Tensor | Callable[[Tensor], Tensor] | None, w: Tensor) -> Tensor | None:
    """The pairwise weights α at the filter ``w``: ``alpha(w)`` for a state-dependent α, else ``alpha``."""
    return alpha(w) if callable(alpha) else alpha


def alpha_covariance(
    a: Tensor,
    a_pos: Tensor | None = None,
    *,
    alpha: Tensor | None = None,
    weights: Tensor | None = None,
    b: Tensor | None = None,
    b_pos: Tensor | None = None,
) -> Tensor:
    """``C_α[a]`` (or ``C_α[a, b]``) of eq. 3 for any pairwise importance, the O(N) form when α is uniform.

    ``alpha=None``: :func:`uniform_contrastive_covariance` (``α ≡ 1`` without an ``N × N`` matrix; with
    population ``weights (N,)`` the weighted covariance); ``C_α[a, b]`` is then the off-diagonal block
    ``[:p, p:]`` of ``C_α[[a, b]]`` (eq. 3 is bilinear). Otherwise
    :func:`ssldyn.objectives.contrastive_covariance` with ``alpha (N, N)`` or ``(..., N, N)``
    (``weights`` are then an error). A missing positive view means no augmentation (``a_pos = a``).

    Args:
        a: ``(..., N, p)``; a_pos: same shape or None.
        alpha: None (uniform) or the pairwise importance; weights: ``(N,)`` or None (uniform α only).
        b, b_pos: ``(..., N, q)`` second argument or None (``C_α[a]``); give ``b_pos`` with ``b`` exactly
            when ``a_pos`` is given.

    Returns:
        ``(..., p, p)``, or ``(..., p, q)`` with ``b``.
    """
    if b is None and b_pos is not None:
        raise ValueError("b_pos: given without b (the second argument of C_α[a, b])")
    if b is not None and (a_pos is None) != (b_pos is None):
        raise ValueError("a_pos, b_pos: give both positive views or neither")
    if alpha is None:
        if b is None:
            return uniform_contrastive_covariance(a, a_pos, weights)
        joint_pos = None if a_pos is None or b_pos is None else torch.cat([a_pos, b_pos], -1)  # (..., N, p + q)
        joint = uniform_contrastive_covariance(torch.cat([a, b], -1), joint_pos, weights)  # (..., p + q, p + q)
        p = a.shape[-1]
        return joint[..., :p, p:]
    if weights is not None:
        raise ValueError("weights: only supported with uniform alpha (alpha=None)")
    return contrastive_covariance(
        a, a if a_pos is None else a_pos, b, None if b is None else (b if b_pos is None else b_pos), alpha=alpha
    )


def _gated_covariance(
    x: Tensor, w: Tensor, act: Activation, x_pos: Tensor | None, alpha, weights: Tensor | None
) -> Tensor:
    """``C_α[x̃^w]`` of checked inputs ``x``, ``x_pos`` and ``weights`` (:func:`_check_population`; ``w`` is checked
    by :func:`gated_input`)."""
    xt = gated_input(x, w, act)  # (..., N, d)
    if weights is not None:  # population mode: uniform α, no augmentation
        return population_contrastive_covariance(xt, weights)  # Σ p_i x̃_i x̃_iᵀ − m mᵀ
    xt_pos = None if x_pos is None else gated_input(x_pos, w, act)
    return alpha_covariance(xt, xt_pos, alpha=_alpha_at(alpha, w))


def gated_covariance(
    x: Tensor,
    w: Tensor,
    activation: ActivationName | Activation = "relu",
    *,
    x_pos: Tensor | None = None,
    alpha: Alpha = None,
    weights: Tensor | None = None,
) -> Tensor:
    """``A(w) = C_α[x̃^w]`` (Lemma 3), for one filter ``(d,) -> (d, d)`` or an ensemble ``(E, d) -> (E, d, d)``.

    Args:
        x: ``(N, d)`` inputs (view 1; the un-augmented sample when ``x_pos`` is None).
        w: ``(d,)`` or ``(E, d)``.
        activation: name or :class:`~ssldyn.models.activations.Activation`.
        x_pos: ``(N, d)`` second augmented view ``x[i']`` or None (no augmentation).
        alpha: None (uniform), ``(N, N)``/``(E, N, N)`` tensor, or callable ``w -> α``.
        weights: ``(N,)`` probabilities of the rows (population mode; uniform α, no augmentation).
    """
    _check_views(x, x_pos)
    _check_w(w, x.shape[-1])
    act = _activation(activation, "gated_covariance", x_pos=True)
    return _gated_covariance(x, w, act, x_pos, alpha, _check_population(weights, x, x_pos, alpha))


def make_A_fn(
    x: Tensor,
    activation: ActivationName | Activation = "relu",
    *,
    x_pos: Tensor | None = None,
    alpha: Alpha = None,
    weights: Tensor | None = None,
) -> AFn:
    """The map ``w -> A(w)`` on a fixed batch (what :func:`power_iteration` and the probes take).

    The batch (``x``, ``x_pos``, ``weights``) is checked once, here, not at every evaluation of ``A``.
    """
    _check_views(x, x_pos)
    weights = _check_population(weights, x, x_pos, alpha)
    act = _activation(activation, "make_A_fn", x_pos=True)

    def A_fn(w: Tensor) -> Tensor:
        return _gated_covariance(x, w, act, x_pos, alpha, weights)

    return A_fn


def one_layer_energy(
    x: Tensor,
    w: Tensor,
    activation: ActivationName | Activation = "relu",
    *,
    x_pos: Tensor | None = None,
    alpha: Alpha = None,
    weights: Tensor | None = None,
) -> Tensor:
    """``E_α(w) = ½ C_α[h(wᵀx)]`` (eq. 5 for one filter); ``w (d,) -> ()``, ``(E, d) -> (E,)``.

    Any activation (homogeneous or not). Uses :func:`ssldyn.objectives.alpha_cl_energy`
    when ``alpha`` is given, the O(N) uniform form otherwise. The batch is checked as in
    :func:`make_A_fn`: ``x_pos`` of the shape of ``x``, and ``weights (N,)`` only with uniform α
    (``alpha=None``) and no augmentation (otherwise a ``ValueError``, not weights ignored).
    """
    act = _activation(activation, "one_layer_energy", x_pos=True)
    _check_views(x, x_pos)
    _check_w(w, x.shape[-1])
    weights = _check_population(weights, x, x_pos, alpha)
    f = act(x @ w.unsqueeze(-1))  # (..., N, 1)
    f_pos = f if x_pos is None else act(x_pos @ w.unsqueeze(-1))
    a = _alpha_at(alpha, w)
    if a is None:
        return 0.5 * uniform_contrastive_covariance(f, None if x_pos is None else f_pos, weights)[..., 0, 0]
    return alpha_cl_energy(f, f_pos, a)


def gaussian_alpha_fn(
    x0: Tensor, activation: ActivationName | Activation = "relu", *, temperature: float = 1.0
) -> Callable[[Tensor], Tensor]:
    """Cor. 2's 1-D Gaussian α: ``w -> α_ij = exp(−(h(wᵀx0_i) − h(wᵀx0_j))² / 2τ)``, ``(N, N)`` or ``(E, N, N)``."""
    act = _activation(activation, "gaussian_alpha_fn")

    def alpha(w: Tensor) -> Tensor:
        f = act(x0 @ w.unsqueeze(-1))  # (..., N, 1)
        return alpha_gaussian(f, temperature)

    return alpha


def sphere_tangent(w: Tensor, v: Tensor) -> Tensor:
    """``P⊥_w v = v − (wᵀv) w``: the component of ``v`` tangent to the unit sphere at the unit ``w``; ``(..., d)``."""
    return v - (v * w).sum(-1, keepdim=True) * w


def sphere_grad(A: Tensor, w: Tensor) -> Tensor:
    """``P⊥_w A w`` (eq. 7) for ``A (..., d, d)``, unit ``w (..., d)``."""
    aw = (A @ w.unsqueeze(-1)).squeeze(-1)  # (..., d)
    return sphere_tangent(w, aw)


def sphere_euler_step(w: Tensor, g: Tensor, dt: float) -> Tensor:
    """``normalize(w + dt·g)``: one projected Euler step with renormalisation on the unit sphere; ``(..., d)``.

    Computed in place on a fresh tensor (``dt·g``), so ``w`` and ``g`` are left as they are and a large
    ensemble allocates one tensor per step.
    """
    w_next = (dt * g).add_(w)  # (..., d): w + dt·g
    return w_next.div_(w_next.norm(dim=-1, keepdim=True))


def _normalize(w: Tensor) -> Tensor:
    return w / w.norm(dim=-1, keepdim=True)


def _start(w0: Tensor, A_fn: AFn, fn: str) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
    """Check ``w0`` and return the flow's state ``w (E, d)`` (rows normalised) and the map back to ``w0``'s rank."""
    if callable(w0) and isinstance(A_fn, Tensor):
        raise ValueError(f"{fn}(w0, A_fn, ...): the weights come first, the operator second")
    if not isinstance(w0, Tensor) or w0.dim() not in (1, 2) or w0.shape[-1] < 1 or w0.numel() == 0:
        raise ValueError(f"{fn}: w0 must be a non-empty tensor (d,) or (E, d), got {getattr(w0, 'shape', w0)!r}")
    check_finite("w0", w0)
    if bool((w0.norm(dim=-1) == 0).any()):
        raise ValueError(f"{fn}: w0 has a zero row (a direction on the sphere is needed)")
    member = (lambda w: w[0]) if w0.dim() == 1 else (lambda w: w)
    return _normalize(w0.reshape(-1, w0.shape[-1]).clone()), member  # (E, d)


def _check_operator(A: Tensor, fn: str, w: Tensor, diagonal: bool = False) -> None:
    """The operator at the start, for ``w (E, d)``: dense ``(E, d, d)``, ``(1, d, d)`` or ``(d, d)``; with
    ``diagonal`` its diagonal ``(E, d)``, ``(1, d)`` or ``(d,)``. A wrong shape or NaN/inf in ``A(w0)`` is a
    ``ValueError``."""
    E, d = w.shape
    shape = tuple(A.shape) if isinstance(A, Tensor) else None
    want, lead = ((d,), 1) if diagonal else ((d, d), 2)
    if (
        shape is None
        or shape[-lead:] != want
        or len(shape) not in (lead, lead + 1)
        or (len(shape) == lead + 1 and shape[0] not in (1, E))
    ):
        full = f"(E, d) = ({E}, {d})" if diagonal else f"(E, d, d) = ({E}, {d}, {d})"
        raise ValueError(f"{fn}: A_fn(w) must return {full} for w of shape ({E}, {d}), "
                         f"got {type(A).__name__} {shape if shape is not None else ''}")  # fmt: skip
    if not bool(torch.isfinite(A).all()):
        raise ValueError(f"{fn}: A_fn(w0) contains NaN/inf (the operator at the starting weights); check A_fn's data")


def _apply(A: Tensor, w: Tensor, diagonal: bool) -> Tensor:
    """``A(w) w`` for ``w (E, d)``: ``A (E, d, d)`` (dense) or its diagonal ``a (E, d)`` (``a ⊙ w``) -> ``(E, d)``."""
    return A * w if diagonal else (A @ w.unsqueeze(-1)).squeeze(-1)


def _eigenvalues(A: Tensor, diagonal: bool) -> Tensor:
    """Ascending eigenvalues of the symmetric part of ``A (..., d, d)``, or of ``diag(a)`` for ``a (..., d)``: ``(..., d)``."""
    return A.sort(-1).values if diagonal else torch.linalg.eigvalsh(0.5 * (A + A.mT))


def sphere_flow(
    w0: Tensor,
    A_fn: AFn,
    *,
    steps: int,
    dt: float = 0.05,
    probes: Probes | None = None,
    every: int | Iterable[int] | None = 1,
    keep_path: bool = False,
    track: Track | None = None,
    guard: LossGuard | bool | None = None,
    diagonal: bool = False,
) -> FlowResult[Tensor]:
    """Integrate ``ẇ = P⊥_w A(w) w`` (eq. 7) on the unit sphere for ``steps`` steps of size ``dt``.

    Projected explicit Euler with retraction: ``w ← normalize(w + dt·P⊥_w A(w) w)`` (time
    ``t = steps·dt``); runs on the device of ``w0``. Logged per member at the ``every`` steps:
    ``energy`` = ½ wᵀA(w)w (= E_α for h(x) = h'(x)x), ``grad_norm`` and the probes of ``w``;
    ``keep_path`` also keeps the snapshots ``w`` there.

    ``A_fn(w)`` for ``w (E, d)`` returns ``A(w)`` as ``(E, d, d)`` (or ``(1, d, d)``/``(d, d)``, shared);
    with ``diagonal=True`` it returns the diagonal ``a(w) (E, d)`` (or ``(1, d)``/``(d,)``) of a diagonal
    operator ``A(w) = diag(a(w))``, applied elementwise: ``A(w)w = a ⊙ w`` (O(E·d) per step instead of
    O(E·d²) and no ``(E, d, d)`` tensor; the same iterates as the dense ``diag_embed(a)``, tested).

    Returns:
        ``FlowResult(state=w (d,) or (E, d), trajectory)``.
    Raises:
        ValueError: bad ``steps``/``dt``, NaN/inf in ``w0``, NaN/inf in ``A(w0)`` or a shape of ``A(w0)``
            other than the above (before the first step).
        NonFiniteLossError: the energy ½ wᵀA(w)w (the objective this gradient flow ascends)
            became NaN/inf; names the step, the member and its last finite value.
    """
    steps, dt = check_steps(steps), check_lr(dt, "dt")
    w, member = _start(w0, A_fn, "sphere_flow")  # (E, d)

    def step(w: Tensor, t: int):
        A = A_fn(w)  # (E, d, d), or (E, d) with diagonal
        if t == 0:
            _check_operator(A, "sphere_flow", w, diagonal)
        aw = _apply(A, w, diagonal)  # (E, d): A(w)w
        waw = (aw * w).sum(-1, keepdim=True)  # (E, 1): wᵀA(w)w
        g = aw.sub_(waw * w)  # (E, d): P⊥_w A(w) w, as sphere_grad (in place: aw is a fresh tensor)
        energy = 0.5 * waw.squeeze(-1)  # (E,)
        # normalize(w + dt·g) in place on a fresh tensor (fewer allocations: a large E is memory-bound, and
        # allocator churn cost ~40% at E = 60,000, d = 10)
        w_next = sphere_euler_step(w, g, dt) if t < steps else w  # (E, d)
        return w_next, energy, (lambda: {"grad_norm": g.norm(dim=-1)})

    res = run(
        w,
        step,
        steps=steps,
        every=every,
        probes=probes,
        observe=member,
        snapshots={"w": member} if keep_path else None,
        snapshot_every=every if keep_path else (),
        track=track,
        guard=guard,
        guard_what="energy",
        loss_name="energy",
        trajectory=Trajectory(meta={"dynamics": "alpha_cl.sphere_flow", "dt": dt, "t_max": steps * dt}),
    )
    return FlowResult(member(res.state), res.trajectory)


def power_iteration(
    w0: Tensor,
    A_fn: AFn,
    *,
    steps: int = 200,
    tol: float = 1e-10,
    shift: bool | None = None,
    probes: Probes | None = None,
    every: int | Iterable[int] | None = 1,
    keep_path: bool = False,
    track: Track | None = None,
    guard: LossGuard | bool | None = None,
    warn_unconverged: bool = True,
    diagonal: bool = False,
) -> FlowResult[Tensor]:
    """Power iteration (eq. PI): ``w(t+1) = A(w(t)) w(t) / ‖A(w(t)) w(t)‖₂``, at most ``steps`` iterations.

    Stops early when every member's discrepancy ``‖w(t+1) − w(t)‖₂`` is below ``tol``. A member
    with ``A(w)w = 0`` (e.g. a dead ReLU filter) stays where it is.

    Indefinite operators. Eq. PI finds the eigenvector of the eigenvalue of largest *magnitude*:
    when ``A(w)`` is indefinite (e.g. ``C_α`` with augmentation, whose intra-view term is
    negative definite) and that eigenvalue is negative, the plain iteration converges to the
    wrong eigenvector and ``w`` flips sign at every step (discrepancy 2). The remedy is the shift
    of the proof of Thm. 3 (App. B, eq. 104): iterate with ``Â(w) = A(w) − (λ_min(A(w)) − ε)I``
    (``ε = 1e-9``), which is positive definite with the same eigenvectors, so its fixed points
    are those of eq. PI and its attracting ones are the top eigenvectors of ``A(w)``
    (convergence rate ``(λ₂ − λ_min)/(λ₁ − λ_min)`` per step).

    * ``shift=None`` (default): the plain iteration while a member's Rayleigh quotient
      ``wᵀA(w)w`` is non-negative; once it is negative (beyond round-off: ``A(w)`` is indefinite
      and the plain iteration heads for a negative eigenvalue) that member continues with
      ``Â(w)``. ``trajectory.meta["shifted"]`` lists the members (and the step) where it switched.
    * ``shift=True``: always ``Â(w)`` (``meta["shifted"]`` lists every member, from step 0). ``shift=False``: never; a negative Rayleigh quotient is then
      a ``ValueError`` giving the eigenvalue range of ``A(w)``.

    Args:
        w0: ``(d,)`` or ``(E, d)`` initial weights (normalised here; the state).
        A_fn: ``(E, d) -> (E, d, d)``, e.g. from :func:`make_A_fn` (or ``(1, d, d)``/``(d, d)``, shared);
            with ``diagonal=True`` the diagonal ``a(w) (E, d)`` of ``A(w) = diag(a(w))`` (or ``(1, d)``/``(d,)``),
            applied as ``A(w)w = a ⊙ w`` (as in :func:`sphere_flow`).
        steps: maximum number of iterations; tol: convergence threshold on the discrepancy.
        probes: ``name -> probe(w)`` logged at the ``every`` steps (a float or ``(E,)``).
        keep_path: keep every iterate ``w(t)``, ``t = 0 .. T``, as the snapshots ``w``.
        track: progress wrapper; guard: the guard of the Rayleigh quotient (None: default; False: none).
        warn_unconverged: a ``RuntimeWarning`` naming the fix when a member ends unconverged.

    Returns:
        ``FlowResult(state=w (d,) or (E, d), trajectory)``. The trajectory holds per member, at
        step ``t`` (``t = 0 .. T−1`` for ``T`` iterations), ``discrepancy`` = ``‖w(t+1) − w(t)‖₂``
        (Fig. 1 right) and ``rayleigh`` = ``w(t)ᵀA(w(t))w(t)``; ``trajectory.series_members(
        "discrepancy")`` gives the ``(T, E)`` table. ``trajectory.meta``: ``converged`` (bool
        array ``(E,)``, the last discrepancy below ``tol``; all False for ``steps = 0``, where no
        discrepancy was measured, without a warning), ``iterations`` (``T``), ``shifted``.
        With ``keep_path`` the snapshots ``w`` at steps ``0 .. T`` (``trajectory.stack("w")``).
    Raises:
        ValueError: bad arguments, NaN/inf in ``w0`` or ``A(w0)``, or (``shift=False``) an
            indefinite ``A(w)`` met.
        NonFiniteLossError: the Rayleigh quotient became NaN/inf at a later step.
    """
    steps = check_steps(steps)
    tol = nonnegative(tol, "tol", where="power_iteration")
    if shift not in (None, True, False):
        raise ValueError(f"power_iteration: shift must be None (auto), True or False, got {shift!r}")
    w, member = _start(w0, A_fn, "power_iteration")  # (E, d)
    E = w.shape[0]
    round_off = math.sqrt(torch.finfo(w.dtype).eps)
    st = {
        "shifted": torch.full((E,), shift is True, dtype=torch.bool, device=w.device),  # (E,)
        "switched": {},  # member -> step of the switch to Â(w)
        "disc": torch.zeros(E, dtype=w.dtype, device=w.device),
        "iterations": 0,
        "converged": False,
    }

    def step(w: Tensor, t: int):
        A = A_fn(w)  # (E, d, d), or (E, d) with diagonal
        if t == 0:
            _check_operator(A, "power_iteration", w, diagonal)
        aw = _apply(A, w, diagonal)  # (E, d): A(w)w
        ray = (w * aw).sum(-1)  # (E,): wᵀA(w)w
        switched = st["switched"]
        if shift is not True:
            fro = A.norm(dim=-1) if diagonal else torch.linalg.matrix_norm(A)  # (E,): ‖A(w)‖_F
            negative = ray < -round_off * fro  # (E,): negative beyond round-off
            new = negative & ~st["shifted"]
            if bool(new.any()):
                e = int(new.nonzero()[0, 0])
                if shift is False:
                    lam = _eigenvalues(A, diagonal).expand(E, -1)[e]  # (d,) ascending
                    raise ValueError(
                        f"power_iteration: A(w) is indefinite (eigenvalues {float(lam[0]):.4g} … "
                        f"{float(lam[-1]):.4g} at step {t}, member {e}): the plain iteration converges to the "
                        "eigenvector of the most negative eigenvalue and flips sign every step; use shift=True "
                        "(or the default shift=None)"
                    )
                switched.update(dict.fromkeys(new.nonzero().flatten().tolist(), t))
                st["shifted"] = st["shifted"] | new
        if shift is True or switched:
            lmin = _eigenvalues(A, diagonal)[..., 0]  # (E,)
            sigma = torch.where(st["shifted"], lmin - 1e-9, torch.zeros_like(lmin))  # (E,)
            aw = aw - sigma[:, None] * w  # Â(w)w for the shifted members, A(w)w for the others
        nrm = aw.norm(dim=-1, keepdim=True)
        alive = nrm > 1e-300
        w_new = torch.where(alive, aw / nrm.clamp_min(1e-300), w)
        disc = (w_new - w).norm(dim=-1)  # (E,)
        st.update(disc=disc, iterations=t + 1, converged=bool((disc < tol).all()))
        return w_new, ray, {"discrepancy": disc, "rayleigh": ray}

    # the logged iterations (the last one always), within 0 .. steps − 1
    logs = {s for s in step_schedule(every, max(steps - 1, 0)) | {steps - 1} if 0 <= s < steps}
    res = run(
        w,
        step,
        steps=steps,
        every=logs,
        probes=probes,
        observe=member,
        snapshots={"w": member} if keep_path else None,
        snapshot_every=range(steps + 1) if keep_path else (),
        track=track,
        guard=guard,
        guard_what="Rayleigh quotient wᵀA(w)w",
        final=False,
        stop=lambda w, t: st["converged"],
        loss_name=None,
        trajectory=Trajectory(meta={"dynamics": "alpha_cl.power_iteration"}),
    )
    traj, iterations, disc = res.trajectory, st["iterations"], st["disc"]
    # no iteration (steps = 0): no discrepancy was measured, so no member is reported converged
    converged = (disc < tol).cpu().numpy() if iterations else np.zeros(E, dtype=bool)
    traj.meta.update(
        converged=converged,
        iterations=iterations,
        shifted=_shifted_meta(shift, st["switched"], E),
    )
    if warn_unconverged and iterations and not converged.all():
        bad = np.flatnonzero(~converged)
        warnings.warn(
            f"power_iteration: {len(bad)} of {E} member(s) did not converge in {iterations} iterations "
            f"(last discrepancy {float(disc[bad].max()):.3g} > tol = {tol:g}; members {bad[:8].tolist()}); "
            "raise steps, loosen tol, or pass warn_unconverged=False where this is expected "
            "(trajectory.meta['converged'] has the per-member flags)",
            RuntimeWarning,
            stacklevel=2,
        )
    return FlowResult(member(res.state), traj)


def _shifted_meta(shift: bool | None, switched: dict[int, int], E: int) -> dict[str, str]:
    """``meta["shifted"]``: which members iterated with the shifted operator Â(w), and from which step."""
    if shift is True:
        return {f"member {m}": "from step 0" for m in range(E)}
    return {f"member {m}": f"from step {s}" for m, s in sorted(switched.items())}
