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
_BN_FLAGS = {
    "off": (0.0, 0.0),
    "standard": (1.0, 1.0),
    "mean_only": (1.0, 0.0),
    "var_only": (0.0, 1.0),
    "none": (0.0, 0.0),
}


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

    Parameters: ``W`` (E, K, M_pad, d_in) filters (row m of RF k is w_km) and ``VT`` (E, K·M_pad, out), the
    second layer stored transposed (rows of RF k contiguous, as the token-space path contracts
    them); ``V`` is the read-only view (E, out, K·M_pad) of the paper's V.
    """

    def __init__(
        self,
        K: int,
        in_dim: int,
        filters: int | Sequence[int],
        out_dim: int = 50,
        ensemble: int = 1,
        activation: str | Sequence[str] = "relu",
        bn: str | Sequence[str] = "off",
        seeds: int | Sequence[int] = 0,
        bn_eps: float = 1e-5,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if K < 1 or in_dim < 1 or out_dim < 1 or ensemble < 1:
            raise ValueError(
                f"EnsembleRFNet: K, in_dim, out_dim, ensemble must be >= 1, got {K}, {in_dim}, {out_dim}, {ensemble}"
            )
        E = ensemble
        Ms = [int(m) for m in _per_member(filters, E, "filters")]
        if min(Ms) < 1:
            raise ValueError(f"filters: every member needs >= 1 filter per RF, got {Ms}")
        self.acts = [
            get_activation(a).name if isinstance(a, str) else a.name for a in _per_member(activation, E, "activation")
        ]
        self.bn_modes = _per_member(bn, E, "bn")
        for m in self.bn_modes:
            if m not in BN_MODES:
                raise ValueError(f"bn {m!r}: allowed values are {', '.join(BN_MODES)}")
        seeds = [int(s) for s in _per_member(seeds, E, "seeds")]
        self.K, self.in_dim, self.out_dim, self.ensemble, self.bn_eps = K, in_dim, out_dim, E, bn_eps
        self.M_pad = max(Ms)
        self.token_mode = "auto"  # "auto" | "table" | "samples" (see _token_mode)
        self.filters = Ms
        Mp = self.M_pad
        W = torch.zeros(E, K, Mp, in_dim, dtype=dtype)
        VT = torch.zeros(E, K, Mp, out_dim, dtype=dtype)
        for e, (M, s) in enumerate(zip(Ms, seeds)):
            g = torch.Generator().manual_seed(s)
            b1 = 1.0 / math.sqrt(in_dim)
            for k in range(K):
                W[e, k, :M] = (torch.rand(M, in_dim, generator=g, dtype=torch.float64) * 2 - 1).to(dtype) * b1
            b2 = 1.0 / math.sqrt(K * M)
            v = (torch.rand(out_dim, K * M, generator=g, dtype=torch.float64) * 2 - 1).to(dtype) * b2
            VT[e, :, :M, :] = v.view(out_dim, K, M).permute(1, 2, 0)
        self.W = nn.Parameter(W)  # (E, K, M_pad, d_in)
        self.VT = nn.Parameter(VT.view(E, K * Mp, out_dim))  # (E, K·M_pad, out) = Vᵀ
        mask = torch.zeros(E, K, Mp, dtype=dtype)
        for e, M in enumerate(Ms):
            mask[e, :, :M] = 1.0
        self.register_buffer("filter_mask", mask)  # (E, K, M_pad)
        flags = torch.tensor([_BN_FLAGS[m] for m in self.bn_modes], dtype=dtype)  # (E, 2)
        self.register_buffer("bn_on", torch.tensor([m != "off" for m in self.bn_modes]))  # (E,)
        self.register_buffer("bn_a", flags[:, 0].clone())  # (E,) μ backpropagated
        self.register_buffer("bn_b", flags[:, 1].clone())  # (E,) σ² backpropagated
        # host-side: does any member backpropagate μ / σ²? (no device sync per step)
        self._bp_mean = any(_BN_FLAGS[m][0] for m in self.bn_modes)
        self._bp_var = any(_BN_FLAGS[m][1] for m in self.bn_modes)
        self._act_runs = _runs(self.acts)
        self._need_mask = Mp > min(Ms) and any(float(get_activation(a).fn(torch.zeros(1))) != 0.0 for a in self.acts)

    @property
    def V(self) -> torch.Tensor:
        """The paper's second layer ``V`` (E, out, K·M_pad): a view of the parameter ``VT``."""
        return self.VT.transpose(1, 2)

    # ------------------------------------------------------------------ autograd reference path
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One view through the network with autograd: ``(B, K, d_in)`` or ``(E, B, K, d_in)`` -> ``(E, B, out)``.

        BN statistics are those of this batch (call once per view). Output is not normalised.
        """
        E, K, Mp = self.ensemble, self.K, self.M_pad
        if x.dim() == 3:
            x = x.unsqueeze(0).expand(E, *x.shape)
        if x.dim() != 4 or x.shape[0] != E or x.shape[2] != K or x.shape[3] != self.in_dim:
            raise ValueError(
                f"EnsembleRFNet.forward: x must be (B, {K}, {self.in_dim}) or ({E}, B, {K}, "
                f"{self.in_dim}), got {tuple(x.shape)}"
            )
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
        return torch.bmm(g, self.VT)  # (E, B, out)

    # ------------------------------------------------------------------ fast training path
    def loss_and_grad(
        self,
        loss_fn: Callable[[torch.Tensor], torch.Tensor] | None,
        x: torch.Tensor | None = None,
        tokens: torch.Tensor | None = None,
        embedding: torch.Tensor | None = None,
        loss_grad_fn: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """Loss of both views and its gradient, written into ``W.grad`` / ``VT.grad``.

        Inputs (one of):
            x: dense inputs ``(E or 1, 2, N, K, d_in)`` (view axis 1);
            tokens + embedding: token indices ``(E, 2, N, K)`` and per-member embeddings
                ``(E, n_tokens, d_in)`` (x_k = u_{tokens[k]}); computed in token space
                (:meth:`_token_loss_and_grad`).
        loss_fn: ``z (E, 2, N, out) -> (E,)`` per-member losses (autograd is used on ``z`` only);
            or ``loss_grad_fn``: ``z -> (losses (E,), dL/dz (E, 2, N, out))`` given in closed form.

        Returns: per-member losses ``(E,)`` (detached). Gradients equal those of autograd through
        :meth:`forward` applied to each view (tested).
        """
        if tokens is not None:
            if embedding is None:
                raise ValueError("loss_and_grad: tokens need an embedding (E, n_tokens, d_in)")
            return self._token_loss_and_grad(tokens, embedding, loss_fn, loss_grad_fn)
        E, K, Mp, din = self.ensemble, self.K, self.M_pad, self.in_dim
        W, VT = self.W.detach(), self.VT.detach()
        F_ = K * Mp
        if x is None:
            raise ValueError("loss_and_grad: pass x or tokens + embedding")
        if x.dim() != 5 or x.shape[3] != K or x.shape[4] != din:
            raise ValueError(f"loss_and_grad: x must be (E or 1, 2, N, {K}, {din}), got {tuple(x.shape)}")
        # ---- first layer y = W_k x_k: (E, 2, N, F)
        two, N = x.shape[1], x.shape[2]
        y = torch.einsum("evnki,ekmi->evnkm", x, W).reshape(E, two, N, F_)  # (E, 2, N, F)
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
        z = torch.bmm(g2, VT)  # (E, 2N, out)
        losses, dz = _loss_and_dz(z.view(E, two, N, -1), loss_fn, loss_grad_fn)
        dz = dz.reshape(E, two * N, -1)  # (E, 2N, out)
        # ---- backward through V
        gV = torch.bmm(g2.transpose(1, 2), dz)  # (E, F, out)
        dg = torch.bmm(dz, VT.transpose(1, 2)).view(E, two, N, F_)  # (E, 2, N, F)
        # ---- BN backward: dh = s (dg − a mean(dg) − b g mean(dg g))
        a_ = self.bn_a.view(E, 1, 1, 1) * on
        if self._bp_mean:
            dg.sub_(dg.mean(2, keepdim=True) * a_)
        if self._bp_var:
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
        gW = torch.einsum(
            "evnkm,evnki->ekmi", dg.view(E, two, N, K, Mp), x.expand(E, *x.shape[1:])
        )  # (E, K, M_pad, d_in)
        self.W.grad = gW
        self.VT.grad = gV
        return losses.detach()

    def _token_mode(self, N: int, n_tok: int, out: int) -> str:
        """``"table"`` or ``"samples"`` for the token path: ``self.token_mode``, or :func:`token_path`."""
        if self.token_mode != "auto":
            return self.token_mode
        return token_path(self.K, self.M_pad, N, n_tok, out)

    def _token_loss_and_grad(
        self, tokens: torch.Tensor, embedding: torch.Tensor, loss_fn, loss_grad_fn
    ) -> torch.Tensor:
        """:meth:`loss_and_grad` for token inputs, computed in *token space* (exact, no ``(N, K, M)`` tensor).

        With token inputs, x_nk = u_{t_nk}, every first-layer quantity of sample n at RF k is a row
        of the table ``y_tab[k, a] = W_k u_a`` (``(K, T, M)``, T tokens): ``h_nk = h(y_tab[k, t_nk])``.
        Batch sums over n therefore become sums over tokens weighted by the counts
        ``c_v[k, a] = #{n : t_nk = a}`` of view v, and everything is done on ``(K, T, ·)`` tables:

        - BN statistics: ``μ = Σ_a c h_tab / N``, ``σ² = Σ_a c h_tab² / N − μ²``;
        - forward: ``z_n = Σ_k P_v[k, t_nk] − Σ_{k,m} μ_km s_km V_{·km}`` with
          ``P_v[k, a] = Σ_m h_tab[k, a, m] s_km V_{·km}`` (a gather-sum over K rows, ``embedding_bag``);
        - backward, with ``D_v[k, a] = Σ_{n: t_nk = a} ∂L/∂z_n`` (a scatter-add) and
          ``Q_v[k] = D_vᵀ h_tab[k]`` (``= Σ_n ∂L/∂z_n h_nkᵀ``):
          ``∂L/∂V_{·km} = Σ_v s (Q_v − (Σ_n ∂L/∂z_n) μ)``; the BN backward
          ``∂L/∂h = s(dg − a·mean(dg) − b·g·mean(dg·g))`` (dg = ∂L/∂g = Vᵀ∂L/∂z) summed over
          ``{n : t_nk = a}`` is ``Σ_v [s D_v V + c_v(−s a m_v + s² b c2_v μ) − s² b c2_v c_v h_tab]`` with
          ``m_v = mean(dg) = V ᵀmean(∂L/∂z)`` and ``c2_v = mean(dg·g) = s (Σ_o V_o Q_v,o / N − m_v μ)``;
          then ``× h'(y_tab)`` and ``∂L/∂W_k = (∂L/∂y_tab[k])ᵀ U``.

        The big contractions shrink from ``N`` rows to ``T`` rows (T = 20 ≪ 2N = 256 in Sec. 5).
        """
        E, K, Mp, din = self.ensemble, self.K, self.M_pad, self.in_dim
        if tokens.dim() != 4 or tokens.shape[0] != E or tokens.shape[3] != K:
            raise ValueError(f"loss_and_grad: tokens must be ({E}, 2, N, {K}), got {tuple(tokens.shape)}")
        n_tok = embedding.shape[-2]
        if embedding.dim() != 3 or embedding.shape[0] != E or embedding.shape[2] != din:
            raise ValueError(f"loss_and_grad: embedding must be ({E}, n_tokens, {din}), got {tuple(embedding.shape)}")
        _, two, N, _ = tokens.shape
        dev, dt = self.W.device, self.W.dtype
        W, VT = self.W.detach(), self.VT.detach()
        out = VT.shape[2]
        Vt = VT.view(E, K, Mp, out)  # (E, K, M, out) V_{o,k,m}
        # ---- token tables: y_tab = W_k u_a, h_tab = h(y_tab)
        y_tab = torch.matmul(embedding.unsqueeze(1), W.transpose(2, 3))  # (E, K, T, M)
        h_tab = _cat([get_activation(a).fn(y_tab[s0:t]) for a, s0, t in self._act_runs])  # (E, K, T, M)
        mask = self.filter_mask.view(E, K, 1, Mp)
        if self._need_mask:
            h_tab = h_tab * mask
        # ---- counts c_v[k, a]; table rows ((e·K + k)·2 + v)·T + a, i.e. the (E, K, 2, T) layout
        offs = (
            (torch.arange(E, device=dev).view(E, 1, 1, 1) * K + torch.arange(K, device=dev)) * two
            + torch.arange(two, device=dev).view(1, two, 1, 1)
        ) * n_tok  # (E, 2, 1, K)
        rows = tokens + offs  # (E, 2, N, K)
        c = torch.bincount(rows.reshape(-1), minlength=E * K * two * n_tok).to(dt).view(E, K, two, n_tok)
        # ---- BN statistics per view: (E, K, 2, M)
        mu = torch.matmul(c, h_tab) / N  # (E, K, 2, M)
        var = (torch.matmul(c, h_tab * h_tab) / N).sub_(mu * mu).clamp_min_(0.0)  # (E, K, 2, M) biased variance
        on = self.bn_on.view(E, 1, 1, 1)
        s = torch.where(on, torch.rsqrt(var + self.bn_eps), torch.ones_like(var))  # (E, K, 2, M)
        mu = mu * on
        if self._token_mode(N, n_tok, out) == "table":
            hs = (h_tab.unsqueeze(2) * s.unsqueeze(3)).view(E, K, two * n_tok, Mp)  # (E, K, 2·T, M): h_tab s_v
            # ---- forward: P_v[k, a] = (h_tab s_v)[k, a] V_k, z_n = Σ_k P_v[k, t_nk] − const_v
            P = torch.matmul(hs, Vt)  # (E, K, 2·T, out)
            smu = (s * mu).transpose(1, 2).reshape(E, two, K * Mp)  # (E, 2, K·M)
            const = torch.bmm(smu, VT)  # (E, 2, out) Σ_km μ s V
            z = torch.nn.functional.embedding_bag(rows.reshape(-1, K), P.view(-1, out), mode="sum")  # (E·2·N, out)
            z = z.view(E, two, N, out).sub_(const.unsqueeze(2))  # (E, 2, N, out)
            losses, dz = _loss_and_dz(z, loss_fn, loss_grad_fn)
            dz = dz.reshape(E * two * N, out)  # (E·2·N, out)
            # ---- backward: D_v[k, a] = Σ_{n: t_nk = a} dz_n (one index_add per RF: no (N, K, out) copy)
            D = torch.zeros(E * K * two * n_tok, out, device=dev, dtype=dt)
            rk = rows.reshape(-1, K).t().contiguous()  # (K, E·2·N)
            for k in range(K):
                D.index_add_(0, rk[k], dz)
            D = D.view(E, K, two * n_tok, out)  # (E, K, 2·T, out)
            dzsum = dz.view(E, two, N, out).sum(2)  # (E, 2, out)
            # ∂L/∂V_km = Σ_v s_v (Σ_a h_tab[k, a, m] D_v[k, a] − μ_v dzsum_v)
            gV = torch.matmul(hs.transpose(2, 3), D).view(E, K * Mp, out)  # (E, K·M, out)
            gV.baddbmm_(smu.transpose(1, 2), dzsum, alpha=-1.0)
            # ∂L/∂h_tab = Σ_v [s_v D_v V + c_v γ_v + c_v β_v h_tab]
            Rv = torch.matmul(D, Vt.transpose(2, 3)).view(E, K, two, n_tok, Mp)  # (E, K, 2, T, M): D_v V
        else:  # "samples": per-sample normalised features g gathered from the table (small M)
            g_tab = (h_tab.unsqueeze(2) - mu.unsqueeze(3)).mul_(s.unsqueeze(3))  # (E, K, 2, T, M) (h − μ_v)s_v
            g = g_tab.view(-1, Mp).index_select(0, rows.reshape(-1)).view(E, two * N, K * Mp)  # (E, 2N, K·M)
            z = torch.bmm(g, VT)  # (E, 2N, out)
            losses, dz = _loss_and_dz(z.view(E, two, N, out), loss_fn, loss_grad_fn)
            dz = dz.reshape(E, two * N, out)  # (E, 2N, out)
            dzsum = dz.view(E, two, N, out).sum(2)  # (E, 2, out)
            gV = torch.bmm(g.transpose(1, 2), dz)  # (E, K·M, out)
            dg = torch.bmm(dz, VT.transpose(1, 2))  # (E, 2N, K·M) ∂L/∂g
            Rv = torch.zeros(E * K * two * n_tok, Mp, device=dev, dtype=dt)
            Rv.index_add_(0, rows.reshape(-1), dg.view(-1, Mp))
            Rv = Rv.view(E, K, two, n_tok, Mp)  # (E, K, 2, T, M): Σ_{n: t_nk = a} ∂L/∂g_nk per view
        dh_tab = (Rv * s.unsqueeze(3)).sum(2)  # (E, K, T, M)
        need_a, need_b = self._bp_mean, self._bp_var  # ("off" has both flags 0)
        if need_a or need_b:
            a_ = (self.bn_a * self.bn_on).view(E, 1, 1, 1)
            b_ = (self.bn_b * self.bn_on).view(E, 1, 1, 1)
            md = torch.bmm(dzsum / N, VT.transpose(1, 2))  # (E, 2, K·M) mean_n(dg)
            md = md.view(E, two, K, Mp).transpose(1, 2)  # (E, K, 2, M)
            gam = -(s * a_ * md)  # (E, K, 2, M)
            if need_b:
                c2 = s * ((h_tab.unsqueeze(2) * Rv).sum(3) / N - md * mu)  # (E, K, 2, M) mean_n(dg g)
                gam = gam + s * s * b_ * c2 * mu
                bet = -(s * s) * b_ * c2  # (E, K, 2, M)
                dh_tab.addcmul_(torch.matmul(c.transpose(2, 3), bet), h_tab)
            dh_tab.add_(torch.matmul(c.transpose(2, 3), gam))  # (E, K, T, M)
        # ---- activation backward (h' depends only on the table entry) and ∂L/∂W_k = dy_tabᵀ U
        for a, s0, t in self._act_runs:
            if a != "linear":
                dh_tab[s0:t].mul_(_act_deriv(a, y_tab[s0:t]))
        dy_tab = dh_tab  # (E, K, T, M)
        if self._need_mask:
            dy_tab = dy_tab * mask
        self.W.grad = torch.matmul(dy_tab.transpose(2, 3), embedding.unsqueeze(1))  # (E, K, M, d_in)
        self.VT.grad = gV
        return losses.detach()


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


def _act_deriv(name: str, y: torch.Tensor) -> torch.Tensor:
    """h'(y), with h'(0) = 0 for ReLU and slope 0.05 at y <= 0 for LeakyReLU (as the dense path)."""
    if name == "relu":
        return (y > 0).to(y.dtype)
    if name == "leaky_relu":
        return torch.where(y > 0, torch.ones_like(y), torch.full_like(y, _LEAKY_SLOPE))
    return get_activation(name).deriv(y)


def _loss_and_dz(z: torch.Tensor, loss_fn, loss_grad_fn) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-member losses ``(E,)`` and ``dL/dz`` for ``z (E, 2, N, out)``: closed form or autograd on ``z`` only."""
    if loss_grad_fn is not None:
        return loss_grad_fn(z)
    zl = z.detach().requires_grad_(True)
    with torch.enable_grad():
        losses = loss_fn(zl)  # (E,)
        (dz,) = torch.autograd.grad(losses.sum(), zl)
    return losses, dz
