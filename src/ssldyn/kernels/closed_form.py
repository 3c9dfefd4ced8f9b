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
from typing import Literal

import torch
from torch import Tensor

from ssldyn.checks import choice, integer
from ssldyn.models.activations import Activation, ActivationName, get_activation

__all__ = [
    "averaging_net_kernel",
    "relu_infinite_width_kernel",
    "cluster_coefficients",
    "predicted_cluster_flow",
    "cluster_limit_kernel",
    "block_structure",
    "RELU_INFINITE_WIDTH_BETA",
]

RELU_INFINITE_WIDTH_BETA = 0.5
"""β_q^k for ReLU and Gaussian rows as M → ∞: E[1{b·ξ > 0}] = ½ (Cor. 4.6)."""


def _finite(fn: str, **tensors: Tensor | None) -> None:
    """NaN/inf in an input is a ValueError naming the function and the input (not a NaN kernel).

    Checked for CPU tensors only: on a GPU the check would be a host sync per call (kernels are
    recomputed inside flows), and the flows' guards catch a NaN there."""
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise ValueError(f"{fn}: {name} must be a tensor, got {type(t).__name__}")
        if t.device.type == "cpu" and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            n = int((~torch.isfinite(t)).sum())
            raise ValueError(f"{fn}: {name} has {n} non-finite value(s) (NaN or inf); the kernel would be NaN")


def _check_clusters(fn: str, labels: Tensor, centers: Tensor, beta: Tensor | None) -> None:
    """``labels (n,)`` cluster indices in ``0..N-1`` of ``centers (N, D)``, and ``beta (N, d)`` when given."""
    if labels.dim() != 1 or centers.dim() != 2 or (beta is not None and (beta.dim() != 2 or len(beta) != len(centers))):
        raise ValueError(f"{fn}: need labels (n,), centers (N, D) and beta (N, d), got {tuple(labels.shape)}, "
                         f"{tuple(centers.shape)}, {None if beta is None else tuple(beta.shape)}")  # fmt: skip
    if labels.numel() and not (0 <= int(labels.min()) and int(labels.max()) < len(centers)):
        raise ValueError(f"{fn}: labels must be cluster indices in 0..{len(centers) - 1}, got "
                         f"{int(labels.min())}..{int(labels.max())}")  # fmt: skip


def _check_B(B: Tensor, d: int, x: Tensor) -> tuple[Tensor, int]:
    if B.dim() not in (2, 3):
        raise ValueError(f"B must have shape (Md, D) or (E, Md, D), got {tuple(B.shape)}")
    d = integer(d, "d (the output dimension)")
    if B.shape[-2] % d:
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
    activation: ActivationName | Activation = "relu",
    *,
    d: int,
    bias: Tensor | None = None,
    mode: Literal["full", "blocks", "trace"] = "full",
) -> Tensor:
    """Prop. 4.3 (eq. 20): the NTK of ``f(x) = Aᵀσ(Bx [+c])`` w.r.t. ``B`` (and ``c`` if given).

    Args:
        B: ``(Md, D)`` or ``(E, Md, D)``.
        x1: ``(n1, D)``, or ``(E, n1, D)`` per-member inputs (as :class:`~ssldyn.models.AveragingNet` takes);
            x2: the same with ``n2`` (or None: x1).
        activation: name or Activation (its derivative σ' is used).
        d: output dimension (number of blocks).
        bias: the hidden bias ``c`` ``(Md,)`` / ``(E, Md)`` when the net has one (trained too).
        mode: ``"full"`` -> ``(n1, n2, d, d)`` (zero off the diagonal ``k ≠ l``);
            ``"blocks"`` -> ``(n1, n2, d)`` the diagonal entries ``K^{kk}``; ``"trace"`` -> ``(n1, n2)``.
    Returns:
        The kernel (with a leading ``E`` axis for an ensemble ``B``).
    """
    choice(mode, "mode", ("full", "blocks", "trace"), where="averaging_net_kernel")
    _finite("averaging_net_kernel", B=B, x1=x1, x2=x2, bias=bias)
    act = get_activation(activation)
    x2 = x1 if x2 is None else x2
    B, M = _check_B(B, d, x1)
    if x1.dim() not in (2, 3) or x2.dim() != x1.dim() or x1.shape[:-2] != x2.shape[:-2] or x2.shape[-1] != x1.shape[-1]:
        raise ValueError(f"averaging_net_kernel: x1, x2 must be (n, D) or per-member (E, n, D) alike, got "
                         f"{tuple(x1.shape)}, {tuple(x2.shape)}")  # fmt: skip
    if x1.dim() == 3 and B.dim() == 3 and x1.shape[0] != B.shape[0]:
        raise ValueError(f"averaging_net_kernel: per-member inputs {tuple(x1.shape)} need B with the same E, got "
                         f"{tuple(B.shape)}")  # fmt: skip
    # σ' ∈ {0, 1} (ReLU, linear): Σ_p σ'σ' counts co-active units, exact in float32 for M < 2^24
    binary = act.name in ("relu", "linear") and M < 2**24
    work = torch.float32 if binary and x1.dtype == torch.float64 else x1.dtype
    s1 = act.deriv(_preact(B, x1, bias)).to(work)  # (..., n1, Md)
    s2 = s1 if x2 is x1 else act.deriv(_preact(B, x2, bias)).to(work)  # (..., n2, Md)
    s1 = s1.unflatten(-1, (d, M)).movedim(-2, -3)  # (..., d, n1, M)
    s2 = s2.unflatten(-1, (d, M)).movedim(-2, -3)  # (..., d, n2, M)
    gram = x1 @ x2.mT  # (n1, n2) or per member (E, n1, n2)
    if bias is not None:
        gram = gram + 1.0
    blocks = (s1 @ s2.mT).to(x1.dtype) * (gram.unsqueeze(-3) / M)  # (..., d, n1, n2): one gram for every block
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
    _finite("relu_infinite_width_kernel", x1=x1, x2=x2)
    if d is not None:
        d = integer(d, "d", where="relu_infinite_width_kernel")
    x2 = x1 if x2 is None else x2
    if x1.dim() != 2 or x2.dim() != 2 or x1.shape[-1] != x2.shape[-1]:
        raise ValueError(
            f"relu_infinite_width_kernel: x1 and x2 must be (n1, D) and (n2, D), got {tuple(x1.shape)} and "
            f"{tuple(x2.shape)}"
        )
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
    B: Tensor, centers: Tensor, activation: ActivationName | Activation = "relu", *, d: int, bias: Tensor | None = None
) -> Tensor:
    """eq. (37): ``β_q^k = (1/M) Σ_{p=(k-1)M+1}^{kM} σ'(b_p ξ_q)²``.

    Args:
        B: ``(Md, D)`` or ``(E, Md, D)``; centers: ``(N, D)`` the ξ_q.
    Returns:
        ``(N, d)`` (or ``(E, N, d)``): row ``q`` is the diagonal of ``β_q``.
    """
    _finite("cluster_coefficients", B=B, centers=centers, bias=bias)
    act = get_activation(activation)
    B, M = _check_B(B, d, centers)
    s = act.deriv(_preact(B, centers, bias))  # (..., N, Md)
    return (s**2).unflatten(-1, (d, M)).mean(-1)  # (..., N, d)


def cluster_limit_kernel(labels: Tensor, centers: Tensor, beta: Tensor) -> Tensor:
    """The block-diagonal cluster limit of the kernel (Thm. 4.5): ``K_ij = 1[γ(i) = γ(j)] ‖ξ_q‖² diag(β_q)``, ``q = γ(i)``.

    The kernel whose flow ``ż_i = −(1/n) Σ_j K_ij ∇L(z_j)`` is :func:`predicted_cluster_flow`; Thm. 4.5 bounds the
    averaging net's kernel's distance to it by O(δ).

    Args:
        labels: ``(n,)`` cluster indices γ(i) in ``0..N-1``.
        centers: ``(N, D)`` ξ_q.
        beta: ``(N, d)`` from :func:`cluster_coefficients`.
    Returns:
        ``(n, n, d, d)`` in ``beta``'s dtype, the layout of :func:`averaging_net_kernel`.
    """
    _check_clusters("cluster_limit_kernel", labels, centers, beta)
    same = (labels[:, None] == labels[None, :]).to(beta.dtype)  # (n, n)
    sq = (centers**2).sum(-1)  # (N,)
    K_block = same[..., None] * (sq[labels][:, None, None] * beta[labels][:, None, :])  # (n, n, d)
    return torch.diag_embed(K_block)  # (n, n, d, d)


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
    _finite("predicted_cluster_flow", grads=grads, centers=centers, beta=beta if isinstance(beta, Tensor) else None)
    if not isinstance(beta, Tensor) and not math.isfinite(float(beta)):
        raise ValueError(f"predicted_cluster_flow: beta must be finite, got {beta!r}")
    _check_clusters("predicted_cluster_flow", labels, centers, beta if isinstance(beta, Tensor) else None)
    N, n = centers.shape[0], labels.numel()
    if grads.dim() != 2 or len(grads) != n or (isinstance(beta, Tensor) and beta.shape[-1] != grads.shape[-1]):
        raise ValueError(
            f"predicted_cluster_flow: grads must be (n={n}, d) with beta (N, d), got "
            f"{tuple(grads.shape)}" + (f" and beta {tuple(beta.shape)}" if isinstance(beta, Tensor) else "")
        )
    labels, centers = labels.to(grads.device), centers.to(grads.device)
    one_hot = torch.nn.functional.one_hot(labels, N).to(grads.dtype)  # (n, N)
    sizes = one_hot.sum(0)  # (N,)
    mean_grad = (one_hot.T @ grads) / sizes.clamp_min(1)[:, None]  # (N, d)
    beta = torch.full_like(mean_grad, float(beta)) if not isinstance(beta, Tensor) else beta.to(grads.device)
    per_cluster = -(sizes / n)[:, None] * (centers**2).sum(-1)[:, None] * beta * mean_grad  # (N, d)
    return per_cluster[labels]  # (n, d)


def block_structure(
    K: Tensor, labels: Tensor, *, n_perm: int = 0, generator: torch.Generator | None = None
) -> dict[str, float]:
    r"""How block-diagonal by class a kernel ``(n, n, d, d)`` or ``(n, n)`` is, and whether that is more than chance.

    Two kinds of numbers:

    * **Thm. 4.5's O(δ) measure** (exact block-diagonality, for kernels that are nearly zero
      between clusters, e.g. the averaging net on well-separated clusters):
      ``off`` = max |entry| over pairs from different classes, ``on`` = mean Frobenius norm of
      the same-class blocks ``K_ij``, ``off_ratio = off / on``. On a network's NTK, whose entries
      are all large and positive, this ratio says nothing about class structure (a max over
      thousands of pairs: ≈ 1 with true and with shuffled labels).
    * **Class contrast** (any kernel): with the cosine-normalised scalar kernel
      ``k̃_ij = k_ij / √(k_ii k_jj)`` (``k = Σ_k K^{kk}`` for a matrix-valued kernel),

      .. math::
          W = \operatorname{mean}_{i \ne j,\, y_i = y_j} \tilde k_{ij}, \qquad
          B = \operatorname{mean}_{y_i \ne y_j} \tilde k_{ij}, \qquad
          \text{contrast} = \frac{W - B}{\operatorname{sd}_{i \ne j}(\tilde k_{ij})}.

      Under a random relabelling (a uniform permutation of ``labels``, class sizes kept) the
      expectation of ``W − B`` is exactly 0 (every off-diagonal pair is equally likely to be a
      same-class pair), so ``contrast`` ≈ 0 for shuffled labels and > 0 when the kernel sees the
      classes (samples of one class are more similar to each other than to the rest). With
      ``n_perm > 0`` the permutation z-score ``z = (W − B − mean_π) / sd_π`` over ``n_perm``
      shuffles of the labels is returned too (``z ≈ N(0, 1)`` for labels unrelated to the kernel).

    Args:
        K: ``(n, n, d, d)`` or ``(n, n)``, symmetric with a positive diagonal (a kernel on one set).
        labels: ``(n,)`` class of each sample (at least two classes, one with two samples).
        n_perm: label shuffles for the z-score (0: no z-score).
        generator: CPU generator of the shuffles (default seed 0).

    Returns:
        ``{"off", "on", "off_ratio", "within", "between", "contrast"}`` (+ ``"z"`` when ``n_perm > 0``),
        Python floats.

    Example:
        >>> import torch
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> K = torch.tensor([[1.0, 0.9, 0.1, 0.2], [0.9, 1.0, 0.2, 0.1], [0.1, 0.2, 1.0, 0.8], [0.2, 0.1, 0.8, 1.0]])
        >>> round(block_structure(K, labels)["within"], 2), round(block_structure(K, labels)["between"], 2)
        (0.85, 0.15)
    """
    if K.dim() not in (2, 4) or K.shape[0] != K.shape[1] or (K.dim() == 4 and K.shape[2] != K.shape[3]):
        raise ValueError(f"block_structure: K must have shape (n, n) or (n, n, d, d), got {tuple(K.shape)}")
    _finite("block_structure", K=K)
    integer(n_perm, "n_perm", where="block_structure", minimum=0)
    labels = torch.as_tensor(labels).to(K.device)
    n = K.shape[0]
    if labels.shape != (n,):
        raise ValueError(f"block_structure: labels must have shape ({n},) like K, got {tuple(labels.shape)}")
    contrast = _class_contrast(K, labels, n_perm, generator)  # validates labels and the diagonal
    same = labels[:, None] == labels[None, :]  # (n, n)
    mag = K.abs().amax(dim=(-2, -1)) if K.dim() == 4 else K.abs()  # (n, n)
    fro = K.flatten(2).norm(dim=-1) if K.dim() == 4 else K.abs()
    off = float(mag[~same].max())
    on = float(fro[same].mean())
    return {"off": off, "on": on, "off_ratio": off / on, **contrast}


def _class_contrast(K: Tensor, labels: Tensor, n_perm: int, generator: torch.Generator | None) -> dict[str, float]:
    k = torch.diagonal(K, dim1=-2, dim2=-1).sum(-1) if K.dim() == 4 else K  # (n, n) scalar kernel
    k = k.to(torch.float64)
    diag = torch.diagonal(k)  # (n,)
    if not bool((diag > 0).all()):
        raise ValueError("block_structure: the kernel's diagonal k_ii must be positive (a kernel of one sample set)")
    kn = k / torch.sqrt(diag[:, None] * diag[None, :])  # (n, n): cosine-normalised
    n = k.shape[0]
    offdiag = ~torch.eye(n, dtype=torch.bool, device=k.device)  # (n, n)
    vals = kn[offdiag]  # (n(n-1),)
    classes, y = torch.unique(labels, return_inverse=True)
    onehot = torch.nn.functional.one_hot(y, len(classes)).to(torch.float64)  # (n, C)
    if len(classes) < 2 or int((onehot.sum(0) >= 2).sum()) == 0:
        counts = ", ".join(f"{int(c)}: {int(m)}" for c, m in list(zip(classes.tolist(), onehot.sum(0).tolist()))[:20])
        more = f", … ({len(classes)} classes)" if len(classes) > 20 else ""
        raise ValueError(
            "block_structure: labels need at least two classes and a class with two samples; "
            f"the {n} samples have class counts {{{counts}{more}}}"
        )

    sizes = onehot.sum(0)  # (C,) class sizes (kept by a permutation)
    n_same = float((sizes**2).sum()) - n  # same-class pairs i != j
    n_between = float(n * n - (sizes**2).sum())
    total = float(vals.sum())

    def within_between(oh: Tensor) -> tuple[Tensor, Tensor]:  # oh (P, n, C) -> (P,), (P,)
        same_sum = torch.diagonal(oh.mT @ kn @ oh, dim1=-2, dim2=-1).sum(-1) - float(torch.diagonal(kn).sum())  # (P,)
        return same_sum / n_same, (total - same_sum) / n_between

    w, b = within_between(onehot[None])
    sd = float(vals.std())
    gap = float(w[0] - b[0])
    res = {"within": float(w[0]), "between": float(b[0]), "contrast": gap / sd if sd > 0 else 0.0}
    if n_perm > 0:
        g = generator if generator is not None else torch.Generator().manual_seed(0)
        perms = torch.stack([torch.randperm(n, generator=g) for _ in range(n_perm)]).to(k.device)  # (P, n)
        gaps = []
        for chunk in perms.split(max(1, 2**22 // (n * len(classes)))):
            wp, bp = within_between(onehot[chunk])
            gaps.append(wp - bp)
        null = torch.cat(gaps)  # (n_perm,)
        res["z"] = (gap - float(null.mean())) / max(float(null.std()), 1e-300)
    return res
