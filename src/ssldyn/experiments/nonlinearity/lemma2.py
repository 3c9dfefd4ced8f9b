"""`nonlinearity` Lemma 2 / Cor. 1 / Lemma 1: ``C_α[g]`` converges to ``Σ_l z_l² V_{p̃_l}[E[g|x₀]]``.

Data: ``x₀`` from the latent summation model (exact population of ``2^M`` atoms, so every limit
is computed exactly); ``g(x) = ReLU(Gx)`` with a fixed random ``G (p, d)``. ``C_α`` is eq. 3
(``ssldyn.objectives.contrastive_covariance``) on ``N`` samples; the error
``‖C_N − C_∞‖_F / ‖C_∞‖_F`` is averaged over ``repeats`` batches for a grid of ``N``.

- (a) uniform α, no augmentation: ``C_∞ = V[g]`` (Cor. 1).
- (b) uniform α, Gaussian augmentation ``x = x₀ + σε`` (two views): ``C_∞ = V_{x₀}[E[g|x₀]]`` with
  ``E[ReLU(a + sε)] = aΦ(a/s) + sφ(a/s)`` (``a = G_j x₀``, ``s = σ‖G_j‖``): the intra-sample
  term removes the augmentation variance, so ``C_N`` does *not* approach ``V[g(x)]``.
- (c) Gaussian α (Lemma 1) on un-augmented samples, ``α_ij = exp(−‖x₀[i] − x₀[j]‖²/2τ)``:
  ``C_∞ = ½ E[K(x₀, y₀)(g(x₀) − g(y₀))(g(x₀) − g(y₀))ᵀ] = Σ_l z_l² V_{p̃_l}[g]`` (proof of Lemma 2),
  which is PSD.

Runs on ``ctx.device``: the population, ``G`` and every batch are drawn on the CPU (CPU
generator; sampling uses the CPU probabilities) and moved; the errors come back for the tables.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.data.latent import latent_summation_support, random_orthonormal_basis
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.objectives import alpha_gaussian, contrastive_covariance
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class Lemma2Config(ExperimentConfig):
    d: conint(ge=2, le=10) = Field(4, description="input dimension = number of latents")
    p: conint(ge=1) = Field(3, description="output dimension of g")
    ns: list[conint(ge=10)] = Field([100, 300, 1000, 3000], min_length=3, description="batch sizes N")
    repeats: conint(ge=1) = Field(10)
    sigma: PositiveFloat = Field(0.5, description="augmentation noise σ in (b)")
    tau: PositiveFloat = Field(1.0, description="Gaussian-α temperature τ in (c)")


def _norm_cdf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


@register
class Lemma2(Experiment):
    name = "nonlinearity.lemma2"
    paper = "nonlinearity"
    figure = "Lemma 2, Cor. 1, Lemma 1"
    description = "C_α[g] → Σ z_l² V_p̃l[E[g|x₀]] as N grows: uniform α, augmentation, Gaussian α"
    Config = Lemma2Config
    quick = {"ns": [100, 400, 1600], "repeats": 4}
    est_seconds = (6, 60)

    def run(self, cfg: Lemma2Config, ctx) -> Result:
        g = ctx.generator(0)
        dev = ctx.device
        U = random_orthonormal_basis(cfg.d, cfg.d, generator=g)
        q = torch.linspace(0.2, 0.5, cfg.d, dtype=torch.float64)
        atoms, probs_cpu = latent_summation_support(U, q)  # (A, d), (A,), on the CPU
        atoms, probs = atoms.to(dev), probs_cpu.to(dev)
        G = torch.randn(cfg.p, cfg.d, generator=g, dtype=torch.float64).to(dev)

        def gfun(x):
            return torch.relu(x @ G.T)  # (…, p)

        def wcov(v, w):
            m = w @ v
            return (v * w[:, None]).T @ v - torch.outer(m, m)

        ga = gfun(atoms)  # (A, p)
        lim_a = wcov(ga, probs)
        a = atoms @ G.T  # (A, p)
        s = cfg.sigma * G.norm(dim=-1)  # (p,)
        cond_mean = a * _norm_cdf(a / s) + s * torch.exp(-0.5 * (a / s) ** 2) / math.sqrt(2 * math.pi)
        lim_b = wcov(cond_mean, probs)
        K = torch.exp(-(torch.cdist(atoms, atoms) ** 2) / (2 * cfg.tau))  # (A, A)
        diff = ga[:, None, :] - ga[None, :, :]  # (A, A, p)
        lim_c = 0.5 * torch.einsum("a,b,ab,abi,abj->ij", probs, probs, K, diff, diff)
        rows = []
        for n in ctx.track(cfg.ns, description="batch sizes"):
            for r in range(cfg.repeats):
                idx = torch.multinomial(probs_cpu, n, replacement=True, generator=g).to(dev)
                x0 = atoms[idx]
                f0 = gfun(x0)
                x1 = x0 + cfg.sigma * torch.randn(x0.shape, generator=g, dtype=x0.dtype).to(dev)
                x2 = x0 + cfg.sigma * torch.randn(x0.shape, generator=g, dtype=x0.dtype).to(dev)
                f1, f2 = gfun(x1), gfun(x2)
                c_a = contrastive_covariance(f0, f0)
                c_b = contrastive_covariance(f1, f2)
                c_c = contrastive_covariance(f0, f0, alpha=alpha_gaussian(x0, cfg.tau))
                v_total = f1.T @ f1 / n - torch.outer(f1.mean(0), f1.mean(0))  # V[g(x)] incl. augmentation variance
                errs = (
                    torch.stack(
                        [
                            (c_a - lim_a).norm() / lim_a.norm(),
                            (c_b - lim_b).norm() / lim_b.norm(),
                            (c_b - v_total).norm() / lim_b.norm(),
                            (c_c - lim_c).norm() / lim_c.norm(),
                        ]
                    )
                    .cpu()
                    .tolist()
                )  # one transfer
                rows += [
                    {"setting": "a_uniform", "N": n, "rep": r, "err": errs[0]},
                    {"setting": "b_augmented", "N": n, "rep": r, "err": errs[1], "dist_to_total_var": errs[2]},
                    {"setting": "c_gaussian", "N": n, "rep": r, "err": errs[3]},
                ]
        table = pd.DataFrame(rows)
        mean = table.groupby(["setting", "N"])["err"].mean().reset_index()
        summary = {}
        for setting, grp in mean.groupby("setting"):
            slope = np.polyfit(np.log(grp["N"]), np.log(grp["err"]), 1)[0]
            summary[f"slope_{setting}"] = float(slope)
            summary[f"err_first_{setting}"] = float(grp["err"].iloc[0])
            summary[f"err_last_{setting}"] = float(grp["err"].iloc[-1])
        nmax = max(cfg.ns)
        b_last = table[(table.setting == "b_augmented") & (table.N == nmax)]
        summary["aug_dist_to_total_var_last"] = float(b_last["dist_to_total_var"].mean())
        summary["aug_variance_removed_ratio"] = summary["aug_dist_to_total_var_last"] / summary["err_last_b_augmented"]
        summary["min_eig_gaussian_limit"] = float(torch.linalg.eigvalsh(lim_c)[0])
        summary["max_eig_gaussian_limit"] = float(torch.linalg.eigvalsh(lim_c)[-1])
        res = Result(tables={"errors": table, "mean_errors": mean})
        res.summary = summary
        res.notes.append(
            "x₀: latent summation model with q ∈ [0.2, 0.5] (exact population), g = ReLU(Gx) with G "
            "Gaussian; limits are exact (closed-form Gaussian–ReLU mean for (b), double sum over atoms "
            "for (c)). Sampling error of C_N is O(N^-1/2)."
        )
        return res

    def claims(self, cfg: Lemma2Config, result: Result):
        s = result.summary
        loc = "Lemma 2, eq. 4"
        out = []
        for key, stmt, where in (
            ("a_uniform", "Uniform α, no augmentation: C_α[g] → V[g].", "Cor. 1"),
            ("b_augmented", "With augmentation: C_α[g] → V_x₀[E[g|x₀]].", loc),
            ("c_gaussian", "Gaussian α (Lemma 1): C_α[g] → Σ_l z_l² V_p̃l[g].", "Lemma 1, Lemma 2"),
        ):
            out.append(
                check(
                    f"converges-{key}",
                    stmt + " The error shrinks with N.",
                    where,
                    s[f"slope_{key}"],
                    le=-0.35,
                    expected="log-log slope of the mean relative error vs N <= −0.35 (theory −0.5)",
                )
            )
        out.append(
            check(
                "aug-variance-removed",
                "The intra-sample term removes the augmentation variance: C_N stays "
                "away from the total variance V[g(x)].",
                loc,
                s["aug_variance_removed_ratio"],
                ge=3.0,
                expected="‖C_N − V[g(x)]‖ / ‖C_N − V_x₀[E[g|x₀]]‖ at the largest N >= 3",
            )
        )
        out.append(
            check(
                "psd",
                "C_α is asymptotically PSD (Gaussian α).",
                loc,
                s["min_eig_gaussian_limit"],
                ge=-1e-12,
                expected="min eigenvalue of the limit >= −1e-12",
            )
        )
        return out

    def plots(self, cfg: Lemma2Config, result: Result, fig_dir: Path):
        m = result.tables["mean_errors"]
        fig, ax = new_figure(1, 1, size=(4.8, 3.6))
        for i, (setting, grp) in enumerate(m.groupby("setting")):
            ax[0, 0].loglog(grp["N"], grp["err"], "o-", color=PALETTE[i], label=setting)
        n = np.array(sorted(m["N"].unique()), dtype=float)
        ax[0, 0].loglog(n, m["err"].max() * (n / n[0]) ** -0.5, "k:", label="∝ N^-1/2")
        ax[0, 0].set(xlabel="batch size N", ylabel="‖C_N − C_∞‖_F / ‖C_∞‖_F", title="Lemma 2: convergence of C_α")
        ax[0, 0].legend(fontsize=7)
        return [save_figure(fig, fig_dir / "lemma2.png")]
