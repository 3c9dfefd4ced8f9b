"""Empirical NTK of the averaging net (``variational`` eq. 18) by autograd vs the closed form of Prop. 4.3.

Prints one JSON line: wall time (median of ``--repeats``) of the full ``(n, n, d, d)`` kernel for
n = 1024 inputs, width M = 512 per output coordinate, d = 2, for input dimensions ``--Ds``
(default 2 = the Fig. 5 setting, and 16 = a Sec. 4.2 setting with D > d), by
``empirical_ntk(implementation="jacobian")``, ``empirical_ntk(implementation="ntk-vp")`` and
``averaging_net_kernel``, the closed form's speed-up over the faster generic implementation
(target >= 20x), and the max abs difference between the kernels (float64).

The generic implementations cost O(n² d² · Md·D) (they form all d×d blocks from parameter
gradients), the closed form O(n² M d + n² D), so the speed-up grows with D and d.

Usage: python benchmarks/ntk.py [--n 1024] [--width 512] [--d 2] [--Ds 2 16] [--repeats 3] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from ssldyn.kernels import averaging_net_kernel, empirical_ntk
from ssldyn.models import AveragingNet


def _time(fn, repeats: int):
    out, times = None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--d", type=int, default=2)
    ap.add_argument("--Ds", type=int, nargs="+", default=[2, 16])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    out = {
        "benchmark": "ntk",
        "n": a.n,
        "width_M": a.width,
        "d": a.d,
        "dtype": "float64",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "target_speedup": 20,
    }
    for D in a.Ds:
        g = torch.Generator().manual_seed(0)
        net = AveragingNet(D, a.d, a.width, "relu", dtype=torch.float64, generator=g)
        x = torch.randn(a.n, D, generator=g, dtype=torch.float64)
        B = net.B[0].detach()
        K_cf, t_cf = _time(lambda B=B, x=x: averaging_net_kernel(B, x, None, "relu", d=a.d), a.repeats)
        K_j, t_j = _time(lambda net=net, x=x: empirical_ntk(net, None, x, implementation="jacobian"), a.repeats)
        diff_j = float((K_j - K_cf).abs().max())
        del K_j
        K_v, t_v = _time(lambda net=net, x=x: empirical_ntk(net, None, x, implementation="ntk-vp"), 1)
        diff_v = float((K_v - K_cf).abs().max())
        del K_v
        fastest = min(t_j, t_v)
        out[f"D{D}"] = {
            "t_jacobian_s": round(t_j, 4),
            "t_ntk_vp_s": round(t_v, 4),
            "t_closed_form_s": round(t_cf, 5),
            "speedup_closed_form_vs_fastest_generic": round(fastest / t_cf, 1),
            "meets_target": fastest / t_cf >= 20,
            "max_abs_diff": max(diff_j, diff_v),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
