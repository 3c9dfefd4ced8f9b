"""Two-layer receptive-field network of `nonlinearity` Sec. 4–5 (Fig. 2a), ensemble-batched.

K disjoint receptive fields (RFs); RF k sees ``x_k ∈ R^{d_in}`` and has M bias-free filters
``w_km`` (first layer ``f_1km = h(w_km·x_k)``); the K·M outputs are concatenated, optionally
batch-normalised without affine parameters (App. D / E.2 variants), then mapped by a
bias-free ``V ∈ R^{out × KM}`` to the output ``z = V f_1^bn`` (L2-normalised by the loss).

BatchNorm variants (App. E.2, Table 1), forward always ``(f − μ)/σ`` with the batch
statistics of the view being normalised (biased variance, eps 1e-5):

=============  ===============================================================
``off``        no BatchNorm
``standard``   gradient through μ and σ² (vanilla BN)
``mean_only``  σ² detached: the paper's mean-backprop BN (Def. 5)
``var_only``   μ detached, gradient through σ²
``none``       both statistics detached
=============  ===============================================================

Ensembles (DESIGN.md): parameters carry a leading axis E, members never interact. Members
may differ in the number of filters (padded to ``M_pad`` with zero filters that stay zero),
in activation, and in BN variant. Two code paths compute the same function:

- :meth:`EnsembleRFNet.forward` — plain autograd on one view ``(E, B, K, d_in)`` (reference;
  usable for any data, e.g. MNIST quadrants);
- :meth:`EnsembleRFNet.loss_and_grad` — the fast training path: both views at once, a
  hand-derived backward (few memory passes, three large batched matmuls), optional token
  inputs (first layer as a gather of ``U W_kᵀ``). Autograd is used only for the loss on the
  small output ``z``.

Hand-derived BN backward (g = (h − μ)s, s = (σ² + ε)^{-1/2}, means over the batch of a view):
``dh = s·(dg − a·mean(dg) − b·g·mean(dg·g))`` with a = 1 iff μ is backpropagated and
b = 1 iff σ² is; ``dh = dg`` without BN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ssldyn.models.activations import get_activation

_LEAKY_SLOPE = -float(get_activation("leaky_relu").fn(torch.tensor(-1.0, dtype=torch.float64)))  # 0.05
BN_MODES = ("off", "standard", "mean_only", "var_only", "none")
_BN_FLAGS = {"off": (0.0, 0.0), "standard": (1.0, 1.0), "mean_only": (1.0, 0.0), "var_only": (0.0, 1.0),
             "none": (0.0, 0.0)}


def _per_member(value, n: int, name: str) -> list:
    if isinstance(value, (str, int, float)) or value is None:
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise ValueError(f"{name}: expected one value or {n} (one per member), got {len(value)}")
    return value


def _runs(names: Sequence[str]) -> list[tuple[str, int, int]]:
    """Contiguous runs ``(name, start, stop)`` of equal entries."""
    out: list[tuple[str, int, int]] = []
    for i, a in enumerate(names):
        if out and out[-1][0] == a:
            out[-1] = (a, out[-1][1], i + 1)
        else:
            out.append((a, i, i + 1))
    return out


class EnsembleRFNet(nn.Module):
    """E independent two-layer RF networks (`nonlinearity` Sec. 4, App. D).

    Args:
        K: number of receptive fields.
        in_dim: input dimension per RF (d; 196 for 14×14 MNIST quadrants).
        filters: M (filters per RF) — one int, or one per member (padded to the max).
        out_dim: output dimension (``output_d``; 50 in Sec. 5).
        ensemble: number of members E.
        activation: name (see :func:`~ssldyn.models.activations.get_activation`) or one per member.
        bn: BN variant (``BN_MODES``) or one per member.
        seeds: per-member init seeds (int or list); member e is initialised exactly as a lone
            network with seed ``seeds[e]``: per RF ``w_k ~ U(±1/√d_in)`` (``(M, d_in)``, RF order),
            then ``V ~ U(±1/√(KM))`` (``nn.Linear`` defaults, as the reference).
        bn_eps: ε of BatchNorm.

    Parameters: ``W`` (E, K, M_pad, d_in) filters (row m of RF k is w_km), ``V`` (E, out, K·M_pad).
    """

    def __init__(self, K: int, in_dim: int, filters: int | Sequence[int], out_dim: int = 50, ensemble: int = 1,
                 activation: str | Sequence[str] = "relu", bn: str | Sequence[str] = "off",
                 seeds: int | Sequence[int] = 0, bn_eps: float = 1e-5, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        if K < 1 or in_dim < 1 or out_dim < 1 or ensemble < 1:
            raise ValueError(f"EnsembleRFNet: K, in_dim, out_dim, ensemble must be >= 1, got {K}, {in_dim}, "
                             f"{out_dim}, {ensemble}")
        E = ensemble
        Ms = [int(m) for m in _per_member(filters, E, "filters")]
        if min(Ms) < 1:
            raise ValueError(f"filters: every member needs >= 1 filter per RF, got {Ms}")
        self.acts = [get_activation(a).name if isinstance(a, str) else a.name
                     for a in _per_member(activation, E, "activation")]
        self.bn_modes = _per_member(bn, E, "bn")
        for m in self.bn_modes:
            if m not in BN_MODES:
                raise ValueError(f"bn {m!r}: allowed values are {', '.join(BN_MODES)}")
        seeds = [int(s) for s in _per_member(seeds, E, "seeds")]
        self.K, self.in_dim, self.out_dim, self.ensemble, self.bn_eps = K, in_dim, out_dim, E, bn_eps
        self.M_pad = max(Ms)
        self.filters = Ms
        Mp = self.M_pad
        W = torch.zeros(E, K, Mp, in_dim, dtype=dtype)
        V = torch.zeros(E, out_dim, K, Mp, dtype=dtype)
        for e, (M, s) in enumerate(zip(Ms, seeds)):
            g = torch.Generator().manual_seed(s)
            b1 = 1.0 / math.sqrt(in_dim)
            for k in range(K):
                W[e, k, :M] = (torch.rand(M, in_dim, generator=g, dtype=torch.float64) * 2 - 1).to(dtype) * b1
            b2 = 1.0 / math.sqrt(K * M)
            v = (torch.rand(out_dim, K * M, generator=g, dtype=torch.float64) * 2 - 1).to(dtype) * b2
            V[e, :, :, :M] = v.view(out_dim, K, M)
        self.W = nn.Parameter(W)  # (E, K, M_pad, d_in)
        self.V = nn.Parameter(V.view(E, out_dim, K * Mp))  # (E, out, K·M_pad)
        mask = torch.zeros(E, K, Mp, dtype=dtype)
        for e, M in enumerate(Ms):
            mask[e, :, :M] = 1.0
        self.register_buffer("filter_mask", mask)  # (E, K, M_pad)
        flags = torch.tensor([_BN_FLAGS[m] for m in self.bn_modes], dtype=dtype)  # (E, 2)
        self.register_buffer("bn_on", torch.tensor([m != "off" for m in self.bn_modes]))  # (E,)
        self.register_buffer("bn_a", flags[:, 0].clone())  # (E,) μ backpropagated
        self.register_buffer("bn_b", flags[:, 1].clone())  # (E,) σ² backpropagated
        self._act_runs = _runs(self.acts)
        self._need_mask = Mp > min(Ms) and any(float(get_activation(a).fn(torch.zeros(1))) != 0.0
                                               for a in self.acts)

    # ------------------------------------------------------------------ autograd reference path
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One view through the network with autograd: ``(B, K, d_in)`` or ``(E, B, K, d_in)`` -> ``(E, B, out)``.

        BN statistics are those of this batch (call once per view). Output is not normalised.
        """
        E, K, Mp = self.ensemble, self.K, self.M_pad
        if x.dim() == 3:
            x = x.unsqueeze(0).expand(E, *x.shape)
        if x.dim() != 4 or x.shape[0] != E or x.shape[2] != K or x.shape[3] != self.in_dim:
            raise ValueError(f"EnsembleRFNet.forward: x must be (B, {K}, {self.in_dim}) or ({E}, B, {K}, "
                             f"{self.in_dim}), got {tuple(x.shape)}")
        y = torch.einsum("ebki,ekmi->ebkm", x, self.W)  # (E, B, K, M_pad)
        h = torch.cat([get_activation(a).fn(y[s:t]) for a, s, t in self._act_runs], 0)  # (E, B, K, M_pad)
        h = h * self.filter_mask[:, None]  # padded filters contribute exactly 0
        h = h.reshape(E, -1, K * Mp)  # (E, B, F)
        mu = h.mean(1, keepdim=True)  # (E, 1, F)
        var = h.var(1, unbiased=False, keepdim=True)  # (E, 1, F)
        a = self.bn_a.bool()[:, None, None]
        b = self.bn_b.bool()[:, None, None]
        mu = torch.where(a, mu, mu.detach())
        var = torch.where(b, var, var.detach())
        g = (h - mu) / torch.sqrt(var + self.bn_eps)  # (E, B, F)
        g = torch.where(self.bn_on[:, None, None], g, h)
        return torch.bmm(g, self.V.transpose(1, 2))  # (E, B, out)

    # ------------------------------------------------------------------ fast training path
    def loss_and_grad(self, loss_fn: Callable[[torch.Tensor], torch.Tensor] | None, x: torch.Tensor | None = None,
                      tokens: torch.Tensor | None = None, embedding: torch.Tensor | None = None,
                      loss_grad_fn: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None
                      ) -> torch.Tensor:
        """Loss of both views and its gradient, written into ``W.grad`` / ``V.grad``.

        Inputs (one of):
            x: dense inputs ``(E or 1, 2, N, K, d_in)`` (view axis 1);
            tokens + embedding: token indices ``(E, 2, N, K)`` and per-member embeddings
                ``(E, n_tokens, d_in)`` (x_k = u_{tokens[k]}); the first layer is then a gather.
        loss_fn: ``z (E, 2, N, out) -> (E,)`` per-member losses (autograd is used on ``z`` only);
            or ``loss_grad_fn``: ``z -> (losses (E,), dL/dz (E, 2, N, out))`` given in closed form.

        Returns: per-member losses ``(E,)`` (detached). Gradients equal those of autograd through
        :meth:`forward` applied to each view (tested).
        """
        E, K, Mp, din = self.ensemble, self.K, self.M_pad, self.in_dim
        W, V = self.W.detach(), self.V.detach()
        F_ = K * Mp
        # ---- first layer y = W_k x_k: (E, 2, N, F)
        if tokens is not None:
            if embedding is None:
                raise ValueError("loss_and_grad: tokens need an embedding (E, n_tokens, d_in)")
            n_tok = embedding.shape[-2]
            _, two, N, _ = tokens.shape
            table = torch.matmul(W, embedding.transpose(1, 2).unsqueeze(1))  # (E, K, M_pad, n_tok)
            table = table.transpose(2, 3).reshape(E * K * n_tok, Mp)  # rows (e, k, a)
            offs = (torch.arange(E).view(E, 1, 1, 1) * K + torch.arange(K)) * n_tok  # (E, 1, 1, K)
            rows = (tokens + offs).reshape(-1)  # (E·2·N·K,)
            y = table.index_select(0, rows).view(E, two, N, F_)  # (E, 2, N, F)
        elif x is not None:
            if x.dim() != 5 or x.shape[3] != K or x.shape[4] != din:
                raise ValueError(f"loss_and_grad: x must be (E or 1, 2, N, {K}, {din}), got {tuple(x.shape)}")
            two, N = x.shape[1], x.shape[2]
            y = torch.einsum("evnki,ekmi->evnkm", x, W).reshape(E, two, N, F_)  # (E, 2, N, F)
        else:
            raise ValueError("loss_and_grad: pass x or tokens + embedding")
        # ---- activation, in place (per contiguous run of members); y is kept only where h' needs it
        kept: dict[int, torch.Tensor] = {}
        for a, s0, t in self._act_runs:
            if a == "relu":
                y[s0:t].relu_()
            elif a == "leaky_relu":
                torch.nn.functional.leaky_relu_(y[s0:t], _LEAKY_SLOPE)
            elif a != "linear":
                kept[s0] = y[s0:t].clone()
                y[s0:t] = get_activation(a).fn(kept[s0])
        h = y  # (E, 2, N, F)
        mask = self.filter_mask.reshape(E, 1, 1, F_)
        if self._need_mask:
            h.mul_(mask)
        # ---- BatchNorm per view (mean over N)
        # (torch.var_mean over a non-inner dim is ~10x slower than two plain sums here)
        mu = h.mean(2, keepdim=True)  # (E, 2, 1, F)
        var = (h * h).mean(2, keepdim=True).sub_(mu * mu).clamp_min_(0.0)  # (E, 2, 1, F) biased variance
        on = self.bn_on.view(E, 1, 1, 1)
        s = torch.where(on, torch.rsqrt(var + self.bn_eps), torch.ones_like(var))  # (E, 2, 1, F)
        mu = mu * on
        g = torch.addcmul(-(mu * s), h, s)  # (E, 2, N, F) = (h − μ)s
        g2 = g.view(E, two * N, F_)
        z = torch.bmm(g2, V.transpose(1, 2))  # (E, 2N, out)
        # ---- loss and dL/dz by autograd on the small output
        if loss_grad_fn is not None:
            losses, dz = loss_grad_fn(z.view(E, two, N, -1))
        else:
            zl = z.view(E, two, N, -1).detach().requires_grad_(True)
            with torch.enable_grad():
                losses = loss_fn(zl)  # (E,)
                (dz,) = torch.autograd.grad(losses.sum(), zl)
        dz = dz.reshape(E, two * N, -1)  # (E, 2N, out)
        # ---- backward through V
        gV = torch.bmm(dz.transpose(1, 2), g2)  # (E, out, F)
        dg = torch.bmm(dz, V).view(E, two, N, F_)  # (E, 2, N, F)
        # ---- BN backward: dh = s (dg − a mean(dg) − b g mean(dg g))
        a_ = (self.bn_a.view(E, 1, 1, 1) * on)
        if bool(self.bn_a.any()):
            dg.sub_(dg.mean(2, keepdim=True) * a_)
        if bool(self.bn_b.any()):
            c2 = (dg * g).mean(2, keepdim=True) * self.bn_b.view(E, 1, 1, 1)  # uses dg − a·mean(dg): Σ g = 0
            dg.addcmul_(g, c2, value=-1.0)
        dg.mul_(s)
        # ---- activation backward
        for a, s0, t in self._act_runs:  # relu / leaky: h' from the sign of h = h(y) (one fused pass)
            d = dg[s0:t]
            if a == "relu":
                torch.ops.aten.threshold_backward.grad_input(d, h[s0:t], 0.0, grad_input=d)
            elif a == "leaky_relu":
                torch.ops.aten.leaky_relu_backward.grad_input(d, h[s0:t], _LEAKY_SLOPE, True, grad_input=d)
            elif a != "linear":
                d.mul_(get_activation(a).deriv(kept[s0]))
        if self._need_mask:
            dg.mul_(mask)
        # ---- first-layer gradient
        if tokens is not None:
            # dL/d(U W_kᵀ)[a] = Σ_n 1[token_nk = a] dy_nk (index_add_; single-threaded it beats a one-hot matmul)
            gtab = torch.zeros(E * K * n_tok, Mp, dtype=dg.dtype)
            gtab.index_add_(0, rows, dg.view(-1, Mp))
            gtab = gtab.view(E, K, n_tok, Mp)  # (E, K, n_tok, M_pad)
            gW = torch.matmul(gtab.transpose(2, 3), embedding.unsqueeze(1))  # (E, K, M_pad, d_in)
        else:
            gW = torch.einsum("evnkm,evnki->ekmi", dg.view(E, two, N, K, Mp),
                              x.expand(E, *x.shape[1:]))  # (E, K, M_pad, d_in)
        self.W.grad = gW
        self.V.grad = gV
        return losses.detach()
