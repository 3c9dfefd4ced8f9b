"""`grassmann` Prop. 3 and Sec. 4.1: the four equivalent constrained problems, and two errata.

Linear model ``u(x) = W2ᵀW1x`` on the lifted half-moons (d = 4, every eigenvalue of C negative),
z = 2, width h, loss (8) ``L = Tr(W2ᵀW1 C W1ᵀW2)`` with C averaged over anchors. Prop. 3 says the
following problems are equivalent; we solve each by gradient descent from the same
Haar-random weights and compare the minima with ``L* = λ_1 + λ_2`` (the proof's minimiser keeps the
eigen-directions of the z most negative eigenvalues with weight 1):

1. the scaled loss ``L / (‖W2‖₂²‖W1‖₂²)``, plain GD (``TwoLayerNet(regime="scaled")``);
2. ``‖W1‖₂ ≤ 1``, ``‖W2‖₂ ≤ 1``: GD, then singular values clipped to 1 (projection on the balls);
3. ``‖W2ᵀW1‖₂ ≤ 1``: as in the proof, over the product ``M = W2ᵀW1`` (any M with ‖M‖₂ ≤ 1 is such a
   product when h ≥ max(d, z)): GD on ``Tr(M C Mᵀ)``, then singular values of M clipped to 1;
4. ``W1ᵀW1 = I``, ``W2ᵀW2 = I``: projected GD on the Stiefel manifolds (polar map).

The scaled loss is not differentiable where the top two singular values of a weight matrix meet,
and GD with a constant step chatters there (a 2 % sawtooth that had not reached L* after 2000 steps
for one of five seeds); every problem is therefore solved with the same step schedule — η for the
first half of the steps, then decaying to 0 along a half cosine (the standard remedy for non-smooth
objectives) — and its value is the best loss over the last fifth of the run.

"Extracts the eigenvectors" is read at the fixed rank z: the largest principal angle between
``span(v_1, …, v_z)`` and the span of the top-z right singular vectors of the final map
(:func:`rank_z_angle`); a map with ``σ_z/σ_1 ≤ 1e-3`` has collapsed below rank z and scores π/2
(our choice of tolerance: the collapse claims' 1e-3), so the rank-one map of the Frobenius ball
does not pass by having its one row inside the z-dimensional eigen-subspace.

Controls: the Frobenius-ball constraint ``‖W1‖_F, ‖W2‖_F ≤ 1`` (Prop. 2) from the same start reaches
the rank-one minimum λ_1, not λ_1 + λ_2; the map at initialisation is not aligned with v_1..v_z.

**(3) ⇔ (4) needs h ≥ d + z − k** (erratum ``orthogonality-needs-width``: Prop. 3 states no condition
on h; k = the number of negative eigenvalues used by the minimiser of (3)): the proof writes the optimal M of (3) (eigenvalues of MMᵀ in {0, 1}) as W2ᵀW1 with orthonormal
columns, which needs room in R^h. Counterexample at h = d = z = 2 with λ_1 < 0 < λ_2 (the lifted C
restricted to its first two coordinates is replaced by the 2-D half-moons C shifted to
``C − ½(λ_1 + λ_2)I``): problem (3) reaches λ_1 (M of rank one), while at h = 2 every admissible M
is orthogonal and problem (4) is pinned at Tr C = λ_1 + λ_2; at h = 3 = d + z − k it reaches λ_1.

**Errata** (each with a demonstration computed in the run):

- Prop. 3 writes the general loss as ``‖W2ᵀW1CW1ᵀW2‖₂²``, which is ≥ 0; loss (1) is the trace
  ``Tr(W2ᵀW1CW1ᵀW2)`` (Sec. 4, eq. 8) and is negative at the optimum. We evaluate loss (1) from the
  embeddings at the optimum of problem 4: it equals the trace to round-off and is < 0.
- Sec. 4.1 (and the end of the proof of Prop. 3) states ``E[C̃] = −n E[xxᵀ]``; with ``x⁻`` an
  independent draw, ``E[x_i x_i⁻ᵀ] = E[x]E[x]ᵀ ≠ 0``, so ``E[C̃] = −n Cov(x)``. Monte Carlo over
  ``mc_draws`` draws of the views (noise and negatives) of a fixed data set: the average ``C̃/n``
  matches ``−Cov(x)`` (unbiased covariance; exact for negatives drawn uniformly from the other
  points) and misses ``−E[xxᵀ]`` by ``x̄x̄ᵀ``.

Seeds are the ensemble axis (``batch_seeds``: one data set and one initialisation per seed).
Runs on ``ctx.device``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
from pydantic import Field, PositiveFloat, model_validator
from torch.optim.lr_scheduler import LambdaLR

from ssldyn.contract import Context, Result, register
from ssldyn.contract.claims import ClaimSpec, Erratum, Measured, ge, gt, le, lt
from ssldyn.data.moons import make_views
from ssldyn.dynamics.manifold import ManifoldGD, PlainGD, train_gd
from ssldyn.experiments.grassmann._common import (
    GrassmannExperiment,
    LiftedMoonsConfig,
    map_trace_loss,
    mean_contrastive_loss,
    moons_batch,
    moons_memory,
    peak_of,
)
from ssldyn.models.two_layer import Regime, TwoLayerNet
from ssldyn.objectives import contrast_matrix, trace_loss
from ssldyn.probes.subspace import principal_angles
from ssldyn.streams import derive_seed
from ssldyn.viz.common import PALETTE, new_figure, save_figure

PROBLEMS = ("scaled", "balls", "product", "stiefel")
#: the TwoLayerNet regime of each problem trained as a network (the product constraint trains the map M itself)
_REGIMES: dict[str, Regime] = {
    "scaled": "scaled",
    "balls": "unconstrained",
    "stiefel": "orthogonal",
    "frobenius": "frobenius",
}
LABELS = {  # mathtext: subscripts drawn as subscripts (no literal underscores in the legend)
    "scaled": r"(1) $L\,/\,(\|W_2\|_2^2\,\|W_1\|_2^2)$",
    "balls": r"(2) $\|W_1\|_2,\ \|W_2\|_2 \leq 1$",
    "product": r"(3) $\|W_2^\top W_1\|_2 \leq 1$",
    "stiefel": r"(4) $W_1^\top W_1 = I,\ W_2^\top W_2 = I$",
}


class Prop3Config(LiftedMoonsConfig):
    h: Annotated[int, Field(ge=2)] = Field(20, description="hidden width")
    z: Annotated[int, Field(ge=1)] = Field(2, description="embedding dimension")
    lr: PositiveFloat = Field(0.05, description="GD step η (first half; then annealed to 0 along a half cosine)")
    steps: Annotated[int, Field(ge=10)] = Field(2000, description="GD steps")
    mc_draws: Annotated[int, Field(ge=10)] = Field(
        400, description="Monte Carlo draws of the views for E[C̃] (Sec. 4.1)"
    )
    tol: PositiveFloat = Field(1e-3, description="relative distance to L* counted as the same minimum")

    @model_validator(mode="after")
    def _dims(self):
        d = 2 + len(self.extra_stds)
        if self.z > d or self.h < max(d, self.z):
            raise ValueError(f"need z <= d = {d} and h >= max(d, z) (got h={self.h}, z={self.z})")
        return self


#: σ_z/σ_1 at or below which a map counts as collapsed below rank z (the tolerance of the collapse claims,
#: ``grassmann.collapse``: σ_min/σ_max below 1e-3 is a line to plotting and probing precision)
RANK_TOL = 1e-3


def rank_z_row_space(M: torch.Tensor, z: int, tol: float = RANK_TOL) -> torch.Tensor | None:
    """The rank-z row space of the map ``M (m, d)``: its top-z right singular vectors ``(d, z)``, or None when M has
    collapsed below rank z (fewer than z rows, or ``σ_z ≤ tol·σ_1``)."""
    _, sv, Vh = torch.linalg.svd(M, full_matrices=False)
    if sv.shape[-1] < z or not bool(sv[z - 1] > tol * sv[0]):
        return None
    return Vh[:z].mT


def rank_z_angle(M: torch.Tensor, B: torch.Tensor, tol: float = RANK_TOL) -> float:
    """Largest principal angle (radians) between ``span(B)``, ``B (d, z)``, and the row space of the map ``M (m, d)``
    at the fixed rank z.

    The rank-z row space is spanned by the top-z right singular vectors of M. A map whose z-th singular value is at
    most ``tol`` times its largest (or with fewer than z rows) has collapsed below rank z and scores π/2: its
    trailing singular vectors are arbitrary directions of its null space, not extracted ones (the SVD of
    ``e_1e_1ᵀ`` returns ``e_2`` as second right singular vector), and a numerical-rank comparison would give a
    rank-one map angle 0 against a z-dimensional subspace that contains its row.
    """
    V = rank_z_row_space(M, B.shape[-1], tol)  # (d, z) or None
    return math.pi / 2 if V is None else float(principal_angles(V, B).max())


def clip_singular_values(W: torch.Tensor, c: float = 1.0) -> torch.Tensor:
    """Projection of ``W (..., m, k)`` on the spectral-norm ball ``‖W‖₂ ≤ c``: singular values clipped at c."""
    U, s, Vh = torch.linalg.svd(W, full_matrices=False)
    return U @ (s.clamp(max=c)[..., None] * Vh)


@register
class Prop3(GrassmannExperiment):
    name = "grassmann.prop3"
    figure = "Prop. 3, Sec. 4.1"
    description = "the scaled loss, operator-norm and orthogonality constraints reach the same minimum Σλ_i; errata"
    Config = Prop3Config
    quick = {"steps": 800, "lr": 0.1, "mc_draws": 300}
    # 4: orthogonality-needs-width is a sanity check (an identity of the constraint); 5: an erratum
    # 6: figures only: (2) dashed over (4), the Frobenius control (new array loss/frobenius), the counterexample panel
    # 7: figures only: legend labels in mathtext (no literal underscores); claims unchanged
    version = "7"
    est_seconds = (2, 5)  # CPU seconds for all seeds (3 quick, 5 paper)
    claims = (
        ClaimSpec(
            "equivalent-minima", "The four problems — scaled loss (1), spectral-norm balls (2), product constraint "
            "(3), orthogonality (4) — are equivalent.", "Prop. 3", kind="paper",
            reading="largest over the four problems of |L_best − L*|/|L*| with L* = λ_1 + … + λ_z (every eigenvalue "
            "of C is negative here); L_best is the best loss over the last fifth of GD (step η, then annealed to 0 over the second half)",
            relation=lambda cfg: le(cfg.tol), basis="tolerance: tol (default 0.1%) of the optimal loss",
            control="the Frobenius-ball constraint (Prop. 2) from the same start and schedule (minimum λ_1)",
            bounds=(0.0, math.inf),
        ),
        ClaimSpec(
            "extracts-eigenvectors", "The constraint extracts the eigenvectors of C of the most negative eigenvalues "
            "(and so avoids dimension collapse).", "Prop. 3", kind="paper",
            reading="largest over the four problems of the largest principal angle between span(v_1, …, v_z) and "
            "the row space of the final map W2ᵀW1 at the fixed rank z (its top-z right singular vectors; π/2 when "
            "σ_z/σ_1 ≤ 1e-3, a map collapsed below rank z, so a rank-one map along v_1 fails)",
            relation=le(1e-2), basis="tolerance: 0.01 rad",
            control="the same angle for the maps at initialisation", bounds=(0.0, math.pi / 2),
        ),
        Erratum(
            "orthogonality-needs-width", "Prop. 3's equivalence of (3) and (4) needs h ≥ d + z − k: at h = d = z = 2 "
            "with λ_1 < 0 < λ_2, orthogonality cannot reach the minimum λ_1 of (3).", "Prop. 3",
            result="Prop. 3",
            printed="Prop. 3: (1)–(4) are equivalent whenever C has at least one negative eigenvalue, no condition "
            "on h", used="h ≥ d + z − k (k the number of negative eigenvalues)",
            derivation="the proof of (3) ⇔ (4) writes the minimiser M of (3) (MMᵀ with eigenvalues in {0, 1}) as "
            "W2ᵀW1 with orthonormal columns; at h = d = z every admissible M is orthogonal, so Tr(MCMᵀ) = Tr C",
            reading="(L_best(4) − L_best(3))/λ_2 on the shifted 2-D half-moons C (λ_1 < 0 < λ_2), h = 2: every "
            "admissible pair gives Tr C (the derivation), so the ratio is 1 before any training once (3) reaches "
            "λ_1 — the printed equivalence fails at this admissible width",
            relation=ge(0.5), basis="relation: the gap is λ_2 (ratio 1) when (4) is pinned at Tr C; 0 when equivalent",
            effect="tolerance: half the predicted gap", bounds=(-math.inf, math.inf),
            control="the same gap at h = 3 = d + z − k, where the equivalence holds",
        ),
        Erratum(
            "prop3-loss-is-a-trace", "Prop. 3 writes the general loss as a squared spectral norm; loss (1)/(2) is "
            "the trace of the same matrix.", "Prop. 3, eq. (8)", printed="L = ‖W2ᵀW1CW1ᵀW2‖₂² (≥ 0)",
            used="L = Tr(W2ᵀW1CW1ᵀW2) (eq. 8)",
            reading="loss (1) computed from the embeddings u(x), u(x⁺), u(x⁻) at the optimum of problem (4); a "
            "squared norm cannot take this value", relation=lt(0.0),
            basis="relation: a negative value of loss (1) contradicts a form that is ≥ 0",
        ),
        Erratum(
            "sec41-expectation", "E[C̃] = −n·Cov(x), not −n·E[xxᵀ]: an independent negative has "
            "E[x x⁻ᵀ] = E[x]E[x]ᵀ ≠ 0.", "Sec. 4.1, Prop. 3", printed="E[C̃] = −n E[xxᵀ]",
            used="E[C̃] = −n Cov(x)",
            reading="Monte Carlo mean of C̃/n over draws of the views of one data set: ‖C̄ + E[xxᵀ]‖_F divided by "
            "‖C̄ + Cov(x)‖_F (printed form's error over the used form's error)", relation=gt(10.0), bounds=(0.0, math.inf),
            basis="method: the used form's error is the Monte Carlo error (~ 1/√draws); the printed form misses "
            "x̄x̄ᵀ (‖x̄x̄ᵀ‖_F ≈ 0.3 for the half-moons)",
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: Prop3Config, n_seeds: int) -> tuple[int, str]:
        """``PROCESS_BASELINE`` + the moons (:func:`moons_memory`, ``d = 2 + len(extra_stds)``) + the ``(S, h, d)``
        weights, their gradients and retractions ``8·S·h·d·8`` (small: the training runs on ``C``, not on the
        data). Measured (max RSS, 3 seeds): ``--quick`` 0.54 GB (estimate 0.60 GB); ``--quick n=6000``: 0.98 GB
        (estimate 1.25 GB)."""
        d = 2 + len(cfg.extra_stds)
        return peak_of({"n": moons_memory(cfg.n, n_seeds, d), "h": 8.0 * n_seeds * cfg.h * d * 8})

    def run(self, cfg: Prop3Config, ctx: Context) -> list[Result]:
        dev, seeds = ctx.device, ctx.seeds
        S, z = len(seeds), cfg.z
        mb = moons_batch(cfg.n, cfg.moons_noise, seeds, tuple(cfg.extra_stds), device=dev)
        d, C, lam, V = mb.d, mb.C, mb.lam, mb.V
        L_star = lam[:, :z].clamp(max=0).sum(-1)  # (S,): Σ of the z most negative (negative) eigenvalues
        init = [s + 7 for s in seeds]
        curves, maps = {}, {}

        def eta(k: int) -> float:  # constant, then cosine-decaying over the second half: the same for the four
            u = max(0.0, (k - cfg.steps / 2) / (cfg.steps / 2))
            return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * u))

        nets: dict[str, TwoLayerNet] = {}
        for prob in [*PROBLEMS, "frobenius"]:  # Frobenius balls (Prop. 2): the control, the same start and schedule
            then = None
            if prob == "product":
                net0 = TwoLayerNet(d, cfg.h, z, "linear", "orthogonal", ensemble=S, seeds=init, dtype=torch.float64,
                                   device=dev)  # fmt: skip
                M = torch.nn.Parameter(net0.end_to_end().detach().clone())  # (S, z, d)
                params, loss_fn = [M], lambda M=M: map_trace_loss(M, C)  # Tr(M C Mᵀ)
                then = lambda M=M: _clip_([M])  # noqa: E731
                final_map = lambda M=M: M.detach()  # noqa: E731
            else:
                regime = _REGIMES[prob]
                net = TwoLayerNet(d, cfg.h, z, "linear", regime, ensemble=S, seeds=init, init="orthogonal",
                                  dtype=torch.float64, device=dev)  # fmt: skip
                nets[prob] = net
                params = net.weights()
                if prob == "scaled":
                    loss_fn = lambda net=net: trace_loss(net.W1, net.W2, C) / net.loss_scale()  # noqa: E731
                else:
                    loss_fn = lambda net=net: trace_loss(net.W1, net.W2, C)  # noqa: E731
                if prob == "balls":
                    then = lambda params=params: _clip_(params)  # noqa: E731
                elif prob == "frobenius":
                    then = net.project_
                    maps0 = net.end_to_end().detach().clone()  # (S, z, d): the common initial map
                final_map = lambda net=net: (net.end_to_end() / net.loss_scale().sqrt()[:, None, None]).detach()  # noqa: E731
            opt = (ManifoldGD(params, lr=1.0, mode="projected", retraction="polar") if prob == "stiefel"
                   else PlainGD(params, lr=1.0))  # fmt: skip
            gd = train_gd(params, loss_fn, update=opt, after_step=then, scheduler=_annealed(opt, eta, prob == "stiefel"),
                          steps=cfg.steps, every=1, inputs={"C": C},
                          track=lambda it, prob=prob: ctx.track(it, total=cfg.steps + 1, description=f"Prop. 3 ({prob})"))  # fmt: skip
            curves[prob] = gd.trajectory.series_members("loss")[1]  # (T, S)
            maps[prob] = final_map()  # (S, z, d), normalised to ‖W1‖₂ = ‖W2‖₂ = 1 for the scaled loss
        counter = _counterexample(cfg, mb, dev, eta, seeds)
        with torch.no_grad():  # at the optimum of problem (4) (the Stiefel-trained net)
            L1 = mean_contrastive_loss(nets["stiefel"], mb.x, mb.x_pos, mb.x_neg).cpu()  # loss (1) from the embeddings
            Mst = nets["stiefel"].end_to_end()
            inner = Mst @ C @ Mst.mT  # (S, z, z): W2ᵀW1 C W1ᵀW2
            trace_form = inner.diagonal(dim1=-2, dim2=-1).sum(-1).cpu()
            printed_form = torch.linalg.matrix_norm(inner, ord=2).pow(2).cpu()
        k = max(1, cfg.steps // 5)
        out = []
        for s, seed in enumerate(seeds):
            res = Result(summary={"eigenvalues_C": lam[s].tolist(), "optimal_loss": float(L_star[s])})
            sm = res.summary
            gaps, angles = {}, {}
            for prob in PROBLEMS:
                best = float(np.min(curves[prob][-k:, s]))
                sm[f"{prob}_best_loss_last_fifth"] = best
                sm[f"{prob}_final_loss"] = float(curves[prob][-1, s])
                gaps[prob] = abs(best - float(L_star[s])) / abs(float(L_star[s]))
                angles[prob] = rank_z_angle(maps[prob][s], V[s][:, :z])
                res.arrays[f"loss/{prob}"] = curves[prob][:, s]
            res.arrays["loss/frobenius"] = curves["frobenius"][:, s]  # the control (Prop. 2): reaches λ_1
            sm["frobenius_relative_gap"] = abs(float(np.min(curves["frobenius"][-k:, s])) - float(L_star[s])) / abs(
                float(L_star[s])
            )
            sm["max_angle_at_init"] = rank_z_angle(maps0[s], V[s][:, :z])
            sm["frobenius_angle"] = rank_z_angle(maps["frobenius"][s], V[s][:, :z])  # collapsed (Prop. 2): π/2
            sm.update({key: float(v[s]) for key, v in counter.items()})
            sm["relative_gap_to_optimum"] = gaps
            sm["angle_to_eigvecs"] = angles
            sm["max_relative_gap"] = max(gaps.values())
            sm["max_angle"] = max(angles.values())
            sm["loss1_at_optimum"] = float(L1[s])
            sm["trace_form_at_optimum"] = float(trace_form[s])
            sm["printed_norm_form_at_optimum"] = float(printed_form[s])
            sm.update(_expectation_demo(cfg, seed, mb.x[s].cpu()))
            res.notes.append(
                f"L* = λ_1 + … + λ_z = {float(L_star[s]):.5f}; best losses over the last fifth: "
                + ", ".join(f"{p} {sm[f'{p}_best_loss_last_fifth']:.5f}" for p in PROBLEMS)
                + ". Problem (3) is solved over the product M = W2ᵀW1, as in the proof."
            )
            res.notes.append(
                f"Erratum Prop. 3: at the optimum loss (1) = {sm['loss1_at_optimum']:.6f} = Tr form "
                f"{sm['trace_form_at_optimum']:.6f}, while the printed ‖·‖₂² form = {sm['printed_norm_form_at_optimum']:.6f}. "
                f"Erratum Sec. 4.1: ‖C̄ + E[xxᵀ]‖_F = {sm['ec_printed_error']:.4f}, ‖C̄ + Cov(x)‖_F = "
                f"{sm['ec_used_error']:.4f} over {cfg.mc_draws} draws (‖x̄x̄ᵀ‖_F = {sm['mean_outer_norm']:.4f})."
            )  # fmt: skip
            out.append(res)
        return out

    def measure(self, cfg: Prop3Config, result: Result) -> dict:
        s = result.summary
        return {
            "equivalent-minima": Measured(s["max_relative_gap"], control=s["frobenius_relative_gap"], detail=", ".join(
                f"{p} {v:.2g}" for p, v in s["relative_gap_to_optimum"].items())),
            "extracts-eigenvectors": Measured(s["max_angle"], control=s["max_angle_at_init"], detail=", ".join(
                f"{p} {v:.2g}" for p, v in s["angle_to_eigvecs"].items()) + f"; Frobenius ball {s['frobenius_angle']:.3g}"),
            "orthogonality-needs-width": Measured(
                s["counter_gap_h2"], control=s["counter_gap_h3"],
                detail=f"λ = {s['counter_lambda1']:.4g}, {s['counter_lambda2']:.4g}; (3) reaches "
                f"{s['counter_loss_product']:.4g}, (4) at h = 2 {s['counter_loss_stiefel_h2']:.4g}, at h = 3 "
                f"{s['counter_loss_stiefel_h3']:.4g}"),
            "prop3-loss-is-a-trace": Measured(s["loss1_at_optimum"], detail=(
                f"Tr form {s['trace_form_at_optimum']:.6g}; printed ‖·‖₂² form {s['printed_norm_form_at_optimum']:.3g}")),
            "sec41-expectation": Measured(s["ec_printed_error"] / s["ec_used_error"], detail=(
                f"errors {s['ec_printed_error']:.3g} (printed) vs {s['ec_used_error']:.3g} (−Cov)")),
        }  # fmt: skip

    def plots(self, cfg: Prop3Config, result: Result, fig_dir: Path):
        fig, ax = new_figure(2, 1, size=(5.0, 3.7))
        a, sm = result.arrays, result.summary
        styles = {"balls": (0, (5, 3)), "stiefel": "-"}  # (2) lies on (4): dashed on top of it
        for i, prob in enumerate(PROBLEMS):
            ax[0, 0].plot(a[f"loss/{prob}"], color=PALETTE[i], lw=1.4 if prob == "balls" else 1.0,
                          ls=styles.get(prob, "-"), label=LABELS[prob], zorder=3 if prob == "balls" else 2)  # fmt: skip
        if "loss/frobenius" in a:
            ax[0, 0].plot(a["loss/frobenius"], color="0.5", lw=1, ls="-.",
                          label=r"control (Prop. 2): $\|W_1\|_F,\ \|W_2\|_F \leq 1$")  # fmt: skip
            ax[0, 0].axhline(sm["eigenvalues_C"][0], color="0.5", ls=":", lw=0.8, label="$\\lambda_1$")
        ax[0, 0].axhline(sm["optimal_loss"], color="k", ls="--", lw=0.8,
                         label=f"$\\lambda_1$ + … + $\\lambda_{cfg.z}$")  # fmt: skip
        ax[0, 0].set(xlabel="GD step", ylabel="loss (8)")
        ax[0, 0].set_title(f"Prop. 3: four equivalent problems (seed {result.seed})", fontsize=10)
        ax[0, 0].legend(fontsize=7)
        _counterexample_panel(ax[0, 1], sm)
        return [save_figure(fig, fig_dir / "prop3.png")]


def _counterexample_panel(ax, sm: dict) -> None:
    """Erratum orthogonality-needs-width: the best losses of (3) and of (4) at h = 2 and h = 3 on the shifted 2-D C."""
    names = [r"(3) $\|W_2^\top W_1\|_2 \leq 1$", "(4) Stiefel, h = 2", "(4) Stiefel, h = 3"]
    vals = [sm["counter_loss_product"], sm["counter_loss_stiefel_h2"], sm["counter_loss_stiefel_h3"]]
    ax.bar(names, vals, color=[PALETTE[2], PALETTE[1], PALETTE[3]])
    l1, l2 = sm["counter_lambda1"], sm["counter_lambda2"]
    span = max(abs(v) for v in [*vals, l1, l1 + l2])
    for i, v in enumerate(vals):  # the value under the end of each bar (a bar at ~0 shows only its label)
        ax.text(i, min(v, 0.0) - 0.02 * span, f"{v:.3g}", ha="center", va="top", fontsize=8)
    ax.set_ylim(min([*vals, l1, l1 + l2]) - 0.15 * span, 0.1 * span)
    ax.axhline(l1, color="k", ls=":", lw=1, label=f"$\\lambda_1$ = {l1:.3g}")
    ax.axhline(l1 + l2, color="k", ls="--", lw=1, label=f"Tr C = $\\lambda_1 + \\lambda_2$ = {l1 + l2:.3g}")
    ax.axhline(0, color="0.6", lw=0.6)
    ax.set(ylabel="best loss (8), last fifth of the steps")
    ax.set_title("erratum orthogonality-needs-width: h = d = z = 2,\n2-D C shifted to $\\lambda_1$ < 0 < "
                 "$\\lambda_2$", fontsize=10)  # fmt: skip
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, loc="center")


def _annealed(opt: torch.optim.Optimizer, eta: Callable[[int], float], positive: bool = False) -> LambdaLR:
    """The rate ``η(k)`` at update ``k`` of ``opt`` (created with ``lr = 1.0``: ``LambdaLR`` multiplies that base rate
    by ``η(k)``, exactly); ``positive``: floored at ``1e-300`` where ``η`` reaches 0 (``ManifoldGD`` needs ``lr > 0``)."""
    floor = 1e-300 if positive else 0.0
    return LambdaLR(opt, lambda k: max(eta(k), floor))


@torch.no_grad()
def _clip_(params: list[torch.Tensor]) -> None:
    """In place: every matrix's singular values clipped at 1 (the projection onto the spectral-norm ball)."""
    for W in params:
        W.copy_(clip_singular_values(W))


def _counterexample(cfg: Prop3Config, mb, dev, eta, lab_seeds) -> dict[str, torch.Tensor]:
    """Problem (3) vs (4) at h = 2 and h = 3 on the 2-D half-moons C shifted to λ_1 < 0 < λ_2 (z = 2).

    Returns per seed ``(S,)``: the eigenvalues, the best losses over the last fifth, and the gaps
    ``(L(4) − L(3))/λ_2`` at h = 2 and h = 3.
    """
    S = mb.x.shape[0]
    C2 = contrast_matrix(mb.x[..., :2], mb.x_pos[..., :2], mb.x_neg[..., :2]) / mb.n  # (S, 2, 2): the 2-D moons
    lam2 = torch.linalg.eigvalsh(C2)  # (S, 2)
    C2 = C2 - 0.5 * lam2.sum(-1)[:, None, None] * torch.eye(2, dtype=C2.dtype, device=dev)  # λ_1 < 0 < λ_2
    lam = torch.linalg.eigvalsh(C2)  # (S, 2)
    k = max(1, cfg.steps // 5)
    seeds = [derive_seed(s, 3) for s in lab_seeds]  # one initialisation per lab seed (the ensemble contract)
    out: dict[str, torch.Tensor] = {"counter_lambda1": lam[:, 0].cpu(), "counter_lambda2": lam[:, 1].cpu()}
    # (3): over the product M, singular values clipped at 1
    net0 = TwoLayerNet(2, 2, 2, "linear", "orthogonal", ensemble=S, seeds=seeds, dtype=torch.float64, device=dev)
    M = torch.nn.Parameter(0.5 * net0.end_to_end().detach().clone())  # (S, 2, 2), inside the ball
    opt = PlainGD([M], lr=1.0)
    gd = train_gd([M], lambda: map_trace_loss(M, C2), update=opt, steps=cfg.steps, every=1,
                  after_step=lambda: _clip_([M]), scheduler=_annealed(opt, eta), inputs={"C": C2})  # fmt: skip
    L3 = torch.as_tensor(gd.trajectory.series_members("loss")[1][-k:].min(0))  # (S,)
    out["counter_loss_product"] = L3
    for h in (2, 3):
        net = TwoLayerNet(2, h, 2, "linear", "orthogonal", ensemble=S, seeds=seeds, dtype=torch.float64, device=dev)
        opt = ManifoldGD(net.weights(), lr=1.0, mode="projected", retraction="polar")
        gd = train_gd(net.weights(), lambda net=net: trace_loss(net.W1, net.W2, C2), update=opt, steps=cfg.steps,
                      every=1, scheduler=_annealed(opt, eta, True), inputs={"C": C2})  # fmt: skip
        L4 = torch.as_tensor(gd.trajectory.series_members("loss")[1][-k:].min(0))  # (S,)
        out[f"counter_loss_stiefel_h{h}"] = L4
        out[f"counter_gap_h{h}"] = (L4 - L3) / lam[:, 1].cpu()
    return out


def _expectation_demo(cfg: Prop3Config, seed: int, x: torch.Tensor) -> dict:
    """Monte Carlo of E[C̃]/n over ``mc_draws`` view draws of the fixed anchors ``x (n, d)`` (CPU, float64)."""
    n = x.shape[0]
    acc = torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64)
    for r in range(cfg.mc_draws):
        v = make_views(x, seed=derive_seed(seed, 5, r))  # x⁺ = x + ε, x⁻ a uniformly random other anchor
        acc += contrast_matrix(v.x, v.x_pos, v.x_neg, symmetrize=False) / n  # C̃/n
    c_bar = acc / cfg.mc_draws
    xbar = x.mean(0)
    second = x.T @ x / n  # E[xxᵀ] (empirical)
    cov = torch.cov(x.T)  # unbiased: exactly −E[C̃]/n for negatives drawn uniformly from the other anchors
    return {
        "ec_printed_error": float((c_bar + second).norm()),
        "ec_used_error": float((c_bar + cov).norm()),
        "mean_outer_norm": float(torch.outer(xbar, xbar).norm()),
    }
