"""The empirical neural tangent kernel of ``variational`` eq. (12), for any ``nn.Module``.

``K_ij^{kl} = ∇_w f^k(w, x_i) · ∇_w f^l(w, x_j)`` (eq. 12), the kernel of the function-space
flow ``ż_i = -(1/n) Σ_j K_ij ∇L(z_j)`` (Prop. 4.1). Built on ``torch.func``:

* ``implementation="jacobian"``: per-parameter Jacobians with ``jacrev`` and a contraction;
* ``implementation="ntk-vp"``: NTK-vector products, ``vmap`` over the output basis of a
  ``vjp`` followed by a ``jvp`` (no Jacobian of the second argument is stored).

Both agree to float64 round-off. The model is called on a whole batch (``f(x)`` with
``x`` of shape ``(n, ...)``), so samples must not interact inside it (no batch norm).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, jvp, vjp, vmap

__all__ = ["empirical_ntk", "model_fn"]

Params = Mapping[str, Tensor]


def model_fn(model: nn.Module) -> Callable[[Params, Tensor], Tensor]:
    """``(params, x) -> model(x)`` through ``functional_call`` (params: name -> tensor)."""

    def fn(params: Params, x: Tensor) -> Tensor:
        return functional_call(model, dict(params), (x,))

    return fn


def _resolve(fn: Any, params: Params | None) -> tuple[Callable[[Params, Tensor], Tensor], dict[str, Tensor]]:
    if isinstance(fn, nn.Module):
        if params is None:
            params = {k: v.detach() for k, v in fn.named_parameters() if v.requires_grad}
        return model_fn(fn), dict(params)
    if not callable(fn):
        raise ValueError(f"empirical_ntk: fn must be an nn.Module or a callable (params, x) -> (n, d), got {type(fn)}")
    if params is None:
        raise ValueError("empirical_ntk: params are required when fn is a plain callable")
    return fn, dict(params)


def _out_as_ensemble(out: Tensor) -> Tensor:
    """``(n, d)`` -> ``(1, n, d)``; ``(E, n, d)`` unchanged."""
    if out.dim() == 2:
        return out.unsqueeze(0)
    if out.dim() == 3:
        return out
    raise ValueError(f"empirical_ntk: the model must return (n, d) or (E, n, d), got shape {tuple(out.shape)}")


def empirical_ntk(fn: nn.Module | Callable[[Params, Tensor], Tensor], params: Params | None, x1: Tensor,
                  x2: Tensor | None = None, *, implementation: str = "jacobian", mode: str = "full") -> Tensor:
    """Empirical NTK (eq. 12) between the samples ``x1`` and ``x2``.

    Args:
        fn: an ``nn.Module`` (called through ``functional_call``; ``params`` default to its
            trainable parameters) or a function ``fn(params, x)``.
        params: ``name -> tensor``; the kernel is w.r.t. these (others stay fixed).
        x1: ``(n1, ...)`` inputs; x2: ``(n2, ...)`` or None (= x1).
        implementation: ``"jacobian"`` or ``"ntk-vp"``.
        mode: ``"full"`` -> ``(n1, n2, d, d)`` with ``[i, j, k, l] = ∇f^k(x1_i)·∇f^l(x2_j)``;
            ``"trace"`` -> ``(n1, n2)`` = Σ_k K^{kk}; ``"diagonal"`` -> ``(n1, d, d)`` the blocks
            ``K_ii`` (needs ``x2`` None).

    Returns:
        The kernel; with an ensemble model (output ``(E, n, d)``, E > 1) an extra leading ``E``
        axis, one kernel per member (members share no parameters, so cross terms vanish).
    """
    if implementation not in ("jacobian", "ntk-vp"):
        raise ValueError(f"empirical_ntk: implementation {implementation!r}: allowed values are 'jacobian', 'ntk-vp'")
    if mode not in ("full", "trace", "diagonal"):
        raise ValueError(f"empirical_ntk: mode {mode!r}: allowed values are 'full', 'trace', 'diagonal'")
    if mode == "diagonal" and x2 is not None:
        raise ValueError("empirical_ntk: mode='diagonal' computes K_ii and needs x2=None")
    f, p = _resolve(fn, params)
    same = x2 is None
    x2 = x1 if same else x2
    with torch.no_grad():
        probe = f(p, x1[:1])
    squeeze = probe.dim() == 2 or probe.shape[0] == 1
    if mode == "diagonal":
        K = _diag_jacobian(f, p, x1)  # (E, n, d, d)
    elif implementation == "jacobian":
        K = _ntk_jacobian(f, p, x1, x2, same, mode)
    else:
        K = _ntk_vp(f, p, x1, x2, mode)
    return K[0] if squeeze else K


def _jac(f, p, x) -> list[Tensor]:
    """Per-parameter Jacobians flattened to ``(E, n, d, P)``."""
    jac = jacrev(lambda q: _out_as_ensemble(f(q, x)))(p)  # name -> (E, n, d, *pshape)
    return [j.flatten(3) for j in jac.values()]


def _ntk_jacobian(f, p, x1, x2, same: bool, mode: str) -> Tensor:
    j1 = _jac(f, p, x1)
    j2 = j1 if same else _jac(f, p, x2)
    eq = "eiaP,ejbP->eijab" if mode == "full" else "eiaP,ejaP->eij"
    return sum(torch.einsum(eq, a, b) for a, b in zip(j1, j2))


def _diag_jacobian(f, p, x) -> Tensor:
    return sum(torch.einsum("eiaP,eibP->eiab", j, j) for j in _jac(f, p, x))  # (E, n, d, d)


def _ntk_vp(f, p, x1, x2, mode: str) -> Tensor:
    """vmap over the output basis of ``u -> J2 (J1ᵀ u)`` (vjp then jvp)."""
    out1, vjp_fn = vjp(lambda q: _out_as_ensemble(f(q, x1)), p)  # (E, n1, d)
    E, n1, d = out1.shape

    def column(u: Tensor) -> Tensor:
        (tangent,) = vjp_fn(u)  # J1ᵀ u : name -> pshape
        _, jv = jvp(lambda q: _out_as_ensemble(f(q, x2)), (p,), (tangent,))  # (E, n2, d)
        return jv

    basis = torch.eye(E * n1 * d, dtype=out1.dtype, device=out1.device).view(E * n1 * d, E, n1, d)
    cols = vmap(column)(basis)  # (E*n1*d, E, n2, d)
    n2 = cols.shape[2]
    cols = cols.view(E, n1, d, E, n2, d)
    idx = torch.arange(E, device=out1.device)
    K = cols[idx, :, :, idx]  # (E, n1, d, n2, d): member-diagonal blocks
    K = K.permute(0, 1, 3, 2, 4)  # (E, n1, n2, d, d)
    if mode == "trace":
        return K.diagonal(dim1=-2, dim2=-1).sum(-1)
    return K
