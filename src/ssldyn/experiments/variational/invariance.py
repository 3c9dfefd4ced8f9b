"""`variational` Thm. 4.2: vanilla GD keeps an invariant map invariant; training the network may not — and when.

Data (Sec. 4.2, eq. 16): ``N`` clusters ``x_i = ξ_q + ε_i`` with ε_i in the orthogonal
complement M^⊥ (the perturbation α), ``‖ε_i‖ < δ``. Map: the averaging net (eq. 18) with the
invariant initialisation of eq. (17) (columns of B on M^⊥ are zero), outputs normalised
inside the NT-Xent loss of Prop. 2.1. Perturbations ``T(x) = x + ε'`` with a fresh
``ε' ∈ M^⊥``, ``‖ε'‖ < δ``. Invariance gap ``E‖f(T(x)) − f(x)‖`` (normalised outputs).

* **Vanilla GD (eq. 14).** The map is updated as a function, ``f ← P_S(f − σ∇L(f))``, with
  ∇L(f)(x) the gradient field of eq. (7) evaluated with the current embedded measure
  (:func:`ssldyn.dynamics.pointwise_gradient`), both at the samples and at their perturbed
  copies. It depends on x only through f(x), so the gap stays exactly zero: by construction (the
  copies start at the samples' embeddings bitwise and every step applies the same deterministic
  map to identical inputs), so ``vanilla-stays-invariant`` is a sanity check, not a scored claim.
* **Network GD (eq. 15) on the noisy samples.** ``∇_B f(x) = (a^k ⊙ σ'(Bx)) xᵀ`` contains the
  M^⊥ part of x, so eq. (36), ``∇_w f(T x) = ∇_w f(x)``, fails and the gap grows.
* **What decides invariance (the reading of "only if").** One GD step changes the map at any
  input u by ``Δf(u) = −σ Σ_j K(u, x_j) g_j`` (Prop. 4.1 evaluated off the training set,
  ``g_j = ∂𝓛/∂z_j``), so invariance is kept (to first order) iff
  ``Σ_j [K(T x, x_j) − K(x, x_j)] g_j = 0`` — guaranteed by the *kernel condition*
  ``K(T x, x_j) = K(x, x_j)`` for every training input ``x_j``. Eq. (36) implies it (sufficient)
  but is not needed: training on the clean centers (``x_j ∈ M``, the control) keeps B's M^⊥
  columns at zero and the map exactly invariant, although eq. (36) fails there
  (``∇_B f(T x) − ∇_B f(x) ∝ ε'``): ``K(T x, x_j) − K(x, x_j) ∝ ε'ᵀx_j = 0``. So Thm. 4.2's
  "only if ... eq. (36)" does not hold (erratum ``eq36-only-if``, with the numbers); the
  condition on what is actually preserved is the kernel condition. A network that sees only
  ``P x`` (the projection onto M) satisfies eq. (36) itself and stays invariant: the "if" of
  the proof (App. A.5).

Runs on ``ctx.device`` (data, perturbations and weights drawn on the CPU, then moved); only
the logged numbers are fetched to the CPU, for the table.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, model_validator
from torch import nn

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Erratum, Measured, every_seed, gt, le
from ssldyn.data.clustered import ball_noise, clustered_data
from ssldyn.dynamics import engine
from ssldyn.dynamics.function_space import pointwise_gradient, project_sphere
from ssldyn.experiments.variational import _flows_common as fc
from ssldyn.experiments.variational._common import VariationalExperiment
from ssldyn.kernels.closed_form import averaging_net_kernel
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.models.averaging import AveragingNet
from ssldyn.probes.cluster import invariance_gap
from ssldyn.viz.common import PALETTE, new_figure, save_figure

DT = torch.float64
LOC = "Thm. 4.2, App. A.5"
EXACT = "method: float64 round-off (the map is exactly invariant in exact arithmetic)"
KERNEL_DERIVATION = (
    "Prop. 4.1 off the training set: one GD step moves the map at any input u by −σ Σ_j K(u, x_j) g_j, so "
    "f(Tx) − f(x) stays 0 (to first order) iff Σ_j [K(Tx, x_j) − K(x, x_j)] g_j = 0, guaranteed by "
    "K(Tx, x_j) = K(x, x_j) for all training inputs x_j"
)


class InvarianceConfig(ExperimentConfig):
    d: Annotated[int, Field(ge=2)] = Field(3, description="signal / embedding dimension d (Sec. 4.2)")
    D: Annotated[int, Field(ge=3)] = Field(8, description="ambient dimension D > d")
    clusters: Annotated[int, Field(ge=1)] = Field(3, description="number of clusters N <= d")
    cluster_size: Annotated[int, Field(ge=1)] = Field(12, description="samples per cluster")
    delta: PositiveFloat = Field(0.3, description="radius δ of the perturbation α ∈ P(M^⊥)")
    width: Annotated[int, Field(ge=1)] = Field(64, description="M of the averaging net (eq. 18)")
    tau: PositiveFloat = Field(0.5, description="NT-Xent temperature τ")
    steps: Annotated[int, Field(ge=1)] = Field(300, description="gradient-descent iterations (every dynamics)")
    lr_network: PositiveFloat = Field(0.5, description="step size of weight-space GD")
    lr_vanilla: PositiveFloat = Field(0.05, description="step size σ of vanilla GD (eq. 14)")
    draws: Annotated[int, Field(ge=1)] = Field(4, description="perturbation draws T per sample for the gap")
    log_every: Annotated[int, Field(ge=1)] = Field(10, description="gap logged every this many iterations")

    @model_validator(mode="after")
    def _dims(self):
        if self.clusters > self.d or self.D <= self.d:
            raise ValueError(f"need clusters <= d < D, got clusters={self.clusters}, d={self.d}, D={self.D}")
        return self


def project_onto_M(v: torch.Tensor, d: int) -> torch.Tensor:
    """``P v``: the projection onto M, the first ``d`` coordinates (the others set to 0); ``(..., D)``."""
    return torch.cat([v[..., :d], torch.zeros_like(v[..., d:])], -1)


class Projected(nn.Module):
    """``f(x) = g(P x)`` with ``P`` the projection onto M (the first d coordinates): eq. (36) holds for it."""

    def __init__(self, net: AveragingNet, d: int) -> None:
        super().__init__()
        self.net, self.d = net, d

    def forward(self, x):
        return self.net(project_onto_M(x, self.d))

    @property
    def B(self):
        return self.net.B


def eq36_violation(B: torch.Tensor, x: torch.Tensor, xT: torch.Tensor, d: int) -> float:
    """``mean_i ‖∇_B f(T x_i) − ∇_B f(x_i)‖_F / ‖∇_B f(x_i)‖_F`` for the ReLU averaging net (no bias).

    ``∇_B f^k(u)`` has rows ``p`` of block ``k`` equal to ``σ'(b_p·u) u / √M`` (App. A.6), so
    ``‖J(u) − J(v)‖² = (1/M) Σ_p ‖1[b_p·u > 0] u − 1[b_p·v > 0] v‖²``. ``B``: ``(Md, D)``; ``x, xT``: ``(n, D)``.
    """
    M = B.shape[0] // d
    s, sT = (x @ B.T > 0).to(x.dtype), (xT @ B.T > 0).to(x.dtype)  # (n, Md)
    nx, nT, cross = (x * x).sum(-1), (xT * xT).sum(-1), (x * xT).sum(-1)  # (n,)
    diff2 = (sT * nT[:, None] + s * nx[:, None] - 2 * s * sT * cross[:, None]).sum(-1) / M  # (n,)
    base2 = (s * nx[:, None]).sum(-1) / M  # (n,)
    return float((diff2.clamp_min(0).sqrt() / base2.sqrt().clamp_min(1e-300)).mean())


def kernel_violation(B: torch.Tensor, x: torch.Tensor, xT: torch.Tensor, x_train: torch.Tensor, d: int) -> float:
    """``max_{i,j} |K(T x_i, x_j) − K(x_i, x_j)| / max |K(x_i, x_j)|`` over the training inputs ``x_j`` (eq. 20)."""
    K = averaging_net_kernel(B, x, x_train, "relu", d=d, mode="blocks")  # (n, n_train, d)
    KT = averaging_net_kernel(B, xT, x_train, "relu", d=d, mode="blocks")
    return float((KT - K).abs().max() / K.abs().max().clamp_min(1e-300))


@register
class Invariance(VariationalExperiment):
    name = "variational.invariance"
    figure = "Thm. 4.2 (App. A.5)"
    description = "Invariance under GD: kept by vanilla GD; through the network exactly when the kernel condition holds"
    Config = InvarianceConfig
    quick = {"steps": 100, "draws": 2}
    est_seconds = (2, 8)
    # 4: eq36-sufficient and kernel-condition-kept are sanity checks (they hold by construction); 5: so is
    # vanilla-stays-invariant (the same deterministic map on identical embeddings; a referee's finding)
    # 6: figure only: one panel per network run (eq. 36 vs kernel condition vs gap), legends, labels, captions
    # 7: figure only: the seed in the suptitle; claims unchanged
    version = "7"
    claims = (
        ClaimSpec(
            "vanilla-stays-invariant", "If f(w⁽⁰⁾, ·) is invariant, vanilla gradient descent (eq. 14) keeps it "
            "invariant for all iterations.", LOC, kind="sanity",
            reading="max over iterations of E‖f(T x) − f(x)‖; a sanity check, not scored: vanilla GD (eq. 14) never "
            "sees x — the perturbed copies start at the samples' embeddings bitwise (eq. 17 zeroes B's M⊥ columns) "
            "and every step applies the same deterministic map (the eq.-7 gradient field of the current measure, then "
            "the projection onto the sphere) to identical embeddings, so the gap is 0 at every iteration — the "
            "sentence holds by construction",
            relation=le(1e-12), basis=EXACT, rule=every_seed("an exact identity"),
            control="network GD (eq. 15) on the noisy samples from the same invariant start (max gap)",
            bounds=(0.0, math.inf),
        ),
        ClaimSpec(
            "vanilla-moves", "(vanilla GD does train: the loss decreases)", LOC, kind="sanity",
            reading="loss(0) − loss(end)", relation=gt(0.0), basis="relation: a decrease",
        ),
        ClaimSpec(
            "network-starts-invariant", "The eq.-17 initialisation is invariant.", "eq. (17)", kind="sanity",
            result="Thm. 4.2",
            reading="gap at t = 0", relation=le(1e-12), basis=EXACT, rule=every_seed("an exact identity"),
        ),
        ClaimSpec(
            "network-loses-invariance", "With the neural kernel (eq. 15) invariance needs more than an invariant "
            "start; the optimisation can cause f to lose invariance.", LOC, kind="paper",
            reading="gap after training on the noisy samples", relation=gt(1e-6),
            basis="tolerance: 1e-6 ≫ float64 round-off (an invariant map gives ≤ 1e-15)",
            control="the network that sees only P x (eq. 36 holds), trained on the same samples (its gap at the end)",
            bounds=(0.0, math.inf),
        ),
        ClaimSpec(
            "network-gap-grows", "... the gap grows during training.", LOC, kind="consequence",
            reading="gap(end) / gap(10% of the run)", relation=gt(2.0),
            basis="relation: 'grows' means a ratio > 1, here by at least the minimum effect",
            effect="tolerance: the gap at least doubles between 10% of the run and its end (ours: ≈ 13×)",
            derivation="Thm. 4.2 says the network may lose invariance during the optimisation; a loss that happens "
            "through the iterations makes the gap grow along the run (our reading)",
            control="the same ratio for vanilla GD (eq. 14) from the same start (its gap stays 0)",
            bounds=(0.0, math.inf),
        ),
        ClaimSpec(
            "eq36-sufficient", "If f is invariant and satisfies eq. (36), it stays invariant (the proof of Thm. 4.2).",
            "Thm. 4.2, eq. (36)", kind="sanity",
            reading="a sanity check, not scored (it holds by construction): a network that sees only the projection "
            "P x onto M (eq. 36 holds for it: detail): max gap "
            "over training on the noisy samples. For eq. (18)'s networks eq. (36) with T ≠ Id holds only in this "
            "structural way (f(x) = g(Px) is invariant for every weight value), so the check confirms the statement "
            "where it applies and that training keeps it; it cannot separate eq. (36) from structural invariance",
            relation=le(1e-12), basis=EXACT,
            rule=every_seed("an exact identity"),
            control="the network on the raw x (eq. 36 fails), trained on the same samples (max gap)",
            bounds=(0.0, math.inf),
        ),
        Erratum(
            "eq36-only-if", "Thm. 4.2's 'only if': invariance is kept although eq. (36) fails.", "Thm. 4.2, eq. (36)",
            printed="the invariance of f at the (b+1)-th iteration holds only if f is invariant at the b-th and "
            "∇_w f(w⁽ᵇ⁾, T(x)) = ∇_w f(w⁽ᵇ⁾, x) (eq. 36)",
            used="invariance is kept (to first order) iff Σ_j [K(Tx, x_j) − K(x, x_j)] g_j = 0, guaranteed by the "
            "kernel condition K(Tx, x_j) = K(x, x_j) on the training inputs; eq. (36) is sufficient, not necessary",
            reading="training on the clean centers: the relative eq.-(36) violation ‖∇_B f(Tx) − ∇_B f(x)‖/‖∇_B f(x)‖ "
            "(smallest over the logged steps) while the map stays exactly invariant (NaN if it did not)",
            relation=gt(0.01), basis="relation: the printed 'only if' needs a violation of 0 whenever invariance "
            "is kept; the measured one is O(δ/‖x‖)", rule=every_seed("one counterexample suffices, at every seed"),
        ),
        ClaimSpec(
            "kernel-condition-kept", "Where the kernel against the training inputs is invariant, the map stays "
            "invariant (control: training on the clean centers).", "Thm. 4.2, Prop. 4.1", kind="sanity",
            reading="max over logged steps of the kernel-condition violation in the control run (detail: its gap); a "
            "sanity check, not scored: on the clean centers the gradient never reaches B's M⊥ columns (εᵀx_j = 0), so "
            "the violation is 0 by construction — the condition's consequence is tested where it is violated "
            "(kernel-condition-broken)",
            relation=le(1e-12), basis=EXACT, derivation=KERNEL_DERIVATION, rule=every_seed("an exact identity"),
            control="the kernel-condition violation of the noisy run at t = 0", bounds=(0.0, math.inf),
        ),
        ClaimSpec(
            "kernel-condition-broken", "Where invariance is lost, the kernel condition is violated (training on the "
            "noisy samples).", "Thm. 4.2, Prop. 4.1", kind="consequence",
            reading="kernel-condition violation at t = 0 of the noisy run (the step that starts the gap)",
            relation=gt(1e-3), basis="tolerance: 1e-3 ≫ round-off", derivation=KERNEL_DERIVATION,
            control="the largest kernel-condition violation of the clean-centers run (invariance kept)",
            bounds=(0.0, math.inf),
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: InvarianceConfig, n_seeds: int) -> tuple[int, str]:
        """``PROCESS_BASELINE`` + 0.06 GB (process, lab, figures) + 20 live float64 ``(n, M·d)`` hidden activations /
        ReLU masks (forward and backward of the averaging net, eq. (36) and kernel-condition probes; ``n`` = clusters ·
        cluster_size, ``M`` = width). Measured (max RSS, 3 seeds): 0.546 GB quick (M = 64), 0.773 GB at M = 20000
        (+0.23 GB ≈ 13 copies of 36 · 60000 · 8 B) (estimates before the baseline became PROCESS_BASELINE: 0.56 /
        0.91 GB)."""
        n = cfg.clusters * cfg.cluster_size
        return int(PROCESS_BASELINE + 0.06e9 + 20 * n * cfg.width * cfg.d * 8), "width"

    def run(self, cfg: InvarianceConfig, ctx: Context) -> Result:
        dev = ctx.device
        data = clustered_data([cfg.cluster_size] * cfg.clusters, cfg.d, cfg.D, cfg.delta, noise="orthogonal",
                              generator=ctx.generator(0), dtype=DT, device=dev)  # fmt: skip
        g = ctx.generator(1)
        eps = torch.zeros(cfg.draws, data.n, cfg.D, dtype=DT, device=dev)
        for r in range(cfg.draws):  # drawn on the CPU from g, moved to the device
            eps[r, :, cfg.d :] = ball_noise(data.n, cfg.D - cfg.d, cfg.delta, generator=g, dtype=DT, device=dev)
        xT = data.x[None] + eps  # (R, n, D) perturbed copies T(x_i)
        loss = fc.flow_loss(cfg.tau, positive_term=False)
        rows = []

        def fresh():
            return AveragingNet(cfg.D, cfg.d, cfg.width, "relu", invariant_init=True, dtype=DT,
                                generator=ctx.generator(2), device=dev)  # fmt: skip

        def net_gap(net):
            draws = iter(range(cfg.draws))  # the same fixed draws of T at every evaluation
            return invariance_gap(lambda x: project_sphere(net(x)[0]), data.x, lambda x: x + eps[next(draws)],
                                  draws=cfg.draws)  # fmt: skip

        centers = data.centers[data.labels]  # (n, D) the clean samples ξ_γ(i)

        def record(kind):  # the engine's on_log: one table row per logged step
            def on_log(step, state, row):
                rows.append({"dynamics": kind, "step": step, **row})

            return SimpleNamespace(on_log=on_log)

        def train(kind, state, step, **kw):
            engine.run(state, step, steps=cfg.steps, every=cfg.log_every, loss_name=None, callbacks=[record(kind)],
                       track=lambda it: ctx.track(it, description=kind), **kw)  # fmt: skip

        runs = (("network", data.x, False), ("network-clean-data", centers, False), ("network-projected", data.x, True))
        for kind, x_train, projected in runs:
            net = Projected(fresh(), cfg.d) if projected else fresh()
            seen = (lambda v: project_onto_M(v, cfg.d)) if projected else (lambda v: v)  # what the weights B act on
            xs, xTs, x_seen = seen(data.x), seen(xT[0]), seen(x_train)

            @torch.no_grad()
            def probes(net=net, xs=xs, xTs=xTs, x_seen=x_seen):
                B = net.B[0].detach()
                return {"gap": net_gap(net), "loss": float(loss(net(data.x)[0])),
                        "eq36_violation": eq36_violation(B, xs, xTs, cfg.d),
                        "kernel_violation": kernel_violation(B, xs, xTs, x_seen, cfg.d)}  # fmt: skip

            def network_step(net, t, x_train=x_train, probes=probes):  # GD on the weights (eq. 15): the loss on x_train
                return net, loss(net(x_train)[0]), probes

            train(kind, net, network_step, optimizer=torch.optim.SGD(net.parameters(), lr=cfg.lr_network))

        # vanilla GD on the map: samples and perturbed copies follow the same gradient field
        net0 = fresh()
        with torch.no_grad():
            z = project_sphere(net0(data.x)[0])
            zT = torch.stack([project_sphere(net0(xT[r])[0]) for r in range(cfg.draws)])  # (R, n, d)

        def vanilla_step(state, t):  # eq. (14) at the samples and at their perturbed copies
            z, zT = state
            value = loss(z)
            gz = pointwise_gradient(loss, z, z)
            gT = torch.stack([pointwise_gradient(loss, z, zT[r]) for r in range(cfg.draws)])
            nxt = (project_sphere(z - cfg.lr_vanilla * gz), project_sphere(zT - cfg.lr_vanilla * gT))
            return nxt, value, lambda: {"gap": float((zT - z).norm(dim=-1).mean()), "loss": float(value)}

        train("vanilla", (z, zT), vanilla_step)
        df = pd.DataFrame(rows)
        res = Result(tables={"gap": df})

        def col(kind, c):
            return df.loc[df.dynamics == kind].sort_values("step")[c].to_numpy()

        gn = col("network", "gap")
        res.summary.update(
            vanilla_max_gap=float(col("vanilla", "gap").max()),
            network_gap_start=float(gn[0]),
            network_gap_end=float(gn[-1]),
            network_gap_early=float(gn[max(1, len(gn) // 10)]),
            network_max_gap=float(gn.max()),
            vanilla_gap_ratio=float(
                col("vanilla", "gap")[-1] / max(col("vanilla", "gap")[max(1, len(gn) // 10)], 1e-300)
            ),
            projected_gap_end=float(col("network-projected", "gap")[-1]),
            network_kernel_violation_t0=float(col("network", "kernel_violation")[0]),
            network_eq36_violation_t0=float(col("network", "eq36_violation")[0]),
            clean_max_gap=float(col("network-clean-data", "gap").max()),
            clean_min_eq36_violation=float(col("network-clean-data", "eq36_violation").min()),
            clean_max_kernel_violation=float(col("network-clean-data", "kernel_violation").max()),
            projected_max_gap=float(col("network-projected", "gap").max()),
            projected_max_eq36_violation=float(col("network-projected", "eq36_violation").max()),
            vanilla_loss_drop=float(col("vanilla", "loss")[0] - col("vanilla", "loss")[-1]),
            network_loss_drop=float(col("network", "loss")[0] - col("network", "loss")[-1]),
        )
        res.notes.append("Sizes, δ, τ and step sizes are ours; Thm. 4.2 states no numbers. Float64 throughout.")
        return res

    def measure(self, cfg: InvarianceConfig, result: Result) -> dict[str, float | Measured]:
        s = result.summary
        kept = s["clean_max_gap"] <= 1e-12
        return {
            "vanilla-stays-invariant": Measured(s["vanilla_max_gap"], control=s["network_max_gap"]),
            "vanilla-moves": s["vanilla_loss_drop"],
            "network-starts-invariant": s["network_gap_start"],
            "network-loses-invariance": Measured(
                s["network_gap_end"],
                detail=f"eq. (36) violation at t = 0: {s['network_eq36_violation_t0']:.3f}",
                control=s["projected_gap_end"],
            ),  # fmt: skip
            "network-gap-grows": Measured(
                s["network_gap_end"] / max(s["network_gap_early"], 1e-300), control=s["vanilla_gap_ratio"]
            ),
            "eq36-sufficient": Measured(
                s["projected_max_gap"],
                detail=f"eq. (36) violation {s['projected_max_eq36_violation']:.1e}",
                control=s["network_max_gap"],
            ),  # fmt: skip
            "eq36-only-if": Measured(
                s["clean_min_eq36_violation"] if kept else float("nan"),
                detail=f"control: max gap {s['clean_max_gap']:.1e}, eq. (36) violation ≥ "
                f"{s['clean_min_eq36_violation']:.3f}, kernel-condition violation ≤ "
                f"{s['clean_max_kernel_violation']:.1e}",
            ),
            "kernel-condition-kept": Measured(
                s["clean_max_kernel_violation"],
                detail=f"clean-centers run's max gap {s['clean_max_gap']:.1e}",
                control=s["network_kernel_violation_t0"],
            ),  # fmt: skip
            "kernel-condition-broken": Measured(
                s["network_kernel_violation_t0"],
                detail=f"gap at the end {s['network_gap_end']:.3g}",
                control=s["clean_max_kernel_violation"],
            ),  # fmt: skip
        }

    def plots(self, cfg: InvarianceConfig, result: Result, fig_dir: Path):
        df = result.tables["gap"]
        fig, ax = new_figure(3, 2, size=(4.0, 3.1))
        runs = {kind: df.loc[df.dynamics == kind].sort_values("step") for kind, _ in RUNS}

        def floored(v):
            return np.maximum(np.asarray(v, dtype=float), FLOOR)

        for i, (kind, lab) in enumerate(RUNS):  # (a) the gap: every run that stays invariant sits at the floor
            d = runs[kind]
            zero = bool((d["gap"] <= 0).all())
            ax[0, 0].plot(d["step"], floored(d["gap"]), STYLES[i], ms=4 + 1.5 * (3 - i), mfc="none" if i else None,
                          color=PALETTE[i], label=lab + (" (= 0: at floor)" if zero else ""))  # fmt: skip
            ax[0, 1].plot(d["step"], d["loss"], STYLES[i], ms=3, lw=2.4 - 0.5 * i, color=PALETTE[i], label=lab,
                          markevery=(i, 4))  # fmt: skip
        ax[0, 0].set(yscale="log", xlabel="iteration", ylabel=f"E‖f(Tx) − f(x)‖ (floored at {FLOOR:g})",
                     title="(a) Thm. 4.2: invariance gap")  # fmt: skip
        ax[0, 0].legend(fontsize=6, loc="center right")
        ax[0, 1].set(xlabel="iteration", ylabel="NT-Xent (Prop. 2.1 as printed)",
                     title="(b) loss")  # fmt: skip
        ax[0, 1].legend(fontsize=6)
        panels = [(ax[0, 2], "network", "(c) noisy samples: eq. (36) and the kernel\ncondition violated, the gap grows"),
                  (ax[1, 0], "network-clean-data", "(d) clean centres (erratum eq36-only-if): eq. (36)\nviolated, "
                   "kernel condition = 0, gap = 0"),
                  (ax[1, 1], "network-projected", "(e) network on P x (eq36-sufficient):\neq. (36) = 0, gap = 0")]  # fmt: skip
        for a, kind, title in panels:
            d = runs[kind]
            i = [k for k, _ in RUNS].index(kind)
            n_zero = 0
            for col, lab, style, marker in (("eq36_violation", "eq. (36) violation", "-", "o"),
                                            ("kernel_violation", "kernel-condition violation", ":", "x"),
                                            ("gap", "gap E‖f(Tx) − f(x)‖", "--", "+")):  # fmt: skip
                color = PALETTE[i] if col != "gap" else "0.3"
                if (d[col] <= 0).all():  # exactly zero: markers at the floor, staggered so that none hides another
                    a.plot(d["step"], floored(d[col]), marker, ls="none", ms=6, mew=1.4, color=color,
                           markevery=(n_zero, 3), label=lab + " (= 0: at floor)")  # fmt: skip
                    n_zero += 1
                else:
                    a.plot(d["step"], floored(d[col]), style, lw=1.6, color=color, label=lab)
            a.set(yscale="log", ylim=(FLOOR / 30, 3.0), xlabel="iteration", ylabel="relative violation; gap (log)",
                  title=title)  # fmt: skip
            a.title.set_fontsize(9)
            a.legend(fontsize=6.5, loc="center right")
        sm = result.summary
        ax[1, 2].axis("off")
        ax[1, 2].text(0.0, 0.95, "\n".join([
            "claims' readings (this seed):",
            f"eq36-only-if: clean centres, eq. (36) violation ≥ {sm['clean_min_eq36_violation']:.3f}",
            f"   while the gap stays ≤ {sm['clean_max_gap']:.1e}",
            f"kernel-condition-kept: ≤ {sm['clean_max_kernel_violation']:.1e}",
            f"kernel-condition-broken: noisy run at t = 0: {sm['network_kernel_violation_t0']:.3g}",
            f"network-loses-invariance: gap at the end {sm['network_gap_end']:.2e}",
            f"network-gap-grows: ×{sm['network_gap_end'] / max(sm['network_gap_early'], 1e-300):.3g}",
            f"vanilla-stays-invariant: max gap {sm['vanilla_max_gap']:.1e}",
        ]), fontsize=7.5, va="top", family="monospace", transform=ax[1, 2].transAxes)  # fmt: skip
        fig.suptitle(f"Thm. 4.2 (App. A.5): invariance under GD — vanilla GD, the network on noisy samples, on the "
                     f"clean centres and on P x (seed {result.seed})", fontsize=10)  # fmt: skip
        return [save_figure(fig, fig_dir / "invariance.png")]


#: the runs of the figure, in drawing order (the later, invariant ones are drawn with open markers over the others)
RUNS = (("network", "network GD, noisy samples (eq. 15)"), ("vanilla", "vanilla GD (eq. 14)"),
        ("network-clean-data", "network, clean centres (eq. 36 fails)"),
        ("network-projected", "network on P x (eq. 36 holds)"))  # fmt: skip
STYLES = ("o-", "s--", "^-.", "v:")
#: floor of the log axes: an exactly zero gap or violation is drawn here
FLOOR = 1e-17
