"""Benchmark: the Fig. 4/9/10 grid of `nonlinearity` (384 runs) as batched ensembles vs one run at a time.

Grid: 2 losses × 4 activations × β ∈ {1,2,5,10} × P ∈ {1,3,5,10} × 3 seeds, 5000 steps of batch 128.
Prints ONE JSON line with
- ``grid_wall_s``: wall time of the whole grid through the ensemble path. By default every run
  of the grid is trained for ``--steps`` steps (all ensembles, all shapes) and the time is
  extrapolated linearly to 5000 steps (``grid_extrapolated: true``); ``--steps 5000`` measures it.
- ``single_wall_s``: the same 384 runs one at a time through the E = 1 path, extrapolated from
  a sample of ``--single-sample`` runs spread over the widths M (linear fit of time vs M) × ``--steps`` steps.
- ``speedup`` = single / grid; ``gflops``: executed matmul FLOPs of the ensemble path per second
  (the token-space path of ``EnsembleRFNet.forward_pair``: table matmuls, BN statistics from
  counts, the loss); ``peak_gflops``: a float32 matmul on the same device (2048² with the same threads
  on the CPU, 8192² on a GPU);
  ``frac_peak`` = gflops / peak.
- ``model_gflops`` / ``mfu``: *model* FLOPs per second — the FLOPs of the network's per-sample
  forward + backward (first layer on dense inputs, V, its two gradients, the loss), which is what
  a per-sample implementation executes — over the peak ("model FLOPs utilisation"). The token-space
  path computes the same gradients with ~4× fewer FLOPs, so ``mfu`` > ``frac_peak``; both are printed.
The grid runs through the production path of the experiments: ensembles planned by
``group_token_runs`` (cache-sized on the CPU; ONE ensemble on a GPU), each a task of the lab's
executor (``Context.as_completed``: a pool of ``--workers`` processes with ONE torch thread each —
measured faster than 2 threads in one process for these many small ops, and robust on a shared
machine —, each keeping a 256 MB malloc top pad; in-process on a GPU). The peak matmul uses
``torch.set_num_threads(--threads)``; ``OMP_WAIT_POLICY=PASSIVE`` so idle OpenMP threads sleep.

``--device cuda`` times the grid on a GPU; ``--compile`` adds ``compile_*`` figures: the per-step
time of the largest ensemble eager vs through ``torch.compile`` (CUDA graphs on a GPU), both
measured in this run after a warm-up (the compile time is reported separately).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import time

import numpy as np
import torch

from ssldyn.contract.context import Context, keep_heap_pad
from ssldyn.dynamics.ensemble_trainer import (
    TokenRun,
    group_token_runs,
    token_ensemble_cost,
    train_token_ensemble,
)
from ssldyn.experiments.nonlinearity.token_grid import make_runs
from ssldyn.lab.tasks import Tasks
from ssldyn.models.rf_net import token_path

FULL_STEPS = 5000


def matmul_peak(device: torch.device, reps: int = 8) -> float:
    """GFLOP/s of a float32 matmul on ``device`` (the grid's dtype and matmul precision): 2048² on the CPU,
    8192² on a GPU (2048² is too small to fill one), synchronised before each clock read."""
    n = 8192 if device.type == "cuda" else 2048
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(2):
        a @ b
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return 2 * n**3 * reps / (time.perf_counter() - t) / 1e9


def step_flops(runs: list[TokenRun]) -> float:
    """Executed matmul FLOPs of one training step of one ensemble (padded shapes, the chosen token form)."""
    r0 = runs[0]
    E, K, T, din, out = len(runs), r0.spec.K, r0.spec.n_tokens, r0.spec.dim, r0.out_dim
    N = r0.batch
    Mp = max(r.filters for r in runs)
    f = 2 * 2 * K * T * Mp * din  # table y_tab = U W_kᵀ and ∂L/∂W_k = dy_tabᵀ U
    f += 2 * 2 * K * 2 * T * Mp  # BN statistics: counts · h_tab, counts · h_tab²
    if token_path(K, Mp, N, T, out) == "table":
        f += 3 * 2 * K * (2 * T) * Mp * out  # P = (h s) V_k, Σ_a h D (∂V), D V_k (∂h)
    else:
        f += 3 * 2 * (2 * N) * K * Mp * out  # z = g Vᵀ, ∂V = gᵀ ∂z, ∂g = ∂z V
    f += 2 * 2 * N * N * out  # loss: S = ẑ1 ẑ1ᵀ and (G + Gᵀ) ẑ1
    return float(E * f)


def model_flops(runs: list[TokenRun]) -> float:
    """Model FLOPs of one step: per-sample forward + backward of the network on dense inputs (+ loss)."""
    r0 = runs[0]
    K, din, out, N = r0.spec.K, r0.spec.dim, r0.out_dim, r0.batch
    f = 0.0
    for r in runs:  # unpadded widths: the model's own FLOPs
        F = K * r.filters
        f += 2 * 2 * (2 * N) * F * din  # first layer and its weight gradient
        f += 3 * 2 * (2 * N) * F * out  # z = g Vᵀ, ∂V, ∂g
        f += 2 * 2 * N * N * out  # loss
    return f


def _warm(_: int) -> int:
    time.sleep(0.5)  # long enough for every worker of the pool to start and take one
    return torch.get_num_threads()


def _time_group(task: tuple[list[TokenRun], int, str]) -> dict:
    members, steps, device = task
    t = time.perf_counter()
    res = train_token_ensemble(members, steps=steps, every=steps, device=device)
    res.state.W.sum().item()  # wait for the device
    return {
        "E": len(members),
        "M_pad": max(r.filters for r in members),
        "s_per_step": round((time.perf_counter() - t) / steps, 5),
    }


def compile_figures(members: list[TokenRun], steps: int, device: str) -> dict:
    """Per-step time of one ensemble, eager vs ``torch.compile`` (both after a warm-up)."""

    def per_step(compile) -> float:
        train_token_ensemble(members, steps=3, every=3, device=device, compile=compile)  # warm-up / compile
        t = time.perf_counter()
        res = train_token_ensemble(members, steps=steps, every=steps, device=device, compile=compile)
        res.state.W.sum().item()
        return (time.perf_counter() - t) / steps

    t0 = time.perf_counter()
    torch._dynamo.reset()
    compiled = per_step(True)
    eager = per_step(False)
    return {
        "compile_E": len(members),
        "compile_eager_s_per_step": round(eager, 5),
        "compile_compiled_s_per_step": round(compiled, 5),
        "compile_speedup": round(eager / compiled, 3),
        "compile_total_s": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100, help="steps per run actually trained (extrapolated to 5000)")
    ap.add_argument("--single-sample", type=int, default=8, help="runs timed through the E = 1 path")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the peak matmul")
    ap.add_argument("--workers", type=int, default=2, help="processes training ensembles (1 thread each)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--compile", action="store_true", help="also time the largest ensemble eager vs compiled")
    args = ap.parse_args()
    keep_heap_pad()  # as the grid's workers: the E = 1 baseline below runs in this process
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    peak = matmul_peak(dev)  # on the device the grid runs on (before 2026-12-04: always the CPU)
    runs = make_runs(
        losses=["infonce", "quadratic"],
        activations=["linear", "relu", "leaky_relu", "quadratic"],
        betas=[1, 2, 5, 10],
        Ps=[1, 3, 5, 10],
        seeds=[0, 1, 2],
        bns=["mean_only"],
    )
    steps = args.steps
    groups = group_token_runs(runs, device=dev)
    groups.sort(key=lambda g: -token_ensemble_cost([runs[i] for i in g]))  # largest first (load balance)
    flops = sum(step_flops([runs[i] for i in g]) for g in groups) * steps
    mflops = sum(model_flops([runs[i] for i in g]) for g in groups) * steps
    # ensemble path: the lab's executor (a pool of `workers` single-thread processes, started and
    # warmed up before timing; in-process on a GPU), every ensemble of the grid trained `steps` steps
    ctx = Context(tasks=Tasks("processes", workers=args.workers), device=dev)
    ctx.map(_warm, range(args.workers))
    if dev.type == "cuda":  # CUDA context and kernels: not part of the grid's time
        _time_group(([runs[i] for i in groups[0]], 2, str(dev)))
    t0 = time.perf_counter()
    per_group = ctx.map(_time_group, [([runs[i] for i in g], steps, str(dev)) for g in groups])
    grid_s = time.perf_counter() - t0
    # E = 1 path: a sample of runs spread over the widths M = β·P, one at a time in this process
    # (one torch thread: faster than two for these small ops); the total for all 384 runs is
    # extrapolated with a least-squares fit t(M) = a + b·M over the sample
    torch.set_num_threads(1)
    by_m = sorted(runs, key=lambda r: (r.filters, r.activation, r.loss))
    sample = [by_m[int(i)] for i in np.linspace(0, len(by_m) - 1, args.single_sample)]
    ts, ms = [], []
    for r in sample:
        t1 = time.perf_counter()
        train_token_ensemble([r], steps=steps, every=steps, device=dev).state.W.sum().item()
        ts.append(time.perf_counter() - t1)
        ms.append(r.filters)
    b, a = np.polyfit(np.asarray(ms, float), np.asarray(ts), 1)
    single_s = float(sum(a + b * r.filters for r in runs))
    scale = FULL_STEPS / steps
    out = {
        "benchmark": "token_grid",
        "runs": len(runs),
        "ensembles": len(groups),
        "steps_measured": steps,
        "steps_full": FULL_STEPS,
        "grid_extrapolated": steps != FULL_STEPS,
        "grid_wall_s": round(grid_s * scale, 1),
        "grid_measured_s": round(grid_s, 2),
        "single_wall_s": round(single_s * scale, 1),
        "single_extrapolated_from_runs": len(sample),
        "speedup": round(single_s / grid_s, 2),
        "gflops": round(flops / grid_s / 1e9, 2),
        "peak_gflops": round(peak, 2),
        "frac_peak": round(flops / grid_s / 1e9 / peak, 3),
        "model_gflops": round(mflops / grid_s / 1e9, 2),
        "mfu": round(mflops / grid_s / 1e9 / peak, 3),
        "target_grid_s": 900,
        "target_frac_peak": 0.4,
        "device": str(dev),
        "workers": args.workers if dev.type == "cpu" else 1,
        "threads_per_worker": 1,
        "peak_threads": args.threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "per_ensemble": per_group,
    }
    if args.compile:
        out.update(compile_figures([runs[i] for i in groups[0]], steps, str(dev)))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
