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

import numpy as np
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.dynamics.manifold import random_stiefel
from ssldyn.dynamics.q_ode import solve_adaptive, solve_reference
from ssldyn.experiments.grassmann._common import torch_threads
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Thm3Config(ExperimentConfig):
    d: conint(ge=2) = Field(6, description="dimension of C")
    h: conint(ge=2) = Field(50, description="hidden width of the initialising network (h >= d)")
    trials: conint(ge=1) = Field(500, description="random (C, q_0) pairs per case")
    t_final: PositiveFloat = Field(150.0, description="integration time")
    min_gap: float = Field(
        0.05,
        ge=0,
        description="smallest accepted gap λ_2 − λ_1 (negative case) and smallest eigenvalue δ (positive case)",
    )
    tol: PositiveFloat = Field(1e-3, description="distance to the limit counted as converged")
    reference_trials: conint(ge=0) = Field(5, description="trials re-solved with scipy DOP853 (float64)")


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


@register
class Thm3(Experiment):
    name = "grassmann.thm3"
    paper = "grassmann"
    figure = "Thm. 3"
    description = "z = 1: q → 0 when C > 0; q → ±v_1 when C has a negative eigenvalue (random C, random inits)"
    Config = Thm3Config
    quick = {"trials": 30, "reference_trials": 2, "t_final": 100.0}
    est_seconds = (5, 30)

    def run(self, cfg: Thm3Config, ctx) -> Result:
        if cfg.h < cfg.d:
            from ssldyn.errors import UserError

            raise UserError(f"h={cfg.h} must be >= d={cfg.d} (W1ᵀW1 = I_d)")
        dev = ctx.device
        with torch_threads(1, dev):
            g = ctx.generator(11)  # CPU generator: the same draws on every device
            res = Result()
            rows = {}
            for case, C in zip(("positive", "negative"), _random_cases(cfg, g)):
                C = C.to(dev)  # (N, d, d)
                lam, V = torch.linalg.eigh(C)  # ascending
                W1 = random_stiefel(cfg.h, cfg.d, cfg.trials, generator=g, dtype=torch.float64, device=dev)
                W2 = random_stiefel(cfg.h, 1, cfg.trials, generator=g, dtype=torch.float64, device=dev)
                q0 = V.mT @ W1.mT @ W2  # (N, d, 1)
                t = torch.linspace(0, cfg.t_final, 81, dtype=torch.float64, device=dev)
                _, qs = solve_adaptive(q0, lam, t=t, rtol=1e-7, atol=1e-9).trajectory.stack(
                    "q", tensors=True
                )  # (T, N, d, 1)
                qT = qs[-1, :, :, 0]  # (N, d)
                norms = qs[..., 0].norm(dim=-1)  # (T, N)
                align = qs[:, :, 0, 0].abs()  # |⟨q, e_1⟩| (T, N)
                if case == "positive":
                    ok = qT.norm(dim=1) < cfg.tol
                    dist = qT.norm(dim=1)
                else:
                    e1 = torch.zeros_like(qT)
                    e1[:, 0] = 1
                    dist = torch.minimum((qT - e1).norm(dim=1), (qT + e1).norm(dim=1))
                    ok = dist < cfg.tol
                k = min(cfg.reference_trials, cfg.trials)
                ref_err = 0.0
                if k:  # scipy (CPU): copies of the first k trials
                    ref = solve_reference(q0[:k].cpu(), lam[:k].cpu(), t=t.cpu().numpy(), rtol=1e-11, atol=1e-13)
                    ref_err = float(np.abs(ref.state.numpy() - qs[-1, :k].cpu().numpy()).max())
                rows[case] = dict(
                    fraction=float(ok.double().mean()),
                    max_dist=float(dist.max()),
                    q0_norm_max=float(q0.flatten(1).norm(dim=1).max()),
                    ref_err=ref_err,
                )
                res.arrays[f"{case}/t"] = t.cpu().numpy()
                res.arrays[f"{case}/norm"] = norms[:, :50].cpu().numpy()
                res.arrays[f"{case}/align"] = align[:, :50].cpu().numpy()
            for case, r in rows.items():
                for key, v in r.items():
                    res.summary[f"{case}_{key}"] = v
        res.notes.append(
            f"{cfg.trials} trials per case, d={cfg.d}, t_final={cfg.t_final}; negative-case C are "
            f"GOE draws with λ_1 < 0 and gap λ_2 − λ_1 >= {cfg.min_gap} (a vanishing gap makes "
            "convergence arbitrarily slow); positive case C = AAᵀ/d + δI, δ = min_gap."
        )
        return res

    def claims(self, cfg: Thm3Config, result: Result):
        s = result.summary
        return [
            check(
                "positive-to-zero",
                "If all eigenvalues of C are positive, q converges to 0.",
                "Thm. 3 (case 1)",
                s["positive_fraction"],
                ge=1.0,
                expected=f"fraction of trials with ‖q(T)‖ < {cfg.tol:g} == 1",
            ),
            check(
                "negative-to-v1",
                "If at least one eigenvalue is negative, q converges to the eigenvector of the "
                "smallest eigenvalue (up to sign).",
                "Thm. 3 (case 2)",
                s["negative_fraction"],
                ge=1.0,
                expected=f"fraction of trials with min ‖q(T) ∓ v_1‖ < {cfg.tol:g} == 1",
            ),
            check(
                "solver-agrees",
                "torchdiffeq solution agrees with the float64 scipy DOP853 reference.",
                "method check",
                max(s["positive_ref_err"], s["negative_ref_err"]),
                le=1e-6,
                expected="max |q_torchdiffeq(T) − q_scipy(T)| <= 1e-6",
            ),
        ]

    def plots(self, cfg: Thm3Config, result: Result, fig_dir: Path):
        fig, ax = new_figure(2, 1, size=(4.4, 3.4))
        a = result.arrays
        for j in range(a["positive/norm"].shape[1]):
            ax[0, 0].plot(a["positive/t"], a["positive/norm"][:, j], color=PALETTE[0], alpha=0.3)
            ax[0, 1].plot(a["negative/t"], a["negative/align"][:, j], color=PALETTE[1], alpha=0.3)
        ax[0, 0].set(xlabel="t", ylabel="‖q‖", yscale="log", title="C positive definite: q → 0")
        ax[0, 1].set(xlabel="t", ylabel="|⟨q, v_1⟩|", title="C with λ_1 < 0: q → ±v_1")
        return [save_figure(fig, fig_dir / "thm3.png")]
