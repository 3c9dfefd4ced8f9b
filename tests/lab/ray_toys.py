"""Plugin module (``SSLDYN_PLUGINS=tests.lab.ray_toys``) for the multi-node Ray tests: a source run
that computes a shared sub-result through the run cache (``ctx.cached``) and a run that reuses it
(``Experiment.reuses``). Every attempt and every computation of the shared part leaves a file in
``log_dir`` (named after the node and the process), so a test can count them; the results
themselves are deterministic (the same on every node, executor and attempt)."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import torch
from pydantic import Field

from ssldyn.contract.experiment import _REGISTRY
from ssldyn.lab import ClaimSpec, Experiment, ExperimentConfig, Result, between, register

SOURCE = "variational.zz-ray-source"
REUSER = "variational.zz-ray-reuser"


class SharedConfig(ExperimentConfig):
    key: int = Field(0, ge=0, description="which shared sub-result (its cache key)")
    sleep: float = Field(
        0.0, ge=0, description="seconds the shared sub-result takes to compute (at most, with wait_for)"
    )
    wait_for: str = Field(
        "", description="computing the shared part ends early once a file with this prefix is in log_dir"
    )
    log_dir: str = Field("", description="folder for one file per attempt and per computation of the shared part")


def _node() -> str:
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    return "local"


def _blas_threads() -> str:
    """The BLAS threads numpy loaded with in this process (OpenBLAS reads the variable at load time)."""
    return os.environ.get("OPENBLAS_NUM_THREADS", "default")


def _leave(cfg: SharedConfig, what: str) -> None:
    """A file named after the attempt (node, process); it holds the BLAS threads the run computes with."""
    if cfg.log_dir:
        name = f"{what}.{cfg.key}.{_node()}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
        (Path(cfg.log_dir) / name).write_text(f"blas={_blas_threads()}")


class SharedSource(Experiment):
    """Computes the shared sub-result ``v = randn(4)`` seeded by ``key`` (slowly) and adds the run's own noise."""

    name = SOURCE
    paper = "variational"
    figure = "-"
    description = "test: the source of a cached shared sub-result (Ray tests)"
    Config = SharedConfig

    def run(self, cfg, ctx):
        _leave(cfg, f"attempt-{self.name.rsplit('-', 1)[-1]}")

        def compute() -> dict:
            _leave(cfg, "shared")
            end = time.monotonic() + cfg.sleep
            while time.monotonic() < end:
                if cfg.wait_for and any(p.name.startswith(cfg.wait_for) for p in Path(cfg.log_dir).iterdir()):
                    break
                time.sleep(0.05)
            return {"v": torch.randn(4, generator=torch.Generator().manual_seed(cfg.key)).numpy()}

        v = ctx.cached({"ray-toy-shared": cfg.key}, compute)["v"]  # (4,)
        own = torch.randn(4, generator=ctx.generator(), dtype=torch.float64).numpy()  # (4,)
        return Result(arrays={"v": v, "own": own}, summary={"value": float(v.sum() + own.sum())})

    claims = (
        ClaimSpec("finite", "finite", "-", kind="sanity", reading="the summary value", relation=between(-100, 100),
                  basis="tolerance: a sum of eight standard normals"),
    )  # fmt: skip

    def measure(self, cfg, result):
        return {"finite": result.summary["value"]}


class SharedReuser(SharedSource):
    """Reads the source's shared sub-result (same cache key)."""

    name = REUSER
    description = "test: reuses the source's cached shared sub-result (Ray tests)"
    reuses = (SOURCE,)


for _cls in (SharedSource, SharedReuser):
    if _cls.name not in _REGISTRY:
        register(_cls)
