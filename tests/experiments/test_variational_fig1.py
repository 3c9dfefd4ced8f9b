"""variational.fig1: quick preset claims (MNIST), CIFAR-10 reported as not run, CIFAR path on test-written batches."""

import pickle

import numpy as np

from ssldyn.lab import run_experiment


def test_fig1_quick_mnist(tmp_path):
    out = run_experiment("variational.fig1", quick=True, seeds=1, out=tmp_path)
    ids = {c.id for c in out.claims}
    assert ids == {"mnist-pixels-clustered", "mnist-simclr-linear", "mnist-simclr-knn", "mnist-simclr-silhouette"}
    for c in out.claims:
        assert np.isfinite(c.measured)
        assert c.passed, f"{c.id}: measured {c.measured}, expected {c.expected}"
    s = out.run.summary
    assert s["cifar10"] == "not run"  # no claim without a measurement
    assert 0.1 < s["mnist_simclr_linear"] <= 1 and -1 <= s["mnist_pixels_silhouette"] <= 1
    assert s["mnist_loss_last"] < s["mnist_loss_first"]
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
        sets={
            "cifar_dir": str(tmp_path),
            "n_images": 200,
            "cifar_n_images": 120,
            "tsne_points": 40,
            "tsne_iter": 250,
            "knn_k": 5,
            "simclr": small,
            "cifar_simclr": small,
        },
    )
    s = out.run.summary
    assert s["cifar10"] == "run" and s["cifar_train"] + s["cifar_test"] == 120
    cif = [c for c in out.claims if c.id.startswith("cifar")]
    assert len(cif) == 3 and all(np.isfinite(c.measured) for c in cif)
