"""Shared pieces of the `variational` Fig. 5 / Fig. 6 comparisons (network GD vs vanilla GD).

Both dynamics start from the *same* embedding ``z0`` — by default i.i.d. around one random
direction (``init="collapsed"``: the loss far from its minimum, ``z0`` unrelated to the clusters), or
the invariant start of Sec. 3/4.2 (``init="invariant-uniform"``, :func:`uniform_embedding`: the
n-point uniform measure, every cluster's own law uniform too):
the network is wrapped in :class:`ssldyn.models.ShiftedModel` (``f = z0 + g(w) − g(w0)`` on
the training inputs: same NTK, initial embedding ``z0``), its outputs normalised inside the
NT-Xent loss of Prop. 2.1; vanilla GD (eq. 14) moves the embeddings directly, projected to
the sphere.

**Seeds as an ensemble.** Every seed of a run is one member of an ensemble (models with a
leading ``E`` axis, data ``(E, n, D)``, embeddings ``(E, n, d)``): member ``i`` is built from
the generators of seed ``ctx.seeds[i]`` exactly as a one-seed run builds it (each member is
initialised alone and the members are stacked), and members never interact (the loss is a
sum of member losses), so member ``i`` equals the one-seed run with that seed.

**Time.** Gradient descent with step σ after k iterations is at flow time ``t = σ k``
(Prop. 4.1 describes the flow; a step size matters only through O(σ) errors, unless GD is
unstable). Runs are compared at equal ``t``; the step-size table (:func:`step_table`) runs
the same network at several σ to the same t.

**Probes** (silhouette, uniformity, loss) are computed after the run from the recorded
embeddings, batched over records and members (:func:`ssldyn.probes.silhouette_samples_cosine`,
:func:`ssldyn.probes.uniformity_batch`, float64 torch on the CPU copies), not inside the training loop.

Devices: data, model, ``z0`` and both dynamics live on ``ctx.device`` (everything random is
drawn on the CPU and moved); the recorded embeddings come back to the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.legend_handler import HandlerTuple
from torch import Tensor, nn

from ssldyn.data.clustered import ClusteredData
from ssldyn.data.sphere import circle_points_even, fibonacci_sphere
from ssldyn.dynamics.function_space import project_sphere, vanilla_gradient_descent
from ssldyn.dynamics.weight_space import train_weight_space
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.models.shifted import ShiftedModel
from ssldyn.objectives import latent_measure_nt_xent
from ssldyn.probes.cluster import silhouette_samples_cosine, uniformity_batch, uniformity_reference
from ssldyn.viz.common import PALETTE, figure_to_rgb, new_figure, save_figure, save_gif

DT = torch.float64
INITS = ("collapsed", "invariant-uniform")


# --------------------------------------------------------------------------------------
# members: one seed per ensemble member
# --------------------------------------------------------------------------------------
def random_embedding(
    n: int, d: int, spread: float, g: torch.Generator, device: torch.device | str | None = None
) -> Tensor:
    """``z0_i = normalise(m + spread·N(0, I))`` with one random unit direction m: ``(n, d)``.

    Drawn on the CPU from ``g`` (the same numbers on every device), then moved to ``device``.
    """
    m = project_sphere(torch.randn(1, d, generator=g, dtype=DT))
    return project_sphere(m + spread * torch.randn(n, d, generator=g, dtype=DT)).to(device)


def uniform_embedding(
    labels: Tensor, d: int, g: torch.Generator, jitter: float = 0.0, device: torch.device | str | None = None
) -> Tensor:
    """The invariant start of Sec. 3 / Sec. 4.2: an embedding whose law is uniform and carries no cluster: ``(n, d)``.

    ``n`` evenly spaced points on S¹ (``d = 2``: angles ``φ0 + 2πk/n``, random phase φ0) or ``n``
    Fibonacci points on S² (``d = 3``, a random rotation), the *push-forward is the n-point uniform
    measure* (the uniform optimum of vanilla GD, :func:`uniform_optimum`). The points are dealt to
    the samples round-robin over the clusters (each cluster receives every N-th point, its members
    in a random order), so every cluster's own push-forward is itself evenly spread: the latent
    distribution is the same for every cluster — "no information from the data distribution μ has
    been imbued upon the latent distribution" (Sec. 4.2, after eq. 17). Drawn on the CPU from ``g``.
    """
    lab = torch.as_tensor(labels).long().cpu()
    n = lab.numel()
    if d == 2:
        pts = circle_points_even(n, phase=2 * math.pi * torch.rand((), generator=g, dtype=DT))  # (n, 2)
    elif d == 3:
        q, _ = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=DT))
        pts = fibonacci_sphere(n) @ q.T  # (n, 3)
    else:
        raise ValueError(f"uniform_embedding: d={d}; allowed 2 (S¹) or 3 (S²)")
    # round-robin: the k-th member of every cluster (random order within the cluster) gets consecutive points
    rank = torch.empty(n, dtype=torch.long)
    for q in torch.unique(lab):
        idx = torch.nonzero(lab == q)[:, 0]
        rank[idx[torch.randperm(len(idx), generator=g)]] = torch.arange(len(idx))
    order = torch.argsort(rank * (int(lab.max()) + 1) + lab, stable=True)  # samples in dealing order
    z = torch.empty(n, d, dtype=DT)
    z[order] = pts
    if jitter > 0:  # a perturbation off the stationary point (Thm. 3.2: the exact uniform start does not move)
        z = project_sphere(z + jitter * torch.randn(n, d, generator=g, dtype=DT))
    return z.to(device)


def stack_members(make: Callable[[int, torch.Generator | None], nn.Module], gens: Sequence[torch.Generator]):
    """An ensemble of ``len(gens)`` members, member ``i`` initialised alone by ``make(1, gens[i])``.

    ``make(ensemble, generator)`` builds a model whose parameters all carry the leading
    ensemble axis (:class:`~ssldyn.models.AveragingNet`, :class:`~ssldyn.models.MLP`).
    """
    singles = [make(1, g) for g in gens]
    ens = make(len(gens), None)
    state = {k: torch.cat([m.state_dict()[k] for m in singles], 0) for k in singles[0].state_dict()}
    ens.load_state_dict(state)
    return ens


@dataclass
class Members:
    """The data, labels and initial embeddings of every seed (one ensemble member each).

    Attributes:
        x: ``(E, n, D)`` inputs; labels: ``(n,)`` cluster labels (the same for every seed);
        z0: ``(E, n, d)`` the common initial embedding of both dynamics; data: the seeds' data sets.
    """

    x: Tensor
    labels: Tensor
    z0: Tensor
    data: list[ClusteredData] = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.x.shape[1])

    @property
    def d(self) -> int:
        return int(self.z0.shape[-1])


def make_members(
    make_data: Callable[[torch.Generator], ClusteredData],
    data_gens: Sequence[torch.Generator],
    z0_gens: Sequence[torch.Generator],
    d: int,
    init_spread: float,
    device: torch.device | str | None = None,
    init: str = "collapsed",
    jitter: float = 0.0,
) -> Members:
    """Draw each seed's data and initial embedding (CPU generators), stacked on ``device``.

    ``init``: ``"collapsed"`` — :func:`random_embedding` (every point near one random direction, spread
    ``init_spread``); ``"invariant-uniform"`` — :func:`uniform_embedding` with perturbation ``jitter``
    (``init_spread`` unused).
    """
    if init not in INITS:
        raise ValueError(f"init={init!r}; allowed {', '.join(INITS)}")
    data = [make_data(g) for g in data_gens]
    labels = data[0].labels
    if any(not torch.equal(dd.labels, labels) for dd in data):
        raise ValueError("make_members: every seed must have the same cluster sizes (labels)")
    if init == "collapsed":
        z0 = torch.stack([random_embedding(dd.n, d, init_spread, g) for dd, g in zip(data, z0_gens)])  # (E, n, d)
    else:
        z0 = torch.stack([uniform_embedding(dd.labels, d, g, jitter) for dd, g in zip(data, z0_gens)])  # (E, n, d)
    x = torch.stack([dd.x for dd in data])  # (E, n, D)
    return Members(x.to(device), labels, z0.to(device), data)


# --------------------------------------------------------------------------------------
# dynamics
# --------------------------------------------------------------------------------------
@dataclass
class Run:
    """One dynamics on all members: embeddings and losses at the recorded steps.

    Attributes:
        name: ``"network"`` / ``"vanilla"``; lr: the step σ; steps: recorded iterations ``(R,)``;
        z: ``(R, E, n, d)`` normalised embeddings; loss: ``(R, E)``;
        neg_grad: ``{step: (E, n, d)}`` −∇L(z_i) at the figure's steps (w.r.t. the raw outputs);
        z_raw: ``(R, E, n, d)`` the recorded outputs before normalisation (network: ``f(w, x_i)``; vanilla GD:
            its projected embeddings, = z); None for a Run built without them.
        loss_steps, loss_log: ``(L,)``, ``(L, E)``: the loss at every logged step (the records and the
            ``loss_every`` steps of :func:`run_network` / :func:`run_vanilla`, which may be denser); None for a
            Run built without them.
    """

    name: str
    lr: float
    steps: np.ndarray
    z: np.ndarray
    loss: np.ndarray
    neg_grad: dict[int, np.ndarray]
    z_raw: np.ndarray | None = None
    loss_steps: np.ndarray | None = None
    loss_log: np.ndarray | None = None

    @property
    def times(self) -> np.ndarray:
        return self.steps * self.lr

    def index(self, step: int) -> int:
        """Index of the last recorded step ``<= step``."""
        return int(np.searchsorted(self.steps, step, side="right") - 1)

    def raw_at(self, step: int) -> np.ndarray:
        """The raw outputs ``(E, n, d)`` at the last recorded step ``<= step`` (None when the Run was built without
        them)."""
        if self.z_raw is None:
            raise ValueError(f"{self.name} run: no raw outputs recorded for this run")
        return self.z_raw[self.index(step)]


def record_steps(total: int, dense: int = 30, sparse: int = 200, extra: Sequence[int] = ()) -> list[int]:
    """Every iteration up to ``dense``, then ~``sparse`` evenly spaced ones, ``extra`` and the last."""
    grid = set(range(min(total, dense) + 1)) | set(range(0, total + 1, max(1, total // sparse))) | {total}
    return sorted(grid | {int(s) for s in extra if 0 <= s <= total})


Loss = Callable[[Tensor], Tensor]  # embeddings (E, n, d) -> per-member loss (E,)


def flow_loss(tau: float, positive_term: bool = True) -> Loss:
    """The NT-Xent cost both dynamics minimise: :func:`~ssldyn.objectives.latent_measure_nt_xent` at τ.

    ``positive_term=False``: Prop. 2.1 as printed, ``Σ_i w_i log(1 + 2 Σ_{j≠i} w_j e^{sim_ij/τ})``;
    ``True``: with the positive-pair term ``e^{sim(Tx, T'x)/τ} = e^{1/τ}`` of eq. (1) (for an invariant
    map), i.e. ``e^{(sim_ij − 1)/τ}`` — the form of eq. (4) with ``Ψ = log(1 + t)``, ``η = e^{−t/τ}``
    (Def. 2.1), whose flow Sec. 4 analyses: the default of Fig. 5/6 and Remark 4.4's run (their captions do not
    restate the cost).
    """
    return lambda z: latent_measure_nt_xent(z, temperature=tau, positive_term=positive_term)


def _collect(name: str, lr: float, traj, E: int, arrows: Sequence[int]) -> Run:
    zs = traj.snapshots("z")
    steps = np.array(sorted(zs), dtype=np.int64)
    z = np.stack([np.asarray(zs[s]).reshape(E, *np.asarray(zs[s]).shape[-2:]) for s in steps])  # (R, E, n, d)
    df = traj.to_frame()
    df = df[df.probe == "loss"].pivot_table(index="step", columns="member", values="value").sort_index()
    loss = df.loc[steps].to_numpy().reshape(len(steps), E)  # (R, E)
    gs = traj.snapshots("neg_grad")
    neg = {int(s): np.asarray(gs[s]).reshape(E, *np.asarray(gs[s]).shape[-2:]) for s in arrows if s in gs}
    loss_steps, loss_log = df.index.to_numpy(np.int64), df.to_numpy().reshape(len(df), E)  # (L,), (L, E)
    return Run(name, lr, steps, z / np.linalg.norm(z, axis=-1, keepdims=True), loss, neg, z, loss_steps, loss_log)


def run_network(
    model: nn.Module,
    m: Members,
    *,
    loss: Loss,
    lr: float,
    steps: int,
    record: Sequence[int],
    arrows=(),
    track=None,
    loss_every: Sequence[int] = (),
) -> Run:
    """Weight-space GD (eq. 9/15) of the shifted ensemble network from ``m.z0`` on ``loss`` (:func:`flow_loss`).

    The loss is a function of the normalised outputs (cosine similarities), i.e. the outputs are
    mapped to the sphere inside the loss; the raw outputs are recorded too (``Run.z_raw``). The embeddings are
    kept at ``record`` (and ``arrows``), the loss also at ``loss_every`` (``Run.loss_log``: cheap, one value per
    member).
    """
    net = ShiftedModel(model, m.x, m.z0.to(m.x.dtype))
    keep = sorted(set(record) | set(arrows))
    every = sorted(set(keep) | {int(s) for s in loss_every if 0 <= s <= steps})
    traj = train_weight_space(net, m.x, loss, steps=steps, lr=lr, output="raw", every=every,
                              snapshot_every=keep, track=track).trajectory  # fmt: skip
    return _collect("network", lr, traj, m.x.shape[0], arrows)


def run_vanilla(m: Members, *, loss: Loss, lr: float, steps: int, record: Sequence[int], arrows=(), track=None) -> Run:
    """Vanilla GD on the embeddings (eq. 14) on ``loss`` (:func:`flow_loss`), projected onto the sphere."""
    keep = sorted(set(record) | set(arrows))
    traj = vanilla_gradient_descent(m.z0, loss, steps=steps, lr=lr, every=keep, snapshot_every=keep,
                                    track=track).trajectory  # fmt: skip
    return _collect("vanilla", lr, traj, m.z0.shape[0], arrows)


# --------------------------------------------------------------------------------------
# probes, batched over records and members
# --------------------------------------------------------------------------------------
def index_at_time(times: np.ndarray, t: float) -> int:
    """Index of the last record of the sorted flow times ``times (R,)`` at time ``<= t`` (+ 1e-9 round-off).

    A ``t`` before the first record has no such record: a ValueError (an index of −1 would silently pick the last).
    """
    i = int(np.searchsorted(times, t + 1e-9, side="right") - 1)
    if i < 0:
        first = float(times[0]) if len(times) else float("nan")
        raise ValueError(f"index_at_time: t = {t:g} is before the first record (time {first:g}); records: {len(times)}")
    return i


@dataclass
class Probes:
    """Probes of a :class:`Run` per record and member: silhouette ``(R, E)``, uniformity ``(R, E)``,
    loss ``(R, E)``, times ``(R,)``."""

    times: np.ndarray
    silhouette: np.ndarray
    uniformity: np.ndarray
    loss: np.ndarray

    def at(self, t: float) -> int:
        """Index of the last record at time ``<= t`` (+ round-off): :func:`index_at_time`."""
        return index_at_time(self.times, t)


def probes_of(run: Run, labels) -> Probes:
    lab = torch.as_tensor(np.asarray(labels)).long()
    s = silhouette_samples_cosine(run.z, lab)  # (R, E, n)
    return Probes(run.times, s.mean(-1).numpy(), uniformity_batch(run.z).numpy(), run.loss)


#: live float64 copies of the batched probes' ``(R, E, n, n)`` distances at their peak (measured, see
#: :func:`probe_peak_memory`)
PROBE_COPIES = 3.5


def probe_peak_memory(records: int, members: int, n: int, base: float = PROCESS_BASELINE + 0.1e9) -> int:
    """Peak bytes of a flow comparison: ``base`` (process, lab, figures and GIF) + :data:`PROBE_COPIES` ×
    the ``(R, E, n, n)`` float64 pairwise distances of :func:`probes_of` (silhouette over every record
    and member at once; the recorded embeddings ``(R, E, n, d)`` are small beside them).

    Measured (max RSS, 3 seeds): Fig. 5 quick (R ≈ 235, n = 100) 0.701 GB, estimate 0.82 GB; Fig. 5
    with n_per_cluster = 100 (n = 400) 2.81 GB (+2.1 GB ≈ 2.5 copies of 0.9 GB), estimate 4.07 GB;
    Fig. 6 quick (R ≈ 800 in its step table, n = 100) 1.02 GB, estimate 1.19 GB; the imbalance check (its
    docstring).
    """
    return int(base + PROBE_COPIES * records * members * n * n * 8)


def flow_peak_memory(cfg, n_seeds: int) -> tuple[int, str]:
    """:func:`probe_peak_memory` of Fig. 5 / Fig. 6 (a ``FlowCompareConfig``): four clusters of
    ``n_per_cluster`` points, one member per seed, ``R`` the most records of one run (the main network run,
    vanilla GD, or a step-table run: every step up to 400, ~400 beyond)."""
    extra = len(cfg.snapshots_network) + len(cfg.snapshots_long) + len(cfg.snapshots_vanilla) + 4
    table = [len(record_steps(max(1, round(cfg.table_time / lr)), 400, 400)) for lr in cfg.table_lrs]
    R = max(len(record_steps(cfg.steps_network)) + extra, len(record_steps(cfg.steps_vanilla)) + extra, *table)
    return probe_peak_memory(R, n_seeds, 4 * cfg.n_per_cluster), "n_per_cluster"


def uniform_optimum(n: int, d: int) -> float:
    """Uniformity of the uniform optimum: n equally spaced points (S¹), n Fibonacci points (S²), or continuous."""
    return uniformity_reference(n, d=d) if d in (2, 3) else uniformity_reference(d=d)


def coherence(z0: np.ndarray, z1: np.ndarray, labels, *, centred: bool = False) -> np.ndarray:
    """Per member: mean over clusters of the resultant length of the unit displacements ``z1 − z0``.

    ``z0, z1``: ``(E, n, d)``. 1 when all points of each cluster move in one direction (Thm. 4.5:
    same-cluster velocities agree up to O(δ)), ≈ 1/√(cluster size) for independent directions. With
    ``centred``, the displacements less their mean over all n points: the motion that separates the clusters,
    without the common motion of the whole cloud (which any grouping of the points shares).
    """
    lab = np.asarray(labels)
    dz = z1 - z0  # (E, n, d)
    if centred:
        dz = dz - dz.mean(axis=1, keepdims=True)
    unit = dz / np.maximum(np.linalg.norm(dz, axis=-1, keepdims=True), 1e-300)  # (E, n, d)
    return np.mean([np.linalg.norm(unit[:, lab == q].mean(1), axis=-1) for q in np.unique(lab)], axis=0)  # (E,)


def decay_times(p: Probes, u_opt: float, ref_time: float, level: float = 0.5) -> dict[str, np.ndarray]:
    """Per member: the clustered phase and how the run then leaves it for the uniform minimiser.

    * ``t_peak``, ``peak``: time and value of the largest silhouette;
    * ``t_form``/``t_last``: first / last time with silhouette ≥ ``level`` (NaN if never);
    * ``gap_ref``, ``gap_end``: the uniformity gap ``U − U_opt`` to the uniform (trivial)
      minimiser at ``ref_time`` (the end of the fast phase, e.g. Fig. 5's 200 iterations) and at
      the end of the run;
    * ``t_half``: the decay time, the first time after ``ref_time`` at which the gap is half
      ``gap_ref`` (NaN: not within the run).
    """
    T, E = p.silhouette.shape
    out = {k: np.full(E, np.nan) for k in ("t_peak", "peak", "t_form", "t_last", "t_half", "gap_ref", "gap_end")}
    r = p.at(ref_time)
    for e in range(E):
        s, gap = p.silhouette[:, e], p.uniformity[:, e] - u_opt
        i = int(np.argmax(s))
        out["t_peak"][e], out["peak"][e] = p.times[i], s[i]
        above = np.nonzero(s >= level)[0]
        if len(above):
            out["t_form"][e], out["t_last"][e] = p.times[above[0]], p.times[above[-1]]
        out["gap_ref"][e], out["gap_end"][e] = gap[r], gap[-1]
        later = np.nonzero(gap[r:] <= 0.5 * gap[r])[0]
        if len(later) and gap[r] > 0:
            out["t_half"][e] = p.times[r + later[0]]
    return out


def max_loss_increase(loss: np.ndarray) -> np.ndarray:
    """Per member, the largest increase of the loss between consecutive records, relative to the
    total decrease ``L(0) − min L`` (0 for a monotone descent; large for an unstable step)."""
    inc = np.maximum(np.diff(loss, axis=0), 0.0).max(0)  # (E,)
    return inc / np.maximum(loss[0] - loss.min(0), 1e-300)


@dataclass(frozen=True)
class StepRow:
    """One step σ of :func:`step_table`: its iterations and flow time, per-member values ``(E,)`` at that time.

    ``run``, ``probes``: the run itself and its probes per record, for a step listed in ``step_table``'s ``keep``
    (None otherwise): the figures draw the kept run (Fig. 6's gradient-flow row).
    """

    lr: float
    steps: int
    time: float
    silhouette: np.ndarray
    uniformity: np.ndarray
    loss: np.ndarray
    max_loss_increase: np.ndarray
    run: Run | None = field(default=None, repr=False, compare=False)
    probes: Probes | None = field(default=None, repr=False, compare=False)

    def member(self, e: int) -> dict[str, float]:
        """Member ``e``'s row of the ``step_table`` result table."""
        return {"lr": self.lr, "steps": self.steps, "time": self.time, "silhouette": self.silhouette[e],
                "uniformity": self.uniformity[e], "loss": self.loss[e],
                "max_loss_increase": self.max_loss_increase[e]}  # fmt: skip


def snap_to_records(wanted: Sequence[int], records: Sequence[int]) -> list[int]:
    """Each of ``wanted`` replaced by the last of the sorted ``records`` at or before it (distinct, sorted; an
    iteration before the first record is dropped): snapshot iterations that add no record to a run."""
    rec = np.asarray(sorted(records), dtype=np.int64)
    idx = np.searchsorted(rec, np.asarray(list(wanted), dtype=np.int64), side="right") - 1
    return sorted({int(rec[i]) for i in idx if i >= 0})


def step_table(
    make_model: Callable[[], nn.Module],
    m: Members,
    *,
    loss: Loss,
    lrs: Sequence[float],
    time: float,
    main: Run | None,
    keep: Mapping[float, Sequence[int]] | None = None,
) -> list[StepRow]:
    """The network run with each step σ in ``lrs`` up to flow time ``time`` (``round(time/σ)`` steps).

    A step equal to ``main.lr`` reuses ``main`` when it was recorded at every step up to ``time``. Returns one
    :class:`StepRow` per σ with per-member arrays: silhouette, uniformity and loss at ``time``, and the
    largest relative loss increase between consecutive iterations along the run (instability of large steps;
    the loss is logged at every iteration, the embeddings at every one up to 400 and ~400 beyond).

    ``keep``: ``{σ: iterations}`` — the rows of these steps also carry the run and its probes, with −∇L at the
    given iterations (each moved to the last record at or before it: the run's records, and so every number of the
    table, are those of a run without ``keep``).
    """
    rows = []
    for lr in lrs:
        steps = max(1, int(round(time / lr)))
        arrows = next((list(v) for k, v in (keep or {}).items() if math.isclose(k, lr)), None)
        if main is not None and math.isclose(lr, main.lr) and set(range(steps + 1)) <= set(main.steps.tolist()):
            sub = main.steps <= steps
            neg = {s: g for s, g in main.neg_grad.items() if s <= steps}
            run = Run(main.name, main.lr, main.steps[sub], main.z[sub], main.loss[sub], neg)  # recorded every step
            rise = max_loss_increase(run.loss)
        else:
            # embeddings at every step up to 400 and ~400 records beyond; the loss at every step (the rises of an
            # unstable step are visible at any σ)
            record = record_steps(steps, 400, 400)
            run = run_network(make_model(), m, loss=loss, lr=lr, steps=steps, record=record,
                              arrows=snap_to_records(arrows or (), record), loss_every=range(steps + 1))  # fmt: skip
            logged = 0 if run.loss_log is None else len(run.loss_log)
            if run.loss_log is None or logged != steps + 1:
                raise RuntimeError(f"step_table: σ = {lr:g} logged the loss at {logged} of {steps + 1} steps")
            rise = max_loss_increase(run.loss_log)
        p = probes_of(run, m.labels)
        i = p.at(time)
        kept = {"run": run, "probes": p} if arrows is not None else {}
        rows.append(StepRow(lr, steps, float(run.times[i]), p.silhouette[i], p.uniformity[i], p.loss[i], rise, **kept))
    return rows


# --------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------
#: y labels of the probe panels (silhouette, uniformity; the loss label depends on the cost)
SILHOUETTE_LABEL = "cosine silhouette (true labels)"
UNIFORMITY_LABEL = r"uniformity $\log\,\mathbb{E}\,e^{-2\|z-z'\|^2}$"


def loss_label(positive_term: bool) -> str:
    """The y label of a loss panel: the NT-Xent cost the run minimises (:func:`flow_loss`)."""
    return "NT-Xent (Def. 2.1, eq. 4)" if positive_term else "NT-Xent (Prop. 2.1 as printed)"


def cluster_colors(labels) -> list:
    """Viridis colours by cluster (Fig. 5: −3 purple, −1 blue, 1 green, 3 yellow)."""
    import matplotlib

    lab = np.asarray(labels)
    k = int(lab.max()) + 1
    cmap = matplotlib.colormaps["viridis"]
    return [cmap(q / max(k - 1, 1)) for q in lab]


def _draw(ax, z, g, labels, title, d):
    """One snapshot: the points on the sphere coloured by cluster and the −∇L arrows ``g`` (drawn above the points,
    dark-edged so that they stay visible over points of their own colour; the longest 0.35 long)."""
    colors = cluster_colors(labels)
    if g is not None:
        m = float(np.linalg.norm(g, axis=1).max())
        arrow_scale = 0.35 / max(m, 1e-12)
    if d == 2:
        t = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(t), np.sin(t), color="0.85", lw=0.8, zorder=0)
        ax.scatter(z[:, 0], z[:, 1], c=colors, s=7, zorder=2)
        if g is not None:
            ax.quiver(z[:, 0], z[:, 1], g[:, 0], g[:, 1], color=colors, angles="xy", scale_units="xy",
                      scale=1.0 / arrow_scale, width=0.009, edgecolor="0.15", linewidth=0.3, alpha=0.95,
                      zorder=3)  # fmt: skip
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        ax.set_aspect("equal")
    else:
        ax.scatter(z[:, 0], z[:, 1], z[:, 2], c=colors, s=6)
        if g is not None:
            a = arrow_scale
            ax.quiver(z[:, 0], z[:, 1], z[:, 2], g[:, 0] * a, g[:, 1] * a, g[:, 2] * a, colors=colors, alpha=0.9,
                      linewidth=1.0, zorder=3)  # fmt: skip
        for lim in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
            lim(-1, 1)
        ax.set_zticks([])
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=8)


@dataclass
class SnapshotRow:
    """One row of :func:`plot_rows`: one member's embeddings at the snapshot iterations of one dynamics.

    Attributes:
        label: the row's header (which run, which claim reads it); short: its name in the suptitle;
        lr: the step σ; steps: ``(S,)`` iterations; z: ``(S, n, d)``; neg_grad: ``(S, n, d)`` −∇L, or None.
    """

    label: str
    short: str
    lr: float
    steps: np.ndarray
    z: np.ndarray
    neg_grad: np.ndarray | None = None

    @property
    def times(self) -> np.ndarray:
        return np.asarray(self.steps) * self.lr


def rows_title(title: str, rows: Sequence[SnapshotRow]) -> str:
    """The suptitle of :func:`plot_rows`: ``title`` and the rows actually drawn (row 1 is the data)."""
    drawn = [r for r in rows if len(r.steps)]
    return f"{title}\nrow 1: data (a); " + "; ".join(f"row {i}: {r.short}" for i, r in enumerate(drawn, start=2))


def plot_rows(x: np.ndarray, labels, rows: Sequence[SnapshotRow], path: Path, title: str) -> Path:
    """Row 1: the data; then one row per dynamics with a header line (its ``label``), each panel titled by its
    iteration and flow time ``it k (t = σk)``; rows without snapshots are left out, and the suptitle
    (:func:`rows_title`) names the rows drawn."""
    import matplotlib.pyplot as plt

    rows = [r for r in rows if len(r.steps)]
    d = rows[0].z.shape[-1]
    D = x.shape[1]
    cols = max(max(len(r.steps) for r in rows), 3)
    nrow = 1 + len(rows)
    fig = plt.figure(figsize=(1.9 * cols, 2.25 * nrow + 0.5))
    gs = fig.add_gridspec(2 * nrow, cols, height_ratios=[0.16, 1.0] * nrow)
    headers = ["row 1 — (a) data, coloured by cluster"] + [f"row {i} — {r.label}" for i, r in enumerate(rows, 2)]
    for i, text in enumerate(headers):
        h = fig.add_subplot(gs[2 * i, :])
        h.axis("off")
        h.text(0.0, 0.0, text, transform=h.transAxes, fontsize=8.5, fontweight="bold", ha="left", va="bottom")
    ax: Any  # a 3-D axes takes (x, y, z) in scatter
    if D == 3:
        ax = fig.add_subplot(gs[1, : max(1, cols // 2)], projection="3d")
        ax.tick_params(labelsize=6, pad=0)
    else:
        ax = fig.add_subplot(gs[1, :])
    ax.scatter(*(x[:, i] for i in range(min(D, 3))), c=cluster_colors(labels), s=5)
    kw = {"projection": "3d"} if d == 3 else {}
    for r, row in enumerate(rows, start=1):
        gs_row = row.neg_grad if row.neg_grad is not None else [None] * len(row.steps)
        for c, (k, t, z, g) in enumerate(zip(row.steps, row.times, row.z, gs_row)):
            a = fig.add_subplot(gs[2 * r + 1, c], **kw)
            _draw(a, z, g, labels, f"it {int(k)} (t={t:.5g})", d)
    fig.suptitle(rows_title(title, rows), fontsize=9)
    return save_figure(fig, path)


#: GIF panel size (inches) and resolution: 320 px wide per panel, two panels at least 640 px (readable titles)
GIF_PANEL_INCHES, GIF_DPI = (3.2, 3.4), 100


def make_gif(frames: list[tuple[str, np.ndarray, np.ndarray]], labels, path: Path) -> Path:
    """Side-by-side animation: ``frames`` = ``(label, times (F,), z (F, n, d))`` per panel; frame k shows each
    panel's k-th record (each panel at its own log-spaced flow times, said in the frame's title)."""
    import matplotlib.pyplot as plt

    d = frames[0][2].shape[-1]
    kw = {"projection": "3d"} if d == 3 else {}
    imgs = []
    n = min(f[2].shape[0] for f in frames)
    for k in range(n):
        fig = plt.figure(figsize=(GIF_PANEL_INCHES[0] * len(frames), GIF_PANEL_INCHES[1]), dpi=GIF_DPI)
        for i, (label, times, z) in enumerate(frames):
            a = fig.add_subplot(1, len(frames), i + 1, **kw)
            _draw(a, z[k], None, labels, f"{label}\nt = {times[k]:.3g}", d)
            a.title.set_fontsize(10)
        fig.suptitle(f"frame {k + 1}/{n}: each panel at its own log-spaced flow times", fontsize=9)
        fig.tight_layout()
        imgs.append(figure_to_rgb(fig))
    return save_gif(imgs, path, fps=4)


def gif_indices(times: np.ndarray, frames: int) -> np.ndarray:
    """Indices of ``frames`` records spread evenly in log time (the fast phase and the slow one)."""
    t = np.maximum(times, times[times > 0].min() if (times > 0).any() else 1.0)
    targets = np.geomspace(t[0], t[-1], frames)
    idx = np.unique(np.clip(np.searchsorted(times, targets), 0, len(times) - 1))
    return np.unique(np.concatenate([[0], idx, [len(times) - 1]]))


@dataclass(frozen=True)
class Mark:
    """A vertical line of :func:`probe_figure`: flow time ``t``, legend ``label``, the colour of series ``series``."""

    t: float
    label: str
    series: int
    style: str = ":"


@dataclass(frozen=True)
class Level:
    """A horizontal line of :func:`probe_figure`: ``value`` on panel ``panel`` (0 silhouette, 1 uniformity,
    2 loss), legend ``label``."""

    value: float
    label: str
    panel: int = 0
    color: str = "0.35"
    style: str = "--"


def mark_groups(marks: Sequence[Mark]) -> list[list[Mark]]:
    """``marks`` grouped by flow time (equal to a relative 1e-9), in the order of their first mark: the marks of a
    group are drawn as one line with one legend entry (:func:`mark_label`)."""
    groups: list[list[Mark]] = []
    for mk in marks:
        same = next((g for g in groups if math.isclose(g[0].t, mk.t, rel_tol=1e-9)), None)
        if same is None:
            groups.append([mk])
        else:
            same.append(mk)
    return groups


def mark_label(group: Sequence[Mark]) -> str:
    """The legend entry of marks at one flow time: their labels joined by " = " (one mark: its label)."""
    return " = ".join(mk.label for mk in group)


def _shared_styles(group: Sequence[Mark]) -> list[Any]:
    """Line styles of the marks of one group: one mark keeps its style; n marks at the same t alternate dashes of
    their colours along one line (dash k of every n in colour k)."""
    if len(group) == 1:
        return [group[0].style]
    n, dash = len(group), 5.0
    return [(k * dash, (dash, (n - 1) * dash)) for k in range(n)]


def probe_figure(
    series: list[tuple[str, Probes]],
    u_opt: float,
    path: Path,
    *,
    marks: Sequence[Mark] = (),
    levels: Sequence[Level] = (),
    loss_name: str = "NT-Xent",
    title: str | None = None,
) -> Path:
    """Silhouette, uniformity and loss against flow time (log), mean over seeds with the seeds' range.

    The records at t > 0 are joined by lines; the value at t = 0 (no place on a log axis) is a ring at the left
    edge (one ring per series, the later ones smaller, so that equal starts stay visible), and no segment joins it
    to the first record. ``marks``: vertical lines at the flow times the claims read (in their series' colour, on
    every panel; marks at the same t share one line of alternating dashes and one legend entry); ``levels``:
    horizontal lines (thresholds, optima). One legend below the panels.
    """
    fig, ax = new_figure(3, 2, size=(3.8, 1.75), gridspec_kw={"height_ratios": [1.0, 0.32]})
    for a in ax[1]:
        a.remove()
    positive = [p.times[p.times > 0] for _, p in series if (p.times > 0).any()]
    edge = min(float(t.min()) for t in positive) / 3 if positive else 1.0
    names = (("silhouette", SILHOUETTE_LABEL), ("uniformity", UNIFORMITY_LABEL), ("loss", loss_name))
    for i, (label, p) in enumerate(series):
        color = PALETTE[i % 8]
        pos = p.times > 0
        for j, (attr, _) in enumerate(names):
            v = getattr(p, attr)  # (R, E)
            ax[0, j].plot(p.times[pos], v[pos].mean(1), color=color, label=label)
            if v.shape[1] > 1:
                ax[0, j].fill_between(p.times[pos], v[pos].min(1), v[pos].max(1), color=color, alpha=0.2, lw=0)
            if not pos[0]:  # the start, at the left edge
                ax[0, j].plot([edge], [v[0].mean()], "o", mfc="none", color=color, ms=max(7.0 - 1.6 * i, 2.5))
    combined: dict[str, tuple] = {}  # the legend handle of a line shared by marks at the same t: all its colours
    for group in mark_groups(marks):
        label, lw = mark_label(group), 1.0 if len(group) == 1 else 1.3
        for j in range(3):
            lines = tuple(ax[0, j].axvline(mk.t, color=PALETTE[mk.series % 8], ls=style, lw=lw,
                                           label=label if k == 0 else None)
                          for k, (mk, style) in enumerate(zip(group, _shared_styles(group))))  # fmt: skip
            if len(lines) > 1:
                combined.setdefault(label, lines)
    for lv in (*levels, Level(u_opt, "uniform optimum (n points)", panel=1)):
        ax[0, lv.panel].axhline(lv.value, color=lv.color, ls=lv.style, lw=1.0, label=lv.label)
    ax[0, 0].plot([], [], "o", mfc="none", color="0.3", label="value at t = 0 (ring at the left edge)")
    handles: dict[str, Any] = {}
    for j, (attr, ylabel) in enumerate(names):
        ax[0, j].set(xscale="log", xlabel="flow time t = σ·iteration (log)", ylabel=ylabel, title=attr)
        ax[0, j].set_xlim(left=edge / 1.6)
        for h, lab in zip(*ax[0, j].get_legend_handles_labels()):
            handles.setdefault(lab, combined.get(lab, h))
    legend_ax = fig.add_subplot(ax[0, 0].get_gridspec()[1, :])
    legend_ax.axis("off")
    legend_ax.legend(list(handles.values()), list(handles), loc="center", ncol=3, fontsize=7, frameon=False,
                     handler_map={tuple: HandlerTuple(ndivide=1)})  # a shared mark: its colours overlaid  # fmt: skip
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, path)
