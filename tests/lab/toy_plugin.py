"""Plugin module (``SSLDYN_PLUGINS=tests.lab.toy_plugin``) registering test experiments in
every process, including Ray workers and ``ssldyn`` subprocesses."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from pydantic import Field

from ssldyn.contract.experiment import _REGISTRY
from ssldyn.lab import ClaimSpec, Experiment, ExperimentConfig, Result, between, equals, register
from tests.lab.toy import Toy, ToySweep


class KillConfig(ExperimentConfig):
    marker: str = Field("", description="file created on the first attempt; its presence means 'retry'")
    sleep: float = Field(0.0, ge=0)
    value: int = 1
    fail: str = Field("", description="raise RuntimeError(fail) instead of returning (a run that crashes)")


class KillOnce(Experiment):
    """Kills its own process on the first attempt (SIGKILL), succeeds on the retry."""

    name = "variational.zz-kill-once"
    paper = "variational"
    figure = "-"
    description = "test: worker death and retry"
    Config = KillConfig

    def run(self, cfg, ctx):
        marker = Path(cfg.marker)
        if cfg.marker and not marker.exists():
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(cfg.sleep)
        return Result(summary={"value": cfg.value, "pid": os.getpid()})

    claims = (
        ClaimSpec("value", "value is echoed", "-", kind="sanity", reading="the summary value",
                  relation=lambda cfg: equals(cfg.value), basis="relation: the configured value"),
    )  # fmt: skip

    def measure(self, cfg, result):
        return {"value": result.summary["value"]}


class Slow(Experiment):
    """Sleeps, then returns a deterministic number (for kill/resume tests)."""

    name = "variational.zz-slow"
    paper = "variational"
    figure = "-"
    description = "test: a slow run"
    Config = KillConfig
    quick = {"sleep": 0.8}

    def run(self, cfg, ctx):
        import torch

        time.sleep(cfg.sleep)
        if cfg.fail:
            raise RuntimeError(cfg.fail)
        return Result(summary={"value": float(torch.randn(3, generator=ctx.generator()).sum())})

    claims = (
        ClaimSpec("finite", "finite", "-", kind="sanity", reading="the summary value", relation=between(-100, 100),
                  basis="tolerance: a sum of three standard normals"),
    )  # fmt: skip

    def measure(self, cfg, result):
        return {"finite": result.summary["value"]}


class Slow2(Slow):
    name = "variational.zz-slow2"


class Slow3(Slow):
    name = "variational.zz-slow3"
    # the interrupt test makes this run long (set in the driver and its workers alike)
    quick = {"sleep": float(os.environ.get("SSLDYN_TOY_SLOW3_SLEEP", "0.8"))}


for _cls in (Toy, ToySweep, KillOnce, Slow, Slow2, Slow3):
    if _cls.name not in _REGISTRY:
        register(_cls)
