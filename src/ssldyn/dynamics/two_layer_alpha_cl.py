"""Two-layer α-CL with disjoint receptive fields (``nonlinearity`` Sec. 4, App. C).

Network (Fig. 2a): ``K`` disjoint RFs with inputs ``x_k ∈ R^d``; RF ``k`` has ``M`` filters
``w_km``; hidden outputs ``f1_km = h(w_kmᵀ x_k)``; top layer ``f2 = V f1`` with ``V (d_out, KM)``
(column index ``km = k·M + m``), ``S = VᵀV``. Shapes: ``x (N, K, d)``, ``W (K, M, d)``.

- :func:`two_layer_energy`: ``E_α = ½ tr C_α[f2]`` (the autograd reference).
- :func:`lemma4_dynamics`: ``V̇ = V C_α[f1]``, ``ẇ = P⊥_w [(S ⊗ 1_d1_dᵀ) ∘ C_α[x̃]] w`` (eq. 12).
- :func:`thm4_linear_dynamics`: linear ``h`` with ``S = ssᵀ``: ``ẇ_km = s_km b_k(W, V)`` (eq. 14).
- :func:`thm5_closed_form`: ``C = 2``, ``M = 1``, uniform α, no augmentation, conditional
  independence: ``ẇ_k = P⊥(s_k² A_k(w_k) + δ_k Δ_kΔ_kᵀ) w_k`` (eq. 15, 138-143).
- :func:`thm5_flow`: integrate eq. 15 jointly for all RFs (the global-modulation simulation); the
  one dynamics contract (:mod:`ssldyn.dynamics`): returns ``FlowResult(state=W, trajectory)``.

Note on App. C.3: the closing remark "``δ_k = 1 − p₀p₁b_k²/(λ − d_k)``" drops the factor
``1/(Z²(λ − d_k))``; we use eq. 143, ``δ_k = p₀p₁/(Z²(λ − d_k)) Σ_{k'≠k} b_{k'}²/(λ − d_{k'})``,
which is the one that makes eq. 15 equal to eq. 12 (tested).

Devices: everything runs on the device of the inputs (``x``, ``W``; ``z`` and ``weights`` are
moved to the device of ``x``). :func:`thm5_flow` checks its inputs for NaN/inf before the first
step and guards the energy it ascends, ``½ sᵀV[f1]s = ½λ`` (the two-layer ``E_α`` with the top
layer at its stationary point; the loss is ``−E_α``), in blocks: the guard adds no per-step host
sync, but every step's ``torch.linalg.eigh`` (:func:`_thm5_terms`) synchronises a CUDA device with
the CPU itself (PyTorch's documentation).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from ssldyn.checks import probabilities
from ssldyn.dynamics.alpha_cl import alpha_covariance, sphere_euler_step, sphere_grad, sphere_tangent
from ssldyn.dynamics.common import Probes, Track, check_lr, check_steps
from ssldyn.dynamics.engine import run
from ssldyn.dynamics.guards import LossGuard, check_finite
from ssldyn.dynamics.trajectory import FlowResult, Trajectory
from ssldyn.models.activations import Activation, ActivationName, get_activation
from ssldyn.objectives import alpha_cl_energy

__all__ = [
    "two_layer_features",
    "two_layer_energy",
    "two_layer_gated_input",
    "two_layer_features_and_gated_input",
    "lemma4_filter_velocity",
    "lemma4_dynamics",
    "top_eigvec_S",
    "thm4_linear_dynamics",
    "Thm5Terms",
    "stationary_top_layer",
    "thm5_closed_form",
    "thm5_energy",
    "thm5_flow",
]


def _check(x: Tensor, W: Tensor) -> None:
    if x.dim() != 3:
        raise ValueError(f"x: expected shape (N, K, d), got {tuple(x.shape)}")
    if W.dim() != 3 or W.shape[0] != x.shape[1] or W.shape[2] != x.shape[2]:
        raise ValueError(f"W: expected shape (K, M, d) = ({x.shape[1]}, M, {x.shape[2]}), got {tuple(W.shape)}")


def _preactivations(x: Tensor, W: Tensor) -> Tensor:
    """``w_kmᵀ x_k`` ``(N, K, M)`` for ``x (N, K, d)``, ``W (K, M, d)`` (shapes checked)."""
    _check(x, W)
    return torch.einsum("nkd,kmd->nkm", x, W)  # (N, K, M)


def _gated(x: Tensor, gate: Tensor) -> Tensor:
    """``x̃_km = x_k · gate_km`` concatenated in ``(k, m)`` order: ``x (N, K, d)``, ``gate (N, K, M) -> (N, K·M·d)``."""
    return (gate[..., None] * x[:, :, None, :]).reshape(x.shape[0], -1)  # (N, K*M*d)


def two_layer_features(x: Tensor, W: Tensor, activation: ActivationName | Activation = "relu") -> Tensor:
    """``f1 (N, K·M)`` with ``f1_km = h(w_kmᵀ x_k)``."""
    pre = _preactivations(x, W)  # (N, K, M)
    return get_activation(activation)(pre).reshape(x.shape[0], -1)


def two_layer_energy(
    W: Tensor,
    V: Tensor,
    x: Tensor,
    *,
    x_pos: Tensor | None = None,
    alpha: Tensor | None = None,
    activation: ActivationName | Activation = "relu",
) -> Tensor:
    """``E_α = ½ tr C_α[f2]`` with ``f2 = f1 Vᵀ`` (eq. 2-3), via ``ssldyn.objectives.alpha_cl_energy``."""
    f2 = two_layer_features(x, W, activation) @ V.T  # (N, d_out)
    f2p = f2 if x_pos is None else two_layer_features(x_pos, W, activation) @ V.T
    return alpha_cl_energy(f2, f2p, alpha)


def two_layer_gated_input(x: Tensor, W: Tensor, activation: ActivationName | Activation = "relu") -> Tensor:
    """``x̃ (N, K·M·d)``: ``x̃_km = x_k · h'(w_kmᵀ x_k)`` concatenated in ``(k, m)`` order (Sec. 4)."""
    pre = _preactivations(x, W)  # (N, K, M)
    return _gated(x, get_activation(activation).deriv(pre))


def two_layer_features_and_gated_input(
    x: Tensor, W: Tensor, activation: ActivationName | Activation = "relu"
) -> tuple[Tensor, Tensor]:
    """``(f1 (N, K·M), x̃ (N, K·M·d))`` of :func:`two_layer_features` and :func:`two_layer_gated_input` from one
    evaluation of the pre-activations ``w_kmᵀ x_k`` (what the dynamics of eq. 12 and eq. 166 need)."""
    act = get_activation(activation)
    pre = _preactivations(x, W)  # (N, K, M)
    return act(pre).reshape(x.shape[0], -1), _gated(x, act.deriv(pre))


def lemma4_filter_velocity(V: Tensor, C_xt: Tensor, W: Tensor) -> Tensor:
    """The unprojected filter velocity of eq. 12, ``[(S ⊗ 1_d1_dᵀ) ∘ C_α[x̃]] w`` with ``S = VᵀV``, as ``(K, M, d)``.

    ``V (d_out, K·M)``, ``C_xt = C_α[x̃]`` ``(K·M·d, K·M·d)`` (block ``(km, k'm')`` couples filters ``km`` and
    ``k'm'``), ``W (K, M, d)``; eq. 166 (BatchNorm) is the same product with ``C_α[x̃^bn]``.
    """
    K, M, d = W.shape
    S = V.T @ V  # (KM, KM)
    G = torch.kron(S, torch.ones(d, d, dtype=S.dtype, device=S.device)) * C_xt  # (KMd, KMd)
    return (G @ W.reshape(-1)).reshape(K, M, d)


def lemma4_dynamics(
    W: Tensor,
    V: Tensor,
    x: Tensor,
    *,
    x_pos: Tensor | None = None,
    alpha: Tensor | None = None,
    weights: Tensor | None = None,
    activation: ActivationName | Activation = "relu",
    project: bool = True,
) -> tuple[Tensor, Tensor]:
    """Eq. 12: ``(V̇ (d_out, KM), Ẇ (K, M, d))``.

    ``V̇ = V C_α[f1]``; ``ẇ = P⊥_w [(S ⊗ 1_d1_dᵀ) ∘ C_α[x̃]] w`` with ``S = VᵀV``. With
    ``project=False`` the projection is left out (then ``Ẇ = ∂E/∂W`` for a homogeneous ``h``
    with ``h(x) = h'(x)x``; ``P⊥_{w_km} = I − w_km w_kmᵀ/‖w_km‖²`` otherwise).
    """
    f1, xt = two_layer_features_and_gated_input(x, W, activation)  # (N, KM), (N, KMd)
    f1p, xtp = (None, None) if x_pos is None else two_layer_features_and_gated_input(x_pos, W, activation)
    V_dot = V @ alpha_covariance(f1, f1p, alpha=alpha, weights=weights)  # (d_out, KM)
    Cx = alpha_covariance(xt, xtp, alpha=alpha, weights=weights)  # (KMd, KMd)
    w_dot = lemma4_filter_velocity(V, Cx, W)  # (K, M, d)
    if project:
        w_dot = sphere_tangent(W / W.norm(dim=-1, keepdim=True), w_dot)
    return V_dot, w_dot


def top_eigvec_S(
    W: Tensor,
    x: Tensor,
    *,
    x_pos: Tensor | None = None,
    alpha: Tensor | None = None,
    weights: Tensor | None = None,
    activation: ActivationName | Activation = "relu",
) -> tuple[Tensor, Tensor]:
    """``(s, λ)``: the maximal eigenvector/eigenvalue of ``C_α[f1]`` (fast top level: ``S = ssᵀ``)."""
    f1 = two_layer_features(x, W, activation)
    f1p = None if x_pos is None else two_layer_features(x_pos, W, activation)
    lam, vec = torch.linalg.eigh(alpha_covariance(f1, f1p, alpha=alpha, weights=weights))
    return vec[:, -1], lam[-1]


def thm4_linear_dynamics(
    W: Tensor,
    x: Tensor,
    s: Tensor,
    *,
    x_pos: Tensor | None = None,
    alpha: Tensor | None = None,
    weights: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Eq. 14 (linear activation, ``S = ssᵀ``): returns ``(Ẇ (K, M, d), b (K, d))`` with
    ``b_k = C_α[x_k, Σ_{k'm'} s_{k'm'} w_{k'm'}ᵀ x_{k'}]`` and ``ẇ_km = s_km b_k`` (unprojected)."""
    _check(x, W)
    K, M, d = W.shape
    sm = s.reshape(K, M)
    g = torch.einsum("nkd,kmd,km->n", x, W, sm)[:, None]  # (N, 1): Σ s w ᵀx
    gp = None if x_pos is None else torch.einsum("nkd,kmd,km->n", x_pos, W, sm)[:, None]
    xf = x.reshape(x.shape[0], -1)
    xfp = None if x_pos is None else x_pos.reshape(x.shape[0], -1)
    b = alpha_covariance(xf, xfp, alpha=alpha, weights=weights, b=g, b_pos=gp).reshape(K, d)  # (K, d)
    return sm[..., None] * b[:, None, :], b


@dataclass
class Thm5Terms:
    """Quantities of Thm. 5 / eq. 134-143 (leading ensemble axes ``...`` of ``W``)."""

    p0: float
    p1: float
    A: Tensor  # (..., K, d, d)   A_k = V[x̃_k]
    L: Tensor  # (..., K, d, d)   E_z V[x̃_k | z]
    Delta: Tensor  # (..., K, d)  E[x̃_k|z=1] − E[x̃_k|z=0]
    d: Tensor  # (..., K)
    b: Tensor  # (..., K)
    lam: Tensor  # (...)
    s: Tensor  # (..., K)  Bunch–Nielsen–Sorensen top eigenvector of V[f1]
    delta: Tensor  # (..., K)
    w_dot: Tensor  # (..., K, d)  eq. 15 (projected)


def _check_thm5_inputs(W0: Tensor, x: Tensor, z: Tensor, weights: Tensor | None) -> None:
    """Shapes of eq. 15's inputs: ``x (N, K, d)``, ``W0 (..., K, d)``, ``z (N,)`` in {0, 1}, ``weights (N,)`` or ``(N, K)``."""
    if x.dim() != 3:
        raise ValueError(f"thm5_flow: x must be (N, K, d) (N samples, K receptive fields), got {tuple(x.shape)}")
    N, K, d = x.shape
    if W0.dim() < 2 or tuple(W0.shape[-2:]) != (K, d):
        raise ValueError(f"thm5_flow: W0 must be (..., K={K}, d={d}) like x, got {tuple(W0.shape)}")
    zt = torch.as_tensor(z)
    if tuple(zt.shape) != (N,) or not bool(((zt == 0) | (zt == 1)).all()):
        raise ValueError(f"thm5_flow: z must be the N={N} latent classes in {{0, 1}}, got shape {tuple(zt.shape)}")
    if weights is not None and tuple(weights.shape) not in {(N,), (N, K)}:
        raise ValueError(f"thm5_flow: weights must be (N={N},) or (N, K={K}), got {tuple(weights.shape)}")


def _thm5_populations(x: Tensor, z: Tensor, weights: Tensor | None) -> tuple[list[Tensor], float, float]:
    """Per-class masks ``p_i·1[z_i = c]`` ``(N, K)`` on the device of ``x`` and ``(p0, p1)``."""
    n, K, _ = x.shape
    p = (
        torch.full((n,), 1.0 / n, dtype=x.dtype, device=x.device)
        if weights is None
        else weights.to(dtype=x.dtype, device=x.device)
    )
    if p.dim() == 1:
        p = p[:, None].expand(n, K)  # (N, K)
    probabilities(p.mT, "weights (per RF)", where="eq. 15")  # (K, N): each RF's population sums to 1
    z = z.to(x.device)
    masks = [(z == c).to(x.dtype)[:, None] * p for c in (0, 1)]  # (N, K)
    p0, p1 = float(masks[0][:, 0].sum()), float(masks[1][:, 0].sum())
    return masks, p0, p1


def thm5_closed_form(
    W: Tensor, x: Tensor, z: Tensor, *, weights: Tensor | None = None, activation: ActivationName | Activation = "relu"
) -> Thm5Terms:
    """Eq. 15 for ``M = 1``, ``C = 2`` (``z ∈ {0, 1}``), uniform α, no augmentation.

    Args:
        W: ``(..., K, d)`` one filter per RF (leading ensemble axes allowed).
        x: ``(N, K, d)``; z: ``(N,)`` in {0, 1}; weights: ``(N,)`` probabilities (population) or None,
            or ``(N, K)`` per-RF weights (eq. 15 only involves per-RF moments given ``z``, so the
            per-RF conditional populations of :meth:`TwoRFModel.conditional_support` suffice).
    """
    masks, p0, p1 = _thm5_populations(x, z, weights)
    return _thm5_terms(W, x, masks, p0, p1, get_activation(activation))


def _thm5_terms(W: Tensor, x: Tensor, masks: list[Tensor], p0: float, p1: float, act: Activation) -> Thm5Terms:
    pre = (x * W[..., None, :, :]).sum(-1)  # (..., N, K)
    xt = act.deriv(pre)[..., None] * x  # (..., N, K, d)
    xtk = xt.movedim(-3, -2)  # (..., K, N, d)
    means = [(mk.T[:, :, None] * xtk).sum(-2) / pc for mk, pc in zip(masks, (p0, p1))]  # (..., K, d)
    outer = xtk[..., :, None] * xtk[..., None, :]  # (..., K, N, d, d) (small N: broadcasting beats bmm)
    second = [(mk.T[:, :, None, None] * outer).sum(-3) / pc for mk, pc in zip(masks, (p0, p1))]  # (..., K, d, d)
    cond_var = [s_ - m_[..., :, None] * m_[..., None, :] for s_, m_ in zip(second, means)]
    L = p0 * cond_var[0] + p1 * cond_var[1]  # (..., K, d, d)
    Delta = means[1] - means[0]  # (..., K, d)
    A = L + p0 * p1 * Delta[..., :, None] * Delta[..., None, :]
    dk = (W * (L @ W[..., None]).squeeze(-1)).sum(-1)
    bk = (W * Delta).sum(-1)
    Vf = torch.diag_embed(dk) + p0 * p1 * bk[..., :, None] * bk[..., None, :]  # (..., K, K), eq. 138
    lam_all, vec = torch.linalg.eigh(Vf)
    lam, s_eig = lam_all[..., -1], vec[..., -1]  # top eigenpair of V[f1]
    s, delta = stationary_top_layer(dk, bk, p0, p1, lam)
    s = -s  # the sign of eq. 139 as printed, b_k / (d_k − λ)
    # where BNS is singular (all b_k = 0) fall back to the eigenvector itself
    s = torch.where(torch.isfinite(s).all(-1, keepdim=True), s, s_eig)
    # eq. 141 (= eq. 15 with eq. 143 whenever b_k != 0): modulation p0 p1 s_k Σ_{k'≠k} s_k' b_k' Δ_k
    sb = (s * bk).sum(-1, keepdim=True)
    modul = (p0 * p1 * s * (sb - s * bk))[..., None] * Delta
    wn = W / W.norm(dim=-1, keepdim=True)
    rhs = (s**2)[..., None] * (A @ W[..., None]).squeeze(-1) + modul
    w_dot = sphere_tangent(wn, rhs)
    return Thm5Terms(p0, p1, A, L, Delta, dk, bk, lam, s, delta, w_dot)


def stationary_top_layer(d: Tensor, b: Tensor, p0: float, p1: float, lam: Tensor) -> tuple[Tensor, Tensor]:
    """``(s, δ)``: the top layer at its stationary point and the modulation weights of eq. 139 and 143.

    ``V[f1] = diag(d) + p₀p₁ b bᵀ`` (eq. 138) with top eigenvalue ``λ``; its unit top eigenvector by
    Bunch–Nielsen–Sorensen is ``s_k = (b_k / (λ − d_k)) / Z`` with ``Z² = Σ_k b_k² / (λ − d_k)²`` (eq. 139,
    up to sign: the printed ``b_k / (d_k − λ)`` is ``−s``), and
    ``δ_k = p₀p₁ / (Z² (λ − d_k)) Σ_{k'≠k} b_{k'}² / (λ − d_{k'})`` (eq. 143). NaN where every ``b_k = 0``
    (``Z = 0``). Shapes: ``d, b (..., K)``, ``lam (...)`` -> ``s, δ (..., K)``. Cor. 3 (eq. 179) is the same
    with the BatchNorm terms ``d^bn``, ``b^bn``, ``λ^bn``.
    """
    gap = lam[..., None] - d  # (..., K): λ − d_k >= 0
    raw = b / gap  # (..., K)
    Z2 = (raw**2).sum(-1)  # (...)
    s = raw / Z2.sqrt()[..., None]
    tot = (b**2 / gap).sum(-1, keepdim=True)  # (..., 1): Σ_k' b_k'² / (λ − d_k')
    delta = p0 * p1 / (Z2[..., None] * gap) * (tot - b**2 / gap)
    return s, delta


def thm5_energy(terms: Thm5Terms) -> Tensor:
    """``½ sᵀ V[f1] s = ½ (Σ_k d_k s_k² + p₀p₁ (Σ_k b_k s_k)²)`` (eq. 138), shape ``(...)``.

    The two-layer energy ``½ tr C_α[f2]`` with the top layer ``V = sᵀ`` at its stationary point
    (``= ½λ`` for the unit top eigenvector ``s``); NaN whenever the filters are.
    """
    s = terms.s
    return 0.5 * ((terms.d * s**2).sum(-1) + terms.p0 * terms.p1 * (terms.b * s).sum(-1) ** 2)


def thm5_flow(
    W0: Tensor,
    x: Tensor,
    z: Tensor,
    *,
    steps: int,
    dt: float = 0.1,
    weights: Tensor | None = None,
    activation: ActivationName | Activation = "relu",
    modulation: bool = True,
    probes: Probes | None = None,
    every: int | Iterable[int] | None = None,
    track: Track | None = None,
    guard: LossGuard | bool | None = None,
) -> FlowResult[Tensor]:
    """Integrate eq. 15 for all RFs jointly (projected Euler + renormalisation); ``W0 (..., K, d)``.

    ``steps`` Euler steps of size ``dt`` (time ``steps·dt``). With ``modulation=False`` each RF
    follows its own one-layer flow ``ẇ_k = P⊥ A_k(w_k) w_k`` (no top-down term), the baseline of
    Thm. 6. Runs on the device of ``W0`` (``x``, ``z``, ``weights`` are moved there).

    Returns:
        ``FlowResult(state=W (..., K, d) unit filters, trajectory)``: the energy
        :func:`thm5_energy` per member (the leading axes of ``W0`` flattened) and the probes of
        ``W`` at the ``every`` steps (None: the first and the last).
    Raises:
        ValueError: bad ``steps``/``dt``, NaN/inf in ``W0``, ``x`` or ``weights``, a zero filter in ``W0``
            (before the first step).
        NonFiniteLossError: the energy :func:`thm5_energy` at the filters of step ``t`` (``t = 0``
            the start, ``t = steps`` the returned filters) became NaN/inf: names ``t``, the member
            and its last finite value.
    """
    steps, dt = check_steps(steps), check_lr(dt, "dt")
    _check_thm5_inputs(W0, x, z, weights)
    check_finite("W0", W0)
    if bool((W0.norm(dim=-1) == 0).any()):  # W0 / ‖W0‖ would be NaN: a bad input, not a diverged flow
        raise ValueError("thm5_flow: W0 has a zero filter (a direction on the sphere is needed)")
    check_finite("x", x)
    if weights is not None:
        check_finite("weights", weights)
    act = get_activation(activation)
    x = x.to(W0.device)
    masks, p0, p1 = _thm5_populations(x, z, weights)  # constant over the flow: no per-step host sync
    failed: list[Exception | None] = [None]

    def step(W: Tensor, t: int):
        try:
            terms = _thm5_terms(W, x, masks, p0, p1, act)
        # the CPU eigh rejects NaN: the filters diverged at this step (LinAlgError is public; pyright misses
        # it because torch.linalg's __all__ does not list it)
        except torch.linalg.LinAlgError as e:  # pyright: ignore[reportPrivateImportUsage]
            if bool(torch.isfinite(W).all()):
                raise
            failed[0] = e  # a NaN energy: the guard names this step (without a guard, the error is raised)
            return W, torch.full(W.shape[:-2], float("nan"), dtype=W.dtype, device=W.device).reshape(-1)
        energy = thm5_energy(terms).reshape(-1)  # (E,): step ``steps`` is the energy of the returned filters
        if t == steps:
            return W, energy
        g = terms.w_dot if modulation else sphere_grad(terms.A, W)  # (..., K, d): eq. 15, or P⊥ A_k(w_k) w_k
        return sphere_euler_step(W, g, dt), energy

    res = run(
        W0 / W0.norm(dim=-1, keepdim=True),
        step,
        steps=steps,
        every=every,
        probes=probes,
        track=track,
        guard=guard,
        guard_what="energy",
        loss_name="energy",
        stop=lambda W, t: failed[0] is not None,
        trajectory=Trajectory(meta={"dynamics": "two_layer_alpha_cl.thm5_flow", "dt": dt, "modulation": modulation}),
    )
    if failed[0] is not None:
        raise failed[0]
    return res
