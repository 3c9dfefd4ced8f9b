"""The empirical neural tangent kernel of ``variational`` eq. (12), for any ``nn.Module``.

``K_ij^{kl} = ∇_w f^k(w, x_i) · ∇_w f^l(w, x_j)`` (eq. 12), the kernel of the function-space
flow ``ż_i = -(1/n) Σ_j K_ij ∇L(z_j)`` (Prop. 4.1). Built on ``torch.func``:

* ``implementation="jacobian"``: per-sample Jacobians (``vmap(jacrev)``) and a contraction;
* ``implementation="ntk-vp"``: NTK-vector products, ``vmap`` over samples and the output
  basis of a single-sample ``vjp`` followed by a batched ``jvp`` (no Jacobian is stored).

Both agree to float64 round-off. The model is called on batches (the Jacobians call it on
a single sample as a batch of one, ``x_i[None]``), so samples must not interact inside it
(no batch norm).
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


def empirical_ntk(
    fn: nn.Module | Callable[[Params, Tensor], Tensor],
    params: Params | None,
    x1: Tensor,
    x2: Tensor | None = None,
    *,
    implementation: str = "jacobian",
    mode: str = "full",
    chunk_size: int | None = 32,
) -> Tensor:
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
        chunk_size: samples of ``x1`` processed per ``vmap`` chunk; bounds memory (for
            ``"ntk-vp"`` at ~``chunk_size·d`` forward passes over ``x2``). None = all at once.

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
        K = _diag_jacobian(f, p, x1, chunk_size)  # (E, n, d, d)
    elif implementation == "jacobian":
        K = _ntk_jacobian(f, p, x1, x2, same, mode, chunk_size)
    else:
        K = _ntk_vp(f, p, x1, x2, mode, chunk_size)
    return K[0] if squeeze else K


def _single(f, x_i_dims: int):
    """``(params, x_i) -> (E, d)`` for one sample (the model is called on a batch of one)."""

    def g(q, xi):
        return _out_as_ensemble(f(q, xi.unsqueeze(0)))[:, 0]  # (E, d)

    return g


def _jac(f, p, x, chunk_size=None) -> list[Tensor]:
    """Per-sample Jacobians (``vmap`` of ``jacrev`` over samples), flattened to ``(E, n, d, P)``."""
    jac = vmap(jacrev(_single(f, x.dim() - 1)), in_dims=(None, 0), chunk_size=chunk_size)(p, x)  # (n, E, d, *ps)
    return [j.flatten(3).transpose(0, 1) for j in jac.values()]


def _ntk_jacobian(f, p, x1, x2, same: bool, mode: str, chunk_size=None) -> Tensor:
    j1 = _jac(f, p, x1, chunk_size)
    j2 = j1 if same else _jac(f, p, x2, chunk_size)
    eq = "eiaP,ejbP->eijab" if mode == "full" else "eiaP,ejaP->eij"
    return sum(torch.einsum(eq, a, b) for a, b in zip(j1, j2))


def _diag_jacobian(f, p, x, chunk_size=None) -> Tensor:
    return sum(torch.einsum("eiaP,eibP->eiab", j, j) for j in _jac(f, p, x, chunk_size))  # (E, n, d, d)


def _ntk_vp(f, p, x1, x2, mode: str, chunk_size=None) -> Tensor:
    """NTK-vector products: per sample ``i`` of x1 and output basis ``u``, ``J2 (J_iᵀ u)``
    (a single-sample ``vjp`` followed by a batched ``jvp`` on x2); ``vmap`` over both."""
    single = _single(f, x1.dim() - 1)
    batch2 = lambda q: _out_as_ensemble(f(q, x2))  # noqa: E731  (E, n2, d)

    def row(xi: Tensor) -> Tensor:
        out, vjp_fn = vjp(lambda q: single(q, xi), p)  # (E, d)
        E, d = out.shape
        basis = torch.eye(E * d, dtype=out.dtype, device=out.device).view(E * d, E, d)

        def column(u: Tensor) -> Tensor:
            (tangent,) = vjp_fn(u)
            return jvp(batch2, (p,), (tangent,))[1]  # (E, n2, d)

        cols = vmap(column)(basis).view(E, d, E, -1, d)  # (E_u, d_u, E, n2, d)
        idx = torch.arange(E, device=out.device)
        return cols[idx, :, idx]  # (E, d_u, n2, d)

    K = vmap(row, chunk_size=chunk_size)(x1)  # (n1, E, d, n2, d)
    K = K.permute(1, 0, 3, 2, 4)  # (E, n1, n2, d, d)
    if mode == "trace":
        return K.diagonal(dim1=-2, dim2=-1).sum(-1)
    return K
