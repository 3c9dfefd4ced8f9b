"""Batched-ensemble SGD for the receptive-field networks of `nonlinearity` Sec. 5 / App. E.2.

Many independent runs (different seeds, widths M = β·P, activations, losses, BN variants,
data sets) are trained as one :class:`~ssldyn.models.rf_net.EnsembleRFNet`: members never
interact (the total loss is the sum of member losses and SGD with momentum and weight decay
is element-wise, with a per-member learning rate), so each member follows the trajectory of
the same run trained alone with the same seed (tested; differences are float round-off of
the padded contractions).

- :func:`group_token_runs` / :func:`plan_ensembles` group runs into ensembles: on the CPU runs
  with close M share one ensemble (padded to the largest M, padded filters stay exactly zero)
  of a cache-sized total; on a GPU all runs that can share an ensemble form one (seeds and
  conditions as one ensemble on the device). Activations, losses and BN variants mix freely.
- :class:`EnsembleSGD` is ``torch.optim.SGD`` (momentum, dampening 0, L2 weight decay added to
  the gradient) with one learning rate per member.
- :class:`ContrastiveLosses` evaluates the two losses of Sec. 5 per member (InfoNCE or the
  quadratic loss), with a closed-form backward.
- :func:`train_token_ensemble` trains token-generator runs (:mod:`ssldyn.data.tokens`) and
  records χ̄± (:mod:`ssldyn.probes.chi`) and the loss; :func:`train_ensemble` is the
  data-agnostic loop (batches from a callable).

Both follow the dynamics contract: keyword-only ``steps``, ``probes``, ``every``, ``track``,
``guard``, and a :class:`~ssldyn.dynamics.trajectory.FlowResult` back. The training loop has no
host-device synchronisation between logging steps (token batches are drawn in chunks and
indexed on the device, the loss guard checks in blocks).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

import torch

from ssldyn.checks import choice, integer, nonnegative, positive, unit_interval
from ssldyn.data.tokens import TokenGenerator, TokenSpec, TokenStream
from ssldyn.dynamics.engine import resolve_device, run
from ssldyn.dynamics.guards import LossGuard, check_finite
from ssldyn.dynamics.trajectory import FlowResult, Trajectory
from ssldyn.models.activations import ACTIVATION_NAMES, ActivationName
from ssldyn.models.rf_net import BN_MODES, BN_STATS, BNMode, BNStats, EnsembleRFNet
from ssldyn.objectives._common import check_pair_masks
from ssldyn.probes.chi import chi_scores

__all__ = [
    "LOSSES",
    "TokenLoss",
    "TokenNegatives",
    "TOKEN_NEGATIVES",
    "TokenRun",
    "EnsembleSGD",
    "ContrastiveLosses",
    "contrastive_loss_and_grad",
    "plan_ensembles",
    "plan_token_ensembles",
    "group_token_runs",
    "token_ensemble_cost",
    "sign_symmetric",
    "token_probes",
    "train_ensemble",
    "train_token_ensemble",
]

#: the contrastive losses of the token experiments (InfoNCE, Sec. 5; the quadratic loss, App. E.2)
TokenLoss = Literal["infonce", "quadratic"]
LOSSES: tuple[str, ...] = get_args(TokenLoss)
#: the negatives of an anchor: every other sample of the batch (the reference implementation), or only the samples
#: of other generators (`nonlinearity` Fig. 3's caption: "inputs from the same generator are treated as positive
#: pairs, otherwise negative pairs"): same-generator samples left out of the anchor's negatives
#: ("other-generators"), or also made its positives ("generator-positives": a multi-positive reading of the caption,
#: the supervised contrastive loss's "out" form — ours: the paper's eq. 1 has one positive per anchor, and Sec. 5's
#: augmentation, "another sequence from the same generator", may be all the caption describes)
TokenNegatives = Literal["batch", "other-generators", "generator-positives"]
TOKEN_NEGATIVES: tuple[str, ...] = get_args(TokenNegatives)
#: the pair masks a batch may carry for the loss (:class:`ContrastiveLosses`), not for the network
PAIR_MASKS = ("exclude", "positives")
#: activations h with h(−x) = ±h(x) + c: flipping a filter's sign w → −w gives the same network up to the
#: top layer's sign (odd h: linear, tanh), nothing (even h: x²) or a constant the BN mean removes (sigmoid)
SIGN_SYMMETRIC = ("linear", "tanh", "quadratic", "sigmoid")


def sign_symmetric(activation: str, bn: str) -> bool:
    """Whether a filter's sign is not identifiable, so χ± uses ``|cos|`` (`nonlinearity` eq. 16, Fig. 4/9).

    Eq. 16 prints the signed cosine; we use it for ReLU and LeakyReLU (a flipped filter is a different
    network). For an activation with ``h(−x) = ±h(x) + c`` the trained filter converges to ``+u`` or ``−u``
    with equal probability, and the signed score of a single filter would average ≈ 0 where Fig. 4/9 (a)
    shows the linear network at P = 1, β = 1 "works well": so linear, tanh and x² use ``|cos|``, and
    sigmoid (``σ(−x) = 1 − σ(x)``) too when BN subtracts the mean (every variant but ``bn = "off"``).
    """
    return activation in SIGN_SYMMETRIC and (activation != "sigmoid" or bn != "off")


# Largest activation tensor (E · 2N · K · M_pad elements) of one ensemble: ~4 MB stays cache-resident.
# Measured (1 thread): M = 100 costs 2.6 ms per member-step at E = 2–4 but 4.7 ms at E = 24, while
# small M needs large E to amortise the per-op overhead (M = 3: 0.36 ms at E = 24, 0.75 at E = 2).
MAX_ELEMS = 1_100_000
# Token-space path (no (N, K, M) tensors): twice the cap, measured on the Sec. 5 grid (E = 24 at M = 100).
TOKEN_MAX_ELEMS = 2_200_000
# Per-member fixed cost of a token-path step in units of one filter (loss, scatter of ∂L/∂z, data):
# measured ~0.5 ms + 0.007 ms·M per member-step on one core, i.e. ~70 filters.
TOKEN_MEMBER_OVERHEAD = 70
# network init seed = run seed + offset (data use the run seed itself). Additive, unlike the experiments' streams
# (ssldyn.streams.derive_seed): kept, as it meets another run's data stream only 7919 seeds away (README "Seeds")
INIT_SEED_OFFSET = 7919

Probe = Callable[[EnsembleRFNet], "torch.Tensor | float"]


@dataclass(frozen=True)
class TokenRun:
    """One training run of Sec. 5 (defaults: the reference implementation's documented command).

    ``filters`` M = β·P. ``seed`` seeds the data set (generators, allowed sets, batches) and,
    offset by :data:`INIT_SEED_OFFSET`, the network initialisation.
    """

    spec: TokenSpec = field(default_factory=TokenSpec)
    beta: int = 5
    activation: ActivationName = "relu"
    loss: TokenLoss = "infonce"
    bn: BNMode = "mean_only"
    bn_stats: BNStats = "view"
    seed: int = 0
    lr: float = 0.02
    momentum: float = 0.9
    weight_decay: float = 5e-3
    batch: int = 128
    temperature: float = 0.1
    out_dim: int = 50
    negatives: TokenNegatives = "batch"

    def __post_init__(self) -> None:
        choice(self.activation, "activation", ACTIVATION_NAMES, where="TokenRun")
        choice(self.loss, "loss", LOSSES, where="TokenRun")
        choice(self.negatives, "negatives", TOKEN_NEGATIVES, where="TokenRun")
        choice(self.bn, "bn", BN_MODES, where="TokenRun")
        choice(self.bn_stats, "bn_stats", BN_STATS, where="TokenRun")
        integer(self.beta, "beta", where="TokenRun")  # M = β·P filters
        positive(self.lr, "lr", where="TokenRun")
        positive(self.temperature, "temperature", where="TokenRun")
        nonnegative(self.weight_decay, "weight_decay", where="TokenRun")
        unit_interval(self.momentum, "momentum", where="TokenRun", include_one=False)
        integer(self.batch, "batch", where="TokenRun", minimum=2)
        integer(self.out_dim, "out_dim", where="TokenRun")

    @property
    def filters(self) -> int:
        return self.beta * self.spec.P

    @property
    def label(self) -> str:
        """Short description (guards and trajectories name runs by it)."""
        s = self.spec
        bn = self.bn if self.bn_stats == "view" else f"{self.bn}({self.bn_stats})"
        loss = self.loss if self.negatives == "batch" else f"{self.loss}({self.negatives})"
        return f"token run {self.activation}/{loss}/bn={bn}/beta={self.beta}/P={s.P}/zeta={s.zeta}/seed={self.seed}"

    def describe(self) -> dict:
        """All settings as plain JSON values (for trajectory metadata and cache keys)."""
        return asdict(self)

    def key(self) -> str:
        """Stable hash of the run's settings."""
        return hashlib.sha1(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()[:16]


class EnsembleSGD:
    """SGD with momentum and weight decay, element-wise, one learning rate per member.

    Update (as ``torch.optim.SGD``, dampening 0, nesterov off):
    ``b ← μ b + (∇ + λ p)`` (``b = ∇ + λ p`` at the first step), ``p ← p − lr_e b``.
    When every member has the same learning rate, the step is PyTorch's fused SGD kernel
    (``torch._fused_sgd_``, what ``torch.optim.SGD(fused=True)`` runs: one pass instead of four;
    it agrees with the unfused update to float round-off). Gradients accumulate in ``.grad``
    as in PyTorch: call :meth:`zero_grad` before each backward.

    Args:
        params: parameters with a leading ensemble axis E.
        lr: one learning rate, or one per member (a sequence or an ``(E,)`` tensor; its length must be
            the leading axis E of every parameter).
        momentum: ``μ`` (0: plain SGD, no buffers); weight_decay: ``λ``.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float | Sequence[float] | torch.Tensor,
        *,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("EnsembleSGD: no parameters were given")
        self.momentum, self.weight_decay = momentum, weight_decay
        self.bufs: list[torch.Tensor | None] = [None] * len(self.params)  # momentum buffers (unfused)
        self._fused_bufs: list[torch.Tensor] = []
        if isinstance(lr, (int, float)):
            host = [float(lr)]
        else:
            host = [float(v) for v in (lr.detach().cpu().reshape(-1).tolist() if isinstance(lr, torch.Tensor) else lr)]
        if not host or not all(math.isfinite(v) and v >= 0 for v in host):
            raise ValueError(f"EnsembleSGD: lr must be finite and >= 0, got {host[:8]}")
        for i, p in enumerate(self.params):  # one rate per member: the leading axis E of every parameter
            if len(host) > 1 and (p.dim() == 0 or p.shape[0] != len(host)):
                members = "no ensemble axis" if p.dim() == 0 else f"{p.shape[0]} members"
                raise ValueError(f"EnsembleSGD: lr has {len(host)} values (one per member) but parameter {i} of "
                                 f"shape {tuple(p.shape)} has {members}; give one lr or one per member")  # fmt: skip
        self._uniform_lr = host[0] if all(v == host[0] for v in host) else None
        p0 = self.params[0]
        self.lr = torch.tensor(host, dtype=p0.dtype, device=p0.device) if len(host) > 1 else host[0]
        fusable = all(p.is_contiguous() and p.device.type in ("cpu", "cuda") for p in self.params)
        self._fused = self._uniform_lr is not None and fusable and hasattr(torch, "_fused_sgd_")
        self._first = True

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        grads: list[torch.Tensor] = []
        for p in self.params:
            if p.grad is None:
                raise ValueError("EnsembleSGD.step: a parameter has no gradient (call backward() first)")
            grads.append(p.grad)
        if self._fused and self._uniform_lr is not None:
            # momentum 0: no buffers (the kernel requires an empty list then, as torch.optim.SGD passes it)
            if self._first and self.momentum:
                self._fused_bufs = [torch.empty_like(p) for p in self.params]
            torch._fused_sgd_(  # type: ignore[attr-defined]
                [p.data for p in self.params],
                grads,
                self._fused_bufs,
                weight_decay=self.weight_decay,
                momentum=self.momentum,
                lr=self._uniform_lr,
                dampening=0.0,
                nesterov=False,
                maximize=False,
                is_first_step=self._first and bool(self.momentum),
            )
            self._first = False
            return
        for i, (p, d) in enumerate(zip(self.params, grads)):
            if self.weight_decay:
                d = d.add(p, alpha=self.weight_decay)
            buf = self.bufs[i]
            if buf is None:
                buf = self.bufs[i] = d.clone()
            else:
                buf.mul_(self.momentum).add_(d)
            lr = self.lr
            if isinstance(lr, torch.Tensor):
                p.addcmul_(buf, lr.view(-1, *([1] * (p.dim() - 1))), value=-1.0)
            else:
                p.add_(buf, alpha=-lr)


def plan_ensembles(
    filters: Sequence[int],
    *,
    overhead: int = 8,
    slack: float = 0.25,
    max_elems: float = MAX_ELEMS,
    rows: int = 256,
    K: int = 10,
) -> list[list[int]]:
    """Group runs (given their M) into ensembles; returns lists of run indices.

    Runs are sorted by M; the next run joins the current group while the padded cost
    ``(M_pad + overhead)·n`` stays within ``(1 + slack)`` of the unpadded ``Σ (M + overhead)``
    (``overhead`` ~ the per-member fixed cost in units of one filter) and the activation
    tensor ``n · rows · K · M_pad`` stays below ``max_elems`` elements.
    """
    order = sorted(range(len(filters)), key=lambda i: filters[i])
    groups: list[list[int]] = []
    cur: list[int] = []
    cost = 0.0
    for i in order:
        m = filters[i]
        if cur:
            n = len(cur) + 1
            padded = (m + overhead) * n  # m is the new max (sorted)
            if padded <= (1 + slack) * (cost + m + overhead) and n * rows * K * m <= max_elems:
                cur.append(i)
                cost += m + overhead
                continue
            groups.append(cur)
        cur, cost = [i], float(m + overhead)
    if cur:
        groups.append(cur)
    return groups


# ---------------------------------------------------------------------- the losses of Sec. 5
def _kind_runs(kinds: Sequence[bool]) -> list[tuple[bool, int, int]]:
    """Contiguous runs ``(is_infonce, start, stop)`` (host-side: no device sync)."""
    out: list[tuple[bool, int, int]] = []
    for i, k in enumerate(kinds):
        if out and out[-1][0] == bool(k):
            out[-1] = (out[-1][0], out[-1][1], i + 1)
        else:
            out.append((bool(k), i, i + 1))
    return out


def contrastive_loss_and_grad(
    z: torch.Tensor,
    kinds: Sequence[bool] | torch.Tensor,
    temperature: float,
    *,
    eps: float = 1e-12,
    exclude: torch.Tensor | None = None,
    positives: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-member loss and ``dL/dz`` in closed form for the two losses of Sec. 5 (a fast path).

    The losses are those of :func:`ssldyn.objectives.info_nce` (``negatives="view1"``, cosine
    similarity) and :func:`ssldyn.objectives.quadratic_contrastive_loss` (cosine), which remain
    the definitions; this function only evaluates them and their gradient without autograd's
    per-op overhead (it is tested to agree with autograd through those functions). With
    ``ẑ = z/‖z‖``, ``S_ij = ẑ1_i·ẑ1_j`` (i ≠ j), ``S_ii = ẑ1_i·ẑ2_i`` and ``G = ∂L/∂S``:
    InfoNCE ``G = (softmax(S/T) − I)/(N T)``; quadratic ``G_ii = −1/(N T)``, ``G_ij = 1/(N² T)``.
    Then ``∂L/∂ẑ1 = (G_o + G_oᵀ) ẑ1 + diag(G) ẑ2``, ``∂L/∂ẑ2 = diag(G) ẑ1`` (G_o: G off the
    diagonal), and ``∂L/∂z = (∂L/∂ẑ − ẑ (ẑ·∂L/∂ẑ))/‖z‖``. With ``exclude`` the left-out pairs
    ``(i, j)`` leave the softmax (InfoNCE) or the negative sum (quadratic), so ``G_ij = 0`` there.
    With ``positives`` row i's target spreads over ``P_i = {i} ∪ {j: positives_ij}``: InfoNCE
    ``G = (softmax(S/T) − Y)/(N T)`` with ``Y_ij = [j ∈ P_i]/|P_i|``; quadratic ``G_ij = −1/(|P_i| N T)``
    on ``P_i`` (those pairs leave the negative sum).

    Args:
        z: ``(E, 2, N, d)`` outputs of the two views (not normalised).
        kinds: ``(E,)`` True for InfoNCE, False for the quadratic loss (host values: a list, or
            a tensor read once).
        exclude: ``(E, N, N)`` bool, True where ``z1_j`` is not a negative of anchor ``i`` (the
            objectives' ``exclude``; False on the diagonal), or None.
        positives: ``(E, N, N)`` bool, True where ``z1_j`` is a positive of anchor ``i`` besides
            ``z2_i`` (the objectives' ``positives``; False on the diagonal, disjoint from ``exclude``),
            or None.
    Returns:
        losses ``(E,)`` and ``dL/dz`` ``(E, 2, N, d)``.
    """
    if isinstance(kinds, torch.Tensor):
        kinds = kinds.tolist()
    _check_pairs(z, len(kinds), "contrastive_loss_and_grad", "kinds")
    _check_masks(z, exclude, positives, "contrastive_loss_and_grad")
    return _closed_form(z, _kind_runs(kinds), temperature, eps, exclude, positives)


def _check_pairs(z: torch.Tensor, E: int, where: str, what: str) -> None:
    """``z`` must be ``(E, 2, N, d)``: one member per given loss (the others would get no loss, or uninitialised
    memory in the closed form)."""
    if not isinstance(z, torch.Tensor) or z.dim() != 4 or z.shape[1] != 2:
        got = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
        raise ValueError(f"{where}: z must be (E, 2, N, d) (two views per member), got {got}")
    if z.shape[0] != E:
        raise ValueError(f"{where}: z has E={z.shape[0]} members but {E} {what} were given (one per member)")


def _check_masks(z: torch.Tensor, exclude: torch.Tensor | None, positives: torch.Tensor | None, where: str) -> None:
    """``exclude`` and ``positives`` must each be None or an ``(E, N, N)`` bool mask of ``z (E, 2, N, d)``'s view-1
    pairs, False on the diagonal (a positive pair left out would make the InfoNCE loss infinite), and disjoint. The
    values are read only for masks in host memory: on a GPU reading them would synchronise every training step."""
    E, _, N, _ = z.shape
    for name, mask in (("exclude", exclude), ("positives", positives)):
        if mask is None:
            continue
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (E, N, N):
            got = f"{tuple(mask.shape)} {mask.dtype}" if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ValueError(f"{where}: {name} must be a bool tensor (E, N, N) = {(E, N, N)}, got {got}")
        if mask.device != z.device:
            raise ValueError(f"{where}: {name} must be on z's device ({z.device}), got {mask.device}")
    if all(m is None or m.device.type == "cpu" for m in (exclude, positives)):
        check_pair_masks(where, exclude, positives, z[:, 0])  # the objectives' checks


def _closed_form(
    z: torch.Tensor,
    runs: Sequence[tuple[bool, int, int]],
    t: float,
    eps: float,
    exclude: torch.Tensor | None = None,
    positives: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    E, _, N, _ = z.shape
    # (E, N, N) the positives P_i of each anchor (its other view on the diagonal), or None: the other view only
    targets = None if positives is None else positives | torch.eye(N, dtype=torch.bool, device=z.device)
    inv = z.norm(dim=-1, keepdim=True).clamp_min_(eps).reciprocal_()  # (E, 2, N, 1) 1/‖z‖
    zh = z * inv  # (E, 2, N, d)
    z1, z2 = zh[:, 0], zh[:, 1]  # (E, N, d)
    S = torch.bmm(z1, z1.transpose(1, 2))  # (E, N, N)
    pos = (z1 * z2).sum(-1)  # (E, N)
    torch.diagonal(S, dim1=1, dim2=2).copy_(pos)  # S_ii = positive pair
    losses = torch.empty(E, dtype=z.dtype, device=z.device)
    G = torch.empty_like(S)  # N·T·∂L/∂S (the factor 1/(N T) is applied in the products below)
    for infonce, start, stop in runs:
        sl = slice(start, stop)
        if infonce:  # row-wise cross-entropy of S/T with target i (or spread over P_i: Y / |P_i|)
            Y = None if targets is None else targets[sl]  # (E', N, N)
            if t >= 0.05:  # cosines: (S − 1)/T ∈ [−2/T, 0], so exp needs no max-shift (one pass fewer)
                L = S[sl].sub_(1.0).mul_(1.0 / t)  # (E', N, N) the logits, shifted by their largest possible value
                ym = None if Y is None else _row_mean(L, Y)  # (E', N, 1) Σ_{p∈P_i} L_ip/|P_i|
                P = L.exp_()
                if exclude is not None:
                    P.masked_fill_(exclude[sl], 0.0)  # left-out pairs: out of the softmax
                rs = P.sum(-1, keepdim=True)  # (E', N, 1)
                lse = None if Y is None else rs.log()  # (E', N, 1) log Σ_j e^{L_ij}
                P.mul_(rs.reciprocal_())  # (E', N, N) row softmax
            else:
                logits = S[sl].div_(t) if exclude is None else S[sl].div_(t).masked_fill_(exclude[sl], -math.inf)
                ym = None if Y is None else _row_mean(logits, Y)  # (E', N, 1)
                lse = None if Y is None else torch.logsumexp(logits, dim=-1, keepdim=True)  # (E', N, 1)
                P = torch.softmax(logits, dim=-1)  # (E', N, N)
            if Y is None:
                losses[sl] = -torch.log(torch.diagonal(P, dim1=1, dim2=2)).mean(-1)
                torch.diagonal(P, dim1=1, dim2=2).sub_(1.0)
            else:  # ℓ_i = log Σ_j e^{L_ij} − Σ_{p∈P_i} L_ip/|P_i| from the logits (no far positive underflows)
                assert lse is not None and ym is not None
                losses[sl] = (lse - ym)[..., 0].mean(-1)
                P.sub_(Y.to(P.dtype) / Y.sum(-1, keepdim=True))  # softmax − Y/|P_i|
            if stop - start == E:
                G = P
            else:
                G[sl] = P
        else:  # quadratic: (−Σ S_ii + Σ_{i≠j} S_ij / N) / (N T), the sum over the negative pairs
            out = exclude if positives is None else positives if exclude is None else exclude | positives
            tot = (S[sl] if out is None else S[sl].masked_fill(out[sl], 0.0)).sum((1, 2))
            ps = pos[sl].sum(-1)
            G[sl] = 1.0 / N
            if out is not None:
                G[sl].masked_fill_(out[sl], 0.0)
            if targets is None:
                losses[sl] = (-ps + (tot - ps) / N) / (N * t)
                torch.diagonal(G[sl], dim1=1, dim2=2).fill_(-1.0)
            else:  # the positive term of row i: the mean of S over P_i = {i} ∪ positives_i
                Y = targets[sl]  # (E', N, N)
                pm = _row_mean(S[sl], Y)[..., 0].sum(-1)  # (E',) Σ_i mean_{p∈P_i} S_ip
                losses[sl] = (-pm + (tot - ps) / N) / (N * t)
                G[sl] = torch.where(Y, -1.0 / Y.sum(-1, keepdim=True).to(S.dtype), G[sl])  # −1/|P_i| on P_i
    c = 1.0 / (N * t)
    gd = torch.diagonal(G, dim1=1, dim2=2).clone().mul_(c)  # (E, N) ∂L/∂S_ii
    torch.diagonal(G, dim1=1, dim2=2).zero_()
    Gs = G + G.transpose(1, 2)  # (E, N, N) G_o + G_oᵀ: one matmul instead of two
    dzh = torch.empty_like(zh)  # (E, 2, N, d) ∂L/∂ẑ
    dzh[:, 0] = torch.baddbmm(gd.unsqueeze(-1) * z2, Gs, z1, alpha=c)  # (E, N, d)
    dzh[:, 1] = gd.unsqueeze(-1) * z1  # (E, N, d)
    dz = dzh.sub_(zh * (zh * dzh).sum(-1, keepdim=True)).mul_(inv)  # (E, 2, N, d)
    return losses, dz


def _row_mean(logits: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """``(E', N, 1)``: the mean of ``logits (E', N, N)`` over each row's positives ``Y (E', N, N)``."""
    return torch.where(Y, logits, 0.0).sum(-1, keepdim=True) / Y.sum(-1, keepdim=True)


class _ClosedFormLoss(torch.autograd.Function):
    """Per-member losses whose backward is the closed-form ``dL/dz`` scaled by the upstream gradient."""

    @staticmethod
    def forward(ctx, z, runs, temperature, eps, exclude, positives):
        losses, dz = _closed_form(z.detach(), runs, temperature, eps, exclude, positives)
        ctx.save_for_backward(dz)
        return losses

    @staticmethod
    def backward(ctx, dlosses):  # pyright: ignore[reportIncompatibleMethodOverride] (torch stub: *grad_outputs)
        (dz,) = ctx.saved_tensors
        return dz * dlosses.view(-1, 1, 1, 1), None, None, None, None, None


class ContrastiveLosses:
    """The losses of Sec. 5 per member: ``z (E, 2, N, out) -> (E,)``, differentiable in z.

    Member e uses ``losses[e]`` (``"infonce"``: :func:`ssldyn.objectives.info_nce` with view-1
    negatives; ``"quadratic"``: :func:`ssldyn.objectives.quadratic_contrastive_loss`), cosine
    similarity, temperature T. ``closed_form=True`` evaluates them with
    :func:`contrastive_loss_and_grad` (the same values, several times faster); ``False`` uses
    autograd through the objectives. Members with one loss should be contiguous (fewer slices).
    ``loss(z, exclude=X, positives=Y)``: ``X (E, N, N)`` bool leaves pairs out of the negatives, ``Y``
    makes pairs positives besides the other view (the objectives' ``exclude`` / ``positives``;
    same-generator samples, :attr:`TokenRun.negatives`).
    """

    def __init__(self, losses: Sequence[str], temperature: float, *, closed_form: bool = True) -> None:
        for name in losses:
            choice(name, "loss", LOSSES)
        self.names, self.temperature, self.closed_form = list(losses), float(temperature), closed_form
        self._runs = _kind_runs([n == "infonce" for n in self.names])

    def __call__(
        self, z: torch.Tensor, exclude: torch.Tensor | None = None, positives: torch.Tensor | None = None
    ) -> torch.Tensor:
        _check_pairs(z, len(self.names), "ContrastiveLosses", "losses")  # shapes only: no host sync
        _check_masks(z, exclude, positives, "ContrastiveLosses")  # (and the values of masks in host memory)
        if self.closed_form:
            return _ClosedFormLoss.apply(z, self._runs, self.temperature, 1e-12, exclude, positives)
        from ssldyn.objectives import info_nce, quadratic_contrastive_loss

        parts = []
        for infonce, s, t in self._runs:
            z1, z2 = z[s:t, 0], z[s:t, 1]  # (E', N, out)
            x = None if exclude is None else exclude[s:t]  # (E', N, N)
            y = None if positives is None else positives[s:t]  # (E', N, N)
            if infonce:
                parts.append(info_nce(z1, z2, self.temperature, negatives="view1", exclude=x, positives=y))
            else:
                parts.append(quadratic_contrastive_loss(z1, z2, self.temperature, exclude=x, positives=y))
        return torch.cat(parts)  # (E,)


# ---------------------------------------------------------------------- the training loop
def train_ensemble(
    net: EnsembleRFNet,
    loss: Callable[..., torch.Tensor],
    *,
    batches: Callable[[int], Mapping[str, torch.Tensor]],
    opt: EnsembleSGD | torch.optim.Optimizer,
    steps: int,
    probes: Mapping[str, Probe] | None = None,
    every: int | Iterable[int] | None = 100,
    track: Callable[[Iterable[int]], Iterable[int]] | None = None,
    guard: LossGuard | None = None,
    compile: bool | Mapping[str, Any] = False,
    meta: Mapping | None = None,
) -> FlowResult[EnsembleRFNet]:
    """Train ``net`` for ``steps`` SGD steps: ``loss(net.forward_pair(**batches(t))).sum().backward()``.

    Args:
        net: the ensemble (trained in place; it is also the returned state).
        loss: ``z (E, 2, N, out) -> (E,)`` per-member losses (e.g. :class:`ContrastiveLosses`).
        batches: ``t -> `` keyword inputs of :meth:`~ssldyn.models.rf_net.EnsembleRFNet.forward_pair`
            (``x=...`` or ``tokens=..., embedding=...``), on the network's device; an ``exclude``
            entry ``(E, N, N)`` goes to the loss instead (``loss(z, exclude=...)``: pairs that are
            not negatives, :class:`ContrastiveLosses`).
        opt: an optimizer over ``net``'s parameters (:class:`EnsembleSGD` or any ``torch.optim``).
        probes: ``name -> probe(net)`` returning ``(E,)`` (or a float); the flow's observable is
            the network. Logged with the per-member ``loss`` at the ``every`` steps (before that
            step's update, with that step's batch loss) and after the last step when it is one of
            them (with the last batch's loss).
        every: the logged steps, as in :func:`~ssldyn.dynamics.engine.run`: an int ``k >= 1`` gives
            0, k, 2k, … and the last step; an iterable those steps; None the first and the last.
        track: wraps the step iterator (progress bars).
        guard: per-member loss guard (:class:`~ssldyn.dynamics.guards.LossGuard`; default: a lazy one,
            ``LossGuard(labels=..., lazy=True, check_every=None)``, if None). Every
            step's losses go through it on the device; it is checked at logging steps and at the
            end, so a member whose loss became NaN/inf stops training with
            :class:`~ssldyn.dynamics.guards.NonFiniteLossError` (step and last finite value).
        compile: ``True`` (or keyword arguments of ``torch.compile``): the per-step forward and
            loss, with their hand-written backward, run through ``torch.compile`` — mode
            ``"reduce-overhead"`` (CUDA graphs) on CUDA, the default mode on the CPU. Tested equal
            to the eager step.
        meta: stored in ``trajectory.meta``.

    Returns:
        ``FlowResult(state=net, trajectory)``: probes ``loss`` and each of ``probes`` per member.

    No host-device synchronisation happens between logging steps: probe values stay on the
    device until the end, and the guard is read only when logging.
    """
    integer(steps, "steps", where="train_ensemble", minimum=0)
    guard = guard if guard is not None else LossGuard(lazy=True, check_every=None)
    probes = dict(probes or {})

    def step_loss(batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        masks = {k: v for k, v in batch.items() if k in PAIR_MASKS}  # pair masks: for the loss, not the network
        if masks:
            inputs = {k: v for k, v in batch.items() if k not in PAIR_MASKS}
            return loss(net.forward_pair(**inputs), **masks)  # (E,)
        return loss(net.forward_pair(**batch))  # (E,)

    if compile:
        options = dict(compile) if isinstance(compile, Mapping) else {}
        if "mode" not in options and "backend" not in options and net.W.device.type == "cuda":
            options["mode"] = "reduce-overhead"
        step_loss = torch.compile(step_loss, dynamic=False, **options)
    return run(
        net,
        lambda net, t: (net, step_loss(batches(t))),  # (E,)
        steps=steps,
        every=every,
        probes=probes,
        track=track,
        guard=guard,
        optimizer=opt,
        final=False,  # the last record: the trained network with the last step's losses
        trajectory=Trajectory(meta=meta),
    )


# ---------------------------------------------------------------------- token-generator runs
class _TokenBatches:
    """Token batches of every member, drawn a chunk of steps at a time and indexed on the device.

    Members with equal (spec, seed, batch) share a stream; the stream of a seed is the one a
    :class:`~ssldyn.data.tokens.TokenStream` draws (``CHUNK`` steps per draw, on the CPU
    generator), so a member sees exactly the batches of the same run trained alone, on any device.
    One host-to-device copy per chunk; per step only device indexing. ``negatives[e]``
    (:attr:`TokenRun.negatives`): member e leaves the samples of its anchor's generator out of the
    negatives (``"other-generators"``) or makes them positives too (``"generator-positives"``); the
    step's batch then carries the ``(E, N, N)`` masks ``exclude`` / ``positives`` (the draws are the
    same either way).
    """

    def __init__(
        self,
        gens: list[TokenGenerator],
        batch: int,
        member_stream: list[int],
        device: torch.device,
        negatives: Sequence[str] = (),
    ) -> None:
        self.gens, self.batch, self.device = gens, batch, device
        self.E = len(member_stream)
        self.single = len(gens) == 1
        self.member_stream = torch.tensor(member_stream, device=device)  # (E,)
        # mask name -> (E, N, N): the pairs whose same-generator samples each member treats so (its own rows, off
        # the diagonal: the positive pair with the other view stays as it is)
        off_diagonal = ~torch.eye(batch, dtype=torch.bool, device=device)  # (N, N)
        self.same_generator: dict[str, torch.Tensor] = {}
        for name, value in (("exclude", "other-generators"), ("positives", "generator-positives")):
            if value in negatives:
                members = torch.tensor([n == value for n in negatives], dtype=torch.bool, device=device)  # (E,)
                self.same_generator[name] = members[:, None, None] & off_diagonal  # (E, N, N)
        self.buf: torch.Tensor | None = None  # (S, CHUNK, 2, N, K)
        self.gid: torch.Tensor | None = None  # (S, CHUNK, N) generator of each sample, kept when a mask needs it
        self.i = TokenStream.CHUNK

    def _members(self, x: torch.Tensor) -> torch.Tensor:
        """``(S, ...)`` per stream -> ``(E, ...)`` per member."""
        return x.expand(self.E, *x.shape[1:]) if self.single else x.index_select(0, self.member_stream)

    def __call__(self, t: int) -> dict[str, torch.Tensor]:
        if self.buf is None or self.i >= TokenStream.CHUNK:
            draws = [g.sample(TokenStream.CHUNK, self.batch, return_generators=True) for g in self.gens]
            buf = torch.stack([tok for tok, _ in draws])  # (S, CHUNK, 2, N, K)
            if self.device.type == "cuda":
                buf = buf.pin_memory().to(self.device, non_blocking=True)
            self.buf, self.i = buf, 0
            if self.same_generator:
                self.gid = torch.stack([g for _, g in draws]).to(self.device)  # (S, CHUNK, N)
        out = {"tokens": self._members(self.buf[:, self.i])}  # (E, 2, N, K)
        if self.same_generator:
            assert self.gid is not None
            g = self._members(self.gid[:, self.i])  # (E, N)
            same = g[:, :, None] == g[:, None, :]  # (E, N, N): the same generator
            for name, members in self.same_generator.items():
                out[name] = same & members  # (E, N, N)
        self.i += 1
        return out


def token_probes(
    embedding: torch.Tensor, relevant: torch.Tensor, absolute: bool | torch.Tensor = False
) -> dict[str, Probe]:
    """χ̄₊ and χ̄₋ (:func:`~ssldyn.probes.chi.chi_scores`) of a network's filters as probes ``net -> (E,)``.

    ``embedding (E, T, d)``, ``relevant (E, K, T)`` of each member's data set; ``absolute`` (E,):
    use |cos| (the sign-symmetric activations, :func:`sign_symmetric`, whose filters' sign is arbitrary).
    """

    def chi(net: EnsembleRFNet, which: int) -> torch.Tensor:
        return chi_scores(net.W, embedding, relevant, absolute=absolute, filter_mask=net.filter_mask)[which]

    return {"chi_plus": lambda net: chi(net, 0), "chi_minus": lambda net: chi(net, 1)}


def train_token_ensemble(
    runs: Sequence[TokenRun],
    *,
    steps: int,
    probes: Mapping[str, Probe] | None = None,
    every: int | Iterable[int] | None = 100,
    track: Callable[[Iterable[int]], Iterable[int]] | None = None,
    guard: LossGuard | None = None,
    closed_form_loss: bool = True,
    compile: bool | Mapping[str, Any] = False,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> FlowResult[EnsembleRFNet]:
    """Train token-generator runs as ONE ensemble (member e = ``runs[e]``).

    All runs must share K, input dimension, batch, temperature and out_dim, momentum, weight
    decay and ``bn_stats``; they may differ in everything else (data set, ζ, P, β, activation, loss, BN variant,
    seed, lr). Members with one activation / loss should be contiguous (fewer slices per step;
    :func:`group_token_runs` orders them so). Member e is initialised from a generator seeded
    ``runs[e].seed + INIT_SEED_OFFSET`` and sees the batches of its data set (seeded
    ``runs[e].seed``), drawn on the CPU so every device sees the same data.

    Args:
        probes: ``name -> probe(net) -> (E,)``; default :func:`token_probes` (χ̄₊, χ̄₋; |cos| for
            the sign-symmetric activations, :func:`sign_symmetric`). The per-member ``loss`` is always logged.
        every, track, guard, compile: as in :func:`train_ensemble` (a default guard names each
            member by its run).
        closed_form_loss: evaluate the loss gradient in closed form (:class:`ContrastiveLosses`).
        dtype, device: of the network.

    Returns:
        ``FlowResult(state, trajectory)``: the trained :class:`~ssldyn.models.rf_net.EnsembleRFNet`
        and per-member probes ``chi_plus``, ``chi_minus``, ``loss`` with ``member`` = run index;
        ``trajectory.meta["runs"]`` describes the runs (:meth:`TokenRun.describe`).
    """
    if not runs:
        raise ValueError("train_token_ensemble: no runs")
    dev = resolve_device(device, who="train_token_ensemble: ")
    first = runs[0]
    for r in runs:
        if _shared_settings(r) != _shared_settings(first):
            raise ValueError(
                "train_token_ensemble: runs must share K, input dim, batch, temperature, out_dim, "
                "momentum, weight_decay and bn_stats"
            )
    E = len(runs)
    streams: dict[tuple, int] = {}
    gens: list[TokenGenerator] = []
    member_stream = []
    for r in runs:
        key = (r.spec, r.seed)
        if key not in streams:
            streams[key] = len(gens)
            gens.append(TokenGenerator(r.spec, r.seed))
        member_stream.append(streams[key])
    emb = torch.stack([gens[s].embedding for s in member_stream])  # (E, T, d)
    check_finite("token embedding", emb)
    emb = emb.to(device=dev, dtype=dtype)
    relevant = torch.stack([gens[s].relevant for s in member_stream]).to(dev)  # (E, K, T)
    net = EnsembleRFNet(
        first.spec.K,
        first.spec.dim,
        [r.filters for r in runs],
        out_dim=first.out_dim,
        ensemble=E,
        activation=[r.activation for r in runs],
        bn=[r.bn for r in runs],
        bn_stats=first.bn_stats,
        generator=[torch.Generator().manual_seed(r.seed + INIT_SEED_OFFSET) for r in runs],
        dtype=dtype,
        device=dev,
    )
    opt = EnsembleSGD([net.W, net.VT], [r.lr for r in runs], momentum=first.momentum, weight_decay=first.weight_decay)
    loss = ContrastiveLosses([r.loss for r in runs], first.temperature, closed_form=closed_form_loss)
    if probes is None:
        absolute = torch.tensor([sign_symmetric(r.activation, r.bn) for r in runs], device=dev)
        probes = token_probes(emb, relevant, absolute)
    guard = guard if guard is not None else LossGuard(labels=[r.label for r in runs], lazy=True, check_every=None)
    tokens = _TokenBatches(gens, first.batch, member_stream, dev, [r.negatives for r in runs])
    return train_ensemble(
        net,
        loss,
        batches=lambda t: {**tokens(t), "embedding": emb},
        opt=opt,
        steps=steps,
        probes=probes,
        every=every,
        track=track,
        guard=guard,
        compile=compile,
        meta={"runs": [r.describe() for r in runs]},
    )


def token_ensemble_cost(runs: Sequence[TokenRun]) -> float:
    """Relative cost of one step of an ensemble on the token path (for load balancing)."""
    return len(runs) * (max(r.filters for r in runs) + TOKEN_MEMBER_OVERHEAD)


def plan_token_ensembles(
    runs: Sequence[TokenRun], max_elems: float | None = None, *, overhead: int = 8, slack: float = 0.25
) -> list[list[int]]:
    """:func:`plan_ensembles` for token runs sharing K, n_tokens and out_dim (indices into ``runs``).

    The token-space path (:meth:`~ssldyn.models.rf_net.EnsembleRFNet.forward_pair` with tokens)
    never builds ``(N, K, M)`` tensors; its largest per-member tensors are the ``(K, 2T, M)``
    tables and ``Vᵀ`` ``(K·M, out)``, so the size cap counts ``max(2T, out)`` rows per filter.
    """
    if not runs:
        return []
    r0 = runs[0]
    max_elems = TOKEN_MAX_ELEMS if max_elems is None else max_elems
    return plan_ensembles(
        [r.filters for r in runs],
        overhead=overhead,
        slack=slack,
        max_elems=max_elems,
        rows=max(2 * r0.spec.n_tokens, r0.out_dim),
        K=r0.spec.K,
    )


def _shared_settings(r: TokenRun) -> tuple:
    """Settings every member of one ensemble must share."""
    return (r.spec.K, r.spec.dim, r.batch, r.temperature, r.out_dim, r.momentum, r.weight_decay, r.bn_stats)


def group_token_runs(
    runs: Sequence[TokenRun], max_elems: float | None = None, *, device: torch.device | str | None = None
) -> list[list[int]]:
    """Ensembles for any set of runs (indices into ``runs``): split by the settings members must
    share, then planned by :func:`plan_token_ensembles`; members ordered by (activation, loss).

    On the CPU, ensembles are cache-sized (``TOKEN_MAX_ELEMS``, padding ≤ 25 %: measured fastest
    on a 2-core CPU). On a CUDA ``device`` every set of runs that can share an ensemble becomes
    ONE ensemble (seeds and conditions together: a step there is bound by kernel launches, not
    by the padded FLOPs; the whole Sec. 5 grid is ~0.2 GB). ``max_elems`` overrides the cap.
    """
    cuda = device is not None and torch.device(device).type == "cuda"
    shared: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        shared.setdefault(_shared_settings(r), []).append(i)
    groups = []
    for idx in shared.values():
        sub = [runs[i] for i in idx]
        plan = [list(range(len(sub)))] if cuda and max_elems is None else plan_token_ensembles(sub, max_elems=max_elems)
        for grp in plan:
            members = sorted((idx[g] for g in grp), key=lambda i: (runs[i].activation, runs[i].loss))
            groups.append(members)
    return groups
