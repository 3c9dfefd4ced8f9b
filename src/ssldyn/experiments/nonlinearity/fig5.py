"""`nonlinearity` Fig. 5: learned filters per receptive field, ReLU vs linear, β = 5.

Paper: P = 3, β = 5 (M = 15 filters per RF): "With ReLU activation, learned weights clearly
capture the 3 candidate tokens within R_k^g at each RF R_k, while linear activation cannot."
This experiment trains ReLU and linear networks at each P in ``panels_P`` (default 3 — the
paper's figure — and 5, the configuration of the reference implementation's documented run:
d = 20, P = 5, β = 5, ReLU, mean-only BN, G = 40, output_d = 50, lr 0.02, 5000 steps) and
checks that the documented run reaches χ̄₊ ≥ 0.95 and χ̄₋ ≤ 0.05.

Protocol choices: lr 0.02 (documented command; the paper's text says 2e-3), |cos| in χ± for
the linear activation. The paper's Fig. 5 shows d = 8 dimensional filters; here d = 20
(the Sec. 5 setting); ``--set n_tokens=8`` gives the figure's d.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field

from ssldyn.experiments.nonlinearity.token_grid import (
    BN,
    TokenTrainConfig,
    grid_frame,
    make_runs,
    token_data,
    train_grid,
)
from ssldyn.lab import Experiment, Result, check, register
from ssldyn.lab.claims import Claim


class Fig5Config(TokenTrainConfig):
    """Fig. 5 (`nonlinearity` Sec. 5): ReLU vs linear filters at β = 5."""

    seeds: int = Field(1, ge=1, description="one network per panel (the figure shows one run)")
    panels_P: list[int] = Field([3, 5], description="P of each panel pair (paper's Fig. 5: 3; documented run: 5)")
    beta: int = Field(5, ge=1, description="over-parameterisation β (M = β·P)")
    bn: BN = Field("mean_only", description="BatchNorm variant (documented run: mean-only, Def. 5)")
    documented_P: int = Field(5, ge=1, description="P of the reference's documented run (claim χ̄₊ ≥ 0.95)")


class Fig5(Experiment):
    name = "nonlinearity.fig5"
    paper = "nonlinearity"
    figure = "Fig. 5"
    description = "learned filters per RF, ReLU vs linear (P = 3 and the documented P = 5 run, β = 5)"
    Config = Fig5Config
    quick = {"steps": 1000, "log_every": 250, "panels_P": [3]}
    est_seconds = (15, 120)

    def run(self, cfg, ctx) -> Result:
        runs = make_runs(
            activations=["relu", "linear"],
            betas=[cfg.beta],
            Ps=cfg.panels_P,
            seeds=[ctx.seed],
            bns=[cfg.bn],
            base=cfg.base_run(),
        )
        traj = train_grid(cfg, ctx, runs, keep_filters=True)  # member m = runs[m]
        res = Result()
        df = grid_frame(runs, traj)
        res.tables["chi"] = df
        for m, r in enumerate(runs):
            key = f"P{r.spec.P}_{r.activation}"
            (res.arrays[f"filters/{key}"],) = traj.snapshots(f"filters/{m}").values()  # (K, M, d) final
            data = token_data(r)
            res.arrays[f"allowed/{key}"] = data["allowed"]
            res.arrays[f"relevant/{key}"] = data["relevant"]
            res.summary[f"chi_plus/{key}"] = traj.last("chi_plus", m)
            res.summary[f"chi_minus/{key}"] = traj.last("chi_minus", m)
        res.add_trajectory(traj)
        res.notes.append(
            "lr = 0.02 (documented command of the reference implementation) instead of the paper's "
            "2e-3; χ± with |cos| for linear; filters shown are d = 20 dimensional (Sec. 5)."
        )
        if cfg.steps < 5000:
            res.notes.append(
                f"{cfg.steps} steps (the documented run uses 5000): the χ̄₊ ≥ 0.95 / χ̄₋ ≤ 0.05 "
                "claims are about the full run and are only checked at default scale."
            )
        return res

    def claims(self, cfg, result) -> list[Claim]:
        s = result.summary
        out = []
        for P in cfg.panels_P:
            r, li = f"P{P}_relu", f"P{P}_linear"
            out.append(
                check(
                    f"relu-beats-linear-P{P}",
                    f"P = {P}, β = {cfg.beta}: ReLU filters capture the allowed tokens of each RF better than "
                    "linear ones (χ̄₊(ReLU) − χ̄₊(linear)).",
                    "Fig. 5, Sec. 5.1",
                    s[f"chi_plus/{r}"] - s[f"chi_plus/{li}"],
                    gt=0.0,
                )
            )
            out.append(
                check(
                    f"relu-ignores-noise-P{P}",
                    f"P = {P}: ReLU filters do not learn noise tokens, unlike linear ones (χ̄₋(ReLU) − χ̄₋(linear)).",
                    "Fig. 5, Sec. 5.1 (global modulation)",
                    s[f"chi_minus/{r}"] - s[f"chi_minus/{li}"],
                    lt=0.0,
                )
            )
        P = cfg.documented_P
        documented = (
            P in cfg.panels_P
            and cfg.beta == 5
            and cfg.bn == "mean_only"
            and cfg.steps == 5000
            and cfg.lr == 0.02
            and cfg.n_tokens == 20
            and cfg.G == 40
            and cfg.output_d == 50
        )
        if documented:  # a claim about that exact configuration (not checked at --quick scale)
            out.append(
                check(
                    "documented-run-chi-plus",
                    "The reference implementation's documented run (d=20, P=5, β=5, ReLU, mean-only BN, G=40, "
                    "output_d=50, lr 0.02, 5000 steps) learns the patterns: χ̄₊ ≥ 0.95.",
                    "Sec. 5 / reference README",
                    s[f"chi_plus/P{P}_relu"],
                    ge=0.95,
                    note=f"{cfg.steps} steps",
                )
            )
            out.append(
                check(
                    "documented-run-chi-minus",
                    "… and ignores the noise tokens: χ̄₋ ≤ 0.05.",
                    "Sec. 5 / reference README",
                    s[f"chi_minus/P{P}_relu"],
                    le=0.05,
                    note=f"{cfg.steps} steps",
                )
            )
        return out

    def plots(self, cfg, result, fig_dir: Path) -> list[Path]:
        from ssldyn.viz.common import PALETTE, new_figure, save_figure

        paths = []
        for P in cfg.panels_P:
            K = cfg.K
            fig, axes = new_figure(ncols=5, nrows=(K + 4) // 5 * 1, size=(3.2, 2.6))
            for k in range(K):
                ax = axes[k // 5][k % 5]
                imgs = []
                for act in ("relu", "linear"):
                    w = result.arrays[f"filters/P{P}_{act}"][k]  # (M, d)
                    w = w / np.maximum(np.abs(w).max(1, keepdims=True), 1e-12)
                    imgs.append(w)
                    imgs.append(np.full((w.shape[0], 1), np.nan))
                ax.imshow(
                    np.concatenate(imgs[:-1], 1), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest"
                )
                for a in result.arrays[f"allowed/P{P}_relu"][k]:
                    ax.axvline(a, color="k", lw=0.4, alpha=0.3)
                ax.set_title(f"R{k}: ReLU | linear", fontsize=7)
                ax.set_xticks([])
                ax.set_yticks([])
            fig.suptitle(
                f"Learned filters (rows: M = {cfg.beta * P}, columns: d tokens), P = {P}, β = {cfg.beta}", fontsize=9
            )
            paths.append(save_figure(fig, fig_dir / f"fig5_P{P}.png"))
        df = result.tables["chi"]
        fig, axes = new_figure(ncols=2)
        for i, ((P, act), d) in enumerate(df.groupby(["P", "activation"])):
            for j, col in enumerate(("chi_plus", "chi_minus")):
                axes[0][j].plot(d["step"], d[col], color=PALETTE[i % len(PALETTE)], label=f"P={P} {act}")
        for j, lab in enumerate(("χ̄₊", "χ̄₋")):
            axes[0][j].set_xlabel("step")
            axes[0][j].set_ylabel(lab)
        axes[0][0].legend(fontsize=7)
        paths.append(save_figure(fig, fig_dir / "chi_over_training.png"))
        return paths


register(Fig5)
