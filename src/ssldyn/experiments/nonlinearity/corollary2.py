"""`nonlinearity` Thm. 2 / Cor. 2 (Sec. 3.2): Gaussian α lowers the roughness and may keep more local optima.

Data on the circle (``d = 2``) so that every fixed point of eq. 7 can be found: clusters of
points at angles in an arc around 0 (most of the mass on the positive side of the optima),
radius ``1 + noise``. ReLU. Pairwise importance: uniform ``α ≡ 1`` and the 1-D Gaussian α of
Cor. 2, ``α_ij = exp(−(h(wᵀx_i) − h(wᵀx_j))²/2τ)`` evaluated at the current ``w`` (stop-gradient,
eq. 2), for a grid of τ.

For each α we count distinct stable local optima in two ways:

- **power iteration** (eq. PI) from ``n_starts`` random starts (dead starts, ``A(w)w = 0``, are
  dropped; endpoints within ``merge_deg`` are merged), as the issue asks;
- **the circle scan**: on the circle the flow is ``θ̇ = r(θ) = w⊥ᵀA(w)w``; its stable fixed points are the
  downward sign changes of ``r`` on a fine θ grid (exact up to the grid).

At each optimum ``w*`` we report ``z₀(α_g) = E[exp(−h²(w*ᵀx)/2τ)]`` (Cor. 2) and the roughness
``ρ(w*)`` (finite differences at scale ``rho_eps``, α frozen at ``α(w*)``) next to ``λ_gap(w*)``.

Runs on ``ctx.device`` (data and starts drawn with the CPU generator, then moved); the sign-change
search, the merging of optima and the tables use CPU copies.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.data.latent import circle_points
from ssldyn.dynamics.alpha_cl import gated_covariance, gaussian_alpha_fn, make_A_fn, power_iteration
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.probes.alpha_cl import eigen_summary, local_roughness
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Corollary2Config(ExperimentConfig):
    cluster_deg: list[float] = Field(
        [-50.0, -30.0, -10.0, 10.0, 30.0, 50.0], min_length=2, description="cluster centres (degrees)"
    )
    per_cluster: conint(ge=2) = Field(40)
    angle_noise: PositiveFloat = Field(0.06, description="angular std (radians)")
    radius_noise: float = Field(0.1, ge=0)
    taus: list[PositiveFloat] = Field([0.5, 0.1, 0.02], min_length=1, description="Gaussian-α temperatures τ")
    n_grid: conint(ge=90) = Field(720, description="θ grid of the circle scan")
    n_starts: conint(ge=4) = Field(48, description="random starts of power iteration")
    n_iter: conint(ge=5) = Field(100)
    merge_deg: PositiveFloat = Field(3.0, description="endpoints closer than this are the same optimum")
    rho_eps: PositiveFloat = Field(0.05, description="finite-difference scale of ρ (radians)")


def _merge(angles_deg: list[float], tol: float) -> list[float]:
    out: list[float] = []
    for a in sorted(angles_deg):
        if not any(abs((a - b + 180) % 360 - 180) < tol for b in out):
            out.append(a)
    return out


@register
class Corollary2(Experiment):
    name = "nonlinearity.corollary2"
    paper = "nonlinearity"
    figure = "Thm. 2, Cor. 2"
    description = "Gaussian vs uniform α: z₀, roughness ρ and the number of stable local optima (ReLU, circle data)"
    Config = Corollary2Config
    quick = {"per_cluster": 25, "taus": [0.1, 0.02], "n_grid": 360, "n_starts": 16, "n_iter": 50}
    est_seconds = (15, 75)

    def run(self, cfg: Corollary2Config, ctx) -> Result:
        g = ctx.generator(0)
        dev = ctx.device
        c = torch.tensor(cfg.cluster_deg, dtype=torch.float64).deg2rad()
        ang = (
            c[:, None] + cfg.angle_noise * torch.randn(len(c), cfg.per_cluster, generator=g, dtype=torch.float64)
        ).reshape(-1)
        x = circle_points(ang) * (1 + cfg.radius_noise * torch.randn(ang.shape[0], 1, generator=g, dtype=torch.float64))
        x = x.to(dev)  # data made on the CPU (same points on every device)
        th_cpu = torch.linspace(-math.pi, math.pi, cfg.n_grid + 1, dtype=torch.float64)[:-1]
        th = th_cpu.to(dev)
        W = torch.stack([th.cos(), th.sin()], -1)
        Wp = torch.stack([-th.sin(), th.cos()], -1)
        starts = torch.randn(cfg.n_starts, 2, generator=g, dtype=torch.float64).to(dev)
        settings = [("uniform", None, None)] + [
            (f"gaussian τ={t:g}", t, gaussian_alpha_fn(x, "relu", t)) for t in cfg.taus
        ]
        rows, opt_rows, scans = [], [], {}
        for name, tau, alpha in ctx.track(settings, description="pairwise importances"):
            r = torch.cat(
                [
                    ((cp[:, None, :] @ gated_covariance(x, cw, "relu", alpha=alpha)) @ cw[:, :, None]).reshape(-1)
                    for cw, cp in zip(W.split(60), Wp.split(60))
                ]
            )
            r = r.cpu()
            s = torch.sign(r)
            down = ((s > 0) & (torch.roll(s, -1) < 0)).nonzero().reshape(-1)
            scan_opt = _merge([math.degrees(float(th_cpu[i])) for i in down], cfg.merge_deg)
            scans[name] = r.numpy()
            A_fn = make_A_fn(x, "relu", alpha=alpha)
            ends = []
            for chunk in starts.split(8):
                alive = (A_fn(chunk / chunk.norm(dim=-1, keepdim=True)) @ chunk[..., None]).squeeze(-1).norm(
                    dim=-1
                ) > 1e-12
                if alive.any():
                    pi = power_iteration(chunk[alive], A_fn, steps=cfg.n_iter, tol=1e-10, keep_path=True)
                    # a finite ReLU batch makes A(w) jump at kinks: iterates may end in a small cycle around a
                    # kink, so the endpoint is the mean direction of the last (up to) 10 iterates
                    tail = pi.trajectory.stack("w", tensors=True)[1][-10:].mean(0).cpu()
                    ends += [math.degrees(math.atan2(float(w[1]), float(w[0]))) for w in tail]
            pi_opt = _merge(ends, cfg.merge_deg)
            # stability of the power-iteration endpoints on the scan: keep those near a stable zero of r
            pi_stable = [b for b in scan_opt if any(abs((a - b + 180) % 360 - 180) < cfg.merge_deg for a in pi_opt)]
            for a in scan_opt:
                w = torch.tensor(
                    [math.cos(math.radians(a)), math.sin(math.radians(a))], dtype=torch.float64, device=dev
                )
                a_fixed = None if alpha is None else alpha(w)
                Af = make_A_fn(x, "relu", alpha=a_fixed)
                _, _, gap, _ = eigen_summary(Af(w[None])[0])
                rho = float(local_roughness(Af, w, eps=cfg.rho_eps))
                z0 = float(torch.exp(-(torch.relu(x @ w) ** 2) / (2 * tau)).mean()) if tau else 1.0
                # the uniform-α roughness at the same w*, for the Cor. 2 comparison
                rho_u = float(local_roughness(make_A_fn(x, "relu"), w, eps=cfg.rho_eps))
                if tau is None:  # Gaussian-α roughness (smallest τ, α frozen at w*) at the uniform optima too
                    ag = gaussian_alpha_fn(x, "relu", min(cfg.taus))(w)
                    rho_g_here = float(local_roughness(make_A_fn(x, "relu", alpha=ag), w, eps=cfg.rho_eps))
                else:
                    rho_g_here = rho if tau == min(cfg.taus) else float("nan")
                opt_rows.append(
                    {
                        "alpha": name,
                        "tau": tau,
                        "theta_deg": a,
                        "z0": z0,
                        "rho": rho,
                        "gap": float(gap),
                        "rho_uniform_same_w": rho_u,
                        "rho_gaussian_small_tau_same_w": rho_g_here,
                        "frac_positive": float((x @ w > 0).double().mean()),
                    }
                )
            rows.append(
                {
                    "alpha": name,
                    "tau": tau,
                    "n_stable_scan": len(scan_opt),
                    "n_pi_distinct": len(pi_opt),
                    "n_pi_stable": len(pi_stable),
                    "n_pi_alive": len(ends),
                }
            )
        counts = pd.DataFrame(rows)
        opts = pd.DataFrame(opt_rows)
        gs = opts[opts.tau.notna()]
        small = min(cfg.taus)
        gsm = gs[gs.tau == small]
        uni = counts[counts.alpha == "uniform"].iloc[0]
        both = opts[opts.tau.isna() | (opts.tau == small)]  # optima of uniform α and of the smallest τ
        gsm_c = counts[counts.tau == small].iloc[0]
        res = Result(
            tables={"counts": counts, "optima": opts, "scan": pd.DataFrame({"theta": th_cpu.numpy(), **scans})},
            arrays={"x": x.cpu().numpy()},
        )
        res.summary = {
            "n_pi_stable_uniform": int(uni["n_pi_stable"]),
            "n_pi_stable_gaussian_small_tau": int(gsm_c["n_pi_stable"]),
            "n_scan_uniform": int(uni["n_stable_scan"]),
            "n_scan_gaussian_small_tau": int(gsm_c["n_stable_scan"]),
            "z0_max_small_tau": float(gsm["z0"].max()) if len(gsm) else float("nan"),
            "frac_positive_at_optima": float(gsm["frac_positive"].mean()) if len(gsm) else float("nan"),
            "rho_gaussian_mean_small_tau": float(both["rho_gaussian_small_tau_same_w"].mean()),
            "rho_uniform_same_w_mean": float(both["rho_uniform_same_w"].mean()),
            "rho_over_gap_gaussian": float((gsm["rho"] / gsm["gap"]).mean()) if len(gsm) else float("nan"),
            "rho_over_gap_uniform": float((opts[opts.tau.isna()]["rho"] / opts[opts.tau.isna()]["gap"]).mean()),
            "smallest_tau": small,
        }
        res.notes.append(
            "Circle data of our choice (the paper gives no data for Cor. 2): clusters at "
            f"{cfg.cluster_deg}° with angular noise {cfg.angle_noise} rad; ρ is a finite-difference "
            f"estimate at scale {cfg.rho_eps} (finite batch: A(w) is piecewise constant). Stable optima "
            "found by power iteration (mean direction of the last 10 iterates) are counted only when they match a "
            "stable zero of the circle scan."
        )
        return res

    def claims(self, cfg: Corollary2Config, result: Result):
        s = result.summary
        loc = "Cor. 2, Sec. 3.2"
        return [
            check(
                "z0-small",
                "Gaussian α gives z₀(α_g) ≪ 1 when most data lie on the positive side of w*.",
                loc,
                s["z0_max_small_tau"],
                le=0.1,
                expected=f"max z₀ at the Gaussian-α optima (τ = {s['smallest_tau']:g}) <= 0.1; fraction of data "
                f"with w*ᵀx > 0 there: {s['frac_positive_at_optima']:.2f}",
            ),
            check(
                "lower-roughness",
                "Gaussian α has a lower roughness than uniform α at the same w* (r(w*, α_g) = z₀ r(w*, α_u)).",
                "Thm. 2, Cor. 2",
                s["rho_gaussian_mean_small_tau"],
                lt=s["rho_uniform_same_w_mean"],
                expected=f"mean ρ_g < mean ρ_u = {s['rho_uniform_same_w_mean']:.4g} over the optima of both (same w*)",
            ),
            check(
                "more-optima",
                "Power iteration from random starts finds at least as many distinct stable local "
                "optima under Gaussian α as under uniform α.",
                "Cor. 2, Sec. 5",
                s["n_pi_stable_gaussian_small_tau"],
                ge=s["n_pi_stable_uniform"],
                expected=f">= {s['n_pi_stable_uniform']} (uniform α); circle scan: "
                f"{s['n_scan_gaussian_small_tau']} vs {s['n_scan_uniform']}",
            ),
        ]

    def plots(self, cfg: Corollary2Config, result: Result, fig_dir: Path):
        sc, counts = result.tables["scan"], result.tables["counts"]
        fig, ax = new_figure(2, 1, size=(4.8, 3.5))
        for i, col in enumerate(c for c in sc.columns if c != "theta"):
            r = sc[col].to_numpy()
            ax[0, 0].plot(
                np.rad2deg(sc["theta"]), r / max(np.abs(r).max(), 1e-300), color=PALETTE[i % 8], lw=1, label=col
            )
        ax[0, 0].axhline(0, color="0.5", lw=0.8)
        ax[0, 0].set(xlabel="θ (degrees)", ylabel="r(θ) = w⊥ᵀA(w)w (scaled)", title="flow on the circle")
        ax[0, 0].legend(fontsize=6)
        xs = np.arange(len(counts))
        ax[0, 1].bar(xs - 0.2, counts["n_pi_stable"], width=0.4, color=PALETTE[0], label="power iteration")
        ax[0, 1].bar(xs + 0.2, counts["n_stable_scan"], width=0.4, color=PALETTE[1], label="circle scan")
        ax[0, 1].set_xticks(xs, counts["alpha"], rotation=20, fontsize=7)
        ax[0, 1].set(ylabel="# stable local optima", title="Cor. 2: uniform vs Gaussian α")
        ax[0, 1].legend(fontsize=7)
        return [save_figure(fig, fig_dir / "corollary2.png")]
