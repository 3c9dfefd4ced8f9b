"""Shared pieces of the `variational` Fig. 5 / Fig. 6 comparisons (network GD vs vanilla GD).

Both dynamics start from the *same* random embedding ``z0`` (i.i.d. around one random
direction, so that the loss is far from its minimum and ``z0`` is unrelated to the clusters):
the network is wrapped in :class:`ssldyn.models.ShiftedModel` (``f = z0 + g(w) − g(w0)`` on
the training inputs: same NTK, initial embedding ``z0``), its outputs normalised inside the
NT-Xent loss of Prop. 2.1; vanilla GD (eq. 14) moves the embeddings directly, projected to
the sphere. Probes every iteration: loss, silhouette (cosine, true labels), uniformity,
within-cluster angular spread.

Devices: data, model, ``z0`` and both dynamics live on the device of the data (``ctx.device``);
the initial embedding is drawn on the CPU and moved there. The probes (silhouette, uniformity,
angular spread: small CPU-side summaries with CPU labels) and the metrics (numpy) run on CPU
copies of the embeddings.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ssldyn.dynamics.function_space import project_sphere, vanilla_gradient_descent
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.dynamics.weight_space import train_weight_space
from ssldyn.lab.context import torch_threads  # noqa: F401 (re-exported for the experiments)
from ssldyn.models.shifted import ShiftedModel
from ssldyn.objectives import latent_measure_nt_xent
from ssldyn.probes.cluster import angular_spread, silhouette_cosine, uniformity, uniformity_reference
from ssldyn.viz.common import PALETTE, figure_to_rgb, new_figure, save_figure, save_gif


def random_embedding(
    n: int, d: int, spread: float, g: torch.Generator, device: torch.device | str | None = None
) -> torch.Tensor:
    """``z0_i = normalise(m + spread·N(0, I))`` with one random unit direction m: ``(n, d)``.

    Drawn on the CPU from ``g`` (the same numbers on every device), then moved to ``device``.
    """
    m = project_sphere(torch.randn(1, d, generator=g, dtype=torch.float64))
    return project_sphere(m + spread * torch.randn(n, d, generator=g, dtype=torch.float64)).to(device)


def gif_steps(total: int, frames: int) -> list[int]:
    return sorted({int(round(k * total / (frames - 1))) for k in range(frames)})


def probe_steps(total: int) -> list[int]:
    """Every iteration up to 30, then ~100 evenly spaced ones, and the last."""
    return sorted(set(range(min(total, 30) + 1)) | set(range(0, total + 1, max(1, total // 100))) | {total})


def run_pair(model, x, labels, z0, *, tau, steps_net, steps_van, lr_net, lr_van, keep_net, keep_van, track=None):
    """Train the (shifted) network and run vanilla GD from ``z0``; returns (trajectory, histories).

    ``model``, ``x`` and ``z0`` on one device (the computation runs there); ``labels`` may be
    anywhere (the probes use a CPU copy, as they do of the embeddings).
    """
    loss = lambda z: latent_measure_nt_xent(z, temperature=tau)  # noqa: E731
    lab = labels.cpu()
    probes = {
        "silhouette": lambda z: silhouette_cosine(z.cpu(), lab),
        "uniformity": lambda z: uniformity(z.cpu()),
        "angular_spread": lambda z: angular_spread(z.cpu(), lab),
    }
    net = ShiftedModel(model, x, z0.to(x.dtype))
    # raw output velocity of the network over the first iterations (Thm. 4.5 is about the raw outputs)
    import copy

    probe_net = copy.deepcopy(net)
    train_weight_space(probe_net, x, loss, steps=5, lr=lr_net, output="sphere", every=None)
    with torch.no_grad():
        raw_disp = (probe_net(x) - net(x))[0].cpu().numpy()  # (n, d)
    t_net = train_weight_space(
        net,
        x,
        loss,
        steps=steps_net,
        lr=lr_net,
        output="sphere",
        probes=probes,
        every=probe_steps(steps_net),
        snapshot_every=1,
        track=track,
    ).trajectory
    t_van = vanilla_gradient_descent(
        z0,
        loss,
        steps=steps_van,
        lr=lr_van,
        probes=probes,
        every=probe_steps(steps_van),
        snapshot_every=1,
        track=track,
    ).trajectory
    traj = Trajectory()
    hist = {"network_raw_disp": raw_disp}
    for name, t, keep in (("network", t_net, keep_net), ("vanilla", t_van, keep_van)):
        zs = t.snapshots("z")
        gs = t.snapshots("neg_grad")
        hist[name] = np.stack([zs[s] for s in sorted(zs)])  # (T+1, n, d)
        hist[name + "_grad"] = {s: gs[s] for s in keep}
        sub = Trajectory()
        for row in t.to_frame().itertuples(index=False):  # probes of every iteration, snapshots only at `keep`
            sub.log(row.step, row.member, **{row.probe: row.value})
        for s in keep:
            sub.snapshot(s, "z", zs[s])
            sub.snapshot(s, "neg_grad", gs[s])
        traj.extend(sub, prefix=name + "/")
    return traj, hist


def pair_metrics(
    traj: Trajectory, hist: dict, labels: torch.Tensor, probe_step: int, coherence_steps: int, n: int, d: int
) -> dict:
    """Numbers used by the claims (numpy, on the CPU)."""
    lab = labels.cpu().numpy()
    out = {}
    for name in ("network", "vanilla"):
        zh = hist[name]  # (T+1, n, d)
        T = zh.shape[0] - 1
        disp = np.linalg.norm(np.diff(zh, axis=0), axis=-1).mean(1)  # (T,) mean displacement per iteration
        tail = max(1, T // 10)
        out[f"{name}_tail_speed_ratio"] = float(disp[-tail:].mean() / disp.max())
        dz = hist["network_raw_disp"] if name == "network" else zh[min(coherence_steps, T)] - zh[0]  # (n, d)
        unit = dz / np.maximum(np.linalg.norm(dz, axis=1, keepdims=True), 1e-300)
        out[f"{name}_coherence"] = float(np.mean([np.linalg.norm(unit[lab == q].mean(0)) for q in np.unique(lab)]))
        for p in ("silhouette", "uniformity", "angular_spread", "loss"):
            steps, vals = traj.series(f"{name}/{p}")
            out[f"{name}_{p}_end"] = float(vals[-1])
            out[f"{name}_{p}_at_{probe_step}"] = float(vals[np.searchsorted(steps, probe_step, side="right") - 1])
            out[f"{name}_{p}_start"] = float(vals[0])
        _, sil = traj.series(f"{name}/silhouette")
        out[f"{name}_silhouette_max"] = float(sil.max())
    out["uniform_optimum"] = uniformity_reference(n, d=d) if d in (2, 3) else uniformity_reference(d=d)
    return out


def cluster_colors(labels) -> list:
    """Viridis colours by cluster (Fig. 5: −3 purple, −1 blue, 1 green, 3 yellow)."""
    import matplotlib

    lab = np.asarray(labels)
    k = int(lab.max()) + 1
    cmap = matplotlib.colormaps["viridis"]
    return [cmap(q / max(k - 1, 1)) for q in lab]


def _draw(ax, z, g, labels, title, d, arrow_scale):
    colors = cluster_colors(labels)
    if g is not None and arrow_scale is None:
        arrow_scale = _arrow_scale([g])
    if d == 2:
        t = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(t), np.sin(t), color="0.85", lw=0.8, zorder=0)
        ax.scatter(z[:, 0], z[:, 1], c=colors, s=9, zorder=2)
        if g is not None:
            ax.quiver(
                z[:, 0],
                z[:, 1],
                g[:, 0],
                g[:, 1],
                color=colors,
                angles="xy",
                scale_units="xy",
                scale=1.0 / arrow_scale,
                width=0.006,
                alpha=0.7,
                zorder=1,
            )
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        ax.set_aspect("equal")
    else:
        ax.scatter(z[:, 0], z[:, 1], z[:, 2], c=colors, s=6)
        if g is not None:
            ax.quiver(
                z[:, 0],
                z[:, 1],
                z[:, 2],
                g[:, 0] * arrow_scale,
                g[:, 1] * arrow_scale,
                g[:, 2] * arrow_scale,
                colors=colors,
                alpha=0.6,
                linewidth=0.6,
            )
        ax.set_xlim(-1, 1)
        ax.set_ylim(-1, 1)
        ax.set_zlim(-1, 1)
    ax.set_xticks([])
    ax.set_yticks([])
    if d == 3:
        ax.set_zticks([])
    ax.set_title(title, fontsize=8)


def _arrow_scale(g_list) -> float:
    m = max(float(np.linalg.norm(g, axis=1).max()) for g in g_list) if g_list else 1.0
    return 0.35 / max(m, 1e-12)


def plot_rows(
    traj: Trajectory, data_x: torch.Tensor, labels: torch.Tensor, keep_net, keep_van, path: Path, title: str
) -> Path:
    """Row 1: data (coloured by cluster); row 2: network snapshots; row 3: vanilla snapshots."""
    import matplotlib.pyplot as plt

    d = traj.snapshots("network/z")[0].shape[1]
    D = data_x.shape[1]
    cols = max(len(keep_net), len(keep_van))
    fig = plt.figure(figsize=(1.9 * cols, 1.9 * 3 + 0.3))
    kw = {"projection": "3d"} if d == 3 else {}
    ax = fig.add_subplot(3, 2 if D == 3 else 1, 1, **({"projection": "3d"} if D == 3 else {}))
    x = data_x.numpy()
    cl = cluster_colors(labels)
    if D == 3:
        ax.scatter(x[:, 0], x[:, 1], x[:, 2], c=cl, s=5)
    else:
        ax.scatter(x[:, 0], x[:, 1], c=cl, s=5)
    ax.set_title("(a) data", fontsize=8)
    for r, (name, keep) in enumerate((("network", keep_net), ("vanilla", keep_van)), start=1):
        zs, gs = traj.snapshots(f"{name}/z"), traj.snapshots(f"{name}/neg_grad")
        for c, s in enumerate(keep):  # arrows: −∇L(z_i), scaled per panel
            a = fig.add_subplot(3, cols, r * cols + c + 1, **kw)
            _draw(a, zs[s], gs[s], labels, f"{name} it. {s}", d, None)
    fig.suptitle(title, fontsize=9)
    return save_figure(fig, path)


def make_gif(hist: dict, labels: torch.Tensor, steps: tuple[int, int], frames: int, path: Path) -> Path:
    """Network (left) and vanilla (right) side by side at the same fraction of their runs.

    ``hist[name]``: ``(frames, n, d)`` embeddings at ``gif_steps(steps[i], frames)``.
    """
    import matplotlib.pyplot as plt

    d = hist["network"].shape[-1]
    kw = {"projection": "3d"} if d == 3 else {}
    imgs = []
    its = [gif_steps(steps[0], frames), gif_steps(steps[1], frames)]
    for k in range(min(len(its[0]), len(its[1]), hist["network"].shape[0], hist["vanilla"].shape[0])):
        fig = plt.figure(figsize=(4.0, 2.1))
        for i, name in enumerate(("network", "vanilla")):
            a = fig.add_subplot(1, 2, i + 1, **kw)
            _draw(a, hist[name][k], None, labels, f"{name} it. {its[i][k]}", d, 1.0)
        fig.tight_layout()
        fig.set_dpi(60)
        imgs.append(figure_to_rgb(fig))
    return save_gif(imgs, path, fps=6)


def probe_figure(traj: Trajectory, uniform_opt: float, path: Path) -> Path:
    fig, ax = new_figure(3, 1, size=(3.6, 2.9))
    for i, name in enumerate(("network", "vanilla")):
        for j, p in enumerate(("silhouette", "uniformity", "loss")):
            s, v = traj.series(f"{name}/{p}")
            ax[0, j].plot(np.maximum(s, 1), v, color=PALETTE[i], label=name)
            ax[0, j].set(xscale="log", xlabel="iteration (log)", title=p)
    ax[0, 1].axhline(uniform_opt, color="gray", ls="--", label="uniform optimum")
    ax[0, 0].legend(fontsize=7)
    ax[0, 1].legend(fontsize=7)
    return save_figure(fig, path)


def tables(traj: Trajectory) -> pd.DataFrame:
    return traj.to_frame()
