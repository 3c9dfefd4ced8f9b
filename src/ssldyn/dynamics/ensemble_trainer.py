"""Batched-ensemble SGD for the receptive-field networks of `nonlinearity` Sec. 5 / App. E.2.

Many independent runs (different seeds, widths M = β·P, activations, losses, BN variants,
data sets) are trained as one :class:`~ssldyn.models.rf_net.EnsembleRFNet`: members never
interact (the total loss is the sum of member losses and SGD with momentum and weight decay
is element-wise, with a per-member learning rate), so each member follows the trajectory of
the same run trained alone with the same seed (tested; differences are float round-off of
the padded contractions).

- :func:`plan_ensembles` groups runs into ensembles so that the batched contractions are
  large: runs with close M share one ensemble (padded to the largest M, padded filters stay
  exactly zero), activations, losses and BN variants are mixed freely inside an ensemble.
- :class:`EnsembleSGD` is ``torch.optim.SGD`` (momentum, dampening 0, L2 weight decay added to
  the gradient) with one learning rate per member.
- :func:`train_token_ensemble` trains token-generator runs (:mod:`ssldyn.data.tokens`) and
  records χ̄± (:mod:`ssldyn.probes.chi`) and the loss over training.
- :func:`train_ensemble` is the data-agnostic loop (batches from a callable), for reuse on
  other inputs (e.g. MNIST quadrants).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ssldyn.data.tokens import TokenGenerator, TokenSpec, TokenStream
from ssldyn.dynamics.guards import EnsembleLossGuard, check_finite
from ssldyn.models.rf_net import EnsembleRFNet
from ssldyn.probes.chi import chi_scores

LOSSES = ("infonce", "quadratic")
# Largest activation tensor (E · 2N · K · M_pad elements) of one ensemble: ~4 MB stays cache-resident.
# Measured (1 thread): M = 100 costs 2.6 ms per member-step at E = 2–4 but 4.7 ms at E = 24, while
# small M needs large E to amortise the per-op overhead (M = 3: 0.36 ms at E = 24, 0.75 at E = 2).
MAX_ELEMS = 1_100_000
# Token-space path (no (N, K, M) tensors): twice the cap, measured on the Sec. 5 grid (E = 24 at M = 100).
TOKEN_MAX_ELEMS = 2_200_000
# Per-member fixed cost of a token-path step in units of one filter (loss, scatter of ∂L/∂z, data):
# measured ~0.5 ms + 0.007 ms·M per member-step on one core, i.e. ~70 filters.
TOKEN_MEMBER_OVERHEAD = 70
INIT_SEED_OFFSET = 7919  # network init seed = run seed + offset (data use the run seed itself)


@dataclass(frozen=True)
class TokenRun:
    """One training run of Sec. 5 (defaults: the reference implementation's documented command).

    ``filters`` M = β·P. ``seed`` seeds the data set (generators, allowed sets, batches) and,
    offset by :data:`INIT_SEED_OFFSET`, the network initialisation.
    """

    spec: TokenSpec = field(default_factory=TokenSpec)
    beta: int = 5
    activation: str = "relu"
    loss: str = "infonce"
    bn: str = "mean_only"
    seed: int = 0
    lr: float = 0.02
    momentum: float = 0.9
    weight_decay: float = 5e-3
    batch: int = 128
    temperature: float = 0.1
    out_dim: int = 50

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"TokenRun.loss {self.loss!r}: allowed values are {', '.join(LOSSES)}")
        if self.beta < 1:
            raise ValueError(f"TokenRun.beta={self.beta}: must be >= 1")

    @property
    def filters(self) -> int:
        return self.beta * self.spec.P

    def key(self) -> str:
        """Stable hash of the run's settings (for caches)."""
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


class EnsembleSGD:
    """SGD with momentum and weight decay, element-wise, one learning rate per member.

    Update (as ``torch.optim.SGD``, dampening 0, nesterov off):
    ``b ← μ b + (∇ + λ p)`` (``b = ∇ + λ p`` at the first step), ``p ← p − lr_e b``.
    When every member has the same learning rate, the step is PyTorch's fused SGD kernel
    (``torch._fused_sgd_``, what ``torch.optim.SGD(fused=True)`` runs: one pass instead of four;
    it agrees with the unfused update to float round-off).
    """

    def __init__(
        self,
        params: Sequence[torch.nn.Parameter],
        lr: torch.Tensor | float,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = list(params)
        self.lr = lr
        self.momentum, self.weight_decay = momentum, weight_decay
        self.bufs: list[torch.Tensor | None] = [None] * len(self.params)
        if isinstance(lr, torch.Tensor):
            flat = lr.reshape(-1)
            self._uniform_lr = float(flat[0]) if bool((flat == flat[0]).all()) else None
        else:
            self._uniform_lr = float(lr)
        fusable = all(p.is_contiguous() and p.device.type in ("cpu", "cuda") for p in self.params)
        self._fused = self._uniform_lr is not None and fusable and hasattr(torch, "_fused_sgd_")
        self._first = True

    @torch.no_grad()
    def step(self) -> None:
        if self._fused:
            if self._first:
                self.bufs = [torch.empty_like(p) for p in self.params]
            torch._fused_sgd_(
                [p.data for p in self.params],
                [p.grad for p in self.params],
                self.bufs,
                weight_decay=self.weight_decay,
                momentum=self.momentum,
                lr=self._uniform_lr,
                dampening=0.0,
                nesterov=False,
                maximize=False,
                is_first_step=self._first,
            )
            self._first = False
            return
        for i, p in enumerate(self.params):
            d = p.grad
            if self.weight_decay:
                d = d.add(p, alpha=self.weight_decay)
            if self.bufs[i] is None:
                self.bufs[i] = d.clone()
            else:
                self.bufs[i].mul_(self.momentum).add_(d)
            lr = self.lr
            if isinstance(lr, torch.Tensor):
                p.addcmul_(self.bufs[i], lr.view(-1, *([1] * (p.dim() - 1))), value=-1.0)
            else:
                p.add_(self.bufs[i], alpha=-lr)


def plan_ensembles(
    filters: Sequence[int],
    overhead: int = 8,
    slack: float = 0.25,
    max_elems: int = MAX_ELEMS,
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


@dataclass
class RunTrace:
    """What one run records: χ̄± and the loss at the logged steps, final filters."""

    steps: np.ndarray
    chi_plus: np.ndarray
    chi_minus: np.ndarray
    loss: np.ndarray
    filters: np.ndarray | None = None  # (K, M, d) final filters
    relevant: np.ndarray | None = None  # (K, n_tokens)
    allowed: np.ndarray | None = None  # (K, P)


def train_ensemble(
    net: EnsembleRFNet,
    next_batch: Callable[[int], dict],
    loss_fn: Callable,
    opt: EnsembleSGD,
    steps: int,
    log_every: int,
    probe: Callable[[int, torch.Tensor | None], None],
    on_step: Callable[[], None] | None = None,
    loss_grad_fn: Callable | None = None,
    guard: EnsembleLossGuard | None = None,
) -> None:
    """The training loop: ``steps`` SGD steps; ``probe(step, losses)`` at step 0 and every ``log_every``.

    ``next_batch(t)`` returns the keyword inputs of :meth:`EnsembleRFNet.loss_and_grad`
    (``x=...`` or ``tokens=..., embedding=...``). ``probe`` is called before the update of step
    ``t`` (step 0: at initialisation, with that batch's loss) and after the last step.
    Every step's per-member losses go through ``guard`` (:class:`EnsembleLossGuard`, a default
    one if None), checked at each logging step and at the end: a member whose loss became
    NaN/inf stops training with :class:`~ssldyn.dynamics.guards.NonFiniteLossError` (step and
    last finite value), so the run is recorded as failed.
    """
    guard = guard if guard is not None else EnsembleLossGuard()
    losses = None
    for t in range(steps):
        batch = next_batch(t)
        losses = net.loss_and_grad(loss_fn, loss_grad_fn=loss_grad_fn, **batch)
        guard.update(t, losses)
        if t % log_every == 0:
            guard.check()
            probe(t, losses)
        opt.step()
        if on_step is not None:
            on_step()
    guard.check()
    with torch.no_grad():
        probe(steps, losses)


def _loss_fn(losses: Sequence[str], temperature: float) -> Callable[[torch.Tensor], torch.Tensor]:
    from ssldyn.objectives import info_nce, quadratic_contrastive_loss

    runs = []
    for i, name in enumerate(losses):
        if runs and runs[-1][0] == name:
            runs[-1][2] = i + 1
        else:
            runs.append([name, i, i + 1])

    def fn(z: torch.Tensor) -> torch.Tensor:  # z: (E, 2, N, out)
        parts = []
        for name, s, t in runs:
            z1, z2 = z[s:t, 0], z[s:t, 1]  # (E', N, out)
            if name == "infonce":
                parts.append(info_nce(z1, z2, temperature, negatives="view1"))
            else:
                parts.append(quadratic_contrastive_loss(z1, z2, temperature))
        return torch.cat(parts)  # (E,)

    return fn


def contrastive_loss_and_grad(
    z: torch.Tensor, kinds: torch.Tensor, temperature: float, eps: float = 1e-12
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-member loss and ``dL/dz`` in closed form for the two losses of Sec. 5 (a fast path).

    The losses are those of :func:`ssldyn.objectives.info_nce` (``negatives="view1"``, cosine
    similarity) and :func:`ssldyn.objectives.quadratic_contrastive_loss` (cosine), which remain
    the definitions; this function only evaluates them and their gradient without autograd's
    per-op overhead (it is tested to agree with autograd through those functions). With
    ``ẑ = z/‖z‖``, ``S_ij = ẑ1_i·ẑ1_j`` (i ≠ j), ``S_ii = ẑ1_i·ẑ2_i`` and ``G = ∂L/∂S``:
    InfoNCE ``G = (softmax(S/T) − I)/(N T)``; quadratic ``G_ii = −1/(N T)``, ``G_ij = 1/(N² T)``.
    Then ``∂L/∂ẑ1 = (G_o + G_oᵀ) ẑ1 + diag(G) ẑ2``, ``∂L/∂ẑ2 = diag(G) ẑ1`` (G_o: G off the
    diagonal), and ``∂L/∂z = (∂L/∂ẑ − ẑ (ẑ·∂L/∂ẑ))/‖z‖``.

    Args:
        z: ``(E, 2, N, d)`` outputs of the two views (not normalised).
        kinds: ``(E,)`` bool, True for InfoNCE, False for the quadratic loss.
    Returns:
        losses ``(E,)`` and ``dL/dz`` ``(E, 2, N, d)``.
    """
    E, _, N, _ = z.shape
    inv = z.norm(dim=-1, keepdim=True).clamp_min_(eps).reciprocal_()  # (E, 2, N, 1) 1/‖z‖
    zh = z * inv  # (E, 2, N, d)
    z1, z2 = zh[:, 0], zh[:, 1]  # (E, N, d)
    S = torch.bmm(z1, z1.transpose(1, 2))  # (E, N, N)
    pos = (z1 * z2).sum(-1)  # (E, N)
    torch.diagonal(S, dim1=1, dim2=2).copy_(pos)  # S_ii = positive pair
    t = temperature
    losses = torch.empty(E, dtype=z.dtype, device=z.device)
    G = torch.empty_like(S)  # N·T·∂L/∂S (the factor 1/(N T) is applied in the products below)
    kl = kinds.tolist()
    start = 0
    for i in range(1, E + 1):  # contiguous runs of one loss kind
        if i < E and kl[i] == kl[start]:
            continue
        sl = slice(start, i)
        if kl[start]:  # InfoNCE: row-wise cross-entropy of S/T with target i
            if t >= 0.05:  # cosines: (S − 1)/T ∈ [−2/T, 0], so exp needs no max-shift (one pass fewer)
                P = S[sl].sub_(1.0).mul_(1.0 / t).exp_()
                P.mul_(P.sum(-1, keepdim=True).reciprocal_())  # (E', N, N) row softmax
            else:
                P = torch.softmax(S[sl].div_(t), dim=-1)  # (E', N, N)
            losses[sl] = -torch.log(torch.diagonal(P, dim1=1, dim2=2)).mean(-1)
            torch.diagonal(P, dim1=1, dim2=2).sub_(1.0)
            if i - start == E:
                G = P
            else:
                G[sl] = P
        else:  # quadratic: (−Σ S_ii + Σ_{i≠j} S_ij / N) / (N T)
            tot = S[sl].sum((1, 2))
            ps = pos[sl].sum(-1)
            losses[sl] = (-ps + (tot - ps) / N) / (N * t)
            G[sl] = 1.0 / N
            torch.diagonal(G[sl], dim1=1, dim2=2).fill_(-1.0)
        start = i
    c = 1.0 / (N * t)
    gd = torch.diagonal(G, dim1=1, dim2=2).clone().mul_(c)  # (E, N) ∂L/∂S_ii
    torch.diagonal(G, dim1=1, dim2=2).zero_()
    Gs = G + G.transpose(1, 2)  # (E, N, N) G_o + G_oᵀ: one matmul instead of two
    dzh = torch.empty_like(zh)  # (E, 2, N, d) ∂L/∂ẑ
    dzh[:, 0] = torch.baddbmm(gd.unsqueeze(-1) * z2, Gs, z1, alpha=c)  # (E, N, d)
    torch.mul(gd.unsqueeze(-1), z1, out=dzh[:, 1])  # (E, N, d)
    dz = dzh.sub_(zh * (zh * dzh).sum(-1, keepdim=True)).mul_(inv)  # (E, 2, N, d)
    return losses, dz


def train_token_ensemble(
    runs: Sequence[TokenRun],
    steps: int,
    log_every: int = 100,
    keep_filters: bool = False,
    on_step: Callable[[], None] | None = None,
    fused_loss: bool = True,
    device: torch.device | str | None = None,
) -> list[RunTrace]:
    """Train token-generator runs as ONE ensemble; returns one :class:`RunTrace` per run (input order).

    All runs must share K, input dimension, batch, temperature and out_dim; they may differ in
    everything else (data set, ζ, P, β, activation, loss, BN variant, seed, lr, momentum, wd —
    momentum and wd must be equal). ``fused_loss`` evaluates the loss gradient with
    :func:`contrastive_loss_and_grad` (same values as autograd through ``ssldyn.objectives``,
    several times faster); ``False`` uses autograd through the objectives. ``device``: where the
    network trains (token batches are drawn on the CPU, so every device sees the same data).
    A member whose loss becomes NaN/inf raises :class:`~ssldyn.dynamics.guards.NonFiniteLossError`
    naming the run, the step and the last finite loss.
    """
    if not runs:
        return []
    dev = torch.device(device) if device is not None else torch.device("cpu")
    first = runs[0]
    for r in runs:
        if _shared_settings(r) != _shared_settings(first):
            raise ValueError(
                "train_token_ensemble: runs must share K, input dim, batch, temperature, out_dim, "
                "momentum and weight_decay"
            )
    # members sorted by (activation, loss) so both are contiguous slices
    perm = sorted(range(len(runs)), key=lambda i: (runs[i].activation, runs[i].loss))
    rs = [runs[i] for i in perm]
    E = len(rs)
    streams: dict[tuple, TokenStream] = {}
    member_stream = []
    for r in rs:
        key = (r.spec, r.seed, r.batch)
        if key not in streams:
            streams[key] = TokenStream(TokenGenerator(r.spec, r.seed), r.batch)
        member_stream.append(list(streams).index(key))
    stream_list = list(streams.values())
    sidx = torch.tensor(member_stream)
    emb = torch.stack([stream_list[s].gen.embedding for s in member_stream])  # (E, T, d)
    check_finite("token embedding", emb)
    emb = emb.to(dev)
    relevant = torch.stack([stream_list[s].gen.relevant for s in member_stream]).to(dev)  # (E, K, T)
    net = EnsembleRFNet(
        first.spec.K,
        first.spec.dim,
        [r.filters for r in rs],
        out_dim=first.out_dim,
        ensemble=E,
        activation=[r.activation for r in rs],
        bn=[r.bn for r in rs],
        seeds=[r.seed + INIT_SEED_OFFSET for r in rs],
    ).to(dev)
    lr = torch.tensor([r.lr for r in rs], dtype=torch.float32, device=dev)
    opt = EnsembleSGD([net.W, net.VT], lr, momentum=first.momentum, weight_decay=first.weight_decay)
    loss_fn = _loss_fn([r.loss for r in rs], first.temperature)
    kinds = torch.tensor([r.loss == "infonce" for r in rs])
    guard = EnsembleLossGuard(
        [
            f"token run {r.activation}/{r.loss}/bn={r.bn}/beta={r.beta}/P={r.spec.P}/zeta={r.spec.zeta}/seed={r.seed}"
            for r in rs
        ]
    )

    def loss_grad(z: torch.Tensor):
        return contrastive_loss_and_grad(z, kinds, first.temperature)

    absolute = torch.tensor([r.activation == "linear" for r in rs], device=dev)
    log: dict[str, list] = {"step": [], "chi_plus": [], "chi_minus": [], "loss": []}

    def next_batch(t: int) -> dict:
        toks = torch.stack([s.next() for s in stream_list])  # (S, 2, N, K)
        toks = toks[sidx] if len(stream_list) > 1 else toks.expand(E, *toks.shape[1:])  # (E, 2, N, K)
        return {"tokens": toks.to(dev, non_blocking=True), "embedding": emb}

    def probe(t: int, losses: torch.Tensor | None) -> None:
        with torch.no_grad():
            cp, cm = chi_scores(net.W, emb, relevant, absolute=absolute, filter_mask=net.filter_mask)
        log["step"].append(t)
        log["chi_plus"].append(cp.cpu().numpy().copy())
        log["chi_minus"].append(cm.cpu().numpy().copy())
        log["loss"].append(losses.cpu().numpy().copy() if losses is not None else np.full(E, np.nan, np.float32))

    train_ensemble(
        net,
        next_batch,
        None if fused_loss else loss_fn,
        opt,
        steps,
        log_every,
        probe,
        on_step,
        loss_grad_fn=loss_grad if fused_loss else None,
        guard=guard,
    )
    steps_arr = np.asarray(log["step"])
    cp, cm, ls = (np.stack(log[k], 1) for k in ("chi_plus", "chi_minus", "loss"))  # (E, n_log)
    out: list[RunTrace | None] = [None] * E
    for j, i in enumerate(perm):
        r = rs[j]
        tr = RunTrace(steps_arr, cp[j], cm[j], ls[j])
        if keep_filters:
            g = stream_list[member_stream[j]].gen
            tr.filters = net.W.detach()[j, :, : r.filters].cpu().numpy().copy()
            tr.relevant = g.relevant.numpy().copy()
            tr.allowed = g.allowed.numpy().copy()
        out[i] = tr
    return out  # type: ignore[return-value]


def token_ensemble_cost(runs: Sequence[TokenRun]) -> float:
    """Relative cost of one step of an ensemble on the token path (for load balancing)."""
    return len(runs) * (max(r.filters for r in runs) + TOKEN_MEMBER_OVERHEAD)


def plan_token_ensembles(
    runs: Sequence[TokenRun], max_elems: int | None = None, overhead: int = 8, slack: float = 0.25
) -> list[list[int]]:
    """:func:`plan_ensembles` for token runs sharing K, n_tokens and out_dim (indices into ``runs``).

    The token-space path (:meth:`~ssldyn.models.rf_net.EnsembleRFNet.loss_and_grad` with tokens)
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
    return (r.spec.K, r.spec.dim, r.batch, r.temperature, r.out_dim, r.momentum, r.weight_decay)


def group_token_runs(runs: Sequence[TokenRun], max_elems: int | None = None) -> list[list[int]]:
    """Ensembles for any set of runs (indices into ``runs``): split by the settings members must
    share, then planned by :func:`plan_token_ensembles`."""
    shared: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        shared.setdefault(_shared_settings(r), []).append(i)
    return [
        [idx[g] for g in grp]
        for idx in shared.values()
        for grp in plan_token_ensembles([runs[i] for i in idx], max_elems=max_elems)
    ]


def train_token_runs(
    runs: Sequence[TokenRun],
    steps: int,
    log_every: int = 100,
    keep_filters: bool = False,
    max_elems: int | None = None,
    progress: Callable[[int], None] | None = None,
    device: torch.device | str | None = None,
) -> list[RunTrace]:
    """Train any set of runs: grouped by :func:`plan_token_ensembles` (and by the shared settings), in input order.

    ``progress(n)`` is called after each ensemble with the number of runs it finished; ``device``
    as in :func:`train_token_ensemble`.
    """
    out: list[RunTrace | None] = [None] * len(runs)
    for members in group_token_runs(runs, max_elems):
        traces = train_token_ensemble([runs[i] for i in members], steps, log_every, keep_filters, device=device)
        for i, tr in zip(members, traces):
            out[i] = tr
        if progress is not None:
            progress(len(members))
    return out  # type: ignore[return-value]
