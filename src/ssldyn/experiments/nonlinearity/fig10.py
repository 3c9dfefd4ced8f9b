"""`nonlinearity` Fig. 10: the Fig. 4 grid with the quadratic loss (constant α), vs InfoNCE.

Same settings, protocol choices, metric (eq. 16 signed for ReLU / LeakyReLU, |cos| for the
sign-symmetric activations) and seeds as ``nonlinearity.fig4``; the grid is shared (cached per run),
so running both costs one grid. Controls as in ``nonlinearity.fig4`` (the β-gain claims: the same ReLU
β-gain at t = 0, since χ̄₊ is a max over M = β·P filters and rises with β before any training); the loss
comparison's control is its sign-flip null (:func:`~._token_seeds.sign_flip_null`: the same difference with the
losses swapped in half of the cells, its lower quartile over every relabelling that sums to 0 along each β and
P) — at t = 0 the difference is 0 by construction, since both losses start from the same filters, so that
control could never hold.
Claims: the trends of Fig. 4 hold with the quadratic loss, and its χ̄₊ is lower than InfoNCE's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import model_validator

from ssldyn.contract import Result, register
from ssldyn.contract.claims import ClaimSpec, Measured, Robustness, lt
from ssldyn.experiments.nonlinearity._token_seeds import finals, mean_diff, over_parameterised_cells, sign_flip_null
from ssldyn.experiments.nonlinearity.fig4 import (
    BN_KNOBS,
    BN_PAPER,
    DIFF_BOUNDS,
    EFFECT_CHI,
    EFFECT_CHI_BASIS,
    LR_BATCH_KNOBS,
    LR_BATCH_PAPER,
    ActivationGridConfig,
    _ActivationGridBase,
    plot_activation_grid,
    protocol_maps,
    trend_claims,
    trend_measures,
)
from ssldyn.experiments.nonlinearity.token_plots import CHI_MINUS_SIGNED, CHI_PLUS, ChiRow


class Fig10Config(ActivationGridConfig):
    """The Fig. 4 grid; Fig. 10's claims are about the quadratic-loss row (and compare it with InfoNCE)."""

    @model_validator(mode="after")
    def _both(self) -> Fig10Config:
        if not {"infonce", "quadratic"} <= set(self.losses):
            raise ValueError("losses must include 'quadratic' and 'infonce' (Fig. 10 compares them)")
        return self


LOC10 = "Fig. 10"


def loss_gap_frame(result: Result) -> pd.DataFrame:
    """Per (activation, β, P): mean and std over the seeds of χ̄₊(quadratic) − χ̄₊(InfoNCE), the per-cell
    differences ``quadratic-below-infonce`` averages (columns ``d_chi_plus_mean``, ``d_chi_plus_std``)."""
    keys = ["activation", "beta", "P"]
    wide = finals(result).pivot_table(index=[*keys, "rep"], columns="loss", values="chi_plus_mean")
    d = (wide["quadratic"] - wide["infonce"]).rename("d").reset_index()
    g = d.groupby(keys)["d"].agg(["mean", "std"]).reset_index()
    return g.rename(columns={"mean": "d_chi_plus_mean", "std": "d_chi_plus_std"})


def fig10_rows(gap: pd.DataFrame) -> list[ChiRow]:
    """Fig. 10's rows (quadratic loss: χ̄₊, then χ̄₋ with the signed eq. 181 score), each with InfoNCE's curve for
    comparison, and a row of the difference χ̄₊(quadratic) − χ̄₊(InfoNCE) (``gap``: :func:`loss_gap_frame`) with
    the 0 line and the claim's −EFFECT_CHI."""
    infonce = {"loss": "infonce"}
    return [
        ChiRow("quadratic loss: Fig. 10 top", {"loss": "quadratic"}, ref=infonce),
        ChiRow("quadratic loss: Fig. 10 bottom", {"loss": "quadratic"}, "chi_minus_signed", CHI_MINUS_SIGNED,
               ref=infonce),
        ChiRow("gap: quadratic − InfoNCE", {}, "d_chi_plus", f"Δ{CHI_PLUS}", frame=gap,
               init=False, hlines=(0.0, -EFFECT_CHI)),
    ]  # fmt: skip


#: the claims Fig. 10's maps show: every scored claim
FIG10_MAPPED = (
    "relu-rises-with-beta-quadratic", "relu-gain-beyond-init-quadratic", "relu-beats-linear-quadratic",
    "linear-flat-in-beta-quadratic", "homogeneous-similar-quadratic", "homogeneous-gain-beyond-init-quadratic",
    "quadratic-below-infonce",
)  # fmt: skip


@register
class Fig10(_ActivationGridBase):
    name = "nonlinearity.fig10"
    figure = "Fig. 10 (and Fig. 4 bottom row)"
    description = "χ̄₊ / χ̄₋ vs β per activation and P with the quadratic loss, compared with InfoNCE"
    Config = Fig10Config
    quick = {**_ActivationGridBase.quick, "losses": ["infonce", "quadratic"]}
    est_seconds = (10, 10)  # with Fig. 4's grid in the store (reuses); 1440 s more without it
    # 4: robustness map over lr × batch (as Fig. 4's); 3: quadratic-below-infonce's control is the sign-flip null;
    # 2: relu-rises-with-beta-quadratic at t = 0
    # 5: homogeneous-gain-beyond-init-quadratic (a referee's finding); the maps show it too
    # 6: a robustness map over the negatives (as Fig. 4's); 7: and over the temperature (T may decide
    # quadratic-below-infonce: the quadratic loss is linear in the similarity, so 1/T scales its loss gradient, not
    # the weight decay); the negatives map gains generator-positives
    # 8: the sign-flip null over every relabelling summing to 0 along β and P (its quartile on the claim's side),
    # not one checkerboard
    # 9: figure only (claims unchanged): Fig. 10's own rows (quadratic loss, InfoNCE beside it) and the gap
    # χ̄₊(quadratic) − χ̄₊(InfoNCE); χ̄₋ signed (the metric of the claims), t = 0 dotted, captions (a referee's finding)
    version = "9"
    reuses = ("nonlinearity.fig4",)  # the same grid entries (ctx.cached): computed once when both run
    robustness = (
        Robustness(claims=FIG10_MAPPED, knobs=LR_BATCH_KNOBS, paper=LR_BATCH_PAPER),
        Robustness(claims=FIG10_MAPPED, knobs=BN_KNOBS, paper=BN_PAPER),
        *protocol_maps(FIG10_MAPPED),
    )
    claims = (
        *trend_claims("quadratic loss", LOC10, suffix="-quadratic"),
        ClaimSpec(
            "quadratic-below-infonce", "Quadratic loss is not as effective as InfoNCE in feature learning.",
            "Fig. 4, Fig. 10, Sec. 5.1", kind="paper",
            reading="mean over (activation, β, P) of χ̄₊(quadratic) − χ̄₊(InfoNCE)", relation=lt(-EFFECT_CHI),
            basis="relation: 'not as effective' — a lower matching score", effect=EFFECT_CHI_BASIS,
            bounds=DIFF_BOUNDS, control="the sign-flip null: the same difference with the two losses swapped in "
            "half of the (β, P) cells (the same cells for every activation), its lower quartile over the "
            "relabellings (each sums to 0 along every β and every P)",
        ),
    )  # fmt: skip

    def measure(self, cfg: Fig10Config, result: Result) -> dict:
        t, t0 = result.tables["final"], result.tables["init"]
        out = {f"{k}-quadratic": v for k, v in trend_measures(cfg, t, t0, "quadratic").items()}
        keys = ["activation", "beta", "P"]

        q = t[t["loss"] == "quadratic"].set_index(keys)["chi_plus_mean"]
        n = t[t["loss"] == "infonce"].set_index(keys)["chi_plus_mean"]
        d = q - n.reindex(q.index)  # (activation × β × P,)
        diff = d.to_numpy()
        wide = d.unstack("activation")  # (β × P cells, activations): one sign pattern for every activation
        out["quadratic-below-infonce"] = Measured(
            float(np.mean(diff)),
            # each pattern: the mean over the activations of the signed differences
            control=sign_flip_null(wide.to_numpy(), list(wide.index), tail="lower"),
            detail=f"quadratic below InfoNCE in {np.mean(diff < 0):.0%} of the cells; (β > 1, "
            f"P > 1), ReLU: {mean_diff(t, {'activation': 'relu', 'loss': 'quadratic'}, {'activation': 'relu', 'loss': 'infonce'}, over_parameterised_cells(cfg.betas, cfg.Ps)):+.3f}",
        )
        return out

    def plots(self, cfg: Fig10Config, result: Result, fig_dir: Path) -> list[Path]:
        n_seeds = len(result.seed_results or [result])
        gap = loss_gap_frame(result)
        mean_gap = f"{gap['d_chi_plus_mean'].mean():+.3f}".replace("-", "−")
        title = (
            f"Fig. 10: quadratic loss (bold) vs InfoNCE (faint), mean ± std over {n_seeds} seeds; dotted: t = 0\n"
            f"gap Δ{CHI_PLUS} = quadratic − InfoNCE, mean over all cells: {mean_gap}\n"
            f"(claim quadratic-below-infonce: < −{EFFECT_CHI:g})"
        )
        path = fig_dir / "fig10.png"
        rows = fig10_rows(gap)
        return [plot_activation_grid(cfg, result, path, rows=rows, title=title, ref_label="InfoNCE (comparison)",
                                     main_label="quadratic loss")]  # fmt: skip
