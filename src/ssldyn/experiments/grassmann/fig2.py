"""`grassmann` Thm. 1, Conj. 1, Sec. 3.2, Fig. 2: nonlinear vs linear outputs as the width grows.

``u^φ = W2ᵀφ(W1x)`` and ``u^I = W2ᵀW1x`` with ``W1ᵀW1 = I_d``, ``W2ᵀW2 = I_z`` start from the
same Haar-random weights; each is trained separately with the contrastive loss (1) — summed
over the anchors as printed (``reduction="sum"``; the other grassmann experiments average) —
on the half-moons by projected GD (polar map), lr 0.01, 100 epochs (Sec. 3.2), for widths h from 10
to 1000 and 10 initialisations (seeds form the ensemble axis; widths are separate runs). We
record the gap ``‖u^φ_t − u^I_t‖`` (mean over the anchors of the Euclidean distance of the
z = 2 outputs) at initialisation (Thm. 1) and during training (Conj. 1) for sigmoid, ReLU and
tanh, and fit the log-log slope of the seed-averaged gap against h.

Thm. 1 bounds the gap at initialisation by ``K c ‖x‖² d √(log⁴h / h)`` for φ(0) = 0,
φ'(0) = 1, |φ''| ≤ c (tanh). Its slope in log h is ``2/ln h − ½`` (≈ −0.07 at h = 100), so any
measured slope ≤ −½ is compatible with it; the heuristic scaling of ``W2ᵀ(φ(W1x) − W1x)``
for tanh (pre-activations O(h^{-1/2}), cubic remainder, projection on z of h directions)
is ``h^{-3/2}`` at initialisation, for ReLU ``h^{-1/2}``, and for sigmoid O(1) (φ(0) = ½).

Runs on ``ctx.device`` (data, nets, training, gaps); the gaps come to the CPU for the table.
Training uses ``train_gd`` (NaN/inf data check, loss guard).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pandas as pd
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.dynamics.manifold import ManifoldGD, train_gd
from ssldyn.experiments.grassmann._common import (
    loglog_slope,
    mean_contrastive_loss,
    moons_problem,
    torch_threads,
    view_inputs,
)
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.probes.subspace import output_gap
from ssldyn.viz.common import PALETTE, new_figure, save_figure

ACTS = ("sigmoid", "relu", "tanh")


class Fig2Config(ExperimentConfig):
    widths: list[conint(ge=2)] = Field(
        [10, 20, 50, 100, 200, 500, 1000], min_length=2, description="hidden widths h (Fig. 2: 10 to 1000)"
    )
    activations: list[Literal["sigmoid", "relu", "tanh"]] = Field(
        list(ACTS), min_length=1, description="φ (Sec. 3.2: sigmoid, ReLU, tanh)"
    )
    lr: PositiveFloat = Field(0.01, description="learning rate (Sec. 3.2)")
    epochs: conint(ge=1) = Field(100, description="epochs (Sec. 3.2)")
    seeds: conint(ge=1) = Field(10, description="initialisations (Sec. 3.2: 10)")
    z: conint(ge=1) = Field(2, description="output dimension")
    n: conint(ge=10) = Field(200, description="half-moons anchors")
    moons_noise: float = Field(0.05, ge=0, description="make_moons noise")
    record_every: conint(ge=1) = Field(10, description="epochs between gap measurements")
    reduction: Literal["mean", "sum"] = Field(
        "sum",
        description="loss (1) summed over anchors as printed (default, Sec. 3.2 with lr 0.01) or averaged (= lr/n)",
    )


@register
class Fig2(Experiment):
    name = "grassmann.fig2"
    paper = "grassmann"
    figure = "Thm. 1, Conj. 1, Fig. 2"
    description = "‖u^φ − u^I‖ vs width h at init and during training: tanh ↓, ReLU ↓ slower, sigmoid ↑"
    Config = Fig2Config
    quick = {"widths": [10, 100, 1000], "seeds": 2, "epochs": 20}
    est_seconds = (12, 200)

    def run(self, cfg: Fig2Config, ctx) -> Result:
        bad = [a for a in cfg.activations if a not in ACTS]
        if bad:
            from ssldyn.errors import UserError

            raise UserError(f"activations {bad}: allowed values are {', '.join(ACTS)}")
        with torch_threads(1, ctx.device):
            return self._run(cfg, ctx)

    def _run(self, cfg: Fig2Config, ctx) -> Result:
        views, C, lam, V = moons_problem(cfg.n, cfg.moons_noise, ctx.seed, device=ctx.device)
        d = C.shape[0]
        scale = views.n if cfg.reduction == "sum" else 1.0
        rows = []
        for h in ctx.track(cfg.widths, description="Fig. 2 widths"):
            if h < max(d, cfg.z):
                continue
            seeds = [ctx.seed * 100000 + 1000 * s + h for s in range(cfg.seeds)]
            trajs = {}
            for act in ["linear"] + list(cfg.activations):
                net = TwoLayerNet(
                    d,
                    h,
                    cfg.z,
                    act,
                    "orthogonal",
                    ensemble=cfg.seeds,
                    seeds=seeds,
                    dtype=torch.float64,
                    device=ctx.device,
                )
                opt = ManifoldGD(net.weights(), lr=cfg.lr, mode="projected", retraction="polar")
                gd = train_gd(
                    net.weights(),
                    lambda net=net: scale * mean_contrastive_loss(net, views),
                    update=opt.step,
                    steps=cfg.epochs,
                    every=cfg.record_every,
                    snapshots={"u": lambda _ps, net=net: net(views.x)},  # (E, n, z)
                    inputs=view_inputs(views),
                )
                _, trajs[act] = gd.trajectory.stack("u", tensors=True)  # (T, E, n, z)
            eps = [ep for ep in range(cfg.epochs + 1) if ep % cfg.record_every == 0 or ep == cfg.epochs]
            for act in cfg.activations:
                gap = output_gap(trajs[act], trajs["linear"]).cpu()  # (T, E)
                for i, ep in enumerate(eps):
                    for e in range(cfg.seeds):
                        rows.append({"activation": act, "h": h, "epoch": ep, "seed": e, "gap": float(gap[i, e])})
        df = pd.DataFrame(rows)
        res = Result(tables={"gaps": df})
        mean = df.groupby(["activation", "h", "epoch"])["gap"].mean().reset_index()
        for act in cfg.activations:
            m = mean[mean.activation == act]
            init = m[m.epoch == 0].sort_values("h")
            fin = m[m.epoch == cfg.epochs].sort_values("h")
            during = m[m.epoch > 0].groupby("h")["gap"].mean().reset_index().sort_values("h")
            res.summary[f"{act}_slope_init"] = loglog_slope(init.h, init.gap)
            res.summary[f"{act}_slope_final"] = loglog_slope(fin.h, fin.gap)
            res.summary[f"{act}_slope_during"] = loglog_slope(during.h, during.gap)
            res.summary[f"{act}_gap_init"] = dict(zip(map(str, init.h), init.gap.round(8)))
            res.summary[f"{act}_gap_final"] = dict(zip(map(str, fin.h), fin.gap.round(8)))
        if "tanh" in cfg.activations:
            res.notes.append(
                f"tanh: fitted slopes {res.summary['tanh_slope_init']:.2f} (init) and "
                f"{res.summary['tanh_slope_during']:.2f} (training) — steeper than the −½ of the "
                "√(log⁴h/h) bound (an upper bound); the heuristic init scaling is h^(−3/2)."
            )
        if "sigmoid" in cfg.activations and not res.summary["sigmoid_slope_during"] > 0:
            res.notes.append(
                f"sigmoid: slope {res.summary['sigmoid_slope_during']:.2f} — the gap does not increase "
                "with h here; it levels off at ≈ ‖W2ᵀ(½·1)‖ (φ(0) = ½), so the paper's increase is not "
                "reproduced with this setting."
            )
        res.notes.append(
            "Gap = mean over the n anchors of ‖u^φ(x) − u^I(x)‖₂, averaged over seeds; u^φ and u^I "
            "are trained separately from the same orthogonal initialisation (Conj. 1). Loss (1) is "
            f"{'averaged over anchors (the paper sums), which rescales time by n' if cfg.reduction == 'mean' else 'summed over anchors as printed'}."
        )
        return res

    def claims(self, cfg: Fig2Config, result: Result):
        s = result.summary
        out = []
        if "tanh" in cfg.activations:
            out += [
                check(
                    "tanh-decreases-init",
                    "tanh: the gap at initialisation decreases with h.",
                    "Thm. 1, Fig. 2",
                    s["tanh_slope_init"],
                    lt=0.0,
                    expected="log-log slope of gap(h) at init < 0",
                ),
                check(
                    "tanh-decreases-training",
                    "tanh: the gap decreases with h during training.",
                    "Conj. 1, Fig. 2",
                    s["tanh_slope_during"],
                    lt=0.0,
                    expected="log-log slope of the gap averaged over training epochs < 0",
                ),
                check(
                    "tanh-compatible-with-bound",
                    "tanh: the decay is compatible with the √(log⁴h/h) bound.",
                    "Thm. 1",
                    max(s["tanh_slope_init"], s["tanh_slope_during"]),
                    le=-0.5,
                    expected="slope <= −½ at init and during training",
                ),
                check(
                    "tanh-slope-near-half",
                    "tanh: fitted log-log slope near −½ (issue's reading of Fig. 2).",
                    "Fig. 2",
                    s["tanh_slope_during"],
                    between=(-0.75, -0.25),
                    expected="slope during training in [−0.75, −0.25]",
                ),
            ]
        if "relu" in cfg.activations:
            out.append(
                check(
                    "relu-decreases",
                    "ReLU: the gap also decreases with h.",
                    "Sec. 3.2, Fig. 2",
                    s["relu_slope_during"],
                    lt=0.0,
                    expected="log-log slope during training < 0",
                )
            )
            if "tanh" in cfg.activations:
                out.append(
                    check(
                        "relu-slower",
                        "ReLU decreases more slowly than tanh.",
                        "Sec. 3.2, Fig. 2",
                        s["relu_slope_during"] - s["tanh_slope_during"],
                        gt=0.0,
                        expected="slope(ReLU) − slope(tanh) > 0 (during training)",
                    )
                )
        if "sigmoid" in cfg.activations:
            out.append(
                check(
                    "sigmoid-increases",
                    "sigmoid (φ(0) ≠ 0): the gap increases with h.",
                    "Sec. 3.2, Fig. 2",
                    s["sigmoid_slope_during"],
                    gt=0.0,
                    expected="log-log slope during training > 0",
                )
            )
        return out

    def plots(self, cfg: Fig2Config, result: Result, fig_dir: Path):
        df = result.tables["gaps"]
        mean = df.groupby(["activation", "h", "epoch"])["gap"].mean().reset_index()
        fig, ax = new_figure(len(cfg.activations), 1, size=(3.8, 3.3))
        for k, act in enumerate(cfg.activations):
            m = mean[mean.activation == act]
            for i, h in enumerate(sorted(m.h.unique())):
                g = m[m.h == h].sort_values("epoch")
                ax[0, k].plot(g.epoch, g.gap, color=PALETTE[i % 8], label=f"h={h}")
            ax[0, k].set(xlabel="epoch", ylabel="‖u^φ − u^I‖", yscale="log", title=act)
            ax[0, k].legend(fontsize=7)
        p1 = save_figure(fig, fig_dir / "fig2.png")
        fig, ax = new_figure(1, 1, size=(4.4, 3.4))
        for k, act in enumerate(cfg.activations):
            m = mean[(mean.activation == act)]
            for ep, ls in ((0, "--"), (cfg.epochs, "-")):
                g = m[m.epoch == ep].sort_values("h")
                ax[0, 0].plot(
                    g.h, g.gap, ls, marker="o", color=PALETTE[k], label=f"{act} ({'init' if ep == 0 else 'end'})"
                )
        ax[0, 0].set(xscale="log", yscale="log", xlabel="width h", ylabel="‖u^φ − u^I‖")
        ax[0, 0].legend(fontsize=7)
        return [p1, save_figure(fig, fig_dir / "fig2_vs_width.png")]
