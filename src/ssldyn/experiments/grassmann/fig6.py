"""`grassmann` Sec. 4.2 "Deep Linear Networks", Fig. 6.

Deep linear networks ``u(x) = W_outᵀ W_L ⋯ W_1 x`` with 1, 2 and 3 hidden layers, every matrix
with orthonormal columns (``W_1 ∈ St(h, d)``, square orthogonal ``W_k ∈ O(h)``,
``W_out ∈ St(h, z)``), trained on the trace loss (8) by projected GD (polar map) from random
orthogonal initialisations, and the q-ODE (9) of the one-hidden-layer case. The paper reports
that the deeper networks converge to the same final embedding as one hidden layer. The
embedding is determined up to a rotation of R^z (the loss is invariant to W_out → W_out R), so
we compare the row spaces of the end-to-end maps (principal angles), and the final losses.
Data: the lifted half-moons of Fig. 5 (d = 4), z = 2.

Runs on ``ctx.device`` (GD with ``train_gd``: NaN/inf data check and loss guard; the Euler
q-ODE); losses and embeddings come to the CPU for arrays and summaries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.dynamics.manifold import ManifoldGD, train_gd
from ssldyn.dynamics.q_ode import euler, q_from_map, trace_loss_q
from ssldyn.experiments.grassmann._common import moons_problem, torch_threads
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.models.two_layer import DeepLinearNet
from ssldyn.probes.subspace import principal_angles
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Fig6Config(ExperimentConfig):
    depths: list[conint(ge=1)] = Field([1, 2, 3], min_length=2, description="numbers of hidden layers (Fig. 6)")
    h: conint(ge=2) = Field(32, description="hidden width (all hidden layers)")
    z: conint(ge=1) = Field(2, description="embedding dimension")
    extra_stds: list[PositiveFloat] = Field([0.3, 0.15], description="extra coordinates of the lifted half-moons")
    n: conint(ge=10) = Field(200, description="half-moons anchors")
    moons_noise: float = Field(0.05, ge=0, description="make_moons noise")
    lr: PositiveFloat = Field(0.05, description="learning rate")
    steps: conint(ge=10) = Field(2000, description="GD steps")
    record_every: conint(ge=1) = Field(20, description="steps between recorded losses")


@register
class Fig6(Experiment):
    name = "grassmann.fig6"
    paper = "grassmann"
    figure = "Sec. 4.2, Fig. 6"
    description = "deep linear nets (2, 3 hidden layers) under orthogonality converge to the 1-hidden-layer embedding"
    Config = Fig6Config
    quick = {"steps": 1000, "h": 8}
    est_seconds = (6, 30)

    def run(self, cfg: Fig6Config, ctx) -> Result:
        with torch_threads(1, ctx.device):
            return self._run(cfg, ctx)

    def _run(self, cfg: Fig6Config, ctx) -> Result:
        dev = ctx.device
        views, C, lam, V = moons_problem(cfg.n, cfg.moons_noise, ctx.seed, tuple(cfg.extra_stds), device=dev)
        d = C.shape[0]
        if cfg.h < max(d, cfg.z):
            from ssldyn.errors import UserError

            raise UserError(f"h={cfg.h} must be >= max(d, z) = {max(d, cfg.z)}")
        res = Result(summary={"eigenvalues_C": lam.tolist(), "optimal_loss": float(lam[: cfg.z].sum())})
        maps = {}
        q0_one = None
        for L in cfg.depths:
            net = DeepLinearNet(
                d, [cfg.h] * L, cfg.z, "orthogonal", seeds=[ctx.seed * 10 + L], dtype=torch.float64, device=dev
            )
            opt = ManifoldGD(net.weights(), lr=cfg.lr, mode="projected", retraction="polar")

            def loss_fn(net=net):
                A = net.end_to_end()[0]  # (z, d)
                return ((A @ C) * A).sum()  # Tr(A C Aᵀ) = loss (8)

            gd = train_gd(
                net.weights(),
                loss_fn,
                update=opt.step,
                steps=cfg.steps,
                every=cfg.record_every,
                inputs={"C": C},
                track=lambda it, L=L: ctx.track(it, total=cfg.steps + 1, description=f"Fig. 6 depth {L}"),
            )
            losses = gd.trajectory.series("loss")[1].tolist()
            if L == 1:
                q0_one = q_from_map(
                    DeepLinearNet(
                        d, [cfg.h], cfg.z, "orthogonal", seeds=[ctx.seed * 10 + 1], dtype=torch.float64, device=dev
                    )
                    .end_to_end()[0]
                    .detach(),
                    V,
                )
            maps[L] = net.end_to_end()[0].detach()
            res.arrays[f"loss/depth{L}"] = np.asarray(losses)
            res.summary[f"final_loss_depth{L}"] = losses[-1]
        ks, qs = euler(q0_one, lam, lr=cfg.lr, steps=cfg.steps, every=cfg.record_every).trajectory.stack(
            "q", tensors=True
        )  # (T,), (T, d, z)
        res.arrays["loss/ode"] = trace_loss_q(qs, lam).cpu().numpy()
        res.arrays["steps"] = ks
        A_ode = (V @ qs[-1]).T  # (z, d): u(x) = qᵀVᵀx
        maps["ode"] = A_ode
        base = maps[cfg.depths[0]]
        angles = {}
        for key, A in maps.items():
            if key == cfg.depths[0]:
                continue
            angles[str(key)] = float(principal_angles(base.T, A.T).max())
        res.summary["max_angle_to_depth1"] = angles
        res.summary["max_principal_angle"] = max(angles.values())
        res.summary["max_angle_to_eigvecs"] = max(
            float(principal_angles(A.T, V[:, : cfg.z]).max()) for A in maps.values()
        )
        res.summary["max_final_loss_gap"] = max(
            abs(res.summary[f"final_loss_depth{L}"] - res.summary["optimal_loss"]) for L in cfg.depths
        )
        for key, A in maps.items():
            u = views.x @ A.T  # (n, z) final embedding
            res.arrays[f"embedding/{key}"] = u.cpu().numpy()
        res.notes.append(
            "Principal angles compare the row spaces of the end-to-end maps (the embedding is defined "
            "up to a rotation of R^z). Loss (8) with C averaged over anchors; lifted half-moons d = 4."
        )
        return res

    def claims(self, cfg: Fig6Config, result: Result):
        s = result.summary
        return [
            check(
                "same-embedding",
                "Networks with two and three hidden layers converge to the same final embedding "
                "as the one-hidden-layer network (and its q-ODE).",
                "Sec. 4.2, Fig. 6",
                s["max_principal_angle"],
                le=1e-2,
                expected="max principal angle between end-to-end row spaces <= 0.01 rad",
            ),
            check(
                "same-loss",
                "... reaching the same (optimal) loss λ_1 + … + λ_z.",
                "Sec. 4.2, Fig. 6",
                s["max_final_loss_gap"],
                le=1e-4,
                expected="max |L_final − Σ_{i≤z} λ_i| <= 1e-4",
            ),
        ]

    def plots(self, cfg: Fig6Config, result: Result, fig_dir: Path):
        fig, ax = new_figure(2, 1, size=(4.4, 3.4))
        ks = result.arrays["steps"]
        for i, L in enumerate(cfg.depths):
            ax[0, 0].plot(ks, result.arrays[f"loss/depth{L}"], color=PALETTE[i], label=f"{L} hidden layer(s)")
        ax[0, 0].plot(ks, result.arrays["loss/ode"], "k--", label="q-ODE (1 hidden)")
        ax[0, 0].axhline(result.summary["optimal_loss"], color="gray", lw=0.8)
        ax[0, 0].set(xlabel="step", ylabel="trace loss (8)", title="loss")
        ax[0, 0].legend(fontsize=8)
        for i, L in enumerate(cfg.depths):
            u = result.arrays[f"embedding/{L}"]
            ax[0, 1].scatter(
                u[:, 0],
                u[:, 1] if u.shape[1] > 1 else 0 * u[:, 0],
                s=4,
                color=PALETTE[i],
                label=f"{L} hidden",
                alpha=0.6,
            )
        ax[0, 1].set(title="final embeddings (up to rotation)", xlabel="u₁", ylabel="u₂")
        ax[0, 1].legend(fontsize=8)
        return [save_figure(fig, fig_dir / "fig6.png")]
