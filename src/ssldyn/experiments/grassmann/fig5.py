"""`grassmann` Conj. 2, Fig. 5: span(q) → span(v_1, …, v_z) on the half-moons.

For z ∈ {1, 2, 3} we solve the q-ODE (9) from a random initialisation and record the norm of
the projection of each eigenvector ``v_1, v_2, v_3`` (most negative eigenvalues first) onto
the column space of ``q`` (in the eigenbasis ``v_i = e_i``). Conj. 2: for i ≤ z these norms
tend to 1. The half-moons are 2-D, so z = 3 needs d ≥ 3: we append two independent Gaussian
coordinates with stds 0.3 and 0.15 (d = 4; C then has four distinct negative eigenvalues).
Optionally the same is measured for projected GD on the network (width h).

Runs on ``ctx.device`` (the q-ODE with torchdiffeq, GD with ``train_gd``: NaN/inf data check
and loss guard); the projection norms come to the CPU for arrays and summaries.
"""

from __future__ import annotations

from pathlib import Path

import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.dynamics.manifold import ManifoldGD, train_gd
from ssldyn.dynamics.q_ode import q_from_map, solve_adaptive
from ssldyn.experiments.grassmann._common import moons_problem, torch_threads
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.objectives import trace_loss
from ssldyn.probes.subspace import projection_norms
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Fig5Config(ExperimentConfig):
    zs: list[conint(ge=1)] = Field([1, 2, 3], min_length=1, description="embedding dimensions (Fig. 5)")
    extra_stds: list[PositiveFloat] = Field([0.3, 0.15], description="stds of extra Gaussian coordinates (d = 2 + len)")
    n: conint(ge=10) = Field(200, description="half-moons anchors")
    moons_noise: float = Field(0.05, ge=0, description="make_moons noise")
    t_final: PositiveFloat = Field(100.0, description="ODE time")
    h: conint(ge=4) = Field(50, description="width of the network that gives q_0 (and of the GD run)")
    gd: bool = Field(True, description="also run projected GD on the network")
    gd_lr: PositiveFloat = Field(0.05, description="GD learning rate (step k ↔ t = kη)")
    tol: PositiveFloat = Field(1e-2, description="1 − norm counted as converged")


@register
class Fig5(Experiment):
    name = "grassmann.fig5"
    paper = "grassmann"
    figure = "Conj. 2, Fig. 5"
    description = "half-moons C, z = 1, 2, 3: projections of v_1..v_z onto span(q) tend to 1 (q-ODE and GD)"
    Config = Fig5Config
    quick = {"gd": False, "t_final": 80.0}
    est_seconds = (4, 40)

    def run(self, cfg: Fig5Config, ctx) -> Result:
        with torch_threads(1, ctx.device):
            return self._run(cfg, ctx)

    def _run(self, cfg: Fig5Config, ctx) -> Result:
        dev = ctx.device
        views, C, lam, V = moons_problem(cfg.n, cfg.moons_noise, ctx.seed, tuple(cfg.extra_stds), device=dev)
        d = C.shape[0]
        from ssldyn.errors import UserError

        if max(cfg.zs) > d or cfg.h < d:
            raise UserError(f"need max(zs) <= d = {d} and h >= d (got zs={cfg.zs}, h={cfg.h})")
        res = Result(summary={"eigenvalues_C": lam.tolist(), "d": d})
        t = torch.linspace(0, cfg.t_final, 101, dtype=torch.float64, device=dev)
        eye = torch.eye(d, dtype=torch.float64, device=dev)
        for z in cfg.zs:
            net = TwoLayerNet(
                d, cfg.h, z, "linear", "orthogonal", seeds=[ctx.seed * 100 + z], dtype=torch.float64, device=dev
            )
            q0 = q_from_map(net.end_to_end()[0].detach(), V)  # (d, z)
            _, qs = solve_adaptive(q0, lam, t=t, rtol=1e-8, atol=1e-10).trajectory.stack("q", tensors=True)  # (T, d, z)
            norms = torch.stack([projection_norms(eye[:, : min(3, d)], q) for q in qs]).cpu()  # (T, min(3, d))
            res.arrays[f"ode/z{z}"] = norms.numpy()
            res.summary[f"ode_z{z}_final_norms"] = norms[-1].tolist()
            if cfg.gd:
                steps = int(round(cfg.t_final / cfg.gd_lr))
                opt = ManifoldGD(net.weights(), lr=cfg.gd_lr, mode="projected", retraction="polar")
                train_gd(
                    net.weights(),
                    lambda net=net: trace_loss(net.W1, net.W2, C),
                    update=opt.step,
                    steps=steps,
                    inputs={"C": C},
                    track=lambda it, z=z, steps=steps: ctx.track(it, total=steps + 1, description=f"Fig. 5 GD z={z}"),
                )
                qg = q_from_map(net.end_to_end()[0].detach(), V)
                res.summary[f"gd_z{z}_final_norms"] = projection_norms(eye[:, : min(3, d)], qg).tolist()
        res.arrays["t"] = t.cpu().numpy()
        worst = []
        for z in cfg.zs:
            worst.append(1 - min(res.summary[f"ode_z{z}_final_norms"][:z]))
            if cfg.gd:
                worst.append(1 - min(res.summary[f"gd_z{z}_final_norms"][:z]))
        res.summary["max_shortfall"] = float(max(worst))
        res.notes.append(
            f"The 2-D half-moons are lifted to d = {d} with extra N(0, s²) coordinates s = "
            f"{cfg.extra_stds} so that z = 3 is possible; eigenvalues of C/n: "
            + ", ".join(f"{v:.3f}" for v in lam.tolist())
        )
        return res

    def claims(self, cfg: Fig5Config, result: Result):
        s = result.summary
        return [
            check(
                "span-converges",
                "If C has at least k negative eigenvalues, span(q) converges to the span of "
                "the eigenvectors of the k most negative eigenvalues: the projections of v_1..v_z onto "
                "span(q) tend to 1.",
                "Conj. 2, Fig. 5",
                s["max_shortfall"],
                le=cfg.tol,
                expected=f"max over z ∈ {cfg.zs}, i ≤ z{' and ODE/GD' if cfg.gd else ''} of 1 − ‖P_q v_i‖ "
                f"at t = {cfg.t_final:g} <= {cfg.tol:g}",
            )
        ]

    def plots(self, cfg: Fig5Config, result: Result, fig_dir: Path):
        fig, ax = new_figure(len(cfg.zs), 1, size=(3.6, 3.2))
        t = result.arrays["t"]
        for k, z in enumerate(cfg.zs):
            nr = result.arrays[f"ode/z{z}"]
            for i in range(nr.shape[1]):
                ax[0, k].plot(t, nr[:, i], color=PALETTE[i], label=f"v_{i + 1}")
            ax[0, k].set(xlabel="t", ylabel="‖P_span(q) v_i‖", title=f"z = {z}", ylim=(-0.05, 1.05))
            ax[0, k].legend(fontsize=8)
        return [save_figure(fig, fig_dir / "fig5.png")]
