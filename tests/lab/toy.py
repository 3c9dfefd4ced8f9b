"""A tiny experiment for lab tests (registered by the ``toy`` fixture, removed afterwards)."""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.dynamics import Trajectory
from ssldyn.lab import Experiment, ExperimentConfig, Result, check
from ssldyn.viz.common import new_figure, save_figure

CALLS = {"run": 0}


class Inner(ExperimentConfig):
    lr: PositiveFloat = 0.1


class ToyConfig(ExperimentConfig):
    n: conint(ge=1) = Field(8, description="number of points")
    tau: PositiveFloat = 0.5
    label: str = "toy"
    optim: Inner = Inner()
    fail: bool = False


class Toy(Experiment):
    """Gradient descent on 0.5‖x‖² from a random start: ‖x_t‖ = (1 − lr)^t ‖x_0‖."""

    name = "variational.zz-toy"
    paper = "variational"
    figure = "Fig. 0"
    description = "toy experiment for the lab tests <b>"
    Config = ToyConfig
    quick = {"n": 4}

    def run(self, cfg, ctx):
        CALLS["run"] += 1
        if cfg.fail:
            raise RuntimeError("toy failure")
        x = torch.randn(cfg.n, generator=ctx.generator())
        traj = Trajectory()
        for t in ctx.track(range(5), description="toy"):
            traj.log(t, norm=x.norm())
            x = x - cfg.optim.lr * x
        res = Result(
            arrays={"x": x.numpy()}, summary={"final": float(x.norm()), "x0": float(traj.series("norm")[1][0])}
        )
        res.add_trajectory(traj)
        res.notes.append(f"label: {cfg.label}")
        return res

    def claims(self, cfg, result):
        ratio = result.summary["final"] / result.summary["x0"]
        return [
            check(
                "decay",
                "‖x‖ decays like (1 − lr)^5",
                "toy",
                ratio,
                between=((1 - cfg.optim.lr) ** 5 - 1e-6, (1 - cfg.optim.lr) ** 5 + 1e-6),
            )
        ]

    def plots(self, cfg, result, fig_dir):
        fig, ax = new_figure()
        frame = result.tables["metrics"]
        ax[0, 0].plot(frame["step"], frame["value"])
        return [save_figure(fig, fig_dir / "toy.png")]


__all__ = ["Toy", "CALLS", "np"]
