"""`nonlinearity` Thm. 4 (Sec. 4.1, App. C.4): gradient co-linearity of linear two-layer networks.

Two-layer network with ``K`` disjoint RFs and ``M`` filters per RF (Fig. 2a). At random lower
weights ``W``, the top layer is at its stationary point (Assumption 2, "fast top-level training"):
``V = sᵀ`` with ``s`` the top eigenvector of ``C_α[f1]``, so ``S = ssᵀ``. The gradients
``∂E_α/∂w_km`` (autograd of ``½ tr C_α[f2]``, α treated as a constant) of all filters of one RF are
co-linear for linear ``h`` (``ẇ_km = s_km b_k``, eq. 14) and not for ReLU. Inputs: the
conditional-independence model of Assumption 2 (:class:`~ssldyn.data.latent.TwoRFModel`) with
Gaussian noise; two settings of α: uniform without augmentation, and InfoNCE-α (from the
current embeddings of two noisy views). We also report the relative error between the
analytic Lemma 4 dynamics (eq. 12) and autograd.

Runs on ``ctx.device`` (data are sampled with the CPU generator, then moved); the per-trial
numbers come back to the CPU for the table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.data.latent import TwoRFModel
from ssldyn.dynamics.two_layer_alpha_cl import (
    lemma4_dynamics,
    thm4_linear_dynamics,
    top_eigvec_S,
    two_layer_energy,
    two_layer_features,
)
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.objectives import alpha_infonce
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class ColinearityConfig(ExperimentConfig):
    K: conint(ge=1) = Field(4, description="receptive fields")
    M: conint(ge=2) = Field(4, description="filters per RF")
    d: conint(ge=2) = Field(6, description="input dimension per RF")
    n: conint(ge=8) = Field(256, description="batch size")
    noise: PositiveFloat = Field(0.3, description="input noise / augmentation noise")
    trials: conint(ge=1) = Field(20, description="random weight draws")
    tau: PositiveFloat = Field(0.5, description="InfoNCE-α temperature")
    activations: list[str] = Field(["linear", "relu", "leaky_relu", "quadratic"], min_length=2)


def _abs_cos_within_rf(G: torch.Tensor) -> torch.Tensor:
    """All |cos| between gradients of distinct filters of the same RF: ``G (K, M, d) -> (K·M(M−1)/2,)``."""
    Gn = G / G.norm(dim=-1, keepdim=True)
    C = (Gn @ Gn.mT).abs()  # (K, M, M)
    iu = torch.triu_indices(G.shape[1], G.shape[1], offset=1, device=G.device)
    return C[:, iu[0], iu[1]].reshape(-1)


@register
class Colinearity(Experiment):
    name = "nonlinearity.colinearity"
    paper = "nonlinearity"
    figure = "Thm. 4, Sec. 4.1"
    description = "Filter gradients within one RF are co-linear with linear activation, not with ReLU"
    Config = ColinearityConfig
    quick = {"trials": 5, "n": 128}
    est_seconds = (5, 20)

    def run(self, cfg: ColinearityConfig, ctx) -> Result:
        g = ctx.generator(0)
        dev = ctx.device
        model = TwoRFModel.random(K=cfg.K, d=cfg.d, C=2, P=min(3, cfg.d), noise=cfg.noise, generator=g)
        rows = []
        for trial in ctx.track(range(cfg.trials), description="random weights"):
            x, _ = model.sample(cfg.n, generator=g)  # CPU draws (same data on every device)
            x_pos = (x + cfg.noise * torch.randn(x.shape, generator=g, dtype=x.dtype)).to(dev)
            x = x.to(dev)
            W = torch.randn(cfg.K, cfg.M, cfg.d, generator=g, dtype=torch.float64).to(dev)
            for act in cfg.activations:
                for setting in ("uniform", "infonce"):
                    xp = None if setting == "uniform" else x_pos
                    alpha = None
                    if setting == "infonce":  # α from the embeddings of the two views at the current weights
                        s0, _ = top_eigvec_S(W, x, x_pos=x_pos, activation=act)
                        z1 = two_layer_features(x, W, act) @ s0[:, None]
                        z2 = two_layer_features(x_pos, W, act) @ s0[:, None]
                        alpha = alpha_infonce(z1, z2, cfg.tau)
                    s, _ = top_eigvec_S(W, x, x_pos=xp, alpha=alpha, activation=act)
                    V = s[None, :]  # stationary top layer, S = ssᵀ
                    Wr = W.clone().requires_grad_(True)
                    (gW,) = torch.autograd.grad(two_layer_energy(Wr, V, x, x_pos=xp, alpha=alpha, activation=act), Wr)
                    _, w_dot = lemma4_dynamics(W, V, x, x_pos=xp, alpha=alpha, activation=act, project=False)
                    cos = _abs_cos_within_rf(gW)
                    stats = [cos.min(), cos.mean(), (w_dot - gW).norm() / gW.norm()]
                    if act == "linear":
                        w4, _ = thm4_linear_dynamics(W, x, s, x_pos=xp, alpha=alpha)
                        stats.append((w4 - gW).norm() / gW.norm())
                    vals = torch.stack(stats).cpu().tolist()  # one transfer per row
                    row = {
                        "trial": trial,
                        "activation": act,
                        "alpha": setting,
                        "min_abs_cos": vals[0],
                        "mean_abs_cos": vals[1],
                        "lemma4_rel_err": vals[2],
                    }
                    if act == "linear":
                        row["thm4_rel_err"] = vals[3]
                    rows.append(row)
        t = pd.DataFrame(rows)
        lin = t[t.activation == "linear"]
        summ = {
            "linear_min_abs_cos": float(lin["min_abs_cos"].min()),
            "linear_thm4_max_rel_err": float(lin["thm4_rel_err"].max()),
        }
        for act in cfg.activations:
            if act == "linear":
                continue
            summ[f"{act}_mean_abs_cos"] = float(t[t.activation == act]["mean_abs_cos"].mean())
            summ[f"{act}_max_min_abs_cos"] = float(t[t.activation == act]["min_abs_cos"].max())
        summ["lemma4_max_rel_err_homogeneous"] = float(
            t[t.activation.isin(["linear", "relu", "leaky_relu"])]["lemma4_rel_err"].max()
        )
        res = Result(tables={"cosines": t}, summary=summ)
        res.notes.append(
            "Quadratic h(x) = x² satisfies h = ½h'(x)x, so eq. 12 holds up to the factor ½ for it "
            "(its Lemma-4 error is not part of the homogeneous check)."
        )
        return res

    def claims(self, cfg: ColinearityConfig, result: Result):
        s = result.summary
        loc = "Thm. 4, eq. 14"
        out = [
            check(
                "linear-colinear",
                "With linear activation the gradients of all filters in one RF are co-linear.",
                loc,
                s["linear_min_abs_cos"],
                ge=1 - 1e-9,
                expected="min |cos| over RFs, pairs, trials, α >= 1 − 1e-9",
            ),
            check(
                "eq14",
                "ẇ_km = s_km b_k(W, V) (eq. 14) equals the autograd gradient.",
                loc,
                s["linear_thm4_max_rel_err"],
                le=1e-6,
                expected="max relative error <= 1e-6",
            ),
            check(
                "lemma4",
                "Lemma 4 (eq. 12) equals the autograd gradient of E_α (homogeneous h).",
                "Lemma 4",
                s["lemma4_max_rel_err_homogeneous"],
                le=1e-6,
                expected="max relative error <= 1e-6",
            ),
        ]
        if "relu_mean_abs_cos" in s:
            out.append(
                check(
                    "relu-not-colinear",
                    "With ReLU the filter gradients are not co-linear.",
                    "Sec. 4.1",
                    s["relu_mean_abs_cos"],
                    lt=0.99,
                    expected="mean |cos| over pairs < 0.99",
                )
            )
        return out

    def plots(self, cfg: ColinearityConfig, result: Result, fig_dir: Path):
        t = result.tables["cosines"]
        fig, ax = new_figure(1, 1, size=(5.0, 3.4))
        acts = list(dict.fromkeys(t["activation"]))
        for j, setting in enumerate(("uniform", "infonce")):
            vals = [t[(t.activation == a) & (t.alpha == setting)]["mean_abs_cos"].to_numpy() for a in acts]
            pos = np.arange(len(acts)) + (j - 0.5) * 0.3
            ax[0, 0].bar(pos, [v.mean() for v in vals], width=0.3, color=PALETTE[j], label=f"α: {setting}")
        ax[0, 0].set_xticks(np.arange(len(acts)), acts)
        ax[0, 0].set(
            ylabel="mean |cos| between filter gradients in one RF",
            ylim=(0, 1.05),
            title="Thm. 4: co-linear gradients (linear)",
        )
        ax[0, 0].legend(fontsize=8)
        return [save_figure(fig, fig_dir / "colinearity.png")]
