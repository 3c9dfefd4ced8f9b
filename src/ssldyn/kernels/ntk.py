"""The empirical neural tangent kernel of ``variational`` eq. (12), for any ``nn.Module``.

``K_ij^{kl} = ∇_w f^k(w, x_i) · ∇_w f^l(w, x_j)`` (eq. 12), the kernel of the function-space
flow ``ż_i = -(1/n) Σ_j K_ij ∇L(z_j)`` (Prop. 4.1). Built on ``torch.func``:

* ``implementation="jacobian"``: per-sample Jacobians (``vmap(jacrev)``) and a contraction;
* ``implementation="ntk-vp"``: NTK-vector products, ``vmap`` over samples and the output
  basis of a single-sample ``vjp`` followed by a batched ``jvp`` (no Jacobian is stored).

Both agree to float64 round-off. The model is called on batches (the Jacobians call it on
a single sample as a batch of one, ``x_i[None]``), so samples must not interact inside it and
it must be deterministic: a module with BatchNorm in training mode (batch statistics couple the
samples) or Dropout in training mode (random) is a ``ValueError`` asking for ``model.eval()``.

Memory. The ``(n1, n2, d, d)`` kernel itself must fit: a kernel larger than ``max_memory``
(default: the memory available on the device) is a ``ValueError`` with the estimate. With
``implementation="jacobian"``, ``mode="trace"`` and ``mode="diagonal"`` never hold the Jacobians
of all samples: they are computed for ``chunk_size`` samples at a time (at most two chunks of
``chunk_size·E·d·P`` numbers for ``P`` parameters; the trace costs ``≈ n1·n2/chunk_size``
Jacobian rows instead of ``n1 + n2``), and ``mode="full"`` does the same when the Jacobians of all
samples would not fit in ``max_memory``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, cast, get_args

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, jvp, vjp, vmap

from ssldyn.checks import choice, integer
from ssldyn.memory import available_memory
from ssldyn.memory import fmt_bytes as _gb

__all__ = ["empirical_ntk", "model_fn", "available_memory", "NTKImplementation", "NTKMode"]

NTKImplementation = Literal["jacobian", "ntk-vp"]
NTKMode = Literal["full", "trace", "diagonal"]

Params = Mapping[str, Tensor]
_STOCHASTIC = (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd)


def model_fn(model: nn.Module) -> Callable[[Params, Tensor], Tensor]:
    """``(params, x) -> model(x)`` through ``functional_call`` (params: name -> tensor)."""

    def fn(params: Params, x: Tensor) -> Tensor:
        return functional_call(model, dict(params), (x,))

    return fn


def _check_params(params: Any) -> None:
    """``params`` is a mapping name -> tensor (inputs passed in its place are the usual slip)."""
    if not isinstance(params, Mapping):
        hint = " (inputs go after it: empirical_ntk(model, None, x1, x2))" if isinstance(params, Tensor) else ""
        raise ValueError(f"empirical_ntk: params must be a mapping name -> tensor or None, got "
                         f"{type(params).__name__}{hint}")  # fmt: skip
    bad = [k for k, v in params.items() if not isinstance(v, Tensor)]
    if bad:
        raise ValueError(f"empirical_ntk: params[{bad[0]!r}] is a {type(params[bad[0]]).__name__}, not a tensor")


def _resolve(fn: Any, params: Params | None) -> tuple[Callable[[Params, Tensor], Tensor], dict[str, Tensor]]:
    if params is not None:
        _check_params(params)
    if isinstance(fn, nn.Module):
        if params is None:
            params = {k: v.detach() for k, v in fn.named_parameters() if v.requires_grad}
        known = {k for k, _ in fn.named_parameters()} | {k for k, _ in fn.named_buffers()}
        unknown = sorted(set(params) - known)
        if unknown:  # functional_call ignores a name the module does not have: the kernel would be 0
            names = sorted(k for k, _ in fn.named_parameters())
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise ValueError(f"empirical_ntk: params {unknown[0]!r} is not a parameter of the "
                             f"{type(fn).__name__}; its parameters are {shown}")  # fmt: skip
        return model_fn(fn), dict(params)
    if not callable(fn):
        raise ValueError(f"empirical_ntk: fn must be an nn.Module or a callable (params, x) -> (n, d), got {type(fn)}")
    if params is None:
        raise ValueError("empirical_ntk: params are required when fn is a plain callable")
    return cast("Callable[[Params, Tensor], Tensor]", fn), dict(params)


def _check_module(model: nn.Module) -> None:
    """BatchNorm / Dropout in training mode make the kernel undefined: one clear error (naming only
    the kinds of layer the model has)."""
    found = [m for m in model.modules() if m.training and isinstance(m, _STOCHASTIC)]
    if not found:
        return
    names = ", ".join(sorted({type(m).__name__ for m in found}))
    why = []
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in found):
        why.append("BatchNorm couples the samples of a batch through its batch statistics")
    if any(isinstance(m, nn.modules.dropout._DropoutNd) for m in found):
        why.append("Dropout is random")
    raise ValueError(
        f"empirical_ntk: the model is in training mode and has {names}: {' and '.join(why)}, so the kernel "
        "is not defined; call model.eval() first"
    )


def _check_inputs(name: str, x: Any) -> None:
    if not isinstance(x, Tensor) or x.dim() < 1:
        raise ValueError(f"empirical_ntk: {name} must be a tensor (n, ...), got {type(x).__name__}")
    if x.is_complex():
        raise ValueError(f"empirical_ntk: {name} is complex ({x.dtype}); real inputs are needed")
    if x.shape[0] == 0:
        raise ValueError(f"empirical_ntk: {name} is empty (0 samples); pass at least one sample")
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        n = int((~torch.isfinite(x)).sum())
        raise ValueError(f"empirical_ntk: {name} has {n} non-finite value(s) (NaN or inf); the kernel would be NaN")


def _as_param_dtype(p: Params, x: Tensor) -> Tensor:
    """Floating inputs are cast to the parameters' floating dtype (as training does): a float64 ``x``
    for a float32 model is computed in float32. Parameters of several floating dtypes are an error."""
    dtypes = {t.dtype for t in p.values() if t.is_floating_point()}
    if len(dtypes) > 1:
        raise ValueError(
            f"empirical_ntk: the parameters have several dtypes ({', '.join(sorted(map(str, dtypes)))}); "
            "cast the model to one (model.double() or model.float())"
        )
    if dtypes and x.is_floating_point() and x.dtype not in dtypes:
        return x.to(next(iter(dtypes)))
    return x


def _probe(f: Callable[[Params, Tensor], Tensor], p: Params, x1: Tensor) -> Tensor:
    """The model on one sample ``x1[:1]`` as ``(E, 1, d)``: a model that cannot take ``x1``'s sample shape,
    or that does not return one row per sample, is a ValueError naming the shapes."""
    try:
        with torch.no_grad():
            out = f(p, x1[:1])
    except (RuntimeError, ValueError, TypeError, IndexError) as e:
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"empirical_ntk: the model cannot be applied to samples of shape {tuple(x1.shape[1:])} "
            f"(x1 {tuple(x1.shape)}, {x1.dtype}): {first}"
        ) from None
    if not isinstance(out, Tensor) or out.dim() not in (2, 3) or out.shape[-2] != 1:
        raise ValueError(
            f"empirical_ntk: the model returned {tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__} "
            f"for one sample x1[:1] of shape {tuple(x1[:1].shape)}; it must return (1, d) or (E, 1, d) "
            "(x is (n, features...) with one output row per sample)"
        )
    return _out_as_ensemble(out)


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
    implementation: NTKImplementation = "jacobian",
    mode: NTKMode = "full",
    chunk_size: int | None = 32,
    max_memory: int | None = None,
) -> Tensor:
    """Empirical NTK (eq. 12) between the samples ``x1`` and ``x2``.

    Args:
        fn: an ``nn.Module`` (called through ``functional_call``; ``params`` default to its
            trainable parameters; BatchNorm/Dropout must be in eval mode) or a function ``fn(params, x)``.
        params: ``name -> tensor``; the kernel is w.r.t. these (others stay fixed).
        x1: ``(n1, ...)`` inputs; x2: ``(n2, ...)`` or None (= x1). Non-empty, finite, the same sample
            shape; floating inputs are cast to the parameters' dtype.
        implementation: ``"jacobian"`` or ``"ntk-vp"``.
        mode: ``"full"`` -> ``(n1, n2, d, d)`` with ``[i, j, k, l] = ∇f^k(x1_i)·∇f^l(x2_j)``;
            ``"trace"`` -> ``(n1, n2)`` = Σ_k K^{kk}; ``"diagonal"`` -> ``(n1, d, d)`` the blocks
            ``K_ii`` (needs ``x2`` None).
        chunk_size: samples per Jacobian chunk (``"jacobian"``, and ``mode="diagonal"`` with either
            implementation: the diagonal blocks are always built from Jacobian chunks) or per ``vmap`` chunk of x1
            (``"ntk-vp"``, ~``chunk_size·d`` forward passes over ``x2``); bounds memory. None = all at once.
        max_memory: bytes the kernel (and the Jacobians held at once, where Jacobians are built) may use;
            None: the memory available on the device (:func:`available_memory`).

    Returns:
        The kernel; with an ensemble model (output ``(E, n, d)``, E > 1) an extra leading ``E``
        axis, one kernel per member (members share no parameters, so cross terms vanish).
    Raises:
        ValueError: a bad argument, an empty or non-finite input, inputs the model cannot take (the
            wrong number of features) or that give more than one output row per sample (e.g. a 3-D
            ``x`` for an MLP), parameters of mixed dtypes, a module with BatchNorm/Dropout in training
            mode, or a kernel that would not fit in ``max_memory`` (with the estimate).
    """
    choice(implementation, "implementation", get_args(NTKImplementation), where="empirical_ntk")
    choice(mode, "mode", get_args(NTKMode), where="empirical_ntk")
    if mode == "diagonal" and x2 is not None:
        raise ValueError("empirical_ntk: mode='diagonal' computes K_ii and needs x2=None")
    if chunk_size is not None:
        chunk_size = integer(chunk_size, "chunk_size", where="empirical_ntk")
    _check_inputs("x1", x1)
    if x2 is not None:
        _check_inputs("x2", x2)
    if isinstance(fn, nn.Module):
        _check_module(fn)
    f, p = _resolve(fn, params)
    if x2 is not None and x2.shape[1:] != x1.shape[1:]:
        raise ValueError(
            f"empirical_ntk: x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} must have the same sample shape "
            f"{tuple(x1.shape[1:])}"
        )
    x1, x2 = _as_param_dtype(p, x1), (None if x2 is None else _as_param_dtype(p, x2))
    same = x2 is None
    x2 = x1 if same else x2
    probe = _probe(f, p, x1)  # (E, 1, d)
    squeeze = probe.shape[0] == 1
    E, d = probe.shape[0], probe.shape[-1]
    n1, n2 = x1.shape[0], x2.shape[0]
    item = probe.element_size()
    P = sum(t.numel() for t in p.values())
    budget = max_memory if max_memory is not None else available_memory(x1.device)
    out_numel = {"full": n1 * n2 * d * d, "trace": n1 * n2, "diagonal": n1 * d * d}[mode] * E
    if out_numel * item > budget:
        raise ValueError(
            f"empirical_ntk: the {mode} kernel of {n1}×{n2} samples (E={E}, d={d}) needs {_gb(out_numel * item)}, "
            f"more than the {_gb(budget)} available; use mode='trace' or 'diagonal', or fewer samples"
        )
    c = min(n1, chunk_size or n1)
    jac_row = E * d * P * item  # bytes of one sample's Jacobian
    if implementation == "jacobian" or mode == "diagonal":  # the diagonal is always built from Jacobian chunks
        full_jac = (n1 + (0 if same else n2)) * jac_row
        if implementation == "jacobian" and mode == "full" and full_jac + out_numel * item <= budget:
            K = _ntk_jacobian(f, p, x1, x2, same, chunk_size)  # all Jacobians at once (fast path)
        else:
            need = (1 if mode == "diagonal" else 2) * c * jac_row + out_numel * item
            if need > budget:
                hint = "lower chunk_size or use fewer samples" + (
                    "" if mode == "diagonal" else ", or use implementation='ntk-vp'"
                )
                raise ValueError(
                    f"empirical_ntk: Jacobian chunks of {c} samples (E={E}, d={d}, {P} parameters) and the "
                    f"kernel need {_gb(need)}, more than the {_gb(budget)} available; {hint}"
                )
            K = _ntk_jacobian_chunked(f, p, x1, x2, same, mode, c, E, d)
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


def _contract(eq: str, J1: list[Tensor], J2: list[Tensor]) -> Tensor:
    """``Σ_k einsum(eq, J1[k], J2[k])`` over the parameter tensors ``k``."""
    out = torch.einsum(eq, J1[0], J2[0])
    for a, b in zip(J1[1:], J2[1:]):
        out = out + torch.einsum(eq, a, b)
    return out


def _ntk_jacobian(f, p, x1, x2, same: bool, chunk_size=None) -> Tensor:
    """The full kernel ``(E, n1, n2, d, d)`` from the Jacobians of all samples at once (trace and diagonal modes
    always go through :func:`_ntk_jacobian_chunked`)."""
    j1 = _jac(f, p, x1, chunk_size)
    j2 = j1 if same else _jac(f, p, x2, chunk_size)
    return _contract("eiaP,ejbP->eijab", j1, j2)


def _ntk_jacobian_chunked(f, p, x1, x2, same: bool, mode: str, c: int, E: int, d: int) -> Tensor:
    """The kernel block by block from the Jacobians of ``c`` samples at a time (never all of them).

    ``"diagonal"``: ``K_ii`` per chunk of x1. ``"full"``/``"trace"``: blocks ``(chunk of x1) × (chunk
    of x2)``; with ``x2 = x1`` only the blocks on and above the diagonal are computed (``K_ji`` is
    ``K_ij`` transposed).
    """
    n1, n2 = x1.shape[0], x2.shape[0]
    ref = next(iter(p.values()))
    if mode == "diagonal":
        out = torch.empty(E, n1, d, d, dtype=ref.dtype, device=ref.device)
        for i in range(0, n1, c):
            J = _jac(f, p, x1[i : i + c])  # per parameter (E, c, d, P_k)
            out[:, i : i + c] = _contract("eiaP,eibP->eiab", J, J)
        return out
    full = mode == "full"
    out = torch.empty(E, n1, n2, *((d, d) if full else ()), dtype=ref.dtype, device=ref.device)
    eq = "eiaP,ejbP->eijab" if full else "eiaP,ejaP->eij"
    for i in range(0, n1, c):
        J1 = _jac(f, p, x1[i : i + c])
        for j in range(i if same else 0, n2, c):
            J2 = J1 if same and j == i else _jac(f, p, x2[j : j + c])
            blk = _contract(eq, J1, J2)  # (E, c, c', ...)
            out[:, i : i + c, j : j + c] = blk
            if same and j != i:  # K_ji^{lk} = K_ij^{kl}
                out[:, j : j + c, i : i + c] = blk.transpose(1, 2).transpose(-1, -2) if full else blk.transpose(1, 2)
    return out


def _ntk_vp(f, p, x1, x2, mode: str, chunk_size=None) -> Tensor:
    """NTK-vector products: per sample ``i`` of x1 and output basis ``u``, ``J2 (J_iᵀ u)``
    (a single-sample ``vjp`` followed by a batched ``jvp`` on x2); ``vmap`` over both."""
    single = _single(f, x1.dim() - 1)
    batch2 = lambda q: _out_as_ensemble(f(q, x2))  # noqa: E731  (E, n2, d)

    def row(xi: Tensor) -> Tensor:
        vjp_out = vjp(lambda q: single(q, xi), p)  # (out, vjp_fn): no aux
        out, vjp_fn = vjp_out[0], vjp_out[1]  # (E, d)
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
