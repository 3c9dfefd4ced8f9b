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

Devices: everything runs on the device of the inputs (``x``, ``w0``; ``weights`` are moved to
the device of ``x``); tensors created here follow it. :func:`sphere_flow` checks ``w0`` for
NaN/inf before the first step and guards the energy it ascends (the α-CL loss is ``−E_α``):
a non-finite energy raises :class:`~ssldyn.dynamics.guards.NonFiniteLossError` naming the step
and the last finite value. The energies are checked in blocks (one host transfer per block,
not one sync per step), so a CUDA flow is not slowed down by the guard.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ssldyn.dynamics.guards import StepGuard, check_finite
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.models.activations import Activation, get_activation
from ssldyn.objectives import alpha_cl_energy, alpha_gaussian, contrastive_covariance

__all__ = [
    "gated_input",
    "uniform_contrastive_covariance",
    "gated_covariance",
    "make_A_fn",
    "one_layer_energy",
    "gaussian_alpha_fn",
    "sphere_grad",
    "sphere_flow",
    "power_iteration",
    "PowerIterationResult",
    "SphereFlowResult",
]

AFn = Callable[[Tensor], Tensor]


def _check_x(name: str, x: Tensor) -> Tensor:
    if not isinstance(x, Tensor) or x.dim() != 2 or not x.is_floating_point():
        raise ValueError(
            f"{name}: expected a floating tensor of shape (N, d), got "
            f"{type(x).__name__ if not isinstance(x, Tensor) else tuple(x.shape)}"
        )
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: contains NaN or inf")
    return x


def _check_w(w: Tensor, d: int) -> Tensor:
    if not isinstance(w, Tensor) or w.dim() not in (1, 2) or w.shape[-1] != d:
        raise ValueError(
            f"w: expected shape (d,) or (E, d) with d={d}, got "
            f"{tuple(w.shape) if isinstance(w, Tensor) else type(w).__name__}"
        )
    return w


ZERO_TOL = 1e-12


def gated_input(x: Tensor, w: Tensor, activation: str | Activation = "relu", *, zero_tol: float = ZERO_TOL) -> Tensor:
    """``x̃^w = x · h'(wᵀx)`` (eq. 6): ``x (N, d)``, ``w (d,) -> (N, d)`` or ``w (E, d) -> (E, N, d)``.

    Pre-activations with ``|wᵀx| <= zero_tol`` are set to exactly 0 before ``h'`` is applied, so
    the convention ``h'(0) = 0`` of App. B.1 survives round-off (e.g. ``u_mᵀu_m' ≈ 1e-17`` for an
    orthonormal ``U`` in the latent categorical model).
    """
    act = get_activation(activation)
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
        if a_pos is not None:
            raise ValueError("weights: only supported without augmentation (a_pos=None)")
        p = weights.to(dtype=a.dtype, device=a.device)
        if p.dim() != 1 or p.shape[0] != a.shape[-2]:
            raise ValueError(f"weights: expected shape (N,) with N={a.shape[-2]}, got {tuple(p.shape)}")
        m = (p[:, None] * a).sum(-2)  # (..., p)
        return (a * p[:, None]).mT @ a - m[..., :, None] * m[..., None, :]
    n = a.shape[-2]
    ac = a - a.mean(-2, keepdim=True)  # (..., N, p)
    cov = ac.mT @ ac / n  # (..., p, p)
    if a_pos is None:
        return cov
    diff = a - a_pos  # (..., N, p)
    return cov - diff.mT @ diff / (2 * n)


def _alpha_at(alpha, w: Tensor):
    return alpha(w) if callable(alpha) else alpha


def gated_covariance(
    x: Tensor,
    w: Tensor,
    activation: str | Activation = "relu",
    *,
    x_pos: Tensor | None = None,
    alpha=None,
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
    _check_x("x", x)
    _check_w(w, x.shape[-1])
    xt = gated_input(x, w, activation)  # (..., N, d)
    xt_pos = None if x_pos is None else gated_input(_check_x("x_pos", x_pos), w, activation)
    a = _alpha_at(alpha, w)
    if a is None:
        return uniform_contrastive_covariance(xt, xt_pos, weights)
    if weights is not None:
        raise ValueError("weights: only supported with uniform alpha (alpha=None)")
    return contrastive_covariance(xt, xt if xt_pos is None else xt_pos, alpha=a)


def make_A_fn(
    x: Tensor,
    activation: str | Activation = "relu",
    *,
    x_pos: Tensor | None = None,
    alpha=None,
    weights: Tensor | None = None,
) -> AFn:
    """The map ``w -> A(w)`` on a fixed batch (what :func:`power_iteration` and the probes take)."""
    _check_x("x", x)

    def A_fn(w: Tensor) -> Tensor:
        return gated_covariance(x, w, activation, x_pos=x_pos, alpha=alpha, weights=weights)

    return A_fn


def one_layer_energy(
    x: Tensor,
    w: Tensor,
    activation: str | Activation = "relu",
    *,
    x_pos: Tensor | None = None,
    alpha=None,
    weights: Tensor | None = None,
) -> Tensor:
    """``E_α(w) = ½ C_α[h(wᵀx)]`` (eq. 5 for one filter); ``w (d,) -> ()``, ``(E, d) -> (E,)``.

    Any activation (homogeneous or not). Uses :func:`ssldyn.objectives.alpha_cl_energy`
    when ``alpha`` is given, the O(N) uniform form otherwise.
    """
    act = get_activation(activation)
    _check_x("x", x)
    _check_w(w, x.shape[-1])
    f = act(x @ w.unsqueeze(-1))  # (..., N, 1)
    f_pos = f if x_pos is None else act(x_pos @ w.unsqueeze(-1))
    a = _alpha_at(alpha, w)
    if a is None:
        return 0.5 * uniform_contrastive_covariance(f, None if x_pos is None else f_pos, weights)[..., 0, 0]
    return alpha_cl_energy(f, f_pos, a)


def gaussian_alpha_fn(
    x0: Tensor, activation: str | Activation = "relu", temperature: float = 1.0
) -> Callable[[Tensor], Tensor]:
    """Cor. 2's 1-D Gaussian α: ``w -> α_ij = exp(−(h(wᵀx0_i) − h(wᵀx0_j))² / 2τ)``, ``(N, N)`` or ``(E, N, N)``."""
    act = get_activation(activation)

    def alpha(w: Tensor) -> Tensor:
        f = act(x0 @ w.unsqueeze(-1))  # (..., N, 1)
        return alpha_gaussian(f, temperature)

    return alpha


def sphere_grad(A: Tensor, w: Tensor) -> Tensor:
    """``P⊥_w A w`` (eq. 7) for ``A (..., d, d)``, unit ``w (..., d)``."""
    aw = (A @ w.unsqueeze(-1)).squeeze(-1)  # (..., d)
    return aw - (aw * w).sum(-1, keepdim=True) * w


def _normalize(w: Tensor) -> Tensor:
    return w / w.norm(dim=-1, keepdim=True)


@dataclass
class SphereFlowResult:
    """Final weights ``w (E, d)`` (or ``(d,)``) and the recorded :class:`Trajectory`."""

    w: Tensor
    trajectory: Trajectory


def sphere_flow(
    A_fn: AFn,
    w0: Tensor,
    *,
    t_max: float = 10.0,
    dt: float = 0.05,
    record_every: int = 1,
    snapshots: bool = False,
    guard_block: int = 64,
) -> SphereFlowResult:
    """Integrate ``ẇ = P⊥_w A(w) w`` (eq. 7) on the unit sphere.

    Projected explicit Euler with retraction: ``w ← normalize(w + dt·P⊥_w A(w) w)``; runs on the
    device of ``w0``. Probes per member: ``energy`` = ½ wᵀA(w)w (= E_α for h(x) = h'(x)x) and
    ``grad_norm``.

    Raises:
        ValueError: NaN/inf in ``w0`` (before the first step).
        NonFiniteLossError: the energy ½ wᵀA(w)w (the objective this gradient flow ascends)
            became NaN/inf; names the step and the last finite value (mean over members).
            Energies are checked every ``guard_block`` steps and at the end (no per-step sync).
    """
    check_finite("w0", w0)
    single = w0.dim() == 1
    w = _normalize(w0.reshape(-1, w0.shape[-1]).clone())  # (E, d)
    n_steps = max(1, int(round(t_max / dt)))
    traj = Trajectory(meta={"dynamics": "alpha_cl.sphere_flow", "dt": dt, "t_max": t_max})
    guard = StepGuard(w0.device, "energy", guard_block, lazy=True)
    for step in range(n_steps + 1):
        A = A_fn(w)  # (E, d, d)
        aw = (A @ w.unsqueeze(-1)).squeeze(-1)  # (E, d)
        waw = (aw * w).sum(-1, keepdim=True)  # (E, 1): wᵀA(w)w
        g = aw - waw * w  # (E, d): P⊥_w A(w) w, as sphere_grad
        energy = 0.5 * waw.squeeze(-1)  # (E,)
        guard.push(step, energy)
        if step % record_every == 0 or step == n_steps:
            guard.flush()  # the trajectory syncs here anyway: check before logging
            traj.log_members(step, "energy", energy)
            traj.log_members(step, "grad_norm", g.norm(dim=-1))
            if snapshots:
                traj.snapshot(step, "w", w)
        if step == n_steps:
            break
        w = _normalize(w + dt * g)
    guard.flush()
    return SphereFlowResult(w[0] if single else w, traj)


@dataclass
class PowerIterationResult:
    """Result of :func:`power_iteration`.

    Attributes:
        w: final weights, ``(d,)`` or ``(E, d)``.
        discrepancy: ``(T, E)`` iteration discrepancies ``‖w(t+1) − w(t)‖₂`` (Fig. 1 right).
        converged: ``(E,)`` bool, discrepancy below ``tol`` at the end.
        path: ``(T+1, E, d)`` iterates when ``keep_path`` else None.
        trajectory: the same numbers as a :class:`Trajectory` (probes ``discrepancy``, ``rayleigh``).
    """

    w: Tensor
    discrepancy: Tensor
    converged: Tensor
    path: Tensor | None
    trajectory: Trajectory


def power_iteration(
    A_fn: AFn, w0: Tensor, *, n_iter: int = 200, tol: float = 1e-10, shift: bool = False, keep_path: bool = False
) -> PowerIterationResult:
    """Power iteration (eq. PI): ``w(t+1) = A(w(t)) w(t) / ‖A(w(t)) w(t)‖₂``.

    Args:
        A_fn: ``(E, d) -> (E, d, d)``, e.g. from :func:`make_A_fn`.
        w0: ``(d,)`` or ``(E, d)`` initial weights (normalised here).
        n_iter: maximum number of iterations (stops early when all members are below ``tol``).
        tol: convergence threshold on ``‖w(t+1) − w(t)‖₂``.
        shift: iterate with ``Â(w) = A(w) − λ_min(w) I + 1e-9·I`` (PD, same eigenvectors and
            fixed points; proof of Thm. 3) for an indefinite ``A``.
        keep_path: keep all iterates.

    A member with ``A(w)w = 0`` (e.g. a dead ReLU filter) stays where it is.
    """
    single = w0.dim() == 1
    w = _normalize(w0.reshape(-1, w0.shape[-1]).clone())  # (E, d)
    traj = Trajectory(meta={"dynamics": "alpha_cl.power_iteration"})
    discs, path = [], [w.clone()] if keep_path else None
    for t in range(n_iter):
        A = A_fn(w)  # (E, d, d)
        if shift:
            lmin = torch.linalg.eigvalsh(A)[..., 0]  # (E,)
            A = A + (1e-9 - lmin)[:, None, None] * torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        aw = (A @ w.unsqueeze(-1)).squeeze(-1)  # (E, d)
        nrm = aw.norm(dim=-1, keepdim=True)
        alive = nrm > 1e-300
        w_new = torch.where(alive, aw / nrm.clamp_min(1e-300), w)
        disc = (w_new - w).norm(dim=-1)  # (E,)
        traj.log_members(t, "discrepancy", disc)
        traj.log_members(t, "rayleigh", (w * aw).sum(-1))
        discs.append(disc)
        w = w_new
        if keep_path:
            path.append(w.clone())
        if bool((disc < tol).all()):
            break
    disc_t = torch.stack(discs) if discs else torch.zeros(0, w.shape[0], dtype=w.dtype, device=w.device)
    conv = disc_t[-1] < tol if len(discs) else torch.ones(w.shape[0], dtype=torch.bool, device=w.device)
    return PowerIterationResult(w[0] if single else w, disc_t, conv, torch.stack(path) if keep_path else None, traj)
