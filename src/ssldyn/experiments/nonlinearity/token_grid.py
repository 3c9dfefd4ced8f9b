"""Shared computation of the token-generator experiments (`nonlinearity` Sec. 5, App. E.2).

Builds grids of :class:`~ssldyn.dynamics.ensemble_trainer.TokenRun`, trains them as batched
ensembles (optionally in worker processes, one torch thread each), caches every finished run
under the run store's ``<out>/.cache/token_runs/`` (or ``$SSLDYN_CACHE_DIR``; keyed by the run's
settings, steps, logging and a hash of the code), and turns
the traces into long tables. Protocol choices (see README, "Token-generator experiments"):

- learning rate 0.02 (the reference implementation's documented command), not the 2e-3 of
  the paper's text: with 2e-3, χ̄₊ only moves from ≈0.36 to ≈0.48 in 5000 steps;
- for the linear activation χ± use |cos| (a filter's sign is arbitrary);
- BN default ``mean_only`` (the paper's Def. 5 and the documented command's
  ``backprop_var=false``) where the paper does not state the variant.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.dynamics.ensemble_trainer import (
    RunTrace,
    TokenRun,
    group_token_runs,
    token_ensemble_cost,
    train_token_ensemble,
)
from ssldyn.lab import ExperimentConfig

CACHE_VERSION = "1"


def make_runs(
    *,
    losses: Sequence[str] = ("infonce",),
    activations: Sequence[str] = ("relu",),
    betas: Sequence[int] = (1,),
    Ps: Sequence[int] = (5,),
    seeds: Sequence[int] = (0,),
    zetas: Sequence[float] = (1.0,),
    bns: Sequence[str] = ("mean_only",),
    base: TokenRun | None = None,
    **spec_kw: Any,
) -> list[TokenRun]:
    """The Cartesian grid loss × activation × β × P × ζ × BN × seed (other settings from ``base``)."""
    base = base or TokenRun()
    runs = []
    for loss in losses:
        for act in activations:
            for zeta in zetas:
                for bn in bns:
                    for beta in betas:
                        for P in Ps:
                            for seed in seeds:
                                spec = replace(base.spec, P=int(P), zeta=float(zeta), **spec_kw)
                                runs.append(
                                    replace(
                                        base,
                                        spec=spec,
                                        beta=int(beta),
                                        activation=act,
                                        loss=loss,
                                        bn=bn,
                                        seed=int(seed),
                                    )
                                )
    return runs


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """Hash of the sources that determine a run's result (a code change invalidates the cache)."""
    import hashlib
    import importlib

    h = hashlib.sha1()
    for mod in (
        "ssldyn.data.tokens",
        "ssldyn.models.rf_net",
        "ssldyn.models.activations",
        "ssldyn.dynamics.ensemble_trainer",
        "ssldyn.probes.chi",
    ):
        h.update(Path(importlib.import_module(mod).__file__).read_bytes())
    return h.hexdigest()[:10]


def cache_dir_for(ctx: Any = None) -> Path | None:
    """Per-run cache of token runs: ``<ctx.cache_dir>/token_runs`` (the run store's ``<out>/.cache``),
    or ``$SSLDYN_CACHE_DIR/token_runs`` when that is set (``SSLDYN_CACHE_DIR=off`` disables it);
    ``None`` (no disk cache) outside the lab. Entries are keyed by the run's settings, steps,
    logging and a hash of the code that computes them, so a cached run is exactly the run that
    would be recomputed.
    """
    root = os.environ.get("SSLDYN_CACHE_DIR", "")
    if root.lower() == "off":
        return None
    if root:
        return Path(root) / "token_runs"
    base = getattr(ctx, "cache_dir", None)
    return Path(base) / "token_runs" if base is not None else None


def _cache_file(
    cache: Path, run: TokenRun, steps: int, log_every: int, keep_filters: bool, device: str = "cpu"
) -> Path:
    dev = "" if device == "cpu" else f"-{device}"
    return cache / (
        f"{run.key()}-s{steps}-l{log_every}-f{int(keep_filters)}-v{CACHE_VERSION}-{_code_digest()}{dev}.npz"
    )


def _save(path: Path, tr: RunTrace) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrs = {k: v for k, v in vars(tr).items() if v is not None}
    tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
    np.savez(tmp, **arrs)
    os.replace(tmp, path)


def _load(path: Path) -> RunTrace:
    with np.load(path) as d:
        return RunTrace(**{k: d[k] for k in d.files})


def _train_group(
    runs: list[TokenRun], steps: int, log_every: int, keep_filters: bool, device: str = "cpu"
) -> list[RunTrace]:
    return train_token_ensemble(runs, steps, log_every, keep_filters, device=device)


def _worker_init() -> None:
    from ssldyn.lab.context import keep_heap_pad

    torch.set_num_threads(1)
    keep_heap_pad()  # steps free and re-allocate MB-sized tensors: keep the heap, no page faults


def run_grid(
    runs: Sequence[TokenRun],
    steps: int,
    log_every: int = 100,
    *,
    cache: Path | None = None,
    workers: int = 1,
    keep_filters: bool = False,
    max_elems: int | None = None,
    track: Callable | None = None,
    device: torch.device | str | None = None,
) -> list[RunTrace]:
    """Train every run (cached ones are read back), batched by :func:`plan_token_ensembles`; input order.

    ``workers > 1`` trains ensembles in that many spawned processes with one torch thread
    each (robust on a loaded 2-core machine); ``workers = 1`` trains in this process.
    On a CUDA ``device`` every ensemble trains in this process on the GPU (``workers`` unused).
    ``track(iterable, total, description)`` wraps the loop over ensembles (progress bars).
    """
    dev = str(torch.device(device)) if device is not None else "cpu"
    if dev != "cpu":
        workers = 1
    out: list[RunTrace | None] = [None] * len(runs)
    todo = []
    for i, r in enumerate(runs):
        if cache is not None and _cache_file(cache, r, steps, log_every, keep_filters, dev).is_file():
            out[i] = _load(_cache_file(cache, r, steps, log_every, keep_filters, dev))
        else:
            todo.append(i)
    # group by settings that must be shared inside one ensemble, then by width
    groups = [[todo[j] for j in g] for g in group_token_runs([runs[i] for i in todo], max_elems)]
    groups.sort(key=lambda g: -token_ensemble_cost([runs[i] for i in g]))  # largest first (load balance)
    track = track or (lambda it, total=None, description="": it)

    def finish(g: list[int], traces: list[RunTrace]) -> None:
        for i, tr in zip(g, traces):
            out[i] = tr
            if cache is not None:
                _save(_cache_file(cache, runs[i], steps, log_every, keep_filters, dev), tr)

    if groups and workers > 1:
        old = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"
        try:
            import multiprocessing as mp

            with ProcessPoolExecutor(
                max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_worker_init
            ) as ex:
                futs = [
                    (g, ex.submit(_train_group, [runs[i] for i in g], steps, log_every, keep_filters, dev))
                    for g in groups
                ]
                for g, f in track(futs, total=len(futs), description="token ensembles"):
                    finish(g, f.result())
        finally:
            if old is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = old
    elif groups:
        # one torch thread in-process too: with several threads, OpenMP's spinning makes the many
        # small ops of a step tens of times slower whenever the 2 cores are shared with other work
        from ssldyn.lab.context import keep_heap_pad, torch_threads

        if dev == "cpu":
            keep_heap_pad()
        with torch_threads(1, dev):
            for g in track(groups, total=len(groups), description="token ensembles"):
                finish(g, _train_group([runs[i] for i in g], steps, log_every, keep_filters, dev))
    return out  # type: ignore[return-value]


def grid_frame(runs: Sequence[TokenRun], traces: Sequence[RunTrace]) -> pd.DataFrame:
    """Long table: loss, activation, beta, P, zeta, bn, seed, step, chi_plus, chi_minus, loss_value."""
    rows = []
    for r, tr in zip(runs, traces):
        for j, s in enumerate(tr.steps):
            rows.append(
                (
                    r.loss,
                    r.activation,
                    r.beta,
                    r.spec.P,
                    r.spec.zeta,
                    r.bn,
                    r.seed,
                    int(s),
                    float(tr.chi_plus[j]),
                    float(tr.chi_minus[j]),
                    float(tr.loss[j]),
                )
            )
    return pd.DataFrame(
        rows,
        columns=[
            "loss",
            "activation",
            "beta",
            "P",
            "zeta",
            "bn",
            "init",
            "step",
            "chi_plus",
            "chi_minus",
            "loss_value",
        ],
    )


def final_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of the final χ̄± per (loss, activation, ζ, bn, β, P)."""
    last = df[df["step"] == df["step"].max()]
    keys = ["loss", "activation", "zeta", "bn", "beta", "P"]
    g = last.groupby(keys)
    t = g[["chi_plus", "chi_minus"]].agg(["mean", "std", "count"])
    t.columns = [f"{a}_{b}" for a, b in t.columns]
    return t.reset_index()


def cell(t: pd.DataFrame, col: str = "chi_plus_mean", **sel: Any) -> float:
    """One value of :func:`final_table` selected by keys (exactly one row must match)."""
    m = np.ones(len(t), bool)
    for k, v in sel.items():
        m &= (t[k] == v).to_numpy()
    if m.sum() != 1:
        raise KeyError(f"cell({sel}) matched {int(m.sum())} rows")
    return float(t.loc[m, col].iloc[0])


def plot_chi_grid(
    t: pd.DataFrame,
    path: Path,
    *,
    series: str,
    rows: Sequence[tuple[str, dict]],
    Ps: Sequence[int],
    betas: Sequence[int],
    title: str = "",
) -> Path:
    """Panels (row: a selection + a χ column, column: P) of χ vs β, one curve (mean ± std) per ``series``."""
    from ssldyn.viz.common import PALETTE, new_figure, save_figure

    fig, axes = new_figure(ncols=len(Ps), nrows=len(rows), size=(3.0, 2.5))
    for ri, (label, sel) in enumerate(rows):
        sel = dict(sel)
        col = sel.pop("col", "chi_plus")
        sub = t
        for k, v in sel.items():
            sub = sub[sub[k] == v]
        for ci, P in enumerate(Ps):
            ax = axes[ri][ci]
            for si, (name, d) in enumerate(sub[sub["P"] == P].groupby(series)):
                d = d.sort_values("beta")
                ax.errorbar(
                    d["beta"],
                    d[f"{col}_mean"],
                    yerr=d[f"{col}_std"].fillna(0),
                    marker="o",
                    ms=3,
                    capsize=2,
                    color=PALETTE[si % len(PALETTE)],
                    label=str(name),
                )
            ax.set_xscale("log")
            ax.minorticks_off()
            ax.set_xticks(list(betas))
            ax.set_xticklabels([str(b) for b in betas])
            ax.set_title(f"{label}, P={P}", fontsize=8)
            ax.set_xlabel("β")
            ax.set_ylabel("χ̄₊" if col == "chi_plus" else "χ̄₋")
            if ri == 0 and ci == 0:
                ax.legend(fontsize=6)
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, path)


ACTIVATIONS4 = ["linear", "relu", "leaky_relu", "quadratic"]
Act = Literal["linear", "relu", "leaky_relu", "quadratic", "sigmoid", "tanh"]
BN = Literal["off", "standard", "mean_only", "var_only", "none"]


class TokenTrainConfig(ExperimentConfig):
    """Training and data settings shared by the token experiments (`nonlinearity` Sec. 5, App. E.2)."""

    steps: conint(ge=1) = Field(5000, description="SGD steps (minibatches), Sec. 5")
    log_every: conint(ge=1) = Field(250, description="record χ̄± every this many steps")
    lr: PositiveFloat = Field(
        0.02,
        description="learning rate: 0.02 as the reference's documented command "
        "(the paper's text says 2e-3, which barely learns in 5000 steps)",
    )
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum, Sec. 5")
    weight_decay: float = Field(5e-3, ge=0, description="SGD weight decay, Sec. 5")
    batch: conint(ge=2) = Field(128, description="batch size, Sec. 5")
    temperature: PositiveFloat = Field(0.1, description="InfoNCE temperature T")
    output_d: conint(ge=1) = Field(50, description="output dimension of the top layer")
    K: conint(ge=1) = Field(10, description="receptive fields / positions")
    n_tokens: conint(ge=2) = Field(20, description="number of tokens d")
    G: conint(ge=1) = Field(40, description="number of generators")
    L: conint(ge=1) = Field(5, description="fixed positions per generator")
    workers: conint(ge=1) = Field(2, description="worker processes (1 torch thread each)")

    def base_run(self) -> TokenRun:
        from ssldyn.data.tokens import TokenSpec

        spec = TokenSpec(K=self.K, n_tokens=self.n_tokens, G=self.G, L=min(self.L, self.K))
        return TokenRun(
            spec=spec,
            lr=self.lr,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
            batch=self.batch,
            temperature=self.temperature,
            out_dim=self.output_d,
        )


def train_grid(cfg: TokenTrainConfig, ctx: Any, runs: list[TokenRun], keep_filters: bool = False) -> list[RunTrace]:
    """Train ``runs`` with the config's steps/logging/workers, cached in the run store, with progress."""
    return run_grid(
        runs,
        cfg.steps,
        min(cfg.log_every, cfg.steps),
        cache=cache_dir_for(ctx),
        workers=cfg.workers,
        keep_filters=keep_filters,
        track=ctx.track,
        device=getattr(ctx, "device", None),
    )
