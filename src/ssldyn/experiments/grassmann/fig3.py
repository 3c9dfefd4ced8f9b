"""`grassmann` Thm. 2, Sec. 4.2, Fig. 3: GD on the trace loss (8) vs the q-ODE (9).

Linear net ``u(x) = W2ᵀW1x`` with ``W1ᵀW1 = I_d``, ``W2ᵀW2 = I_z`` on the half-moons contrast
matrix ``C`` (eq. 7, mean over anchors), widths h ∈ {10, 100, 1000}, η = 0.01 (Sec. 4.2).

- **Fig. 3 (paper)**: GD as Sec. 4.2 describes eq. (11) — a descent step, then the weights
  projected back on ``W1ᵀW1 = I``, ``W2ᵀW2 = I`` (polar map) — against the ODE started from the
  network's initial outputs ``q_0 = VᵀW1ᵀW2``, discretised as ``q ← q + η·q_ode_rhs(q)`` so that
  step k of both is ODE time t = kη.
- **Thm. 2 (exactness)**: the theorem's flow is GD with the Grassmann projection ``(I − WWᵀ)∇L``
  (proof of Thm. 2, Edelman et al.). Discrete GD with that projection must then converge to the
  exact ODE solution (float64 dopri5, tight tolerances) at order 1 in η: we run it at 4η, 2η, η up
  to ``t_order`` and fit the order of the deviation. Projected GD with the polar map follows a
  different flow (``projected_gd_rhs``: same fixed points, different cubic term): its deviation
  does not vanish as η → 0 (reported as information).
- **Errata**: the printed eq. (11) ``W ← W + η∇L`` is gradient *ascent* (a few printed steps
  increase the loss); the printed eq. (12) drops the factor 2 of eq. (9), so it is Euler with
  dt = η/2 (step k ↔ t = kη/2): it matches the exact solution at kη/2, not at kη.

Seeds are the ensemble axis (``batch_seeds``): members are seeds × widths × initialisations
(widths masked in one ``TwoLayerNet``), each member with its seed's ``C``. Runs on ``ctx.device``
(``train_gd``: NaN/inf data check and loss guard; the q-ODE with torchdiffeq); the recorded q
come to the CPU for the trajectory and summaries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import torch
from pydantic import Field, PositiveFloat, model_validator

from ssldyn.dynamics.manifold import ManifoldGD, projected_gd_step_, train_gd
from ssldyn.dynamics.q_ode import euler, q_from_map, solve_adaptive, trace_loss_q
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.experiments.grassmann._common import GrassmannExperiment, loglog_slope, moons_batch, per_member
from ssldyn.lab import (
    ClaimSpec,
    Context,
    Erratum,
    ExperimentConfig,
    Measured,
    Result,
    between,
    gt,
    le,
    lt,
    register,
)
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.objectives import trace_loss
from ssldyn.viz.common import PALETTE, new_figure, save_figure

ORDER_FACTORS = (4, 2, 1)  # the order study runs GD at 4η, 2η, η


class Fig3Config(ExperimentConfig):
    widths: list[Annotated[int, Field(ge=2)]] = Field(
        [10, 100, 1000], min_length=1, description="hidden widths h (Sec. 4.2)"
    )
    lr: PositiveFloat = Field(0.01, description="learning rate η (Sec. 4.2)")
    steps: Annotated[int, Field(ge=10)] = Field(3000, description="GD steps = ODE steps (t = steps·η)")
    z: Annotated[int, Field(ge=1, le=2)] = Field(
        1, description="embedding dimension (≤ d = 2; Fig. 3 right: z = 1, q → v_1)"
    )
    inits: Annotated[int, Field(ge=1)] = Field(3, description="initialisations per width and seed")
    n: Annotated[int, Field(ge=10)] = Field(200, description="half-moons anchors")
    moons_noise: float = Field(0.05, ge=0, description="make_moons noise")
    record_every: Annotated[int, Field(ge=1)] = Field(20, description="steps between recorded outputs")
    t_order: PositiveFloat = Field(2.0, description="ODE time of the convergence-order study (Thm. 2)")
    ascent_steps: Annotated[int, Field(ge=1)] = Field(20, description="steps of the printed eq. (11) in its erratum")

    @model_validator(mode="after")
    def _fits(self):
        if min(self.widths) < 2:
            raise ValueError(f"widths {self.widths}: every width must be >= d = 2 (W1ᵀW1 = I_d)")
        for f in ORDER_FACTORS:
            k = self.t_order / (f * self.lr)
            if abs(k - round(k)) > 1e-9 or round(k) < 1:
                raise ValueError(f"t_order={self.t_order} must be a whole number of steps of {f}·lr = {f * self.lr}")
        return self


def _max_dev(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``max |a − b|`` over the last two axes ``(..., d, z)`` -> ``(...)``."""
    return (a - b).abs().amax((-2, -1))


@register
class Fig3(GrassmannExperiment):
    name = "grassmann.fig3"
    figure = "Thm. 2, Fig. 3"
    description = "GD on the trace loss vs the q-ODE (9): same loss and outputs (Fig. 3); Grassmann GD → eq. 9 at O(η)"
    Config = Fig3Config
    quick = {"steps": 500, "inits": 1, "record_every": 25}
    est_seconds = (2, 20)  # CPU seconds for all seeds (3 quick, 5 paper)
    version = "2"
    claims = (
        ClaimSpec(
            "same-final-loss", "GD (eq. 11, projected) and the ODE converge to the same final loss.",
            "Sec. 4.2, Fig. 3 (left)", result="Fig. 3", kind="paper",
            reading="largest over widths and initialisations of |L_GD(T) − L_ODE(T)| (loss 8, C averaged)",
            relation=le(1e-3), basis="tolerance: 0.1% of the loss scale |λ_1| ~ 1",
        ),
        ClaimSpec(
            "outputs-stay-close", "For a given initialisation the outputs of GD and of the ODE stay close along "
            "the way.", "Sec. 4.2, Fig. 3 (right)", result="Fig. 3", kind="paper",
            reading="largest over t, widths, initialisations and entries of |q_GD(t) − q_ODE(t)|",
            relation=le(0.1), basis="tolerance: 10% of the unit scale of q (‖q‖₂ ≤ 1), the plotted resolution",
            if_fails="Projected GD with the polar map (eq. 11 as the paper describes it) follows "
            "q̇ = −(4Λq − 3qqᵀΛq − Λqqᵀq), not eq. (9): same linear part and fixed points, a different cubic "
            "term, which matters while q grows from ~0 to ±v_1 (narrow nets start from larger q). GD with the "
            "Grassmann projection stays close to eq. (9) for the same initialisations (see the detail).",
        ),
        ClaimSpec(
            "same-final-outputs", "... and converge to the same final outputs.", "Sec. 4.2, Fig. 3 (right)",
            kind="paper", reading="largest |q_GD(T) − q_ODE(T)| over widths, initialisations and entries",
            result="Fig. 3",
            relation=le(1e-2), basis="tolerance: 1% of the unit scale of q",
        ),
        ClaimSpec(
            "converges-to-v1", "The machine outputs converge to the smallest eigenvector (C has negative "
            "eigenvalues).", "Sec. 4.2, Thm. 3", kind="paper",
            reading="largest min(‖q_GD(T) − e_1‖, ‖q_GD(T) + e_1‖) (eigenbasis, z = 1)",
            relation=le(1e-2), basis="tolerance: 1% of ‖v_1‖ = 1", result="Fig. 3",
        ),
        ClaimSpec(
            "thm2-grassmann-order", "Thm. 2: eq. (9) is the exact learning dynamics of GD under the orthogonality "
            "constraints (Grassmann projection (I − WWᵀ)∇L).", "Thm. 2", kind="paper",
            reading="an exact flow ⇒ discrete Grassmann GD converges to the exact ODE solution (float64 dopri5) "
            "at order 1 in η: log-log slope of max |q_GD(t_order) − q_exact(t_order)| against η ∈ {4η, 2η, η} "
            "(nets of width min(widths); the theorem does not depend on h)",
            relation=between(0.8, 1.2),
            basis="method: a retracted explicit Euler step has global error O(η), i.e. order 1 (±0.2 for the "
            "O(η²) corrections at these η)",
            if_fails="an order near 0 means GD follows a different flow than eq. (9)",
        ),
        Erratum(
            "eq11-sign", "The printed GD update of eq. (11) adds the gradient: it is gradient ascent.",
            "eq. (11), Sec. 4.2", printed="W ← W + η∇L", used="W ← W − η∇L (then the projection)",
            reading="smallest over members of the relative change (L(k printed steps) − L(0))/|L(0)| from the same "
            "initialisation (both eigenvalues of C are negative, so ascent drives q towards 0 and L up to 0)",
            relation=gt(0.0), basis="relation: ascent increases the loss at every member", result="Fig. 3",
        ),
        Erratum(
            "eq12-time-scale", "The printed eq. (12) drops the factor 2 of eq. (9): it is Euler with dt = η/2, so "
            "step k is ODE time kη/2, not kη.", "eq. (12), eq. (9)",
            printed="q ← q − η[2Λq − Λqqᵀq − qqᵀΛq]", used="q ← q + η·q̇ with q̇ of eq. (9) (step k ↔ t = kη)",
            reading="max over the path of |q_eq12(k) − q_exact(kη/2)| divided by max |q_eq12(k) − q_exact(kη)|",
            relation=lt(0.1), basis="method: the kη/2 mismatch is the O(η) Euler error, the kη one is O(1)",
            result="Fig. 3",
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: Fig3Config, n_seeds: int) -> tuple[int, str]:
        """≈ 0.6 GB (process, lab, figures) + 12 copies of every member's (W1, W2) in float64 at the widest
        width (E = widths·inits·seeds members); measured: +9 copies' worth between h = 10⁵ and 4·10⁵."""
        E = len(cfg.widths) * cfg.inits * n_seeds
        return int(0.6e9 + 12 * E * max(cfg.widths) * (2 + cfg.z) * 8), "widths"

    def run(self, cfg: Fig3Config, ctx: Context) -> list[Result]:
        dev, seeds = ctx.device, ctx.seeds
        mb = moons_batch(cfg.n, cfg.moons_noise, seeds, device=dev)
        d, W, S = mb.d, len(cfg.widths), len(seeds)
        per = W * cfg.inits  # members per seed
        widths = [w for w in cfg.widths for _ in range(cfg.inits)] * S  # (E,) seed-major
        member_seeds = [s * 1000 + 17 * i for s in seeds for i in range(per)]
        E, H = len(widths), max(cfg.widths)
        C, lam, V = (per_member(t, per) for t in (mb.C, mb.lam, mb.V))  # (E, d, d), (E, d), (E, d, d)

        def make_net(h_max: int = H) -> TwoLayerNet:
            ws = [min(w, h_max) for w in widths]
            return TwoLayerNet(d, max(ws), cfg.z, "linear", "orthogonal", ensemble=E, widths=ws, seeds=member_seeds,
                               dtype=torch.float64, device=dev)  # fmt: skip

        def run_gd(kind: str, lr: float, steps: int, every: int, h_max: int = H):
            net = make_net(h_max)
            kw = {"mode": "projected"} if kind == "projected" else {"mode": "riemannian", "tangent": "grassmann"}
            opt = ManifoldGD(net.weights(), lr=lr, retraction="polar", **kw)
            gd = train_gd(net.weights(), lambda: trace_loss(net.W1, net.W2, C), update=opt.step, steps=steps,
                          every=every, snapshots={"q": lambda _ps: q_from_map(net.end_to_end(), V)}, inputs={"C": C},
                          track=lambda it: ctx.track(it, total=steps + 1, description=f"Fig. 3 GD ({kind}, η={lr:g})"))  # fmt: skip
            ks, qs = gd.trajectory.stack("q", tensors=True)  # (T,), (T, E, d, z)
            return ks, qs

        out = {}
        for kind in ("projected", "grassmann"):
            ks, out[kind] = run_gd(kind, cfg.lr, cfg.steps, cfg.record_every)
        ks = np.asarray(ks)
        q0 = out["projected"][0]  # (E, d, z): the same initial weights in every run
        _, q_ode = euler(q0, lam, lr=cfg.lr, steps=cfg.steps, form="eq9", every=cfg.record_every).trajectory.stack(
            "q", tensors=True
        )  # (T, E, d, z)
        _, q_12 = euler(q0, lam, lr=cfg.lr, steps=cfg.steps, form="eq12", every=cfg.record_every).trajectory.stack(
            "q", tensors=True
        )
        t = torch.as_tensor(ks * cfg.lr, dtype=torch.float64, device=dev)
        grid, inv = torch.unique(torch.cat([t, t / 2]), sorted=True, return_inverse=True)  # strictly increasing
        exact = solve_adaptive(q0, lam, t=grid, rtol=1e-10, atol=1e-12).trajectory.stack("q", tensors=True)[
            1
        ]  # (G, E, d, z)
        exact_t, exact_half = exact[inv[: len(t)]], exact[inv[len(t) :]]  # at t = kη and t = kη/2
        # Thm. 2: convergence order of Grassmann GD (and, as information, of polar projected GD), on nets of
        # width min(widths) (the theorem is width-independent; the narrow nets make the extra runs cheap)
        h0 = min(cfg.widths)
        t_ord = torch.tensor([0.0, cfg.t_order], dtype=torch.float64, device=dev)
        order_dev = {}
        ref: torch.Tensor | None = None  # the ODE at t_order from the first run's q_0 (every run starts there)
        for kind in ("grassmann", "projected"):
            for f in ORDER_FACTORS:
                lr = f * cfg.lr
                k = round(cfg.t_order / lr)
                _, qq = run_gd(kind, lr, k, k, h_max=h0)  # records steps 0 and k
                if ref is None:
                    ref = solve_adaptive(qq[0], lam, t=t_ord, rtol=1e-11, atol=1e-13).state  # (E, d, z) at t_order
                order_dev[(kind, f)] = _max_dev(qq[-1], ref).cpu()  # (E,)
        # erratum eq. (11): the printed update is ascent
        net = make_net()
        L0 = trace_loss(net.W1, net.W2, C).detach()
        for _ in range(cfg.ascent_steps):
            net.zero_grad()
            trace_loss(net.W1, net.W2, C).sum().backward()
            projected_gd_step_(net.weights(), -cfg.lr, "polar")  # W ← polar(W + η∇L): eq. (11) as printed
        ascent = ((trace_loss(net.W1, net.W2, C).detach() - L0) / L0.abs()).cpu()  # (E,) relative change
        # per-seed results
        series = {"gd": out["projected"], "gd_grassmann": out["grassmann"], "ode": q_ode, "ode_eq12": q_12}
        losses = {k: trace_loss_q(v, lam).cpu() for k, v in series.items()}  # (T, E)
        dev_path = _max_dev(out["projected"], q_ode).cpu()  # (T, E)
        dev_grass = _max_dev(out["grassmann"], exact_t).cpu()
        dev_proj_exact = _max_dev(out["projected"], exact_t).cpu()
        e12_half = _max_dev(q_12, exact_half).amax(0).cpu()  # (E,)
        e12_full = _max_dev(q_12, exact_t).amax(0).cpu()
        dist_v1 = min_dist_to_pm_e1(out["projected"][-1]).cpu() if cfg.z == 1 else None
        qs_cpu = {k: v.cpu() for k, v in series.items()}
        w_arr = np.asarray(widths)
        results = []
        for s in range(S):
            sl = slice(s * per, (s + 1) * per)
            traj = Trajectory()
            for name, qq in qs_cpu.items():
                for i, k in enumerate(ks):
                    traj.log_members(int(k), f"{name}/loss", losses[name][i, sl])
                    traj.log_members(int(k), f"{name}/q1", qq[i, sl, 0, 0])
                    traj.log_members(int(k), f"{name}/q2", qq[i, sl, 1, 0])
            res = Result()
            res.add_trajectory(traj)
            gd_dev = {f: float(order_dev[("grassmann", f)][sl].max()) for f in ORDER_FACTORS}
            pr_dev = {f: float(order_dev[("projected", f)][sl].max()) for f in ORDER_FACTORS}
            etas = [f * cfg.lr for f in ORDER_FACTORS]
            sm = {
                "widths": cfg.widths,
                "eigenvalues_C": mb.lam[s].tolist(),
                "t_final": cfg.steps * cfg.lr,
                "max_path_deviation": float(dev_path[:, sl].max()),
                "max_final_deviation": float(dev_path[-1, sl].max()),
                "max_path_deviation_grassmann_vs_exact": float(dev_grass[:, sl].max()),
                "max_path_deviation_projected_vs_exact": float(dev_proj_exact[:, sl].max()),
                "max_final_loss_gap": float((losses["gd"][-1, sl] - losses["ode"][-1, sl]).abs().max()),
                "final_loss_ode_median": float(losses["ode"][-1, sl].median()),
                "lambda_min": float(mb.lam[s, 0]),
                "max_dev_eq12_vs_gd": float(_max_dev(out["projected"], q_12)[:, sl].max()),
                "order_etas": etas,
                "grassmann_order_dev": [gd_dev[f] for f in ORDER_FACTORS],
                "projected_order_dev": [pr_dev[f] for f in ORDER_FACTORS],
                "grassmann_order": loglog_slope(etas, [gd_dev[f] for f in ORDER_FACTORS]),
                "projected_order": loglog_slope(etas, [pr_dev[f] for f in ORDER_FACTORS]),
                "eq11_ascent_min_rel_increase": float(ascent[sl].min()),
                "eq12_dev_at_half_time": float(e12_half[sl].max()),
                "eq12_dev_at_full_time": float(e12_full[sl].max()),
                "max_final_distance_to_v1": float(dist_v1[sl].max()) if dist_v1 is not None else None,
            }
            for h in cfg.widths:
                sm[f"max_path_deviation_h{h}"] = float(dev_path[:, sl][:, w_arr[sl] == h].max())
            res.summary.update(sm)
            res.notes.append(
                "Losses are means over anchors (C/n). The ODE is Euler on eq. (9) with dt = η (step k ↔ t = kη); the "
                f"printed eq. (12) is the same at dt = η/2 and lags GD (max |q_GD − q_eq12| = {sm['max_dev_eq12_vs_gd']:.3g})."
            )
            res.notes.append(
                f"Thm. 2: GD with the Grassmann projection reaches the exact ODE solution at order "
                f"{sm['grassmann_order']:.2f} in η (max deviations {', '.join(f'{v:.2g}' for v in sm['grassmann_order_dev'])} "
                f"at η = {', '.join(f'{e:g}' for e in etas)}, t = {cfg.t_order:g}); projected GD with the polar map "
                f"(the paper's eq. 11) follows q̇ = −(4Λq − 3qqᵀΛq − Λqqᵀq) instead: order {sm['projected_order']:.2f} "
                f"(deviations {', '.join(f'{v:.2g}' for v in sm['projected_order_dev'])}), close to eq. (9) but not equal."
            )  # fmt: skip
            results.append(res)
        return results

    def measure(self, cfg: Fig3Config, result: Result) -> dict:
        s = result.summary
        dv = s["max_final_distance_to_v1"]
        return {
            "same-final-loss": s["max_final_loss_gap"],
            "outputs-stay-close": Measured(s["max_path_deviation"], detail=(
                f"Grassmann-projected GD vs the exact eq. (9): {s['max_path_deviation_grassmann_vs_exact']:.2g}; "
                + ", ".join(f"h={h}: {s[f'max_path_deviation_h{h}']:.2g}" for h in cfg.widths))),
            "same-final-outputs": s["max_final_deviation"],
            "converges-to-v1": Measured(dv) if dv is not None else Measured(None, not_run="z > 1"),
            "thm2-grassmann-order": Measured(s["grassmann_order"], detail=f"projected GD (polar): order "
                                             f"{s['projected_order']:.2f}"),
            "eq11-sign": s["eq11_ascent_min_rel_increase"],
            "eq12-time-scale": Measured(s["eq12_dev_at_half_time"] / s["eq12_dev_at_full_time"],
                                        detail=f"{s['eq12_dev_at_half_time']:.2g} at kη/2 vs "
                                        f"{s['eq12_dev_at_full_time']:.2g} at kη"),
        }  # fmt: skip

    def plots(self, cfg: Fig3Config, result: Result, fig_dir: Path):
        df = result.tables["metrics"]
        fig, ax = new_figure(2, 1, size=(4.6, 3.6))
        styles = {"gd": "-", "ode": "--", "ode_eq12": ":"}
        for i, h in enumerate(cfg.widths):
            m = i * cfg.inits  # first initialisation of this width
            for name, ls in styles.items():
                g = df[(df.probe == f"{name}/loss") & (df.member == m)]
                label = f"{'GD' if name == 'gd' else name} h={h}" if name != "ode_eq12" or i == 0 else None
                ax[0, 0].plot(g.step * cfg.lr, g.value, ls, color=PALETTE[i % 8], label=label)
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
