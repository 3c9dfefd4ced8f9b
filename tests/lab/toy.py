"""A tiny experiment for lab tests (registered by the ``toy`` fixture, removed afterwards)."""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.contract.claims import Measured, Robustness
from ssldyn.dynamics import Trajectory
from ssldyn.errors import UserError
from ssldyn.lab import ClaimSpec, Experiment, ExperimentConfig, Result, between, every_seed, gt, lt
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
    captions = {"toy.png": "Fig. 0 (toy): ‖x_t‖ against the step <i>"}

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

    claims = (
        ClaimSpec(
            "decay", "‖x‖ decays like (1 − lr)^5", "toy", kind="consequence", reading="‖x_5‖ / ‖x_0‖",
            derivation="GD on ½‖x‖² multiplies x by (1 − lr) at every step",
            relation=lambda cfg: between((1 - cfg.optim.lr) ** 5 - 1e-6, (1 - cfg.optim.lr) ** 5 + 1e-6),
            basis="method: float32 round-off of five steps",
        ),
    )  # fmt: skip

    def measure(self, cfg, result):
        return {"decay": result.summary["final"] / result.summary["x0"]}

    def plots(self, cfg, result, fig_dir):
        fig, ax = new_figure()
        frame = result.tables["metrics"]
        ax[0, 0].plot(frame["step"], frame["value"])
        return [save_figure(fig, fig_dir / "toy.png")]


class SweepConfig(ExperimentConfig):
    n: conint(ge=1) = Field(16, description="dimension of x")
    lr: PositiveFloat = Field(0.2, description="step size (the knob the study tests sweep)")
    steps: conint(ge=1) = Field(10, description="gradient steps")


class ToySweep(Experiment):
    """Gradient descent on 0.5‖x‖² from x_0 ~ N(0, I_n): rms(x_T) = (1 − lr)^T · ‖x_0‖/√n exactly.

    One sweepable knob (``lr``) and declared claims: ``rms-small`` (rms(x_T) < 0.5) passes for
    lr = 0.2 (0.8^10 ≈ 0.107) and fails for lr = 0.01 (0.99^10 ≈ 0.904); ``ratio-exact`` is an
    identity that holds for every lr and seed.
    """

    name = "variational.zz-sweep"
    paper = "variational"
    figure = "Fig. 0"
    description = "toy sweep experiment for the lab tests"
    Config = SweepConfig
    quick = {"n": 8}
    claims = (
        ClaimSpec(
            "rms-small", "the final rms of x is below 0.5", "toy", kind="consequence",
            reading="rms(x_T) = ‖x_T‖/√n per seed", relation=lt(0.5), basis="tolerance: a test threshold",
            derivation="rms(x_T) = (1 − lr)^T rms(x_0) and E rms(x_0)² = 1",
        ),
        ClaimSpec(
            "ratio-exact", "‖x_T‖/‖x_0‖ = (1 − lr)^T", "toy", kind="sanity", reading="ratio of the norms",
            relation=lambda cfg: between((1 - cfg.lr) ** cfg.steps * (1 - 1e-5), (1 - cfg.lr) ** cfg.steps * (1 + 1e-5)),
            basis="method: claim values are stored to 6 significant digits", rule=every_seed("an identity holds for every seed"),
        ),
    )  # fmt: skip

    def run(self, cfg, ctx):
        x = torch.randn(cfg.n, generator=ctx.generator(), dtype=torch.float64)  # (n,)
        traj = Trajectory()
        for t in range(cfg.steps + 1):
            traj.log(t, norm=x.norm())
            if t < cfg.steps:
                x = x - cfg.lr * x
        rms0 = float(traj.series("norm")[1][0]) / cfg.n**0.5
        res = Result(summary={"rms0": rms0, "rms": float(x.norm()) / cfg.n**0.5, "kind": "toy"})
        res.add_trajectory(traj)
        return res

    def measure(self, cfg, result):
        s = result.summary
        return {"rms-small": s["rms"], "ratio-exact": s["rms"] / s["rms0"]}

    def plots(self, cfg, result, fig_dir):
        fig, ax = new_figure()
        frame = result.tables["metrics"]
        ax[0, 0].semilogy(frame["step"], frame["value"], color="#d62728" if cfg.lr < 0.1 else "#1f77b4", lw=3)
        ax[0, 0].set_title(f"lr = {cfg.lr}")
        return [save_figure(fig, fig_dir / "sweep.png")]


__all__ = ["Toy", "ToySweep", "CALLS", "np"]


class ToyMap(ToySweep):
    """The toy sweep with a negative control and a robustness map over its two knobs (lr, steps).

    ``rms-small``'s control is the same statistic at initialisation (rms(x_0) ≈ 1, which must not be
    below 0.5); the map runs lr ∈ {0.2, 0.01} × steps ∈ {10, 30} at n = 64.
    """

    name = "variational.zz-map"
    claims = (
        ClaimSpec(
            "rms-small", "the final rms of x is below 0.5", "toy", kind="consequence",
            reading="rms(x_T) = ‖x_T‖/√n per seed", relation=lt(0.5), basis="tolerance: a test threshold",
            derivation="rms(x_T) = (1 − lr)^T rms(x_0) and E rms(x_0)² = 1", control="the same statistic at t = 0",
            bounds=(0.0, float("inf")),
        ),
    )  # fmt: skip
    robustness = (
        Robustness(claims=("rms-small",), knobs={"lr": [0.2, 0.01], "steps": [10, 30]}, base={"n": 64},
                   paper="the toy's 'paper' leaves lr and steps open"),
    )  # fmt: skip

    def measure(self, cfg, result):
        s = result.summary
        return {"rms-small": Measured(s["rms"], control=s["rms0"])}


class RuleConfig(ExperimentConfig):
    x: int = Field(1, description="echoed; run() refuses x = 2 (a UserError) and crashes at x = 3")


class ToyRule(Experiment):
    """Echoes ``x``: ``run()`` raises a :class:`UserError` for x = 2 (a config rule checked inside run) and a
    RuntimeError for x = 3 (a crashing grid point of its robustness map x ∈ {1, 3})."""

    name = "variational.zz-rule"
    paper = "variational"
    figure = "Fig. 0"
    description = "toy experiment whose run() refuses or crashes on some configs"
    Config = RuleConfig
    seeded = False
    est_seconds = (0.1, 0.1)
    claims = (
        ClaimSpec("positive", "x is positive", "toy", kind="sanity", reading="x", relation=gt(0.0),
                  basis="relation: a test threshold", rule=every_seed("an echo holds for every seed")),
    )  # fmt: skip
    robustness = (Robustness(claims=("positive",), knobs={"x": [1, 3]}, paper="the toy leaves x open"),)

    def run(self, cfg, ctx):
        if cfg.x == 2:
            raise UserError("x=2 is not allowed for this run (a rule checked inside run)")
        if cfg.x == 3:
            raise RuntimeError("grid point x=3 crashes")
        return Result(summary={"x": cfg.x})

    def measure(self, cfg, result):
        return {"positive": result.summary["x"]}
