"""`grassmann` Thm. 3: convergence of the q-ODE (10) for z = 1.

Many random symmetric ``C`` (d × d) and random initialisations ``q_0 = VᵀW1ᵀW2`` from
Haar-random ``W1 ∈ St(h, d)``, ``W2 ∈ St(h, 1)`` (so ‖q_0‖ < 1 as the proof assumes):

- *positive case*: ``C = AAᵀ/d + δI`` (all eigenvalues ≥ δ > 0) — Thm. 3: ``q → 0``;
- *negative case*: ``C`` from the Gaussian orthogonal ensemble, kept when it has a negative
  eigenvalue and a gap λ_2 − λ_1 ≥ ``min_gap`` (a vanishing gap makes convergence arbitrarily
  slow) — Thm. 3: ``q → ±v_1`` (the eigenvector of the smallest eigenvalue).

All trials are one batched ODE solved with torchdiffeq (dopri5) up to ``t_final``; the float64
scipy DOP853 reference is used on a subset to check the solver. Reported: the fraction of
trials that behave as stated (expected: all). Each case is the other's control (a positive-definite
C must not send q to ±v_1, a C with a negative eigenvalue must not send q to 0).

**Thm. 3 needs h > d** (erratum ``needs-h-above-d``: the theorem states no condition on h). At h = d,
``W1`` is square orthogonal and ``‖q‖ = ‖VᵀW1ᵀW2‖ = ‖W2‖ = 1`` for every admissible weight: the network
keeps ‖q‖ = 1 throughout, while for C ≻ 0 the theorem says q → 0. (The unit sphere is invariant for eq. (9) with z = 1 — ``d‖q‖²/dt = −8 qᵀΛq (1 − ‖q‖²)`` —
and repelling when C ≻ 0, so q → 0 needs ‖q_0‖ < 1, which h > d gives with probability 1.) We run
Grassmann-projected GD on the first ``gd_trials`` positive-case trials at h = d and at h = ``h``
(the control, where q → 0 as stated) up to ``t_final`` with step ``gd_lr``.

The random C and initial weights are drawn (and the GOE draws filtered) on the CPU with the
seeded generator, then moved to ``ctx.device``, where the eigendecompositions and the batched
torchdiffeq solve run; the scipy DOP853 reference runs on the CPU (on CPU copies).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
from pydantic import Field, PositiveFloat, model_validator

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Erratum, Measured, Robustness, ge, le
from ssldyn.dynamics.manifold import ManifoldGD, random_stiefel, train_gd
from ssldyn.dynamics.q_ode import q_from_weights, solve_adaptive, solve_reference
from ssldyn.experiments.grassmann._common import GrassmannExperiment, peak_of
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.objectives import trace_loss
from ssldyn.probes.subspace import distance_up_to_sign
from ssldyn.viz.common import PALETTE, new_figure, save_figure

CASES = ("positive", "negative")


class Thm3Config(ExperimentConfig):
    d: Annotated[int, Field(ge=2)] = Field(6, description="dimension of C")
    h: Annotated[int, Field(ge=2)] = Field(50, description="hidden width of the initialising network (h >= d)")
    trials: Annotated[int, Field(ge=1)] = Field(500, description="random (C, q_0) pairs per case and seed")
    t_final: PositiveFloat = Field(
        150.0,
        le=1e4,
        description="integration time (at most 10⁴: the limits are reached at rate ≥ min_gap, e^(−0.05·10⁴) is far "
        "below float64 round-off, and the solver's work grows with t_final)",
    )
    min_gap: float = Field(
        0.05,
        ge=0,
        description="smallest accepted gap λ_2 − λ_1 (negative case) and smallest eigenvalue δ (positive case)",
    )
    tol: PositiveFloat = Field(1e-3, description="distance to the limit counted as converged")
    reference_trials: Annotated[int, Field(ge=0)] = Field(
        5, description="trials per seed re-solved with scipy DOP853 (float64)"
    )
    gd_trials: Annotated[int, Field(ge=1)] = Field(
        20, description="positive-case trials per seed trained by Grassmann GD at h = d and at h (Thm. 3 needs h > d)"
    )
    gd_lr: PositiveFloat = Field(0.05, description="step of that GD (t_final/gd_lr steps)")

    @model_validator(mode="after")
    def _width(self):
        if self.h < self.d:
            raise ValueError(f"h={self.h} must be >= d={self.d} (W1ᵀW1 = I_d)")
        return self


def _random_cases(cfg: Thm3Config, g: torch.Generator):
    """``(C_pos (N, d, d), C_neg (N, d, d))`` drawn and filtered on the CPU with ``g`` (moved to the device later)."""
    d, N = cfg.d, cfg.trials
    A = torch.randn(N, d, d, generator=g, dtype=torch.float64)
    C_pos = A @ A.mT / d + cfg.min_gap * torch.eye(d, dtype=torch.float64)
    mats = []
    while len(mats) < N:  # GOE matrices with a negative eigenvalue and a gap λ_2 − λ_1 >= min_gap
        B = torch.randn(4 * N, d, d, generator=g, dtype=torch.float64)
        B = (B + B.mT) / (2 * d) ** 0.5
        lam = torch.linalg.eigvalsh(B)
        ok = (lam[:, 0] < 0) & (lam[:, 1] - lam[:, 0] >= cfg.min_gap)
        mats.extend(list(B[ok]))
    return C_pos, torch.stack(mats[:N])


def draw_trials(cfg: Thm3Config, g: torch.Generator) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """One seed's trials: ``{case: (C (N, d, d), W1 (N, h, d), W2 (N, h, 1))}``, all drawn with ``g`` on the CPU."""
    out = {}
    for case, C in zip(CASES, _random_cases(cfg, g)):
        W1 = random_stiefel(cfg.h, cfg.d, cfg.trials, generator=g, dtype=torch.float64)
        W2 = random_stiefel(cfg.h, 1, cfg.trials, generator=g, dtype=torch.float64)
        out[case] = (C, W1, W2)
    return out


#: the time at which Thm. 3's limits are read (a robustness map)
T_FINAL_KNOBS = {"t_final": [30.0, 60.0, 150.0, 600.0]}
T_FINAL_PAPER = (
    "Thm. 3 states limits (t → ∞, with probability 1); the finite time at which every trial is read against tol is "
    "ours, and a trial whose q_0 barely overlaps the limit needs longer (~ln(1/|v_1ᵀq_0|) over the eigenvalue gap), "
    "so the quick t_final = 60 can leave one of 30 trials short (inconclusive)."
)


@register
class Thm3(GrassmannExperiment):
    name = "grassmann.thm3"
    figure = "Thm. 3"
    description = "z = 1: q → 0 when C > 0; q → ±v_1 when C has a negative eigenvalue (random C, random inits)"
    Config = Thm3Config
    quick = {"trials": 30, "reference_trials": 1, "t_final": 60.0, "gd_trials": 10}
    est_seconds = (2, 12)  # CPU seconds for all seeds (3 quick, 5 paper)
    # 4: solver-agrees declares its range (0, ∞) (a max |difference|); 5: needs-h-above-d is a sanity check (an identity);
    # 6: needs-h-above-d is an erratum (the printed theorem has no condition on h); 7: a robustness map over t_final
    # 8: figures only: distances on log axes with tol, the h = d erratum panel (new arrays {case}/dist_v1,
    # gd/norm_h_eq_d, gd/norm_h); claims unchanged
    # 9: figures only: every seed in the Thm. 3 panels (per-seed counts in the titles, the other seeds' worst drawn
    # trial dashed, each seed's largest final distance marked); claims unchanged
    version = "9"
    robustness = (Robustness(claims=("positive-to-zero", "negative-to-v1"), knobs=T_FINAL_KNOBS, paper=T_FINAL_PAPER),)
    claims = (
        ClaimSpec(
            "positive-to-zero", "If all eigenvalues of C are positive, q converges to 0 (with probability 1).",
            "Thm. 3", kind="paper", reading="fraction of a seed's random (C, q_0) trials with ‖q(t_final)‖ < tol",
            relation=ge(1.0), basis="relation: 'with probability 1' means every trial",
            control="the same test on the seed's negative-case trials (C with a negative eigenvalue)",
            bounds=(0.0, 1.0),
        ),
        ClaimSpec(
            "negative-to-v1", "If at least one eigenvalue is negative, q converges to the eigenvector of the "
            "smallest eigenvalue (up to sign).", "Thm. 3", kind="paper",
            reading="fraction of a seed's trials with min ‖q(t_final) ∓ v_1‖ < tol (GOE draws with λ_1 < 0 and a "
            "gap λ_2 − λ_1 ≥ min_gap)", relation=ge(1.0), basis="relation: the theorem claims every trial",
            control="the same test on the seed's positive-case trials (C ≻ 0)", bounds=(0.0, 1.0),
        ),
        Erratum(
            "needs-h-above-d", "Thm. 3's q → 0 for C ≻ 0 needs h > d: at h = d the network keeps ‖q‖ = 1.",
            "Thm. 3", bounds=(0.0, math.inf),
            printed="Thm. 3: q → 0 with probability 1 whenever Λ ≻ 0, no condition on h; its proof (App. A.6): "
            "‖q‖ ≠ 1 at initialisation with probability 1",
            used="h > d (at h = d every admissible weight has ‖q‖ = 1)",
            derivation="at h = d, W1 ∈ O(d) and ‖q‖ = ‖VᵀW1ᵀW2‖ = ‖W2‖ = 1 for all admissible weights; the unit "
            "sphere is invariant for eq. (9) (z = 1) and repelling when C ≻ 0, so q → 0 needs ‖q_0‖ < 1",
            reading="smallest over the first gd_trials positive-case trials of ‖q_GD(t_final)‖ for Grassmann GD at "
            "h = d: ‖q‖ = 1 for every admissible weight at h = d (the derivation), trained or not — the printed "
            "theorem's limit 0 is never approached", relation=ge(0.5),
            basis="tolerance: the network's ‖q‖ is 1 up to round-off; 0.5 is half-way to the theorem's limit 0",
            control="the same GD at h = h > d from the same C (the theorem's case: q → 0)",
        ),
        ClaimSpec(
            "solver-agrees", "The torchdiffeq solution agrees with the float64 scipy DOP853 reference.",
            "Thm. 3 (method check)", kind="sanity", reading="max |q_torchdiffeq(T) − q_scipy(T)| over the re-solved trials",
            relation=le(1e-6), basis="method: dopri5 at rtol 1e-7 / atol 1e-9 against DOP853 at 1e-11", bounds=(0.0, math.inf),
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: Thm3Config, n_seeds: int) -> tuple[int, str]:
        """``PROCESS_BASELINE`` + per trial (``S·trials`` of them, two cases) the recorded path ``81·d`` and the
        initialising ``(h, d)`` weights, ``K·2·S·trials·(81 + h)·d·8`` (``K = 2.5``: the solver's stages).
        Measured (max RSS, ``--quick``, 3 seeds): 0.36 GB (estimate 0.60 GB); ``trials=20000``: 1.75 GB
        (estimate 2.49 GB)."""
        return peak_of({"trials": 2.5 * 2 * n_seeds * cfg.trials * (81 + cfg.h) * cfg.d * 8})

    def run(self, cfg: Thm3Config, ctx: Context) -> list[Result]:
        dev, seeds, N = ctx.device, ctx.seeds, cfg.trials
        draws = [draw_trials(cfg, ctx.generator(11, seed=s)) for s in seeds]  # CPU draws: the same on every device
        t = torch.linspace(0, cfg.t_final, 81, dtype=torch.float64, device=dev)
        per_case = {}
        for case in CASES:
            C = torch.cat([dr[case][0] for dr in draws]).to(dev)  # (S·N, d, d) seed-major
            W1 = torch.cat([dr[case][1] for dr in draws]).to(dev)
            W2 = torch.cat([dr[case][2] for dr in draws]).to(dev)
            lam, V = torch.linalg.eigh(C)  # ascending
            q0 = q_from_weights(W1, W2, V)  # (S·N, d, 1): q_0 = VᵀW1ᵀW2
            qs = solve_adaptive(q0, lam, t=t, rtol=1e-7, atol=1e-9).trajectory.stack("q", tensors=True)[
                1
            ]  # (T, S·N, d, 1)
            qT = qs[-1, :, :, 0]  # (S·N, d)
            d_zero = qT.norm(dim=1)  # (S·N,): distance to 0
            d_v1 = distance_up_to_sign(qT, torch.eye(cfg.d, dtype=qT.dtype, device=qT.device)[0])  # to ±v_1 = ±e_1
            dist, other = (d_zero, d_v1) if case == "positive" else (d_v1, d_zero)
            per_case[case] = dict(q0=q0, lam=lam, qs=qs, dist=dist.cpu(), other=other.cpu())
        # Thm. 3 needs h > d: Grassmann GD on the first gd_trials positive-case trials at h = d and at h
        G = min(cfg.gd_trials, N)
        C_gd = torch.cat([dr["positive"][0][:G] for dr in draws]).to(dev)  # (S·G, d, d)
        steps = max(1, round(cfg.t_final / cfg.gd_lr))
        gd_norm = {}
        for tag, h in (("h_eq_d", cfg.d), ("h", cfg.h)):
            net = TwoLayerNet(cfg.d, h, 1, "linear", "orthogonal", ensemble=len(C_gd),
                              seeds=[1000 * s + i for s in seeds for i in range(G)], dtype=torch.float64, device=dev)  # fmt: skip
            opt = ManifoldGD(net.weights(), lr=cfg.gd_lr, mode="riemannian", tangent="grassmann", retraction="polar")
            train_gd(net.weights(), lambda net=net: trace_loss(net.W1, net.W2, C_gd), update=opt.step, steps=steps,
                     inputs={"C": C_gd}, track=lambda it, tag=tag: ctx.track(it, total=steps + 1,
                                                                              description=f"Thm. 3 GD ({tag})"))  # fmt: skip
            with torch.no_grad():
                gd_norm[tag] = net.end_to_end().flatten(1).norm(dim=1).cpu()  # (S·G,): ‖q‖ = ‖W2ᵀW1‖ (V orthogonal)
        out = []
        k = min(cfg.reference_trials, N)
        for s in range(len(seeds)):
            sl = slice(s * N, (s + 1) * N)
            res = Result()
            for case, r in per_case.items():
                dist = r["dist"][sl]
                ref_err = float("nan")
                if k:  # scipy (CPU) on copies of the seed's first k trials
                    q0k, lamk, qTk = r["q0"][sl][:k].cpu(), r["lam"][sl][:k].cpu(), r["qs"][-1, sl][:k].cpu()
                    ref_err = max(  # one (d, 1) trial at a time: scipy's fast numpy right-hand side
                        float(np.abs(solve_reference(q0k[i], lamk[i], t=t.cpu().numpy(), rtol=1e-11,
                                                     atol=1e-13).state.numpy() - qTk[i].numpy()).max()) for i in range(k)
                    )  # fmt: skip
                other_test = "v1" if case == "positive" else "zero"  # the other case's test, on this case's trials
                res.summary.update({
                    f"{case}_fraction": float((dist < cfg.tol).double().mean()),
                    f"{case}_{other_test}_fraction": float((r["other"][sl] < cfg.tol).double().mean()),
                    f"{case}_max_dist": float(dist.max()),
                    f"{case}_q0_norm_max": float(r["q0"][sl].flatten(1).norm(dim=1).max()),
                    f"{case}_ref_err": ref_err,
                })  # fmt: skip
                qs = r["qs"][:, sl][:, :50].cpu()  # (T, ≤50, d, 1)
                res.arrays[f"{case}/t"] = t.cpu().numpy()
                res.arrays[f"{case}/norm"] = qs[..., 0].norm(dim=-1).numpy()
                res.arrays[f"{case}/align"] = qs[:, :, 0, 0].abs().numpy()
                e1 = torch.eye(cfg.d, dtype=qs.dtype)[0]  # v_1 in the eigenbasis
                res.arrays[f"{case}/dist_v1"] = distance_up_to_sign(qs[..., 0], e1).numpy()  # (T, ≤50): min ‖q ∓ v_1‖
            gsl = slice(s * G, (s + 1) * G)
            res.arrays["gd/norm_h_eq_d"] = gd_norm["h_eq_d"][gsl].numpy()  # (G,): ‖q_GD(t_final)‖ at h = d
            res.arrays["gd/norm_h"] = gd_norm["h"][gsl].numpy()  # (G,): the same at h > d
            res.summary.update({
                "gd_min_norm_h_eq_d": float(gd_norm["h_eq_d"][gsl].min()),
                "gd_max_norm_h_eq_d": float(gd_norm["h_eq_d"][gsl].max()),
                "gd_max_norm_h": float(gd_norm["h"][gsl].max()),
                "gd_min_norm_h": float(gd_norm["h"][gsl].min()),
            })  # fmt: skip
            res.notes.append(
                f"Thm. 3 needs h > d: Grassmann GD ({steps} steps of {cfg.gd_lr}) on {G} positive-case trials keeps "
                f"‖q‖ in [{res.summary['gd_min_norm_h_eq_d']:.6f}, {res.summary['gd_max_norm_h_eq_d']:.6f}] at h = d = "
                f"{cfg.d}, and reaches ‖q‖ ≤ {res.summary['gd_max_norm_h']:.2g} at h = {cfg.h}."
            )  # fmt: skip
            res.notes.append(
                f"{N} trials per case, d={cfg.d}, t_final={cfg.t_final}; negative-case C are GOE draws with λ_1 < 0 "
                f"and gap λ_2 − λ_1 >= {cfg.min_gap} (a vanishing gap makes convergence arbitrarily slow); positive "
                "case C = AAᵀ/d + δI, δ = min_gap. All seeds' trials are one batched dopri5 solve."
            )
            out.append(res)
        return out

    def measure(self, cfg: Thm3Config, result: Result) -> dict:
        s = result.summary
        err = max(s["positive_ref_err"], s["negative_ref_err"])
        return {
            "positive-to-zero": Measured(
                s["positive_fraction"],
                control=s["negative_zero_fraction"],
                detail=f"largest ‖q(T)‖ {s['positive_max_dist']:.2g}",
            ),
            "negative-to-v1": Measured(
                s["negative_fraction"],
                control=s["positive_v1_fraction"],
                detail=f"largest distance {s['negative_max_dist']:.2g}",
            ),
            "needs-h-above-d": Measured(
                s["gd_min_norm_h_eq_d"],
                control=s["gd_min_norm_h"],
                detail=f"h = d: ‖q(T)‖ ≤ {s['gd_max_norm_h_eq_d']:.6f}; h = {cfg.h}: ‖q(T)‖ ≤ {s['gd_max_norm_h']:.2g}",
            ),
            "solver-agrees": Measured(err) if cfg.reference_trials else Measured(None, not_run="reference_trials = 0"),
        }

    def plots(self, cfg: Thm3Config, result: Result, fig_dir: Path):
        fig, ax = new_figure(3, 1, size=(4.4, 4.3))
        results = result.seed_results or [result]
        N, shown = cfg.trials, result.arrays["positive/norm"].shape[1]
        panels = (("positive", "positive-to-zero", "Thm. 3, C ≻ 0: q → 0", "‖q(t)‖"),
                  ("negative", "negative-to-v1", "Thm. 3, $\\lambda_1$ < 0: q → ±$v_1$", "min ‖q(t) ∓ $v_1$‖"))  # fmt: skip
        for k, (case, claim, head, ylabel) in enumerate(panels):
            _case_panel(ax[0, k], cfg, results, case, color=PALETTE[k])
            counts = ", ".join(f"{c}/{N}" for c in seed_counts(results, case, N))
            ax[0, k].set(xlabel="t", ylabel=ylabel, yscale="log")
            ax[0, k].set_title(f"{head}\n{claim}, per seed below tol:\n{counts}", fontsize=9)
        _gd_width_panel(ax[0, 2], cfg, result)
        seeds = ", ".join(str(r.seed) for r in results)
        fig.suptitle(f"Thm. 3: q-ODE (9), z = 1, d = {cfg.d}; seeds {seeds}: {min(shown, N)} of {N} random (C, $q_0$) "
                     f"trials of seed {result.seed} drawn, the other seeds' worst drawn trial dashed", fontsize=10)  # fmt: skip
        return [save_figure(fig, fig_dir / "thm3.png")]


def seed_counts(results: list[Result], case: str, trials: int) -> list[int]:
    """Per seed, the number of the ``trials`` trials of ``case`` below tol: the reading of positive-to-zero
    (``case = "positive"``) or negative-to-v1 (``"negative"``) times ``trials``, in seed order."""
    return [round(r.summary[f"{case}_fraction"] * trials) for r in results]


def case_distance(arrays, case: str) -> np.ndarray:
    """The distance ``case``'s claim reads, along the path of the drawn trials ``(T, ≤50)``: ‖q‖ (positive) or
    min ‖q ∓ v_1‖ (negative)."""
    return arrays["positive/norm"] if case == "positive" else v1_distance(arrays)


def _case_panel(ax, cfg: Thm3Config, results: list[Result], case: str, color: str) -> None:
    """Every drawn trial of the first seed (thin), each other seed's worst drawn trial (the largest distance at
    t_final, dashed) and every seed's largest distance at t_final over all its trials (markers at the right edge)."""
    floor = 1e-16  # converged trials reach round-off: drawn at the floor of the log axis
    first = results[0]
    t, dist = first.arrays[f"{case}/t"], case_distance(first.arrays, case)
    for j in range(dist.shape[1]):
        ax.plot(t, np.maximum(dist[:, j], floor), color=color, alpha=0.3, lw=1,
                label=f"seed {first.seed}: drawn trials" if j == 0 else None)  # fmt: skip
    colors = [color] + [PALETTE[(4 + i) % len(PALETTE)] for i in range(len(results) - 1)]
    for r, c in zip(results[1:], colors[1:]):
        d = case_distance(r.arrays, case)
        worst = d[:, int(np.argmax(d[-1]))]
        ax.plot(r.arrays[f"{case}/t"], np.maximum(worst, floor), color=c, ls="--", lw=1.4,
                label=f"seed {r.seed}: worst drawn trial")  # fmt: skip
    for i, (r, c) in enumerate(zip(results, colors)):
        ax.plot(t[-1], max(r.summary[f"{case}_max_dist"], floor), marker="D", ms=5, color=c, mec="k", mew=0.5,
                ls="none", label="largest at $t_{final}$ per seed, all trials" if i == 0 else None, clip_on=False)  # fmt: skip
    ax.axhline(cfg.tol, color="k", ls=":", lw=1, label=f"tol = {cfg.tol:g}")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)  # below: the curves stay clear


def v1_distance(arrays) -> np.ndarray:
    """``min ‖q ∓ v_1‖`` along the path of the drawn negative-case trials ``(T, ≤50)``: the distance negative-to-v1
    reads at t_final (recorded; for a run stored before it was, ``sqrt(‖q‖² + 1 − 2|⟨q, v_1⟩|)``, exact only down to
    ~1e-8 by cancellation)."""
    if "negative/dist_v1" in arrays:
        return arrays["negative/dist_v1"]
    norm, align = arrays["negative/norm"], arrays["negative/align"]
    return np.sqrt(np.maximum(norm**2 + 1.0 - 2.0 * align, 0.0))


def _gd_width_panel(ax, cfg: Thm3Config, result: Result) -> None:
    """Erratum needs-h-above-d: ‖q_GD(t_final)‖ of Grassmann GD on C ≻ 0 at h = d (stays 1) and at h > d (→ 0)."""
    a = result.arrays
    if "gd/norm_h_eq_d" not in a:  # a run stored before these were recorded
        ax.set_title("erratum needs-h-above-d (not recorded)", fontsize=9)
        return
    for k, (key, label) in enumerate((("gd/norm_h_eq_d", f"h = d = {cfg.d}"), ("gd/norm_h", f"h = {cfg.h}"))):
        v = np.maximum(a[key], 1e-16)
        ax.scatter(k + np.linspace(-0.15, 0.15, len(v)), v, s=14, color=PALETTE[2 + k], label=label)
    ax.axhline(0.5, color="k", ls="--", lw=0.8, label="0.5 (erratum's threshold)")
    ax.axhline(cfg.tol, color="k", ls=":", lw=1, label=f"tol = {cfg.tol:g}")
    ax.set(xticks=[0, 1], xticklabels=[f"h = d = {cfg.d}", f"h = {cfg.h}"], xlim=(-0.6, 1.6), yscale="log",
           ylabel="‖$q_{GD}$($t_{final}$)‖")  # fmt: skip
    ax.set_title(f"erratum needs-h-above-d: Grassmann GD,\nC ≻ 0, first {len(a['gd/norm_h'])} trials", fontsize=9)
    ax.legend(fontsize=7, loc="center left")
