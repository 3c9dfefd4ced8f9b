"""`grassmann` Thm. 3: convergence of the q-ODE (10) for z = 1.

Many random symmetric ``C`` (d × d) and random initialisations ``q_0 = VᵀW1ᵀW2`` from
Haar-random ``W1 ∈ St(h, d)``, ``W2 ∈ St(h, 1)`` (so ‖q_0‖ < 1 as the proof assumes):

- *positive case*: ``C = AAᵀ/d + δI`` (all eigenvalues ≥ δ > 0) — Thm. 3: ``q → 0``;
- *negative case*: ``C`` from the Gaussian orthogonal ensemble, kept when it has at least one
  negative eigenvalue — Thm. 3: ``q → ±v_1`` (the eigenvector of the smallest eigenvalue).

All trials are one batched ODE solved with torchdiffeq (dopri5) up to ``t_final``; the float64
scipy DOP853 reference is used on a subset to check the solver. Reported: the fraction of
trials that behave as stated (expected: all).

The random C and initial weights are drawn (and the GOE draws filtered) on the CPU with the
seeded generator, then moved to ``ctx.device``, where the eigendecompositions and the batched
torchdiffeq solve run; the scipy DOP853 reference runs on the CPU (on CPU copies).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import torch
from pydantic import Field, PositiveFloat, model_validator

from ssldyn.dynamics.manifold import random_stiefel
from ssldyn.dynamics.q_ode import solve_adaptive, solve_reference
from ssldyn.experiments.grassmann._common import GrassmannExperiment
from ssldyn.lab import ClaimSpec, Context, ExperimentConfig, Measured, Result, ge, le, register
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


@register
class Thm3(GrassmannExperiment):
    name = "grassmann.thm3"
    figure = "Thm. 3"
    description = "z = 1: q → 0 when C > 0; q → ±v_1 when C has a negative eigenvalue (random C, random inits)"
    Config = Thm3Config
    quick = {"trials": 30, "reference_trials": 1, "t_final": 60.0}
    est_seconds = (2, 12)  # CPU seconds for all seeds (3 quick, 5 paper)
    version = "2"
    claims = (
        ClaimSpec(
            "positive-to-zero", "If all eigenvalues of C are positive, q converges to 0 (with probability 1).",
            "Thm. 3", kind="paper", reading="fraction of a seed's random (C, q_0) trials with ‖q(t_final)‖ < tol",
            relation=ge(1.0), basis="relation: 'with probability 1' means every trial",
        ),
        ClaimSpec(
            "negative-to-v1", "If at least one eigenvalue is negative, q converges to the eigenvector of the "
            "smallest eigenvalue (up to sign).", "Thm. 3", kind="paper",
            reading="fraction of a seed's trials with min ‖q(t_final) ∓ v_1‖ < tol (GOE draws with λ_1 < 0 and a "
            "gap λ_2 − λ_1 ≥ min_gap)", relation=ge(1.0), basis="relation: the theorem claims every trial",
        ),
        ClaimSpec(
            "solver-agrees", "The torchdiffeq solution agrees with the float64 scipy DOP853 reference.",
            "Thm. 3 (method check)", kind="sanity", reading="max |q_torchdiffeq(T) − q_scipy(T)| over the re-solved trials",
            relation=le(1e-6), basis="method: dopri5 at rtol 1e-7 / atol 1e-9 against DOP853 at 1e-11",
        ),
    )  # fmt: skip

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
            q0 = V.mT @ W1.mT @ W2  # (S·N, d, 1)
            qs = solve_adaptive(q0, lam, t=t, rtol=1e-7, atol=1e-9).trajectory.stack("q", tensors=True)[
                1
            ]  # (T, S·N, d, 1)
            qT = qs[-1, :, :, 0]  # (S·N, d)
            if case == "positive":
                dist = qT.norm(dim=1)
            else:
                e1 = torch.zeros_like(qT)
                e1[:, 0] = 1
                dist = torch.minimum((qT - e1).norm(dim=1), (qT + e1).norm(dim=1))
            per_case[case] = dict(q0=q0, lam=lam, qs=qs, dist=dist.cpu())
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
                res.summary.update({
                    f"{case}_fraction": float((dist < cfg.tol).double().mean()),
                    f"{case}_max_dist": float(dist.max()),
                    f"{case}_q0_norm_max": float(r["q0"][sl].flatten(1).norm(dim=1).max()),
                    f"{case}_ref_err": ref_err,
                })  # fmt: skip
                qs = r["qs"][:, sl][:, :50].cpu()  # (T, ≤50, d, 1)
                res.arrays[f"{case}/t"] = t.cpu().numpy()
                res.arrays[f"{case}/norm"] = qs[..., 0].norm(dim=-1).numpy()
                res.arrays[f"{case}/align"] = qs[:, :, 0, 0].abs().numpy()
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
            "positive-to-zero": Measured(s["positive_fraction"], detail=f"largest ‖q(T)‖ {s['positive_max_dist']:.2g}"),
            "negative-to-v1": Measured(s["negative_fraction"], detail=f"largest distance {s['negative_max_dist']:.2g}"),
            "solver-agrees": Measured(err) if cfg.reference_trials else Measured(None, not_run="reference_trials = 0"),
        }

    def plots(self, cfg: Thm3Config, result: Result, fig_dir: Path):
        fig, ax = new_figure(2, 1, size=(4.4, 3.4))
        a = result.arrays
        for j in range(a["positive/norm"].shape[1]):
            ax[0, 0].plot(a["positive/t"], a["positive/norm"][:, j], color=PALETTE[0], alpha=0.3)
            ax[0, 1].plot(a["negative/t"], a["negative/align"][:, j], color=PALETTE[1], alpha=0.3)
        ax[0, 0].set(xlabel="t", ylabel="‖q‖", yscale="log", title="C positive definite: q → 0")
        ax[0, 1].set(xlabel="t", ylabel="|⟨q, v_1⟩|", title="C with λ_1 < 0: q → ±v_1")
        return [save_figure(fig, fig_dir / "thm3.png")]
