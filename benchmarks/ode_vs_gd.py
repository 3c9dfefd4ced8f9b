"""Benchmark: projected GD at width h vs the q-ODE (grassmann Thm. 2), to the same converged outputs.

Problem: the two-class MNIST set of ``grassmann.fig4`` (digits 4/9 × 200, unit-norm images,
PCA to d = 50, ``C`` of eq. (7) averaged over anchors and normalised to ‖C‖₂ = 1), z = 1, so
that the converged outputs are unique: ``q* = ±v_1`` (Thm. 3). From the same random
initialisation (``W1 ∈ St(h, d)``, ``W2 ∈ St(h, 1)``, ``q_0 = VᵀW1ᵀW2``):

- GD: projected GD (step, then polar map), η = 0.01, until ``max |q_GD − q*| <= tol``;
- ODE (Euler): eq. (9) with dt = η (the discretisation that matches GD step for step) until the
  same tolerance;
- ODE (adaptive): ``scipy.integrate.solve_ivp`` DOP853 in float64 (numpy right-hand side
  ``q_ode_rhs_numpy``) stopped by a terminal event at half the tolerance.

The eigendecomposition of C (needed once by the ODE) is included in the ODE times. Prints one
JSON line; ``ratio`` = GD wall time / adaptive-ODE wall time (target >= 100), ``ratio_euler`` =
GD / Euler-ODE.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--h", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--max-steps", type=int, default=200000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from scipy.integrate import solve_ivp

    from ssldyn.dynamics.manifold import ManifoldGD
    from ssldyn.dynamics.q_ode import eigh_ascending, q_from_map, q_ode_rhs, q_ode_rhs_numpy
    from ssldyn.experiments.grassmann.fig4 import Fig4Config, _prepare
    from ssldyn.models.two_layer import TwoLayerNet
    from ssldyn.objectives import trace_loss

    views, C = _prepare(Fig4Config(), args.seed)
    d = C.shape[0]
    net = TwoLayerNet(d, args.h, 1, "linear", "orthogonal", seeds=[args.seed + 1], dtype=torch.float64)
    lam, V = eigh_ascending(C)
    q0 = q_from_map(net.end_to_end()[0].detach(), V)  # (d, 1)
    sign = 1.0 if float(q0[0, 0]) >= 0 else -1.0
    q_star = torch.zeros_like(q0)
    q_star[0, 0] = sign

    # --- projected GD on the network
    opt = ManifoldGD(net.weights(), lr=args.lr, mode="projected", retraction="polar")
    t0 = time.perf_counter()
    steps_gd = 0
    while steps_gd < args.max_steps:
        opt.zero_grad()
        trace_loss(net.W1, net.W2, C).backward()
        opt.step()
        steps_gd += 1
        if steps_gd % 10 == 0:
            with torch.no_grad():
                q_gd = V.mT @ net.end_to_end()[0].T
            if float((q_gd - q_star).abs().max()) <= args.tol:
                break
    t_gd = time.perf_counter() - t0

    # --- q-ODE, Euler with dt = η (step k ↔ t = kη)
    t0 = time.perf_counter()
    lam_e, V_e = eigh_ascending(C)
    q = q0.clone()  # same initial outputs (the eigendecomposition above is part of the ODE's cost)
    steps_ode = 0
    while steps_ode < args.max_steps:
        q = q + args.lr * q_ode_rhs(q, lam_e)
        steps_ode += 1
        if steps_ode % 10 == 0 and float((q - q_star).abs().max()) <= args.tol:
            break
    t_euler = time.perf_counter() - t0

    # --- q-ODE, adaptive float64 DOP853 (scipy) until the same tolerance (terminal event)
    t0 = time.perf_counter()
    lam_a, _ = eigh_ascending(C)
    lam_np, q0_np, qs_np = lam_a.numpy(), q0.numpy(), q_star.numpy()
    f = lambda _t, y: q_ode_rhs_numpy(y.reshape(q0_np.shape), lam_np).reshape(-1)  # noqa: E731
    event = lambda _t, y: float(np.abs(y.reshape(q0_np.shape) - qs_np).max()) - 0.5 * args.tol  # noqa: E731
    event.terminal, event.direction = True, -1
    sol = solve_ivp(
        f, (0.0, args.max_steps * args.lr), q0_np.reshape(-1), method="DOP853", rtol=1e-7, atol=1e-10, events=event
    )
    q_ad = sol.y[:, -1].reshape(q0_np.shape)
    t_adapt = time.perf_counter() - t0

    dev = {
        "gd": float((q_gd - q_star).abs().max()),
        "euler": float((q - q_star).abs().max()),
        "adaptive": float(np.abs(q_ad - q_star.numpy()).max()),
    }
    print(
        json.dumps(
            {
                "benchmark": "ode_vs_gd",
                "h": args.h,
                "d": d,
                "z": 1,
                "lr": args.lr,
                "tol": args.tol,
                "agreement": "max |q − q*| <= tol for GD and both ODE solvers, q* = ±v_1 (Thm. 3)",
                "gd_steps": steps_gd,
                "gd_seconds": round(t_gd, 4),
                "ode_euler_steps": steps_ode,
                "ode_euler_seconds": round(t_euler, 4),
                "ode_adaptive_seconds": round(t_adapt, 4),
                "ode_adaptive_rhs_evals": int(sol.nfev),
                "ode_adaptive_t": round(float(sol.t[-1]), 3),
                "final_max_deviation": dev,
                "all_converged": all(v <= args.tol for v in dev.values()),
                "ratio": round(t_gd / t_adapt, 1),
                "ratio_euler": round(t_gd / t_euler, 1),
                "target_ratio": 100,
                "threads": torch.get_num_threads(),
            }
        )
    )


if __name__ == "__main__":
    main()
