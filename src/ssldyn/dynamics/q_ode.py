"""The q-ODE of ``grassmann`` Thm. 2: width-independent learning dynamics of the linear SSL model.

Setting (eq. 8): ``L = Tr(W2ᵀ W1 C W1ᵀ W2)`` with ``W1ᵀW1 = I_d``, ``W2ᵀW2 = I_z``,
``C = VΛVᵀ`` (eigenvalues ascending, so ``v_1`` has the most negative eigenvalue), and the
outputs on the eigenvectors ``q = [u(v_1), …, u(v_d)]ᵀ = Vᵀ W1ᵀ W2 ∈ R^{d×z}``. Then

    q̇ = −2 [2Λq − Λq qᵀq − q qᵀΛq]                                    (eq. 9)

is exactly the flow of ``Ẇ = −(I − WWᵀ) ∇_W L`` for both layers (proof of Thm. 2), and a new
point is embedded as ``u_t(x̂) = q_tᵀ Vᵀ x̂`` (Sec. 4.1, "New Datapoint").

Time correspondence (derived from eq. 8; we use it everywhere)
--------------------------------------------------------------
A gradient-descent step with learning rate η, ``W ← W − η P_W(∇_W L)``, is the explicit Euler
step of ``Ẇ = −P_W(∇L)`` with dt = η, so **GD step k ↔ ODE time t = k·η**, and the matching
discretisation of eq. (9) is ``q ← q + η · q_ode_rhs(q)`` (``form="eq9"``). The printed
eq. (11) has ``+η∇L`` (a sign flip: ascent) and eq. (12),
``q ← q − η[2Λq − Λqqᵀq − qqᵀΛq]``, drops the factor 2 of eq. (9): it is Euler with
dt = η/2, i.e. step k ↔ t = k·η/2 — half as fast as GD with the same η, which matches the
paper's remark that "the decay is slightly slower in the dynamics setting" (``form="eq12"``).

Projected GD (Euclidean step + polar map) follows instead, to first order in η, the
Stiefel-Riemannian flow whose q-dynamics are :func:`projected_gd_rhs`
``q̇ = −(4Λq − 3qqᵀΛq − Λqqᵀq)``: the same linear part and fixed points as eq. (9), a
different cubic term.

Shapes: ``q`` is ``(..., d, z)`` (leading ensemble axes allowed), ``lam`` is ``(d,)`` or ``(..., d)``.

Devices: :func:`euler` and :func:`solve_adaptive` (torchdiffeq) run on the device of ``q0``;
:func:`solve_reference` is scipy's DOP853 and runs on the CPU (inputs are copied there).
:func:`euler` checks ``q0``/``lam`` for NaN/inf (``ValueError``) and guards the loss
``Tr(qᵀΛq)`` of every step, so a state that becomes non-finite raises
:class:`~ssldyn.dynamics.guards.NonFiniteLossError` naming the step and the last finite loss.
"""

from __future__ import annotations

import numpy as np
import torch

from ssldyn.dynamics.guards import check_finite
from ssldyn.dynamics.manifold import StepGuard

FORMS = ("eq9", "eq12")


def _lam(q: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    lam = torch.as_tensor(lam, dtype=q.dtype, device=q.device)
    if lam.shape[-1] != q.shape[-2]:
        raise ValueError(
            f"q_ode: lam must have shape (..., d) with d = q.shape[-2] = {q.shape[-2]}, got {tuple(lam.shape)}"
        )
    return lam.unsqueeze(-1)  # (..., d, 1): Λq = lam * q


def q_ode_rhs(q: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """Right-hand side of eq. (9): ``−2[2Λq − Λq qᵀq − q qᵀΛq]``; ``q (..., d, z)``, ``lam (..., d)``."""
    L = _lam(q, lam)
    Lq = L * q  # (..., d, z)
    qtq = q.mT @ q  # (..., z, z)
    qtLq = q.mT @ Lq  # (..., z, z)
    return -2.0 * (2.0 * Lq - Lq @ qtq - q @ qtLq)


def q_ode_rhs_numpy(q: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """:func:`q_ode_rhs` in numpy (float64) for ``q (d, z)``, ``lam (d,)``: the fast path of the scipy reference."""
    Lq = lam[:, None] * q  # (d, z)
    return -2.0 * (2.0 * Lq - Lq @ (q.T @ q) - q @ (q.T @ Lq))


def projected_gd_rhs(q: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """q-dynamics of projected GD with the polar map / Stiefel-tangent Riemannian GD (first order in η):
    ``−(4Λq − 3 q qᵀΛq − Λq qᵀq)`` (derived in the module docstring of ``manifold``)."""
    L = _lam(q, lam)
    Lq = L * q
    return -(4.0 * Lq - 3.0 * q @ (q.mT @ Lq) - Lq @ (q.mT @ q))


def eigh_ascending(C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(lam (..., d) ascending, V (..., d, d))`` with ``C = V diag(lam) Vᵀ`` (C symmetrised first)."""
    C = 0.5 * (C + C.mT)
    lam, V = torch.linalg.eigh(C)
    return lam, V


def q_from_map(A: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """``q = Vᵀ Aᵀ`` ``(..., d, z)`` from the end-to-end map ``A = W2ᵀW1`` ``(..., z, d)``: row i is ``u(v_i)``."""
    return V.mT @ A.mT


def q_from_weights(W1: torch.Tensor, W2: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """``q = Vᵀ W1ᵀ W2`` ``(..., d, z)`` for ``W1 (..., h, d)``, ``W2 (..., h, z)``."""
    return V.mT @ (W1.mT @ W2)


def predict(q: torch.Tensor, V: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Embed new points: ``u_t(x̂) = q_tᵀ Vᵀ x̂`` for rows ``x (..., B, d)`` -> ``(..., B, z)``."""
    return x @ V @ q


def trace_loss_q(q: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """Loss (8) in q coordinates: ``Tr(qᵀΛq) = Σ_i λ_i ‖q_i‖²`` ``(...)``."""
    return (_lam(q, lam) * q * q).sum((-2, -1))


def ode_time(step: int | np.ndarray, lr: float, form: str = "eq9") -> float | np.ndarray:
    """ODE time reached after ``step`` discrete steps with rate η: ``k·η`` (eq9 / GD) or ``k·η/2`` (printed eq12)."""
    if form not in FORMS:
        raise ValueError(f"form {form!r}: allowed values are {', '.join(FORMS)}")
    return step * lr * (1.0 if form == "eq9" else 0.5)


def euler(
    q0: torch.Tensor, lam: torch.Tensor, lr: float, steps: int, *, form: str = "eq9", record_every: int = 1
) -> tuple[np.ndarray, torch.Tensor]:
    """Explicit discretisation (eq. 12) from ``q0``.

    ``form="eq9"``: ``q ← q + η·q_ode_rhs(q)`` (step k ↔ t = kη, matches GD with rate η);
    ``form="eq12"``: the printed eq. (12) ``q ← q − η[2Λq − Λqqᵀq − qqᵀΛq]`` (step k ↔ t = kη/2).

    Runs on the device of ``q0`` (``lam`` is moved there).

    Returns:
        ``(steps_recorded (T,), qs (T, ..., d, z))`` including step 0 and the last step.
    Raises:
        ValueError: NaN/inf in ``q0`` or ``lam`` (before any step).
        NonFiniteLossError: the state became non-finite: its loss ``Tr(qᵀΛq)`` at step k is
            NaN/inf (names k and the loss at step k − 1, mean over members).
    """
    if form not in FORMS:
        raise ValueError(f"form {form!r}: allowed values are {', '.join(FORMS)}")
    if not lr > 0 or steps < 0 or record_every < 1:
        raise ValueError(f"euler: need lr > 0, steps >= 0, record_every >= 1; got {lr}, {steps}, {record_every}")
    check_finite("q0", q0)
    check_finite("lam", lam)
    dt = lr if form == "eq9" else 0.5 * lr
    lam_t = torch.as_tensor(lam, dtype=q0.dtype, device=q0.device)  # (d,) or (..., d) on q0's device
    guard = StepGuard(q0.device, what="q-ODE loss Tr(qᵀΛq)")
    q = q0.clone()
    guard(0, trace_loss_q(q, lam_t))
    ks, out = [0], [q.clone()]
    for k in range(1, steps + 1):
        q = q + dt * q_ode_rhs(q, lam_t)  # (..., d, z)
        guard(k, trace_loss_q(q, lam_t))  # (...): a non-finite state has a non-finite loss
        if k % record_every == 0 or k == steps:
            ks.append(k)
            out.append(q.clone())
    guard.flush()
    return np.asarray(ks), torch.stack(out)


def solve_adaptive(
    q0: torch.Tensor,
    lam: torch.Tensor,
    t: torch.Tensor | np.ndarray,
    *,
    method: str = "dopri5",
    rtol: float = 1e-7,
    atol: float = 1e-9,
) -> torch.Tensor:
    """Adaptive solution of eq. (9) with ``torchdiffeq.odeint`` at times ``t`` (T,) -> ``(T, ..., d, z)``.

    Runs on the device of ``q0`` (``lam`` and ``t`` are moved there); NaN/inf in ``q0``/``lam`` is a ``ValueError``.
    """
    from torchdiffeq import odeint

    check_finite("q0", q0)
    check_finite("lam", lam)
    tt = torch.as_tensor(t, dtype=q0.dtype, device=q0.device)
    lam_t = torch.as_tensor(lam, dtype=q0.dtype, device=q0.device)
    return odeint(lambda _t, q: q_ode_rhs(q, lam_t), q0, tt, method=method, rtol=rtol, atol=atol)


def solve_reference(
    q0: torch.Tensor | np.ndarray,
    lam: torch.Tensor | np.ndarray,
    t: np.ndarray | torch.Tensor,
    *,
    rtol: float = 1e-12,
    atol: float = 1e-12,
    rhs=None,
) -> np.ndarray:
    """Float64 reference: ``scipy.integrate.solve_ivp`` (DOP853, tight tolerances) at times ``t``.

    scipy runs on the CPU: tensor inputs on any device are copied to the CPU first.

    Returns ``(T, ..., d, z)`` as numpy float64. ``rhs`` defaults to :func:`q_ode_rhs` (evaluated
    with :func:`q_ode_rhs_numpy` when ``q0`` is a single ``(d, z)`` matrix).
    """
    from scipy.integrate import solve_ivp

    fast = rhs is None and np.ndim(q0) == 2
    rhs = rhs or q_ode_rhs
    q0n = np.asarray(q0.detach().cpu().numpy() if isinstance(q0, torch.Tensor) else q0, dtype=np.float64)
    lamt = torch.as_tensor(
        np.asarray(lam.detach().cpu().numpy() if isinstance(lam, torch.Tensor) else lam, dtype=np.float64)
    )
    tn = np.asarray(t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t, dtype=np.float64)
    shape = q0n.shape

    lam_np = lamt.numpy()

    def f(_t, y):
        if fast:
            return q_ode_rhs_numpy(y.reshape(shape), lam_np).reshape(-1)
        q = torch.from_numpy(y.reshape(shape))
        return rhs(q, lamt).numpy().reshape(-1)

    sol = solve_ivp(f, (float(tn[0]), float(tn[-1])), q0n.reshape(-1), method="DOP853", t_eval=tn, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"solve_reference: scipy failed: {sol.message}")
    return sol.y.T.reshape(len(tn), *shape)


def to_trajectory(
    steps: np.ndarray,
    qs: torch.Tensor,
    lam: torch.Tensor,
    lr: float,
    form: str = "eq9",
    prefix: str = "ode/",
    snapshots: bool = False,
):
    """Report a q-ODE solution into a :class:`ssldyn.dynamics.Trajectory` (DESIGN.md "Dynamics").

    Logs, at each recorded step, the loss ``Tr(qᵀΛq)`` per member (probe ``{prefix}loss``) and the
    ODE time ``t = ode_time(step, lr, form)`` (probe ``{prefix}t``); with ``snapshots`` also the
    arrays ``q``. ``qs`` is ``(T, d, z)`` or ``(T, E, d, z)`` as returned by :func:`euler`.
    """
    from ssldyn.dynamics.trajectory import Trajectory

    traj = Trajectory(meta={"lr": lr, "form": form})
    for i, k in enumerate(np.asarray(steps)):
        q = qs[i]
        loss = trace_loss_q(q, lam).reshape(-1)  # (E,) or (1,)
        traj.log_members(int(k), f"{prefix}loss", loss)
        traj.log(int(k), **{f"{prefix}t": float(ode_time(int(k), lr, form))})
        if snapshots:
            traj.snapshot(int(k), f"{prefix}q", q)
    return traj
