"""Two-layer receptive-field network of `nonlinearity` Sec. 4–5 (Fig. 2a), ensemble-batched.

K disjoint receptive fields (RFs); RF k sees ``x_k ∈ R^{d_in}`` and has M bias-free filters
``w_km`` (bottom layer ``f_1km = h(w_kmᵀ x_k)``); the K·M outputs ``f_1`` are optionally
batch-normalised without affine parameters, ``f^bn_km = (f_1km − μ_km)/σ_km`` (App. D, E.2),
then mapped by the bias-free top layer ``V ∈ R^{out × KM}`` to the output ``z = V f^bn``
(L2-normalised by the loss).

BatchNorm variants (App. E.2, Table 1): the forward pass is always ``(f_1 − μ)/σ`` with batch
statistics (biased variance, ``σ² + ε`` with ε = 1e-5); they differ in which statistics are
backpropagated:

=============  ===============================================================
``off``        no BatchNorm
``standard``   gradient through μ and σ² (vanilla BN)
``mean_only``  σ² detached: the paper's mean-backprop BN (Def. 5)
``var_only``   μ detached, gradient through σ²
``none``       both statistics detached
=============  ===============================================================

Which samples the statistics of the two-view path (:meth:`EnsembleRFNet.forward_pair`) are taken
over, ``bn_stats``: ``"view"`` — each view's N samples (the reference implementation's training
loop, ``z1 = model(x1); z2 = model(x2)``, and our default) — or ``"joint"`` — all 2N samples of
the batch, as App. D defines μ_k and σ_k (eq. 164–165). The paper does not say which of the two
its experiments used beyond the reference code, so the token experiments expose it as a knob.

Ensembles (docs/architecture.md): parameters carry a leading axis E, members never interact. Members
may differ in the number of filters (padded to ``M_pad`` with zero filters that stay zero),
in activation and in BN variant. Two ways to evaluate the network:

- :meth:`EnsembleRFNet.forward` — plain autograd on one view ``(E, B, K, d_in)`` (the reference).
- :meth:`EnsembleRFNet.forward_pair` — both views at once, the training path: a
  :class:`torch.autograd.Function` whose backward is derived by hand (few memory passes, three
  large batched matmuls), so ``loss.backward()`` and any optimizer work and gradients
  accumulate in ``.grad`` as usual. With token inputs (``tokens`` + ``embedding``) it computes
  in *token space* (see :class:`_TokenPair`), exactly.

Hand-derived BN backward, with ``s = 1/σ = (σ² + ε)^{-1/2}`` and means over the samples the statistics
are taken over (the N of a view, or the 2N of the batch):
``∂L/∂f_1 = s (∂L/∂f^bn − a·mean(∂L/∂f^bn) − b·f^bn·mean(∂L/∂f^bn · f^bn))`` with a = 1 iff μ is
backpropagated and b = 1 iff σ² is; ``∂L/∂f_1 = ∂L/∂f^bn`` without BN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from ssldyn.checks import choice
from ssldyn.models._sizes import check_sizes
from ssldyn.models.activations import ACTIVATION_NAMES, ACTIVATIONS, Activation, ActivationName, get_activation
from ssldyn.models.ensemble import check_input_dtype
from ssldyn.models.seeding import member_generators

_LEAKY_SLOPE = -float(get_activation("leaky_relu").fn(torch.tensor(-1.0, dtype=torch.float64)))  # 0.05
BNMode = Literal["off", "standard", "mean_only", "var_only", "none"]
BNStats = Literal["view", "joint"]
TokenPath = Literal["auto", "table", "samples"]
BN_MODES: tuple[str, ...] = get_args(BNMode)
BN_STATS: tuple[str, ...] = get_args(BNStats)
TOKEN_PATHS: tuple[str, ...] = get_args(TokenPath)
# (μ backpropagated, σ² backpropagated) per BN variant
_BN_BACKPROP = {
    "off": (False, False),
    "standard": (True, True),
    "mean_only": (True, False),
    "var_only": (False, True),
    "none": (False, False),
}

__all__ = ["BNMode", "BNStats", "TokenPath", "BN_MODES", "BN_STATS", "TOKEN_PATHS", "EnsembleRFNet", "token_path"]


def _per_member(value, n: int, name: str) -> list:
    if isinstance(value, (str, int, float, Activation)) or value is None:
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise ValueError(f"{name}: expected one value or {n} (one per member), got {len(value)}")
    return value


def _builtin_activation(a: object) -> str:
    """The name of a built-in activation, given by name or as the object :func:`get_activation` returns; anything
    else (a custom :class:`Activation` such as ``monomial(3)``) is one ``ValueError``: the hand-derived backward of
    :meth:`EnsembleRFNet.forward_pair` knows the built-in activations only."""
    if isinstance(a, str):
        return get_activation(a).name  # an unknown name: one error naming the allowed ones
    if isinstance(a, Activation) and ACTIVATIONS.get(a.name) is a:
        return a.name
    what = f"{a.name!r} (a custom Activation)" if isinstance(a, Activation) else repr(a)
    raise ValueError(
        f"activation {what}: EnsembleRFNet takes a built-in activation only, by name or as get_activation(name) "
        f"returns it (its backward is derived by hand); allowed values are {', '.join(map(repr, ACTIVATION_NAMES))}"
    )


def _runs(names: Sequence[str]) -> tuple[tuple[str, int, int], ...]:
    """Contiguous runs ``(name, start, stop)`` of equal entries."""
    out: list[tuple[str, int, int]] = []
    for i, a in enumerate(names):
        if out and out[-1][0] == a:
            out[-1] = (a, out[-1][1], i + 1)
        else:
            out.append((a, i, i + 1))
    return tuple(out)


@dataclass(frozen=True)
class _Layout:
    """Host-side constants of one network (known at construction: no device sync per step).

    ``activations``: contiguous runs ``(name, start, stop)`` of members with one activation;
    ``need_mask``: padded filters must be zeroed after the activation (h(0) ≠ 0);
    ``mean_backprop`` / ``var_backprop``: some member backpropagates μ / σ²; ``eps``: BN ε;
    ``joint``: the two-view path takes the BN statistics over both views (``bn_stats="joint"``).
    """

    activations: tuple[tuple[str, int, int], ...]
    need_mask: bool
    mean_backprop: bool
    var_backprop: bool
    eps: float
    joint: bool = False


def _generators(generator, E: int) -> list[torch.Generator | None]:
    """One generator per member: a sequence is used as given, one generator (or None: torch's
    default) is shared, members drawing one after the other from it."""
    if generator is None or isinstance(generator, torch.Generator):
        return [generator] * E
    gens = list(generator)
    if len(gens) != E or not all(isinstance(g, torch.Generator) for g in gens):
        raise ValueError(
            f"generator: one torch.Generator or a sequence of {E} (one per member), got {type(generator).__name__} "
            f"of length {len(gens)}"
        )
    return gens


class EnsembleRFNet(nn.Module):
    """E independent two-layer RF networks (`nonlinearity` Sec. 4, Fig. 2a, App. D).

    Args (the hyperparameters after ``filters`` are keyword-only):
        K: number of receptive fields.
        in_dim: input dimension per RF (d; 196 for 14×14 MNIST quadrants).
        filters: M (filters per RF) — one int, or one per member (padded to the max).
        out_dim: output dimension (``output_d``; 50 in Sec. 5).
        ensemble: number of members E.
        activation: a built-in activation — its name (:data:`~ssldyn.models.activations.ACTIVATION_NAMES`) or
            the object :func:`~ssldyn.models.activations.get_activation` returns for it — or one per member.
            Custom activations (``monomial(3)``) are refused: the backward of :meth:`forward_pair` is derived
            by hand for the built-in ones.
        bn: BN variant (``BN_MODES``) or one per member.
        bn_eps: ε of BatchNorm.
        bn_stats: the samples :meth:`forward_pair` takes the BN statistics over: ``"view"`` (each
            view's N; the reference implementation) or ``"joint"`` (all 2N, App. D eq. 164–165).
            :meth:`forward` always uses the batch it is given.
        token_path: which exact form :meth:`forward_pair` uses for token inputs: ``"table"``,
            ``"samples"`` or ``"auto"`` (the cheaper one by :func:`token_path`, from the shapes of
            each call).
        seeds: one int per member (:mod:`ssldyn.models.seeding`): member ``e`` is drawn from
            ``torch.Generator().manual_seed(seeds[e])``, exactly as a lone network with ``seeds=[seeds[e]]``.
        generator: where the initial weights come from (instead of ``seeds``) — one ``torch.Generator`` (members drawn
            one after the other: they always differ), a sequence of E generators (member e drawn
            from ``generator[e]``, exactly as a lone network built with that generator: two
            generators seeded alike give two identical members), or None (torch's default generator).
            Per member and RF, ``w_k ~ U(±1/√d_in)`` (``(M, d_in)``, RF order), then
            ``V ~ U(±1/√(KM))`` (``nn.Linear``'s default bounds), drawn in float64 on the CPU, so
            every dtype and device starts from the same numbers.
        dtype, device: of the parameters.

    Parameters: ``W`` (E, K, M_pad, d_in) filters (row m of RF k is w_km) and ``VT`` (E, K·M_pad, out),
    the top layer stored transposed (rows of RF k contiguous, as the token-space path contracts
    them); ``V`` is the read-only view (E, out, K·M_pad) of the paper's V.
    """

    filter_mask: torch.Tensor  # (E, K, M_pad) 1 for a member's real filters, 0 for padding
    bn_on: torch.Tensor  # (E,) bool
    mean_backprop: torch.Tensor  # (E,) 1.0 where μ is backpropagated
    var_backprop: torch.Tensor  # (E,) 1.0 where σ² is backpropagated

    def __init__(
        self,
        K: int,
        in_dim: int,
        filters: int | Sequence[int],
        *,
        out_dim: int = 50,
        ensemble: int = 1,
        activation: ActivationName | Activation | Sequence[ActivationName | Activation] = "relu",
        bn: BNMode | Sequence[BNMode] = "off",
        bn_eps: float = 1e-5,
        bn_stats: BNStats = "view",
        token_path: TokenPath = "auto",
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | Sequence[torch.Generator] | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        check_sizes("EnsembleRFNet", K=K, in_dim=in_dim, out_dim=out_dim, ensemble=ensemble)
        choice(token_path, "token_path", TOKEN_PATHS)
        choice(bn_stats, "bn_stats", BN_STATS)
        E = ensemble
        Ms = [int(m) for m in _per_member(filters, E, "filters")]
        if min(Ms) < 1:
            raise ValueError(f"filters: every member needs >= 1 filter per RF, got {Ms}")
        self.acts = [_builtin_activation(a) for a in _per_member(activation, E, "activation")]
        self.bn_modes = _per_member(bn, E, "bn")
        for m in self.bn_modes:
            choice(m, "bn", BN_MODES)
        if seeds is not None:
            gens = member_generators(E, seeds=seeds, generator=generator)  # type: ignore[arg-type]
        else:
            gens = _generators(generator, E)
        self.K, self.in_dim, self.out_dim, self.ensemble, self.bn_eps = K, in_dim, out_dim, E, bn_eps
        self.token_path, self.bn_stats = token_path, bn_stats
        self.M_pad = Mp = max(Ms)
        self.filters = Ms
        W = torch.zeros(E, K, Mp, in_dim, dtype=torch.float64)
        VT = torch.zeros(E, K, Mp, out_dim, dtype=torch.float64)
        for e, (M, g) in enumerate(zip(Ms, gens)):
            bound_w = 1.0 / math.sqrt(in_dim)
            for k in range(K):
                W[e, k, :M] = (torch.rand(M, in_dim, generator=g, dtype=torch.float64) * 2 - 1) * bound_w
            bound_v = 1.0 / math.sqrt(K * M)
            V = (torch.rand(out_dim, K * M, generator=g, dtype=torch.float64) * 2 - 1) * bound_v  # (out, K·M)
            VT[e, :, :M, :] = V.view(out_dim, K, M).permute(1, 2, 0)
        self.W = nn.Parameter(W.to(dtype=dtype, device=device))  # (E, K, M_pad, d_in)
        self.VT = nn.Parameter(VT.view(E, K * Mp, out_dim).to(dtype=dtype, device=device))  # (E, K·M_pad, out) = Vᵀ
        mask = torch.zeros(E, K, Mp, dtype=dtype, device=device)
        for e, M in enumerate(Ms):
            mask[e, :, :M] = 1.0
        self.register_buffer("filter_mask", mask)  # (E, K, M_pad)
        on = [m != "off" for m in self.bn_modes]
        backprop = [_BN_BACKPROP[m] for m in self.bn_modes]
        self.register_buffer("bn_on", torch.tensor(on, device=device))  # (E,) bool
        # (E,) 1.0 where the member backpropagates μ / σ² (0 for "off")
        self.register_buffer("mean_backprop", torch.tensor([float(a) for a, _ in backprop], dtype=dtype, device=device))
        self.register_buffer("var_backprop", torch.tensor([float(b) for _, b in backprop], dtype=dtype, device=device))
        self._layout = _Layout(
            activations=_runs(self.acts),
            need_mask=Mp > min(Ms)
            and any(float(get_activation(a).fn(torch.zeros(1, dtype=torch.float64))) != 0.0 for a in self.acts),
            mean_backprop=any(a for a, _ in backprop),
            var_backprop=any(b for _, b in backprop),
            eps=float(bn_eps),
            joint=bn_stats == "joint",
        )

    @property
    def V(self) -> torch.Tensor:
        """The paper's top layer ``V`` (E, out, K·M_pad): a view of the parameter ``VT``."""
        return self.VT.transpose(1, 2)

    # ------------------------------------------------------------------ autograd reference path
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One view through the network with autograd: ``(B, K, d_in)`` or ``(E, B, K, d_in)`` -> ``(E, B, out)``.

        BN statistics are those of this batch (call once per view). Output is not normalised.
        """
        E, K, Mp = self.ensemble, self.K, self.M_pad
        check_input_dtype("EnsembleRFNet.forward", x, self.W.dtype)
        if x.dim() == 3:
            x = x.unsqueeze(0).expand(E, *x.shape)
        if x.dim() != 4 or x.shape[0] != E or x.shape[2] != K or x.shape[3] != self.in_dim:
            raise ValueError(
                f"EnsembleRFNet.forward: x must be (B, {K}, {self.in_dim}) or ({E}, B, {K}, "
                f"{self.in_dim}), got {tuple(x.shape)}"
            )
        pre = torch.einsum("ebki,ekmi->ebkm", x, self.W)  # (E, B, K, M_pad) w_kmᵀ x_k
        f1 = torch.cat([get_activation(a).fn(pre[s:t]) for a, s, t in self._layout.activations], 0)
        f1 = f1 * self.filter_mask[:, None]  # padded filters contribute exactly 0
        f1 = f1.reshape(E, -1, K * Mp)  # (E, B, F)
        mu = f1.mean(1, keepdim=True)  # (E, 1, F)
        sigma2 = f1.var(1, unbiased=False, keepdim=True)  # (E, 1, F)
        mu = torch.where(self.mean_backprop.bool()[:, None, None], mu, mu.detach())
        sigma2 = torch.where(self.var_backprop.bool()[:, None, None], sigma2, sigma2.detach())
        f_bn = (f1 - mu) / torch.sqrt(sigma2 + self.bn_eps)  # (E, B, F)
        f_bn = torch.where(self.bn_on[:, None, None], f_bn, f1)
        return torch.bmm(f_bn, self.VT)  # (E, B, out)

    # ------------------------------------------------------------------ fast training path
    def forward_pair(
        self,
        x: torch.Tensor | None = None,
        *,
        tokens: torch.Tensor | None = None,
        embedding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Both views through the network: ``z (E, 2, N, out)``, differentiable in ``W`` and ``VT``.

        Inputs (one of):
            x: dense inputs ``(E or 1, 2, N, K, d_in)`` (view axis 1);
            tokens + embedding: token indices ``(E, 2, N, K)`` and per-member embeddings
                ``(E, n_tokens, d_in)`` (``x_k = u_{tokens[k]}``), computed in token space.

        Equal to :meth:`forward` applied to each view (``bn_stats="view"``) or to the 2N samples of
        both views at once (``"joint"``), with a backward written by hand (tested against autograd
        through :meth:`forward`). Inputs are data:
        gradients flow to ``W`` and ``VT`` only (an input that requires grad is an error).
        """
        lay = self._layout
        bufs = (self.bn_on, self.mean_backprop, self.var_backprop, self.filter_mask)
        if tokens is not None:
            if embedding is None:
                raise ValueError("forward_pair: tokens need an embedding (E, n_tokens, d_in)")
            E, K, din = self.ensemble, self.K, self.in_dim
            if tokens.dim() != 4 or tokens.shape[0] != E or tokens.shape[3] != K:
                raise ValueError(f"forward_pair: tokens must be ({E}, 2, N, {K}), got {tuple(tokens.shape)}")
            if embedding.dim() != 3 or embedding.shape[0] != E or embedding.shape[2] != din:
                raise ValueError(
                    f"forward_pair: embedding must be ({E}, n_tokens, {din}), got {tuple(embedding.shape)}"
                )
            if embedding.requires_grad:
                raise ValueError("forward_pair: no gradient w.r.t. the embedding; pass embedding.detach()")
            if tokens.dtype not in (torch.int32, torch.int64):
                raise ValueError(f"forward_pair: tokens are indices (int32 or int64), got {tokens.dtype}")
            check_input_dtype("EnsembleRFNet.forward_pair (embedding)", embedding, self.W.dtype)
            path = self.token_path
            if path == "auto":
                path = token_path(K, self.M_pad, tokens.shape[2], embedding.shape[1], self.out_dim)
            return _TokenPair.apply(self.W, self.VT, tokens, embedding, *bufs, lay, path)
        if x is None:
            raise ValueError("forward_pair: pass x or tokens + embedding")
        if x.dim() != 5 or x.shape[0] not in (1, self.ensemble) or x.shape[3] != self.K or x.shape[4] != self.in_dim:
            raise ValueError(
                f"forward_pair: x must be (E or 1, 2, N, {self.K}, {self.in_dim}) with E = {self.ensemble}, "
                f"got {tuple(x.shape)}"
            )
        if x.requires_grad:
            raise ValueError("forward_pair: no gradient w.r.t. the inputs; pass x.detach()")
        check_input_dtype("EnsembleRFNet.forward_pair", x, self.W.dtype)
        return _DensePair.apply(self.W, self.VT, x, *bufs, lay)


# ---------------------------------------------------------------------- shared pieces of the backward
def _activate_(pre: torch.Tensor, lay: _Layout) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    """``f_1 = h(pre)`` per run of members, in place where h' can be read off f_1 (ReLU, LeakyReLU,
    linear); elsewhere the pre-activation is kept for h'. Returns f_1 and the kept pre-activations."""
    kept: list[torch.Tensor | None] = []
    for a, s, t in lay.activations:
        if a == "relu":
            pre[s:t].relu_()
            kept.append(None)
        elif a == "leaky_relu":
            torch.nn.functional.leaky_relu_(pre[s:t], _LEAKY_SLOPE)
            kept.append(None)
        elif a == "linear":
            kept.append(None)
        else:
            keep = pre[s:t].clone()
            pre[s:t] = get_activation(a).fn(keep)
            kept.append(keep)
    return pre, kept


def _activation_backward_(df1: torch.Tensor, f1: torch.Tensor, kept: Sequence, lay: _Layout) -> torch.Tensor:
    """``∂L/∂pre = ∂L/∂f_1 · h'(pre)`` in place; ReLU / LeakyReLU read h' off the sign of f_1 (one fused pass)."""
    for (a, s, t), keep in zip(lay.activations, kept):
        d = df1[s:t]
        if a == "relu":
            torch.ops.aten.threshold_backward.grad_input(d, f1[s:t], 0.0, grad_input=d)
        elif a == "leaky_relu":
            torch.ops.aten.leaky_relu_backward.grad_input(d, f1[s:t], _LEAKY_SLOPE, True, grad_input=d)
        elif a != "linear":
            d.mul_(get_activation(a).deriv(keep))
    return df1


def _activation_derivative(name: str, pre: torch.Tensor) -> torch.Tensor:
    """h'(pre), with h'(0) = 0 for ReLU and slope 0.05 at pre <= 0 for LeakyReLU (as the dense path)."""
    if name == "relu":
        return (pre > 0).to(pre.dtype)
    if name == "leaky_relu":
        return torch.where(pre > 0, torch.ones_like(pre), torch.full_like(pre, _LEAKY_SLOPE))
    return get_activation(name).deriv(pre)


def _stats_dims(lay: _Layout) -> int | tuple[int, int]:
    """The sample axes of ``(E, 2, N, F)`` the BN statistics are taken over: N (per view) or 2 × N (joint)."""
    return (1, 2) if lay.joint else 2


def _bn_statistics(
    mean_f1: torch.Tensor, mean_f1_sq: torch.Tensor, bn_on: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(μ, s = 1/σ)`` from per-view means of f_1 and f_1²; members without BN get ``μ = 0, s = 1``
    (so f^bn = f_1)."""
    mu = mean_f1
    sigma2 = mean_f1_sq.sub_(mu * mu).clamp_min_(0.0)  # biased variance
    inv_sigma = torch.where(bn_on, torch.rsqrt(sigma2 + eps), torch.ones_like(sigma2))
    return mu * bn_on, inv_sigma


# ---------------------------------------------------------------------- dense inputs
class _DensePair(torch.autograd.Function):
    """``z = V f^bn(h(W x))`` for both views of dense inputs ``x (E or 1, 2, N, K, d_in)`` -> ``(E, 2, N, out)``."""

    @staticmethod
    def forward(ctx, W, VT, x, bn_on, mean_backprop, var_backprop, filter_mask, lay: _Layout):
        E, K, Mp, _ = W.shape
        F = K * Mp
        two, N = x.shape[1], x.shape[2]
        pre = torch.einsum("evnki,ekmi->evnkm", x, W).reshape(E, two, N, F)  # (E, 2, N, F)
        f1, kept = _activate_(pre, lay)  # (E, 2, N, F)
        mask = filter_mask.reshape(E, 1, 1, F)
        if lay.need_mask:
            f1.mul_(mask)
        # BN statistics per view, or over both (torch.var_mean over a non-inner dim is ~10x slower than two sums)
        on, over = bn_on.view(E, 1, 1, 1), _stats_dims(lay)
        mu, inv_sigma = _bn_statistics(f1.mean(over, keepdim=True), (f1 * f1).mean(over, keepdim=True), on, lay.eps)
        # (E, 2 or 1, 1, F) each
        f_bn = torch.addcmul(-(mu * inv_sigma), f1, inv_sigma)  # (E, 2, N, F) = (f_1 − μ)/σ
        z = torch.bmm(f_bn.view(E, two * N, F), VT)  # (E, 2N, out)
        ctx.lay, ctx.n_kept = lay, len(kept)
        ctx.kept_at = [i for i, k in enumerate(kept) if k is not None]
        ctx.save_for_backward(
            x, VT, f1, f_bn, inv_sigma, mean_backprop, var_backprop, mask, *[k for k in kept if k is not None]
        )
        return z.view(E, two, N, -1)

    @staticmethod
    @once_differentiable
    def backward(ctx, dz):  # pyright: ignore[reportIncompatibleMethodOverride] (torch stub: *grad_outputs)
        x, VT, f1, f_bn, inv_sigma, mean_backprop, var_backprop, mask, *kept_t = ctx.saved_tensors
        lay = ctx.lay
        kept: list[torch.Tensor | None] = [None] * ctx.n_kept
        for i, k in zip(ctx.kept_at, kept_t):
            kept[i] = k
        E, two, N, F = f_bn.shape
        dz = dz.reshape(E, two * N, -1)  # (E, 2N, out)
        dVT = torch.bmm(f_bn.view(E, two * N, F).transpose(1, 2), dz)  # (E, F, out)
        df_bn = torch.bmm(dz, VT.transpose(1, 2)).view(E, two, N, F)  # (E, 2, N, F) ∂L/∂f^bn
        # BN backward: ∂L/∂f_1 = s (∂L/∂f^bn − a mean(∂L/∂f^bn) − b f^bn mean(∂L/∂f^bn f^bn))
        over = _stats_dims(lay)
        if lay.mean_backprop:  # ("off" members have both flags 0)
            df_bn.sub_(df_bn.mean(over, keepdim=True) * mean_backprop.view(E, 1, 1, 1))
        if lay.var_backprop:
            # mean(df^bn · f^bn) after the μ term: unchanged by it since Σ_n f^bn = 0
            mean_df_f = (df_bn * f_bn).mean(over, keepdim=True) * var_backprop.view(E, 1, 1, 1)  # (E, 2 or 1, 1, F)
            df_bn.addcmul_(f_bn, mean_df_f, value=-1.0)
        df1 = df_bn.mul_(inv_sigma)  # (E, 2, N, F) ∂L/∂f_1
        dpre = _activation_backward_(df1, f1, kept, lay)  # (E, 2, N, F) ∂L/∂(w_kmᵀ x_k)
        if lay.need_mask:
            dpre.mul_(mask)
        K = x.shape[3]
        dW = torch.einsum("evnkm,evnki->ekmi", dpre.view(E, two, N, K, F // K), x.expand(E, *x.shape[1:]))
        return dW, dVT, None, None, None, None, None, None  # dW: (E, K, M_pad, d_in)


# ---------------------------------------------------------------------- token inputs
class _TokenPair(torch.autograd.Function):
    """Both views of token inputs through the network, computed in *token space* (exact).

    With token inputs, ``x_nk = u_{t_nk}``, every bottom-layer quantity of sample n at RF k is a
    row of a table over the T tokens: ``pre_tab[k, a] = W_k u_a`` and ``f1_tab = h(pre_tab)``
    (``(K, T, M)``), so ``f_1km[n] = f1_tab[k, t_nk, m]``. Batch sums over n become sums over
    tokens weighted by the counts ``c_v[k, a] = #{n : t_nk = a}`` of view v:

    - BN statistics: ``μ = Σ_a c f1_tab / N``, ``σ² = Σ_a c f1_tab² / N − μ²``;
    - forward (``"table"``): ``z_n = Σ_k z_tab_v[k, t_nk] − Σ_{k,m} μ_km s_km V_{·km}`` with
      ``z_tab_v[k, a] = Σ_m f1_tab[k, a, m] s_km V_{·km}`` (a gather-sum over K rows, ``embedding_bag``);
    - backward, with ``dz_tab_v[k, a] = Σ_{n: t_nk = a} ∂L/∂z_n`` (a scatter-add):
      ``∂L/∂V_{·km} = Σ_v s (Σ_a f1_tab[k, a, m] dz_tab_v[k, a] − μ_km Σ_n ∂L/∂z_n)``, and the BN
      backward summed over ``{n : t_nk = a}`` is
      ``∂L/∂f1_tab = Σ_v [s dz_tab_v V + c_v (−s a m_v + s² b r_v μ) − s² b r_v c_v f1_tab]`` with
      ``m_v = mean(∂L/∂f^bn) = Vᵀ mean(∂L/∂z)`` and ``r_v = mean(∂L/∂f^bn · f^bn)``;
      then ``× h'(pre_tab)`` and ``∂L/∂W_k = (∂L/∂pre_tab[k])ᵀ U``.

    The big contractions run over the 2T table rows instead of the 2N samples (T = 20 ≪ 2N = 256
    in Sec. 5). ``"samples"`` gathers per-sample ``f^bn`` rows from the table instead (cheaper
    for tiny M or T ≫ N; :func:`token_path` chooses).
    """

    @staticmethod
    def forward(ctx, W, VT, tokens, U, bn_on, mean_backprop, var_backprop, filter_mask, lay: _Layout, path: str):
        E, K, Mp, _ = W.shape
        _, two, N, _ = tokens.shape
        T, out = U.shape[1], VT.shape[2]
        dev, dt = W.device, W.dtype
        V_k = VT.view(E, K, Mp, out)  # (E, K, M, out) V_{o,km}
        # ---- token tables: pre_tab = W_k u_a, f1_tab = h(pre_tab)
        pre_tab = torch.matmul(U.unsqueeze(1), W.transpose(2, 3))  # (E, K, T, M)
        f1_tab = _cat([get_activation(a).fn(pre_tab[s:t]) for a, s, t in lay.activations])  # (E, K, T, M)
        mask = filter_mask.view(E, K, 1, Mp)
        if lay.need_mask:
            f1_tab = f1_tab * mask
        # ---- counts c_v[k, a]; table rows ((e·K + k)·2 + v)·T + a, i.e. the (E, K, 2, T) layout
        offsets = (
            (torch.arange(E, device=dev).view(E, 1, 1, 1) * K + torch.arange(K, device=dev)) * two
            + torch.arange(two, device=dev).view(1, two, 1, 1)
        ) * T  # (E, 2, 1, K)
        rows = tokens + offsets  # (E, 2, N, K)
        flat_rows = rows.reshape(-1)
        # index_add_ instead of bincount: no data-dependent output size, so no device sync on CUDA
        counts = torch.zeros(E * K * two * T, device=dev, dtype=dt)
        counts.index_add_(0, flat_rows, torch.ones((), device=dev, dtype=dt).expand(flat_rows.shape[0]))
        counts = counts.view(E, K, two, T)  # (E, K, 2, T)
        on = bn_on.view(E, 1, 1, 1)
        mean_f1, mean_f1_sq = (
            torch.matmul(counts, f1_tab) / N,
            torch.matmul(counts, f1_tab * f1_tab) / N,
        )  # (E, K, 2, M)
        if lay.joint:  # over the 2N samples: the mean of the two views' means (equal N)
            mean_f1, mean_f1_sq = mean_f1.mean(2, keepdim=True), mean_f1_sq.mean(2, keepdim=True)  # (E, K, 1, M)
        mu, inv_sigma = _bn_statistics(mean_f1, mean_f1_sq, on, lay.eps)
        mu, inv_sigma = mu.expand(E, K, two, Mp).contiguous(), inv_sigma.expand(E, K, two, Mp).contiguous()
        # (E, K, 2, M) each: equal for both views when joint
        ctx.lay, ctx.path, ctx.N = lay, path, N
        if path == "table":
            f1s = (f1_tab.unsqueeze(2) * inv_sigma.unsqueeze(3)).view(E, K, two * T, Mp)  # (E, K, 2T, M) f1_tab s_v
            z_tab = torch.matmul(f1s, V_k)  # (E, K, 2T, out)
            mu_s = (inv_sigma * mu).transpose(1, 2).reshape(E, two, K * Mp)  # (E, 2, K·M) μ s
            z_const = torch.bmm(mu_s, VT)  # (E, 2, out) Σ_km μ s V
            z = torch.nn.functional.embedding_bag(rows.reshape(-1, K), z_tab.view(-1, out), mode="sum")  # (E·2N, out)
            z = z.view(E, two, N, out).sub_(z_const.unsqueeze(2))  # (E, 2, N, out)
            ctx.save_for_backward(
                rows, counts, pre_tab, f1_tab, mu, inv_sigma, f1s, mu_s, VT, U, mean_backprop, var_backprop, mask
            )
        elif path == "samples":
            f_bn_tab = (f1_tab.unsqueeze(2) - mu.unsqueeze(3)).mul_(inv_sigma.unsqueeze(3))  # (E, K, 2, T, M)
            f_bn = f_bn_tab.view(-1, Mp).index_select(0, flat_rows).view(E, two * N, K * Mp)  # (E, 2N, K·M)
            z = torch.bmm(f_bn, VT).view(E, two, N, out)  # (E, 2, N, out)
            ctx.save_for_backward(
                rows, counts, pre_tab, f1_tab, mu, inv_sigma, f_bn, VT, U, mean_backprop, var_backprop, mask
            )
        else:
            raise ValueError(f"token path {path!r}: allowed values are table, samples")
        return z

    @staticmethod
    @once_differentiable
    def backward(ctx, dz):  # pyright: ignore[reportIncompatibleMethodOverride] (torch stub: *grad_outputs)
        lay, N = ctx.lay, ctx.N
        saved = ctx.saved_tensors  # table path: (..., f1s, mu_s, ...); samples path: (..., f_bn, ...)
        rows, counts, pre_tab, f1_tab, mu, inv_sigma = saved[:6]
        VT, U, mean_bp, var_bp, mask = saved[-5:]
        E, K, T, Mp = f1_tab.shape
        two, out = rows.shape[1], VT.shape[2]
        dev, dt = f1_tab.device, f1_tab.dtype
        V_k = VT.view(E, K, Mp, out)
        dz_sum = dz.sum(2)  # (E, 2, out) Σ_n ∂L/∂z_n per view
        if ctx.path == "table":
            dz_flat = dz.reshape(E * two * N, out)  # (E·2N, out)
            # dz_tab_v[k, a] = Σ_{n: t_nk = a} ∂L/∂z_n (one index_add per RF: no (N, K, out) copy)
            dz_tab = torch.zeros(E * K * two * T, out, device=dev, dtype=dt)
            rows_k = rows.reshape(-1, K).t().contiguous()  # (K, E·2N)
            for k in range(K):
                dz_tab.index_add_(0, rows_k[k], dz_flat)
            dz_tab = dz_tab.view(E, K, two * T, out)  # (E, K, 2T, out)
            # ∂L/∂V_km = Σ_v s_v (Σ_a f1_tab[k, a, m] dz_tab_v[k, a] − μ_v Σ_n ∂L/∂z_n)
            f1s, mu_s = saved[6], saved[7]  # (E, K, 2T, M), (E, 2, K·M)
            dVT = torch.matmul(f1s.transpose(2, 3), dz_tab).view(E, K * Mp, out)  # (E, K·M, out)
            dVT.baddbmm_(mu_s.transpose(1, 2), dz_sum, alpha=-1.0)
            # Σ_{n: t_nk = a} ∂L/∂f^bn_nk per view
            df_bn_tab = torch.matmul(dz_tab, V_k.transpose(2, 3)).view(E, K, two, T, Mp)  # (E, K, 2, T, M)
        else:
            dz_flat = dz.reshape(E, two * N, out)  # (E, 2N, out)
            f_bn = saved[6]  # (E, 2N, K·M)
            dVT = torch.bmm(f_bn.transpose(1, 2), dz_flat)  # (E, K·M, out)
            df_bn = torch.bmm(dz_flat, VT.transpose(1, 2))  # (E, 2N, K·M) ∂L/∂f^bn
            df_bn_tab = torch.zeros(E * K * two * T, Mp, device=dev, dtype=dt)
            df_bn_tab.index_add_(0, rows.reshape(-1), df_bn.view(-1, Mp))
            df_bn_tab = df_bn_tab.view(E, K, two, T, Mp)  # (E, K, 2, T, M)
        df1_tab = (df_bn_tab * inv_sigma.unsqueeze(3)).sum(2)  # (E, K, T, M) ∂L/∂f1_tab without the BN terms
        if lay.mean_backprop or lay.var_backprop:  # ("off" has both flags 0)
            a, b = mean_bp.view(E, 1, 1, 1), var_bp.view(E, 1, 1, 1)  # 0 for "off" members
            mean_df_bn = torch.bmm(dz_sum / N, VT.transpose(1, 2))  # (E, 2, K·M) m_v = mean_n(∂L/∂f^bn)
            mean_df_bn = mean_df_bn.view(E, two, K, Mp).transpose(1, 2)  # (E, K, 2, M)
            if lay.joint:  # m = mean over the 2N samples
                mean_df_bn = mean_df_bn.mean(2, keepdim=True).expand_as(mean_df_bn)
            bn_offset = -(inv_sigma * a * mean_df_bn)  # (E, K, 2, M): coefficient of c_v
            if lay.var_backprop:
                # r_v = mean_n(∂L/∂f^bn · f^bn) = s (Σ_a f1_tab df_bn_tab / N − m_v μ)
                r = inv_sigma * ((f1_tab.unsqueeze(2) * df_bn_tab).sum(3) / N - mean_df_bn * mu)  # (E, K, 2, M)
                if lay.joint:  # r = mean over the 2N samples = the mean of the views' r_v (μ, s shared)
                    r = r.mean(2, keepdim=True).expand_as(r)
                bn_offset = bn_offset + inv_sigma * inv_sigma * b * r * mu
                bn_slope = -(inv_sigma * inv_sigma) * b * r  # (E, K, 2, M): coefficient of c_v f1_tab
                df1_tab.addcmul_(torch.matmul(counts.transpose(2, 3), bn_slope), f1_tab)
            df1_tab.add_(torch.matmul(counts.transpose(2, 3), bn_offset))  # (E, K, T, M)
        # ---- activation backward (h' depends only on the table entry) and ∂L/∂W_k = dpre_tabᵀ U
        for act, s, t in lay.activations:
            if act != "linear":
                df1_tab[s:t].mul_(_activation_derivative(act, pre_tab[s:t]))
        dpre_tab = df1_tab  # (E, K, T, M)
        if lay.need_mask:
            dpre_tab = dpre_tab * mask
        dW = torch.matmul(dpre_tab.transpose(2, 3), U.unsqueeze(1))  # (E, K, M, d_in)
        return dW, dVT, None, None, None, None, None, None, None, None


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts, 0)


def token_path(K: int, M: int, N: int, n_tok: int, out: int) -> str:
    """Which exact form of the token path is cheaper: ``"table"`` or ``"samples"``.

    Cost model per member and step (memory passes + matmul FLOPs / 8; it matched measurements
    on a 2-core CPU at d = 20, N = 128, out = 50: equal at M = 3, tables 1.1–2× faster from
    M = 10 to 100): tables ``K·out·(2N + 2T) + 3·2T·K·M·out/8`` (scatter of ∂L/∂z, three table
    matmuls); samples ``3·2N·K·M + 2·2N·K·M·out/8`` (gather, scatter, two per-sample matmuls).
    Samples win for tiny M or many tokens (T ≫ N).
    """
    table = K * out * (2 * N + 2 * n_tok) + 3 * 2 * n_tok * K * M * out / 8
    samples = 3 * 2 * N * K * M + 2 * 2 * N * K * M * out / 8
    return "table" if table <= samples else "samples"
