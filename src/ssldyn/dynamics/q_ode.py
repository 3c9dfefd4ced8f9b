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

The one dynamics contract (:mod:`ssldyn.dynamics`): :func:`euler`, :func:`solve_adaptive` and
:func:`solve_reference` return ``FlowResult(state=q_final, trajectory)``; the trajectory holds, at
each recorded step, ``loss`` = ``Tr(qᵀΛq)`` per member, the ODE time ``t`` and the snapshot ``q``
(``trajectory.stack("q")`` gives ``(steps, qs (T, ..., d, z))``); probes receive ``q``. For
:func:`euler` the steps are the Euler steps (logged every ``every``); for the two solvers, which
evaluate the solution at given times ``t`` (T,), step ``i`` is the time ``t[i]``.

Devices: :func:`euler` and :func:`solve_adaptive` (torchdiffeq) run on the device of ``q0``;
:func:`solve_reference` is scipy's DOP853 and runs on the CPU (inputs are copied there). All three
check ``q0``, ``lam`` (and ``t``) for NaN/inf (``ValueError``, before any work) and guard the loss
``Tr(qᵀΛq)``, so a state that becomes non-finite raises
:class:`~ssldyn.dynamics.guards.NonFiniteLossError` naming the step and the last finite loss.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal, get_args

import numpy as np
import torch

from ssldyn.checks import choice, integer
from ssldyn.dynamics.common import Probes, Track, check_lr, check_steps
from ssldyn.dynamics.engine import run
from ssldyn.dynamics.guards import LossGuard, check_finite
from ssldyn.dynamics.trajectory import FlowResult, Trajectory

__all__ = [
    "ADAPTIVE_METHODS",
    "FORMS",
    "AdaptiveMethod",
    "Form",
    "q_ode_rhs",
    "q_ode_rhs_numpy",
    "projected_gd_rhs",
    "eigh_ascending",
    "q_from_map",
    "q_from_weights",
    "q_ode_predict",
    "trace_loss_q",
    "ode_time",
    "euler",
    "solve_adaptive",
    "solve_reference",
]

Form = Literal["eq9", "eq12"]
FORMS: tuple[str, ...] = get_args(Form)
#: the adaptive (error-controlled) solvers of ``torchdiffeq`` that :func:`solve_adaptive` takes
AdaptiveMethod = Literal["dopri5", "dopri8", "bosh3", "fehlberg2", "adaptive_heun"]
ADAPTIVE_METHODS: tuple[str, ...] = get_args(AdaptiveMethod)
GUARD_WHAT = "q-ODE loss Tr(qᵀΛq)"


def _lam(q: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    if q.dim() < 2:
        raise ValueError(f"q_ode: q must have shape (..., d, z), got {tuple(q.shape)}")
    lam = torch.as_tensor(lam, dtype=q.dtype, device=q.device)
    if lam.dim() < 1 or lam.shape[-1] != q.shape[-2]:
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
    if C.dim() < 2 or C.shape[-1] != C.shape[-2]:
        raise ValueError(f"eigh_ascending: C must be square (..., d, d), got shape {tuple(C.shape)}")
    C = 0.5 * (C + C.mT)
    lam, V = torch.linalg.eigh(C)
    return lam, V


def q_from_map(A: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """``q = Vᵀ Aᵀ`` ``(..., d, z)`` from the end-to-end map ``A = W2ᵀW1`` ``(..., z, d)``: row i is ``u(v_i)``."""
    return V.mT @ A.mT


def q_from_weights(W1: torch.Tensor, W2: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """``q = Vᵀ W1ᵀ W2`` ``(..., d, z)`` for ``W1 (..., h, d)``, ``W2 (..., h, z)``."""
    if W1.dim() < 2 or W2.dim() < 2 or W1.shape[-2] != W2.shape[-2] or V.shape[-1] != W1.shape[-1]:
        raise ValueError(f"q_from_weights: need W1 (..., h, d), W2 (..., h, z) and V (..., d, d), got "
                         f"{tuple(W1.shape)}, {tuple(W2.shape)}, {tuple(V.shape)}")  # fmt: skip
    return V.mT @ (W1.mT @ W2)


def q_ode_predict(q: torch.Tensor, V: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Embed new points: ``u_t(x̂) = q_tᵀ Vᵀ x̂`` for rows ``x (..., B, d)`` -> ``(..., B, z)``."""
    d = V.shape[-1]
    if V.dim() < 2 or V.shape[-2] != d or q.dim() < 2 or q.shape[-2] != d or x.dim() < 1 or x.shape[-1] != d:
        raise ValueError(f"q_ode_predict: need q (..., d, z), V (..., d, d) and x (..., B, d) with one d, got "
                         f"{tuple(q.shape)}, {tuple(V.shape)}, {tuple(x.shape)}")  # fmt: skip
    return x @ V @ q


def trace_loss_q(q: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """Loss (8) in q coordinates: ``Tr(qᵀΛq) = Σ_i λ_i ‖q_i‖²`` ``(...)``."""
    return (_lam(q, lam) * q * q).sum((-2, -1))


def _float64(x: object) -> np.ndarray:
    """A tensor (on any device) or array-like as a float64 numpy array on the host."""
    return np.asarray(x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float64)


def ode_time(step: int | np.ndarray, lr: float, form: Form = "eq9") -> float | np.ndarray:
    """ODE time reached after ``step`` discrete steps with rate η: ``k·η`` (eq9 / GD) or ``k·η/2`` (printed eq12)."""
    choice(form, "form", FORMS)
    return step * lr * (1.0 if form == "eq9" else 0.5)


def _check_q0_lam(q0, lam) -> None:
    check_finite("q0", q0)
    check_finite("lam", lam)
    if np.ndim(q0) < 2:
        raise ValueError(f"q0: expected shape (..., d, z), got {tuple(np.shape(q0))}")


def euler(
    q0: torch.Tensor,
    lam: torch.Tensor,
    *,
    lr: float,
    steps: int,
    form: Form = "eq9",
    rhs: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    probes: Probes | None = None,
    every: int | Iterable[int] | None = 1,
    track: Track | None = None,
    guard: LossGuard | bool | None = None,
) -> FlowResult[torch.Tensor]:
    """Explicit discretisation (eq. 12) from ``q0``.

    ``form="eq9"``: ``q ← q + η·q_ode_rhs(q)`` (step k ↔ t = kη, matches GD with rate η);
    ``form="eq12"``: the printed eq. (12) ``q ← q − η[2Λq − Λqqᵀq − qqᵀΛq]`` (step k ↔ t = kη/2).
    ``rhs(q, Λ)`` replaces eq. (9)'s right-hand side (as in :func:`solve_reference`), e.g.
    :func:`projected_gd_rhs` for the polar / Stiefel variant's own flow: ``q ← q + η·rhs(q, Λ)``
    (``form="eq9"`` only: eq. (12) is the printed step of eq. (9)). The logged loss stays ``Tr(qᵀΛq)``.

    Runs on the device of ``q0`` (``lam`` is moved there).

    Returns:
        ``FlowResult(state=q_steps, trajectory)``: at the recorded steps (``every``; 0 and the last
        included) ``loss`` per member, ``t`` and the snapshot ``q``.
    Raises:
        ValueError: ``lr <= 0``, ``steps < 0``, NaN/inf in ``q0`` or ``lam``, ``rhs`` with
            ``form="eq12"`` (before any step).
        NonFiniteLossError: the state became non-finite: its loss ``Tr(qᵀΛq)`` at step k is
            NaN/inf (names k, the member and its loss at step k − 1).
    """
    choice(form, "form", FORMS)
    if rhs is not None and form != "eq9":
        raise ValueError(f"euler: rhs is a right-hand side in eq. (9)'s time; form={form!r} is the printed step of "
                         "eq. (9) itself: use form='eq9' with rhs")  # fmt: skip
    f = rhs or q_ode_rhs
    lr, steps = check_lr(lr), check_steps(steps)
    _check_q0_lam(q0, lam)
    dt = lr if form == "eq9" else 0.5 * lr
    lam_t = torch.as_tensor(lam, dtype=q0.dtype, device=q0.device)  # (d,) or (..., d) on q0's device

    def step(q: torch.Tensor, k: int):
        loss = trace_loss_q(q, lam_t)  # (...): a non-finite state has a non-finite loss
        q_next = q if k == steps else q + dt * f(q, lam_t)  # (..., d, z)
        return q_next, loss, (lambda: {"t": float(ode_time(k, lr, form))})

    return run(
        q0.clone(),
        step,
        steps=steps,
        every=every,
        probes=probes,
        snapshots={"q": lambda q: q},
        snapshot_every=every,
        track=track,
        guard=guard,
        guard_what=GUARD_WHAT,
        trajectory=Trajectory(meta={"lr": lr, "form": form}),
    )


def _check_times(t) -> np.ndarray:
    tn = _float64(t)
    if tn.ndim != 1 or tn.size == 0:
        raise ValueError(f"t: expected a non-empty 1-D array of times, got shape {tn.shape}")
    check_finite("t", tn)
    d = np.diff(tn)
    if tn.size > 1 and not (np.all(d > 0) or np.all(d < 0)):
        raise ValueError("t: the times must be strictly monotone (increasing or decreasing)")
    return tn


def _blow_up(fn: str, tn: np.ndarray) -> str:
    """The error of an adaptive solve whose step size fell to round-off (the solver's own message is cryptic)."""
    return (f"{fn}: the solver's step size fell to round-off before t = {tn[-1]:.3g}: q(t) blows up in finite "
            "time on this interval (eq. 9 is cubic in q: it does backwards in time, or forwards from ‖q_0‖ > 1 "
            "along an eigenvector with λ > 0, e.g. q̇ = 4λq(q² − 1) for d = z = 1); shorten t or check q_0 and lam")  # fmt: skip


#: steps an adaptive solver may take (dopri5 / DOP853); a problem needing more is a ValueError (a bound on the work)
MAX_ODE_STEPS = 100_000


def _check_budget(
    fn: str,
    q0: torch.Tensor | np.ndarray,
    lam: torch.Tensor | np.ndarray,
    tn: np.ndarray,
    max_steps: int,
    radius: float,
) -> None:
    """Refuse before solving when stability alone needs more than ``max_steps`` explicit steps:
    the Jacobian of eq. (9) at ``q = 0`` is ``−4Λ`` (spectral radius ``ρ = 4 max|λ|``), an explicit
    Runge–Kutta step is stable for ``h ρ ≲ radius`` (≈ 3.3 for dopri5, 6 for DOP853), so about
    ``|t_end − t_0| ρ / radius`` steps."""
    integer(max_steps, "max_steps", where=fn)
    lam_np = _float64(lam)
    rho = 4.0 * float(np.abs(lam_np).max(initial=0.0))
    span = abs(float(tn[-1]) - float(tn[0]))
    need = span * rho / radius
    if need > max_steps:
        raise ValueError(
            f"{fn}: integrating over |Δt| = {span:.3g} with max|λ| = {np.abs(lam_np).max():.3g} needs about "
            f"{need:.3g} explicit steps (stability: step ≲ {radius:g}/ρ, ρ = {rho:.3g}), above max_steps={max_steps}; "
            "shorten t, rescale λ, or raise max_steps"
        )


def _solution_result(
    qs: torch.Tensor,
    lam: torch.Tensor,
    tn: np.ndarray,
    probes: Probes | None,
    guard: LossGuard | bool | None,
    meta: dict,
) -> FlowResult[torch.Tensor]:
    """The solution ``qs (T, ..., d, z)`` at the times ``tn`` recorded through the engine (step ``i`` ↔ ``t[i]``)."""
    T = len(tn)

    def step(i: int, _t: int):
        return i + 1, trace_loss_q(qs[i], lam), (lambda: {"t": float(tn[i])})

    res = run(
        0,
        step,
        steps=T - 1,
        every=1,
        probes=probes,
        observe=lambda i: qs[i],
        snapshots={"q": lambda i: qs[i]},
        snapshot_every=1,
        guard=guard,
        guard_what=GUARD_WHAT,
        trajectory=Trajectory(meta=meta),
    )
    return FlowResult(qs[-1], res.trajectory)


def solve_adaptive(
    q0: torch.Tensor,
    lam: torch.Tensor,
    *,
    t: torch.Tensor | np.ndarray,
    method: AdaptiveMethod = "dopri5",
    rtol: float = 1e-7,
    atol: float = 1e-9,
    rhs: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    probes: Probes | None = None,
    guard: LossGuard | bool | None = None,
    max_steps: int = MAX_ODE_STEPS,
) -> FlowResult[torch.Tensor]:
    """Adaptive solution of eq. (9) with ``torchdiffeq.odeint`` at the times ``t`` (T,).

    ``rhs(q, Λ)`` replaces eq. (9)'s right-hand side (as in :func:`solve_reference` and :func:`euler`),
    e.g. :func:`projected_gd_rhs`; the step-budget check assumes eq. (9)'s linear part ``−4Λq`` at
    ``q = 0`` (which :func:`projected_gd_rhs` shares), the solver's own step count bounds any other.

    ``method`` is one of :data:`ADAPTIVE_METHODS` (error-controlled, so ``rtol``/``atol`` and the step
    budget hold; a fixed-step solver of ``torchdiffeq`` would ignore them and is refused).
    At most ``max_steps`` solver steps: a problem that needs more (checked before solving from
    the stability bound, and during solving by the solver's step count) is a ``ValueError``.

    Runs on the device of ``q0`` (``lam`` and ``t`` are moved there). Returns
    ``FlowResult(state=q(t[-1]), trajectory)`` with step ``i`` ↔ ``t[i]`` (``q``, ``loss``, ``t``).

    Raises:
        ValueError: NaN/inf in ``q0``, ``lam`` or ``t``, or ``t`` not strictly monotone.
        NonFiniteLossError: the solution became non-finite at ``t[i]`` (names ``i``).
    """
    from torchdiffeq import odeint

    choice(method, "method", ADAPTIVE_METHODS, where="solve_adaptive")  # fixed-step solvers ignore rtol and max_steps
    _check_q0_lam(q0, lam)
    tn = _check_times(t)
    _check_budget("solve_adaptive", q0, lam, tn, max_steps, 3.3)
    tt = torch.as_tensor(t, dtype=q0.dtype, device=q0.device)
    lam_t = torch.as_tensor(lam, dtype=q0.dtype, device=q0.device)
    f = rhs or q_ode_rhs
    try:
        qs: torch.Tensor = odeint(  # type: ignore[assignment]  # (T, ..., d, z)
            lambda _t, q: f(q, lam_t), q0, tt, method=method, rtol=rtol, atol=atol,
            options={"max_num_steps": max_steps},
        )  # fmt: skip
    except AssertionError as e:
        if "underflow in dt" in str(e):
            raise ValueError(_blow_up("solve_adaptive", tn)) from None
        if "max_num_steps" not in str(e):
            raise
        raise ValueError(f"solve_adaptive: more than max_steps={max_steps} steps to reach t = {tn[-1]:.3g} "
                         f"(rtol={rtol:g}); shorten t or raise max_steps") from None  # fmt: skip
    return _solution_result(qs, lam_t, tn, probes, guard, {"method": method, "rtol": rtol, "atol": atol})


def solve_reference(
    q0: torch.Tensor | np.ndarray,
    lam: torch.Tensor | np.ndarray,
    *,
    t: np.ndarray | torch.Tensor,
    rtol: float = 1e-12,
    atol: float = 1e-12,
    rhs: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    probes: Probes | None = None,
    guard: LossGuard | bool | None = None,
    max_steps: int = MAX_ODE_STEPS,
) -> FlowResult[torch.Tensor]:
    """Float64 reference: ``scipy.integrate.solve_ivp`` (DOP853, tight tolerances) at the times ``t``.

    At most ``max_steps`` DOP853 steps (12 right-hand-side evaluations each): a stiff ``λ`` or a long
    ``t`` that needs more is a ``ValueError`` — before solving when the stability bound alone
    exceeds it, else as soon as the evaluations pass the budget.

    scipy runs on the CPU: tensor inputs on any device are copied to the CPU first. Returns
    ``FlowResult(state=q(t[-1]), trajectory)`` (float64 CPU tensors; step ``i`` ↔ ``t[i]``).
    ``rhs`` defaults to :func:`q_ode_rhs` (evaluated with :func:`q_ode_rhs_numpy` when ``q0`` is
    a single ``(d, z)`` matrix).

    Raises:
        ValueError: NaN/inf in ``q0``, ``lam`` or ``t``, or ``t`` not strictly monotone (scipy
            would never return on NaN/inf input).
        RuntimeError: scipy reports a failure.
    """
    from scipy.integrate import solve_ivp

    _check_q0_lam(q0, lam)
    tn = _check_times(t)
    fast = rhs is None and np.ndim(q0) == 2
    rhs = rhs or q_ode_rhs
    q0n = _float64(q0)
    lamt = torch.as_tensor(_float64(lam))
    shape = q0n.shape
    lam_np = lamt.numpy()
    _check_budget("solve_reference", q0n, lam_np, tn, max_steps, 6.0)
    evals = [0]
    meta = {"method": "DOP853", "rtol": rtol, "atol": atol}

    def f(_t, y):
        evals[0] += 1
        if evals[0] > 12 * max_steps + 1:
            raise _OverBudget
        if fast:
            return q_ode_rhs_numpy(y.reshape(shape), lam_np).reshape(-1)
        q = torch.from_numpy(y.reshape(shape))
        return rhs(q, lamt).numpy().reshape(-1)

    if len(tn) == 1:  # one time: q(t[0]) = q0 (scipy returns no solution array for an empty span)
        qs = torch.from_numpy(q0n.copy())[None]  # (1, ..., d, z)
        return _solution_result(qs, lamt, tn, probes, guard, meta)
    try:
        sol = solve_ivp(f, (float(tn[0]), float(tn[-1])), q0n.reshape(-1), method="DOP853", t_eval=tn, rtol=rtol,
                        atol=atol)  # fmt: skip
    except _OverBudget:
        raise ValueError(f"solve_reference: more than max_steps={max_steps} DOP853 steps to reach t = {tn[-1]:.3g} "
                         f"(rtol={rtol:g}); shorten t or raise max_steps") from None  # fmt: skip
    if not sol.success and "step size is less than spacing" in str(sol.message):
        raise ValueError(_blow_up("solve_reference", tn))
    if not sol.success:
        raise RuntimeError(f"solve_reference: scipy failed: {sol.message}")
    qs = torch.from_numpy(np.ascontiguousarray(sol.y.T.reshape(len(tn), *shape)))  # (T, ..., d, z)
    return _solution_result(qs, lamt, tn, probes, guard, meta)


class _OverBudget(Exception):
    """Raised inside scipy's right-hand side when the step budget is spent (caught by solve_reference)."""
