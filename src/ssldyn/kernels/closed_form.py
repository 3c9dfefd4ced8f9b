"""Closed-form kernels and cluster-level flows of ``variational`` Sec. 4.2.1.

* :func:`averaging_net_kernel` — Prop. 4.3 (eq. 20), the exact NTK of the averaging network
  ``f(x) = Aᵀσ(Bx)`` of eq. (18): block-diagonal in the output coordinates,

      K_ij^{kl} = 1_{k=l} (x_iᵀx_j / M) Σ_{p=(k-1)M+1}^{kM} σ'(b_p x_i) σ'(b_p x_j),

  with ``x_iᵀx_j`` replaced by ``x_iᵀx_j + 1`` when the net has a hidden bias (a constant
  input coordinate). Cost ``O(n² M d)``, no per-parameter Jacobians.
* :func:`relu_infinite_width_kernel` — Prop. 4.4: for Gaussian rows ``b_p`` and ReLU, as
  ``M → ∞``, ``K∞_ij = (x_iᵀx_j)[½ − arccos(cos θ_ij)/(2π)] I_d``.
* :func:`cluster_coefficients` — ``β_q^k = (1/M) Σ_{p∈block k} σ'(b_p ξ_q)²`` (eq. 37);
  :func:`predicted_cluster_flow` — Thm. 4.5 (eq. 21) / Cor. 4.6: on clustered data (eq. 16)
  ``ż_i ≈ −(n_q/n) ‖ξ_q‖² β_q ∇L(ξ_q)`` for every ``i`` in cluster ``q = γ(i)``.

Conventions: ``B`` is ``(Md, D)`` (or ``(E, Md, D)`` for an ensemble), rows grouped in ``d``
blocks of ``M`` consecutive rows, block ``k`` feeding output ``k`` (as ``AveragingNet``).
Everything is computed on the device of the inputs (``B`` / ``x`` / ``grads`` / ``K``); labels
and centers given on another device are moved there.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ssldyn.models.activations import Activation, get_activation

__all__ = [
    "averaging_net_kernel",
    "relu_infinite_width_kernel",
    "cluster_coefficients",
    "predicted_cluster_flow",
    "block_structure",
    "RELU_INFINITE_WIDTH_BETA",
]

RELU_INFINITE_WIDTH_BETA = 0.5
"""β_q^k for ReLU and Gaussian rows as M → ∞: E[1{b·ξ > 0}] = ½ (Cor. 4.6)."""


def _check_B(B: Tensor, d: int, x: Tensor) -> tuple[Tensor, int]:
    if B.dim() not in (2, 3):
        raise ValueError(f"B must have shape (Md, D) or (E, Md, D), got {tuple(B.shape)}")
    if d < 1 or B.shape[-2] % d:
        raise ValueError(f"B has {B.shape[-2]} rows, not a multiple of d={d}")
    if x.shape[-1] != B.shape[-1]:
        raise ValueError(f"inputs have {x.shape[-1]} features but B has D={B.shape[-1]} columns")
    return B, B.shape[-2] // d


def _preact(B: Tensor, x: Tensor, bias: Tensor | None) -> Tensor:
    pre = x @ B.mT  # (..., n, Md)
    if bias is not None:
        pre = pre + bias.unsqueeze(-2)
    return pre


def averaging_net_kernel(
    B: Tensor,
    x1: Tensor,
    x2: Tensor | None = None,
    activation: str | Activation = "relu",
    *,
    d: int,
    bias: Tensor | None = None,
    mode: str = "full",
) -> Tensor:
    """Prop. 4.3 (eq. 20): the NTK of ``f(x) = Aᵀσ(Bx [+c])`` w.r.t. ``B`` (and ``c`` if given).

    Args:
        B: ``(Md, D)`` or ``(E, Md, D)``.
        x1: ``(n1, D)``; x2: ``(n2, D)`` or None (= x1).
        activation: name or Activation (its derivative σ' is used).
        d: output dimension (number of blocks).
        bias: the hidden bias ``c`` ``(Md,)`` / ``(E, Md)`` when the net has one (trained too).
        mode: ``"full"`` -> ``(n1, n2, d, d)`` (zero off the diagonal ``k ≠ l``);
            ``"blocks"`` -> ``(n1, n2, d)`` the diagonal entries ``K^{kk}``; ``"trace"`` -> ``(n1, n2)``.
    Returns:
        The kernel (with a leading ``E`` axis for an ensemble ``B``).
    """
    if mode not in ("full", "blocks", "trace"):
        raise ValueError(f"averaging_net_kernel: mode {mode!r}: allowed values are 'full', 'blocks', 'trace'")
    act = get_activation(activation)
    x2 = x1 if x2 is None else x2
    B, M = _check_B(B, d, x1)
    # σ' ∈ {0, 1} (ReLU, linear): Σ_p σ'σ' counts co-active units, exact in float32 for M < 2^24
    binary = act.name in ("relu", "linear") and M < 2**24
    work = torch.float32 if binary and x1.dtype == torch.float64 else x1.dtype
    s1 = act.deriv(_preact(B, x1, bias)).to(work)  # (..., n1, Md)
    s2 = s1 if x2 is x1 else act.deriv(_preact(B, x2, bias)).to(work)  # (..., n2, Md)
    s1 = s1.unflatten(-1, (d, M)).movedim(-2, -3)  # (..., d, n1, M)
    s2 = s2.unflatten(-1, (d, M)).movedim(-2, -3)  # (..., d, n2, M)
    gram = x1 @ x2.mT  # (n1, n2)
    if bias is not None:
        gram = gram + 1.0
    blocks = (s1 @ s2.mT).to(x1.dtype) * (gram / M)  # (..., d, n1, n2)
    blocks = blocks.movedim(-3, -1)  # (..., n1, n2, d)
    if mode == "blocks":
        return blocks
    if mode == "trace":
        return blocks.sum(-1)
    return torch.diag_embed(blocks)  # (..., n1, n2, d, d)


def relu_infinite_width_kernel(x1: Tensor, x2: Tensor | None = None, *, d: int | None = None) -> Tensor:
    """Prop. 4.4: ``K∞_ij = (x_iᵀx_j)[½ − θ_ij/(2π)]`` (the scalar factor of ``I_d``), ``θ_ij`` the angle.

    The angle is ``θ = 2·atan2(‖û − v̂‖, ‖û + v̂‖)`` (``û, v̂`` the unit vectors), equal to
    ``arccos(cos θ)`` but with finite gradients at ``θ = 0`` (``arccos`` has an infinite slope at
    ``cos θ = 1``, which gave NaN gradients on the diagonal of ``K(x, x)``) and accurate for
    nearly parallel and nearly opposite vectors. Zero vectors get ``θ = π/2`` (no direction) —
    their row is 0 anyway (``x_iᵀx_j = 0``).

    Args:
        x1: ``(n1, D)``; x2: ``(n2, D)`` or None.
        d: if given, return the full ``(n1, n2, d, d)`` kernel ``k_ij I_d``; else ``(n1, n2)``.
    """
    x2 = x1 if x2 is None else x2
    gram = x1 @ x2.mT  # (n1, n2)
    tiny = torch.finfo(gram.dtype).tiny
    u1 = x1 / x1.norm(dim=-1, keepdim=True).clamp_min(tiny)  # (n1, D)
    u2 = x2 / x2.norm(dim=-1, keepdim=True).clamp_min(tiny)  # (n2, D)
    diff = (u1[:, None, :] - u2[None, :, :]).norm(dim=-1)  # (n1, n2): ‖û − v̂‖ (norm' at 0 is 0)
    summ = (u1[:, None, :] + u2[None, :, :]).norm(dim=-1)  # (n1, n2): ‖û + v̂‖
    theta = 2.0 * torch.atan2(diff, summ)  # (n1, n2) in [0, π]
    k = gram * (0.5 - theta / (2 * math.pi))  # (n1, n2)
    if d is None:
        return k
    return k[..., None, None] * torch.eye(d, dtype=k.dtype, device=k.device)


def cluster_coefficients(
    B: Tensor, centers: Tensor, activation: str | Activation = "relu", *, d: int, bias: Tensor | None = None
) -> Tensor:
    """eq. (37): ``β_q^k = (1/M) Σ_{p=(k-1)M+1}^{kM} σ'(b_p ξ_q)²``.

    Args:
        B: ``(Md, D)`` or ``(E, Md, D)``; centers: ``(N, D)`` the ξ_q.
    Returns:
        ``(N, d)`` (or ``(E, N, d)``): row ``q`` is the diagonal of ``β_q``.
    """
    act = get_activation(activation)
    B, M = _check_B(B, d, centers)
    s = act.deriv(_preact(B, centers, bias))  # (..., N, Md)
    return (s**2).unflatten(-1, (d, M)).mean(-1)  # (..., N, d)


def predicted_cluster_flow(grads: Tensor, labels: Tensor, centers: Tensor, beta: Tensor | float) -> Tensor:
    """Thm. 4.5 (eq. 21): ``ż_i = −(n_q/n) ‖ξ_q‖² β_q ∇L(ξ_q)``, ``q = γ(i)``.

    ``∇L(ξ_q)`` is taken as the mean of the per-sample gradients ``∇L(z_j)`` over the cluster
    (the proof's ``Σ_{j∈q} ∇L_j = n_q ∇L(ξ_q) + O(δ)``), so the prediction only replaces the
    kernel by its block-diagonal cluster limit.

    Args:
        grads: ``(n, d)`` per-sample gradients ``∇L(z_j)`` (the paper's normalisation,
            ``∇L(z_j) = n ∂𝓛/∂z_j`` for the mean loss 𝓛).
        labels: ``(n,)`` cluster indices γ(i) in ``0..N-1``.
        centers: ``(N, D)`` ξ_q.
        beta: ``(N, d)`` from :func:`cluster_coefficients`, or a number (e.g. ½ for Cor. 4.6).
    Returns:
        ``(n, d)`` predicted velocities.
    """
    N, n = centers.shape[0], labels.numel()
    labels, centers = labels.to(grads.device), centers.to(grads.device)
    one_hot = torch.nn.functional.one_hot(labels, N).to(grads.dtype)  # (n, N)
    sizes = one_hot.sum(0)  # (N,)
    mean_grad = (one_hot.T @ grads) / sizes.clamp_min(1)[:, None]  # (N, d)
    beta = torch.full_like(mean_grad, float(beta)) if not isinstance(beta, Tensor) else beta.to(grads.device)
    per_cluster = -(sizes / n)[:, None] * (centers**2).sum(-1)[:, None] * beta * mean_grad  # (N, d)
    return per_cluster[labels]  # (n, d)


def block_structure(K: Tensor, labels: Tensor) -> dict[str, float]:
    """How block-diagonal by cluster a kernel ``(n, n, d, d)`` or ``(n, n)`` is.

    Returns ``off`` = max |entry| over pairs from different clusters, ``on`` = mean Frobenius
    norm of the same-cluster blocks, and their ratio ``off_ratio`` (O(δ) by Thm. 4.5).
    """
    labels = labels.to(K.device)
    same = labels[:, None] == labels[None, :]  # (n, n)
    mag = K.abs().amax(dim=(-2, -1)) if K.dim() == 4 else K.abs()  # (n, n)
    fro = K.flatten(2).norm(dim=-1) if K.dim() == 4 else K.abs()
    off = float(mag[~same].max()) if (~same).any() else 0.0
    on = float(fro[same].mean())
    return {"off": off, "on": on, "off_ratio": off / on}
