"""`grassmann` Thm. 2, Sec. 4.2, Fig. 3: projected GD on the trace loss (8) vs the q-ODE (9).

Linear net ``u(x) = W2ᵀW1x`` with ``W1ᵀW1 = I_d``, ``W2ᵀW2 = I_z`` on the half-moons contrast
matrix ``C`` (eq. 7, mean over anchors), widths h ∈ {10, 100, 1000}, η = 0.01 (Sec. 4.2).
GD is the projected GD of eq. (11) (descent step, then the polar map back to the Stiefel
manifold). The ODE starts from the network's initial outputs ``q_0 = VᵀW1ᵀW2`` and is
discretised as ``q ← q + η·q_ode_rhs(q)`` so that step k of both is ODE time t = kη (see
``ssldyn.dynamics.q_ode`` for why the printed eq. 12 is the same at half speed). We also run
the printed eq. (12) and the Riemannian GD with the Grassmann projection ``(I − WWᵀ)G``,
whose flow is exactly eq. (9). All widths × seeds run as one masked ensemble.

GD and the Euler q-ODE run on ``ctx.device`` (``train_gd`` / ``euler``: NaN/inf data check and
loss guard); the recorded q come to the CPU for the trajectory and summaries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.dynamics.manifold import ManifoldGD, train_gd
from ssldyn.dynamics.q_ode import euler, q_from_map, trace_loss_q
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.experiments.grassmann._common import moons_problem, torch_threads
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.objectives import trace_loss
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Fig3Config(ExperimentConfig):
    widths: list[conint(ge=2)] = Field([10, 100, 1000], min_length=1, description="hidden widths h (Sec. 4.2)")
    lr: PositiveFloat = Field(0.01, description="learning rate η (Sec. 4.2)")
    steps: conint(ge=10) = Field(3000, description="GD steps = ODE steps (t = steps·η)")
    z: conint(ge=1) = Field(1, description="embedding dimension (Fig. 3 right: outputs converge to v_1)")
    seeds: conint(ge=1) = Field(3, description="initialisations per width")
    n: conint(ge=10) = Field(200, description="half-moons anchors")
    moons_noise: float = Field(0.05, ge=0, description="make_moons noise")
    record_every: conint(ge=1) = Field(20, description="steps between recorded outputs")


@register
class Fig3(Experiment):
    name = "grassmann.fig3"
    paper = "grassmann"
    figure = "Thm. 2, Fig. 3"
    description = "projected GD on the trace loss vs the q-ODE (eq. 9/12): same loss, same outputs, h = 10..1000"
    Config = Fig3Config
    quick = {"steps": 800, "seeds": 1, "record_every": 40}
    est_seconds = (8, 40)

    def run(self, cfg: Fig3Config, ctx) -> Result:
        with torch_threads(1, ctx.device):
            return self._run(cfg, ctx)

    def _run(self, cfg: Fig3Config, ctx) -> Result:
        views, C, lam, V = moons_problem(cfg.n, cfg.moons_noise, ctx.seed, device=ctx.device)
        d = C.shape[0]
        widths = [w for w in cfg.widths for _ in range(cfg.seeds)]
        seeds = [ctx.seed * 1000 + 17 * i for i in range(len(widths))]
        E, H = len(widths), max(cfg.widths)
        out = {}
        for variant, kw in (
            ("projected", dict(mode="projected", retraction="polar")),
            ("grassmann", dict(mode="riemannian", tangent="grassmann", retraction="polar")),
        ):
            net = TwoLayerNet(
                d,
                H,
                cfg.z,
                "linear",
                "orthogonal",
                ensemble=E,
                widths=widths,
                seeds=seeds,
                dtype=torch.float64,
                device=ctx.device,
            )
            opt = ManifoldGD(net.weights(), lr=cfg.lr, **kw)
            gd = train_gd(
                net.weights(),
                lambda net=net: trace_loss(net.W1, net.W2, C),
                update=opt.step,
                steps=cfg.steps,
                every=cfg.record_every,
                snapshots={"q": lambda _ps, net=net: q_from_map(net.end_to_end(), V)},  # (E, d, z)
                after_step=net.project_,  # re-apply the width mask (exact zeros)
                inputs={"C": C},
                track=lambda it, v=variant: ctx.track(it, total=cfg.steps + 1, description=f"Fig. 3 GD ({v})"),
            )
            ks, out[variant] = gd.trajectory.stack("q", tensors=True)  # (T,), (T, E, d, z)
        q0 = out["projected"][0]  # (E, d, z): same init for both GD variants
        assert torch.allclose(q0, out["grassmann"][0])
        _, q_ode = euler(q0, lam, lr=cfg.lr, steps=cfg.steps, form="eq9", every=cfg.record_every).trajectory.stack(
            "q", tensors=True
        )  # (T, E, d, z)
        _, q_12 = euler(q0, lam, lr=cfg.lr, steps=cfg.steps, form="eq12", every=cfg.record_every).trajectory.stack(
            "q", tensors=True
        )
        traj = Trajectory()
        for name, qq in (
            ("gd", out["projected"]),
            ("gd_grassmann", out["grassmann"]),
            ("ode", q_ode),
            ("ode_eq12", q_12),
        ):
            loss = trace_loss_q(qq, lam).cpu()  # (T, E)
            qq = qq.cpu()  # (T, E, d, z)
            for i, k in enumerate(ks):
                traj.log_members(int(k), f"{name}/loss", loss[i])
                traj.log_members(int(k), f"{name}/q1", qq[i, :, 0, 0])
                if d > 1:
                    traj.log_members(int(k), f"{name}/q2", qq[i, :, 1, 0])
        res = Result()
        res.add_trajectory(traj)
        dev_path = (out["projected"] - q_ode).abs().amax((2, 3)).cpu()  # (T, E)
        dev_grass = (out["grassmann"] - q_ode).abs().amax((2, 3)).cpu()
        final_dev = dev_path[-1]
        l_gd, l_ode = trace_loss_q(out["projected"][-1], lam).cpu(), trace_loss_q(q_ode[-1], lam).cpu()
        w = np.asarray(widths)
        s = {
            "widths": cfg.widths,
            "eigenvalues_C": lam.tolist(),
            "t_final": cfg.steps * cfg.lr,
            "max_path_deviation": float(dev_path.max()),
            "max_final_deviation": float(final_dev.max()),
            "max_path_deviation_grassmann_gd": float(dev_grass.max()),
            "max_final_loss_gap": float((l_gd - l_ode).abs().max()),
            "final_loss_ode_median": float(l_ode.median()),
            "lambda_min": float(lam[0]),
            "max_dev_eq12_vs_gd": float((out["projected"] - q_12).abs().amax((2, 3)).max()),
        }
        for h in cfg.widths:
            s[f"max_path_deviation_h{h}"] = float(dev_path[:, w == h].max())
        s["max_final_distance_to_v1"] = float(min_dist_to_pm_e1(out["projected"][-1]).max()) if cfg.z == 1 else None
        res.summary.update(s)
        res.notes.append(
            "Losses are means over anchors (C/n). The ODE is Euler on eq. (9) with dt = η (step k ↔ "
            "t = kη); the printed eq. (12) is the same at dt = η/2 and lags GD (curves 'ode_eq12', max "
            f"|q_GD − q_eq12| = {s['max_dev_eq12_vs_gd']:.3g})."
        )
        res.notes.append(
            "Projected GD (polar) follows q̇ = −(4Λq − 3qqᵀΛq − Λqqᵀq) to first order, not eq. (9) "
            "exactly; the Riemannian GD with the Grassmann projection follows eq. (9) (max deviation "
            f"{s['max_path_deviation_grassmann_gd']:.3g} vs {s['max_path_deviation']:.3g})."
        )
        return res

    def claims(self, cfg: Fig3Config, result: Result):
        s = result.summary
        out = [
            check(
                "same-final-loss",
                "GD and the ODE converge to the same final loss.",
                "Sec. 4.2, Fig. 3 (left)",
                s["max_final_loss_gap"],
                le=1e-3,
                expected="max over widths/seeds |L_GD(T) − L_ODE(T)| <= 1e-3",
            ),
            check(
                "outputs-stay-close",
                "For a given initialisation the outputs of GD and of the ODE stay close along the way.",
                "Sec. 4.2, Fig. 3 (right)",
                s["max_path_deviation"],
                le=0.1,
                expected="max over t, widths, seeds, entries |q_GD(t) − q_ODE(t)| <= 0.1",
            ),
            check(
                "same-final-outputs",
                "... and converge to the same final outputs.",
                "Sec. 4.2, Fig. 3 (right)",
                s["max_final_deviation"],
                le=1e-2,
                expected="max |q_GD(T) − q_ODE(T)| <= 1e-2",
            ),
        ]
        if cfg.z == 1 and s.get("max_final_distance_to_v1") is not None:
            out.append(
                check(
                    "converges-to-v1",
                    "The machine outputs converge to the smallest eigenvector (C has negative eigenvalues).",
                    "Sec. 4.2, Numerical evaluation of Thm. 3",
                    s["max_final_distance_to_v1"],
                    le=1e-2,
                    expected="max ‖q(T) ∓ e_1‖ <= 1e-2",
                )
            )
        return out

    def plots(self, cfg: Fig3Config, result: Result, fig_dir: Path):
        df = result.tables["metrics"]
        fig, ax = new_figure(2, 1, size=(4.6, 3.6))
        styles = {"gd": "-", "ode": "--", "ode_eq12": ":"}
        n_per = cfg.seeds
        for i, h in enumerate(cfg.widths):
            m = i * n_per  # first seed of this width
            for name, ls in styles.items():
                g = df[(df.probe == f"{name}/loss") & (df.member == m)]
                ax[0, 0].plot(
                    g.step * cfg.lr,
                    g.value,
                    ls,
                    color=PALETTE[i % 8],
                    label=f"{'GD' if name == 'gd' else name} h={h}" if name != "ode_eq12" or i == 0 else None,
                )
                for probe in ("q1", "q2"):
                    g = df[(df.probe == f"{name}/{probe}") & (df.member == m)]
                    if len(g) and name != "ode_eq12":
                        ax[0, 1].plot(g.step * cfg.lr, g.value, ls, color=PALETTE[i % 8])
        ax[0, 0].set(xlabel="t = step·η", ylabel="trace loss (8)", title="(left) loss: GD (—) vs ODE (--), eq12 (··)")
        ax[0, 0].legend(fontsize=7)
        ax[0, 1].set(xlabel="t = step·η", ylabel="u(v_1), u(v_2)", title="(right) outputs q: GD (—) vs ODE (--)")
        return [save_figure(fig, fig_dir / "fig3.png")]


def min_dist_to_pm_e1(q: torch.Tensor) -> torch.Tensor:
    """``min(‖q − e_1‖, ‖q + e_1‖)`` for ``q (E, d, 1)`` in the eigenbasis ``(E,)``."""
    e1 = torch.zeros_like(q[0])
    e1[0, 0] = 1.0
    return torch.minimum((q - e1).flatten(1).norm(dim=1), (q + e1).flatten(1).norm(dim=1))
