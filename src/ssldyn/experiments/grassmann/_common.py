"""Shared pieces of the ``grassmann`` experiments: the half-moons contrast matrix and training loops.

Scaling convention used by every experiment: losses (1)/(8) are *averaged* over the n anchors
(the paper writes sums); equivalently ``C = contrast_matrix(...)/n``. This only rescales
time (a sum is the mean with learning rate n·η) and keeps the eigenvalues of C of order one,
so that the learning rates of the paper (η = 0.01) give stable explicit steps.

Devices: every experiment computes on ``ctx.device``: data are drawn on the CPU (numpy /
seeded CPU generators, the same draws on every device) and moved there, models are built
there, and results come back with ``.cpu()`` only for tables, arrays, summaries and plots.
``torch_threads(1, ctx.device)`` pins the CPU runs to one thread (a no-op on CUDA).
"""

from __future__ import annotations

import numpy as np
import torch

from ssldyn.data.moons import SSLViews, half_moons
from ssldyn.dynamics.q_ode import eigh_ascending
from ssldyn.lab.context import torch_threads  # noqa: F401 (re-exported for the experiments)
from ssldyn.objectives import contrast_matrix, simple_contrastive


def moons_problem(
    n: int,
    noise: float,
    seed: int,
    extra_stds: tuple[float, ...] = (),
    noise_var: float = 0.1,
    device: torch.device | str | None = None,
):
    """``(views, C, lam, V)`` with ``C = contrast_matrix(x, x⁺, x⁻)/n`` (eq. 7, mean over anchors).

    The views are drawn on the CPU and moved to ``device``, where ``C`` and its eigendecomposition
    are computed (labels stay on the CPU).
    """
    views = half_moons(n, noise=noise, seed=seed, extra_stds=tuple(extra_stds), noise_var=noise_var, device=device)
    C = contrast_matrix(views.x, views.x_pos, views.x_neg) / views.n  # (d, d)
    lam, V = eigh_ascending(C)
    return views, C, lam, V


def view_inputs(views: SSLViews) -> dict[str, torch.Tensor]:
    """The training data of ``views`` by name, for the NaN/inf check before training (``train_gd(inputs=...)``)."""
    return {"x": views.x, "x_pos": views.x_pos, "x_neg": views.x_neg}


def mean_contrastive_loss(net, views: SSLViews) -> torch.Tensor:
    """Loss (1) averaged over anchors, one value per ensemble member ``(E,)``."""
    u = net(views.x)  # (E, n, z)
    up = net(views.x_pos.flatten(0, 1)).unflatten(1, views.x_pos.shape[:2])  # (E, n, p, z)
    un = net(views.x_neg.flatten(0, 1)).unflatten(1, views.x_neg.shape[:2])  # (E, n, q, z)
    return simple_contrastive(u, up, un) / views.n


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (finite positive points only)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])
