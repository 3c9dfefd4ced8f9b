"""`nonlinearity` Thm. 4 (Sec. 4.1, App. C.4): gradient co-linearity of linear two-layer networks.

Two-layer network with ``K`` disjoint RFs and ``M`` filters per RF (Fig. 2a). At random lower
weights ``W``, the top layer is at its stationary point (Assumption 2, "fast top-level training"):
``V = sᵀ`` with ``s`` the top eigenvector of ``C_α[f1]``, so ``S = ssᵀ``. The gradients
``∂E_α/∂w_km`` (autograd of ``½ tr C_α[f2]``, α treated as a constant) of all filters of one RF are
co-linear for linear ``h`` (``ẇ_km = s_km b_k``, eq. 14) and not for ReLU. Inputs: the
conditional-independence model of Assumption 2 (:class:`~ssldyn.data.latent.TwoRFModel`) with
Gaussian noise; two settings of α: uniform without augmentation, and InfoNCE-α (from the
current embeddings of two noisy views). We also report the relative error between the
analytic Lemma 4 dynamics (eq. 12) and autograd, for both halves of eq. 12: ``Ẇ`` at the stationary top
layer, and ``V̇ = V C_α[f1]`` at the stationary top layer and at a random one (``d_out = 3``).

Thm. 4 part (2) (App. C.4): "from any critical point with distinct {w_km}, there exists a path
of critical points to identical weights". With ``s`` fixed (as in eq. 14), ``b_k(W)`` depends on
``W`` only through ``v_k = Σ_m s_km w_km``, and ``Ẇ = 0`` iff ``C_α[x] v = 0``. On data whose RF
inputs lie in a hyperplane ``n_kᵀx_k = 0`` we build a critical point ``W*`` with distinct
filters and ``v_k = c_k n_k``, and check that the straight path to the identical filters
``w_km = v_k / Σ_m s_km`` (which keeps every ``v_k``) consists of critical points — with the
gradient computed by autograd of ``½ tr C_α[f2]`` (``V = sᵀ``), not with eq. 14. The printed
proof instead swaps two filters of an RF (``W'*``) and takes convex combinations of ``W*`` and
``W'*``; with ``s_k1 ≠ s_k2`` the swapped ``W'*`` changes ``v_k`` by ``(s_k1 − s_k2)(μ₂ − μ₁)`` and is
not a critical point (recorded as an erratum with the measured gradient). Every critical point of
this kind has **zero energy**: with linear ``h``, ``f₂ = Σ_k v_kᵀx_k`` (``S = ssᵀ``) and ``C_α[x]v_k = 0``,
so ``C_α[f₂] = 0`` — they are minima of ``E_α ≥ 0``, not the learned features (measured along the path,
claim ``critical-path-zero-energy``).

Runs on ``ctx.device`` (data are sampled with the CPU generator, then moved); the per-trial
numbers come back to the CPU for the table.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import torch
from pydantic import Field, PositiveFloat, field_validator

from ssldyn.contract import Context, ExperimentConfig, Result, register
from ssldyn.contract.claims import ClaimSpec, Erratum, Measured, every_seed, ge, gt, le, lt
from ssldyn.data.latent import TwoRFModel
from ssldyn.dynamics.two_layer_alpha_cl import (
    lemma4_dynamics,
    thm4_linear_dynamics,
    top_eigvec_S,
    two_layer_energy,
    two_layer_features,
)
from ssldyn.experiments.nonlinearity._common import ACT_LABELS, F64, NonlinearityExperiment
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.objectives import alpha_infonce
from ssldyn.probes.filters import cosine_matrix
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class ColinearityConfig(ExperimentConfig):
    K: int = Field(4, ge=1, description="receptive fields")
    M: int = Field(4, ge=2, description="filters per RF")
    d: int = Field(6, ge=2, description="input dimension per RF")
    n: int = Field(256, ge=8, description="batch size")
    noise: PositiveFloat = Field(0.3, description="input noise / augmentation noise")
    trials: int = Field(20, ge=1, description="random weight draws")
    tau: PositiveFloat = Field(0.5, description="InfoNCE-α temperature")
    activations: list[Literal["linear", "relu", "leaky_relu", "quadratic", "tanh", "sigmoid"]] = Field(
        ["linear", "relu", "leaky_relu", "quadratic"], min_length=2, description="activations compared"
    )
    path_points: int = Field(11, ge=3, description="points checked on the path of Thm. 4 (2)")

    @field_validator("activations")
    @classmethod
    def _has_linear_and_relu(cls, v: list[str]) -> list[str]:
        if "linear" not in v or "relu" not in v:
            raise ValueError("activations must contain 'linear' and 'relu' (the two the claims compare)")
        return list(dict.fromkeys(v))


def _energy_grads(W: torch.Tensor, V: torch.Tensor, x: torch.Tensor, **kw) -> tuple[torch.Tensor, torch.Tensor]:
    """``(∂E_α/∂W (K, M, d), ∂E_α/∂V (d_out, K·M))`` by autograd of ``E_α = ½ tr C_α[f₂]``
    (:func:`~ssldyn.dynamics.two_layer_alpha_cl.two_layer_energy`, α treated as a constant) at the filters
    ``W (K, M, d)`` with top layer ``V``; ``kw``: ``x_pos``, ``alpha``, ``activation``."""
    Wr, Vr = W.clone().requires_grad_(True), V.clone().requires_grad_(True)
    gW, gV = torch.autograd.grad(two_layer_energy(Wr, Vr, x, **kw), (Wr, Vr))
    return gW, gV


def _v_dot_rel_err(W: torch.Tensor, V: torch.Tensor, x: torch.Tensor, **kw) -> torch.Tensor:
    """Relative error of eq. 12's ``V̇ = V C_α[f₁]`` against autograd's ``∂E_α/∂V`` at ``(W, V)`` (a 0-d tensor);
    ``kw``: ``x_pos``, ``alpha``, ``activation``."""
    _, gV = _energy_grads(W, V, x, **kw)
    V_dot, _ = lemma4_dynamics(W, V, x, project=False, **kw)
    return (V_dot - gV).norm() / gV.norm()


def _with_top_down_sum(W: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """A copy of the filters ``W (K, M, d)`` whose last filter of each RF is chosen so that
    ``Σ_m s_km w_km = v_k`` (``s (K, M)`` with ``s_kM ≠ 0``, ``v (K, d)``); the other filters are kept."""
    rest = (s[:, :-1, None] * W[:, :-1]).sum(1)  # (K, d)
    out = W.clone()
    out[:, -1] = (v - rest) / s[:, -1:]
    return out


def _swap_first_two(W: torch.Tensor) -> torch.Tensor:
    """``W (K, M, d)`` with filters 0 and 1 of every RF swapped (the ``W'*`` of the proof of Thm. 4 (2))."""
    out = W.clone()
    out[:, [0, 1]] = W[:, [1, 0]]
    return out


def _critical_path(cfg: ColinearityConfig, model: TwoRFModel, g: torch.Generator) -> dict[str, float]:
    """Thm. 4 (2) on data in hyperplanes ``n_kᵀx_k = 0`` (float64, CPU; see the module docstring)."""
    K, M, d = cfg.K, cfg.M, cfg.d
    x, _ = model.sample(cfg.n, generator=g)  # (N, K, d)
    nvec = torch.randn(K, d, generator=g, dtype=torch.float64)
    nvec = nvec / nvec.norm(dim=-1, keepdim=True)  # (K, d): n_k
    x = x - (x * nvec).sum(-1, keepdim=True) * nvec  # every x_k ⊥ n_k: C_α[x] has n_k in its null space
    s = torch.randn(K * M, generator=g, dtype=torch.float64)
    s = s / s.norm()
    sm = s.reshape(K, M)
    Wr = torch.randn(K, M, d, generator=g, dtype=torch.float64)
    ck = 1.0 + torch.rand(K, 1, generator=g, dtype=torch.float64)
    W_star = _with_top_down_sum(Wr, sm, ck * nvec)  # v_k = Σ_m s_km w_km = c_k n_k: a critical point
    W_id = (ck * nvec / sm.sum(-1, keepdim=True))[:, None, :].expand(K, M, d)  # identical filters, same v_k

    def grad(W: torch.Tensor, s_vec: torch.Tensor) -> torch.Tensor:
        return _energy_grads(W, s_vec[None, :], x, activation="linear")[0]

    def energy(W: torch.Tensor, s_vec: torch.Tensor) -> float:
        return float(two_layer_energy(W, s_vec[None, :], x, activation="linear"))

    W_rand = torch.randn(K, M, d, generator=g, dtype=torch.float64)
    scale = float(grad(W_rand, s).norm())
    e_scale = energy(W_rand, s)
    cs = torch.linspace(0, 1, cfg.path_points)
    path = [float(grad((1 - c) * W_star + c * W_id, s).norm()) / scale for c in cs]
    # Thm. 4 (2)'s critical points have zero energy: f₂ = Σ_k v_kᵀx_k and C_α[x] v_k = 0, so C_α[f₂] = 0
    path_energy = [abs(energy((1 - c) * W_star + c * W_id, s)) / e_scale for c in cs]
    # control path: to identical filters along a random direction u_k (v_k no longer ∝ n_k)
    u = torch.randn(K, d, generator=g, dtype=torch.float64)
    W_off = (ck * u / u.norm(dim=-1, keepdim=True) / sm.sum(-1, keepdim=True))[:, None, :].expand(K, M, d)
    path_off = [float(grad((1 - c) * W_star + c * W_off, s).norm()) / scale for c in cs]
    swapped = _swap_first_two(W_star)
    s_eq = sm.clone()
    s_eq[:, 1] = s_eq[:, 0]  # s_k1 = s_k2: the proof's swap is then harmless
    sw_eq = _swap_first_two(_with_top_down_sum(Wr, s_eq, ck * nvec))
    return {
        "path_max_rel_grad": max(path),
        "path_max_rel_energy": max(path_energy),
        "control_path_max_rel_grad": max(path_off),
        "swap_rel_energy": abs(energy(swapped, s)) / e_scale,
        "path_distinct_min_abs_cos": float(1 - _abs_cos_within_rf(W_star).max()),
        "swap_rel_grad": float(grad(swapped, s).norm()) / scale,
        "swap_rel_grad_equal_s": float(grad(sw_eq, s_eq.reshape(-1)).norm()) / scale,
    }


def _abs_cos_within_rf(G: torch.Tensor) -> torch.Tensor:
    """All |cos| between (gradients of) distinct filters of the same RF: ``G (K, M, d) -> (K·M(M−1)/2,)``."""
    C = cosine_matrix(G).abs()  # (K, M, M)
    iu = torch.triu_indices(G.shape[1], G.shape[1], offset=1, device=G.device)
    return C[:, iu[0], iu[1]].reshape(-1)


@register
class Colinearity(NonlinearityExperiment):
    name = "nonlinearity.colinearity"
    figure = "Thm. 4, Sec. 4.1"
    description = "Filter gradients within one RF are co-linear with linear activation, not with ReLU"
    Config = ColinearityConfig
    quick = {"trials": 5, "n": 128}
    est_seconds = (1, 4)
    # 2: thm4-swap-step is an every-draw counterexample (as eq6-printed); it and critical-path-zero-energy declare their
    # range (0, ∞)
    # 3: critical-path is a sanity check (the constructed path keeps f₂ ≡ 0); 4: lemma4 compares V̇ with autograd too
    version = "5"  # 5: figure only (spread over draws and seeds, the random-direction level, "x²")
    claims = (
        ClaimSpec(
            "linear-colinear", "With linear activation the gradients of all filters in one RF are co-linear.",
            "Thm. 4 (1), eq. 14", kind="paper",
            reading="smallest |cos| between autograd gradients of two filters of one RF (all RFs, trials, α)",
            relation=ge(1 - 1e-9), basis="method: float64 round-off of a cosine (≤ 1e-9)", bounds=(0.0, 1.0),
            control="the same smallest |cos| with ReLU (the gating differs between filters)",
        ),
        ClaimSpec(
            "eq14", "ẇ_km = s_km b_k(W, V) (eq. 14) equals the gradient of E_α.", "Thm. 4, eq. 14", kind="paper",
            reading="largest relative error of eq. 14 against autograd of ½ tr C_α[f2]", relation=le(1e-6),
            basis="method: float64 round-off", bounds=(0.0, float("inf")),
            control="the smallest relative error of eq. 14 against the ReLU network's gradient (eq. 14 is for "
            "linear h)",
        ),
        ClaimSpec(
            "lemma4", "Lemma 4 (eq. 12) equals the gradient of E_α for homogeneous h: V̇ = V C_α[f₁] and "
            "ẇ = [(S ⊗ 1_d1_dᵀ) ∘ C_α[x̃]] w.", "Lemma 4, eq. 12",
            kind="paper", reading="largest relative error of eq. 12 against autograd of ½ tr C_α[f2] (linear, ReLU, "
            "LeakyReLU), the larger of Ẇ's (stationary top layer V = sᵀ) and V̇'s (at V = sᵀ and at a random "
            "3 × KM top layer)",
            relation=le(1e-6), basis="method: float64 round-off", bounds=(0.0, float("inf")),
            control="the same error (the larger of Ẇ's and V̇'s) for the quadratic h = x², which is not homogeneous "
            "(h = ½h'x: Ẇ is off by the factor 2; V̇ = V C_α[f₁] holds for every h)",
        ),
        ClaimSpec(
            "relu-not-colinear", "With ReLU the filter gradients of one RF are not co-linear.", "Sec. 4.1",
            kind="consequence", reading="mean |cos| between ReLU filter gradients of one RF", relation=lt(0.99),
            bounds=(0.0, 1.0), control="the same mean |cos| with the linear activation (Thm. 4: co-linear)",
            basis="tolerance: 0.99 (8°) separates 'not co-linear' from round-off",
            derivation="Sec. 4.1: the gating x̃_km = x_k h'(w_kmᵀx_k) differs between filters, so their "
            "gradients C_α[x̃_km, ·] are not a common b_k",
        ),
        ClaimSpec(
            "critical-path", "If s_km ≠ 0, from any critical point with distinct filters there is a path of "
            "critical points to identical weights.", "Thm. 4 (2), App. C.4", kind="sanity",
            reading="largest ‖∂E/∂W‖ (autograd, V = sᵀ) along the straight path from a critical point W* with "
            "distinct filters to w_km = v_k/Σ_m s_km, relative to the gradient at a random W; a sanity check of the "
            "construction, not scored: the data are built with x_k ⊥ n_k and the path keeps v_k = c_k n_k, so with "
            "linear h the output f₂ is 0 on every sample along it and the gradient vanishes by construction",
            relation=le(1e-10), basis="method: float64 round-off (a critical point has zero gradient)",
            bounds=(0.0, float("inf")),
            control="the same largest gradient along the path from W* to identical filters along a random "
            "direction (v_k no longer ∝ n_k)",
        ),
        ClaimSpec(
            "critical-path-zero-energy", "The critical points of Thm. 4 (2) all have zero energy: with linear h "
            "and b_k = 0, C_α[f₂] = 0.", "Thm. 4 (2), App. C.4", kind="sanity",
            reading="largest |E_α| along the path, relative to E_α at a random W", relation=le(1e-10),
            basis="method: float64 round-off; f₂ = Σ_k v_kᵀx_k and C_α[x]v_k = 0 on the path",
            bounds=(0.0, math.inf),
        ),
        Erratum(
            "thm4-swap-step", "The proof of Thm. 4 (2) takes W'* (two filters of an RF swapped) as a critical point "
            "and convex combinations of W* and W'*; with s fixed that holds only when s_k1 = s_k2.",
            "Thm. 4 (2), App. C.4, eq. 163",
            printed="'by symmetry of the weights, W'* ... is also a critical point'; b_k(W^c) = c b_k(W*) + "
            "(1 − c) b_k(W'*) = 0",
            used="the path that keeps v_k = Σ_m s_km w_km fixed (claim critical-path)",
            reading="relative gradient norm at the swapped W'* (s_k1 ≠ s_k2), same scale as critical-path",
            relation=gt(1e-6), basis="method: ≫ the 1e-10 round-off level of a true critical point",
            rule=every_seed("the printed step is contradicted by one draw; every draw (s_k1 ≠ s_k2) must show it"),
            bounds=(0.0, math.inf),
        ),
    )  # fmt: skip

    @classmethod
    def peak_memory(cls, cfg: ColinearityConfig, n_seeds: int) -> tuple[int, str]:
        """``BASE + 6 · n²·8`` bytes: the InfoNCE-α weights ``(n, n)`` float64 of a batch and the weighted
        sums and gradients built on them (≈ 4 copies measured). Measured (max RSS): 0.48 GB at the quick
        preset (n = 128, estimate 0.55 GB), ≥ 0.77 GB with n = 3000 (stopped after 188 s; estimate 0.98 GB)."""
        return int(PROCESS_BASELINE + 6 * cfg.n**2 * F64), "n"

    def run(self, cfg: ColinearityConfig, ctx: Context) -> Result:
        g = ctx.generator(0)
        dev = ctx.device
        model = TwoRFModel.random(K=cfg.K, d=cfg.d, C=2, P=min(3, cfg.d), noise=cfg.noise, generator=g)
        rows = []
        for trial in ctx.track(range(cfg.trials), description="random weights"):
            x, _ = model.sample(cfg.n, generator=g)  # CPU draws (same data on every device)
            x_pos = (x + cfg.noise * torch.randn(x.shape, generator=g, dtype=x.dtype)).to(dev)
            x = x.to(dev)
            W = torch.randn(cfg.K, cfg.M, cfg.d, generator=g, dtype=torch.float64).to(dev)
            V_rand = torch.randn(3, cfg.K * cfg.M, generator=g, dtype=torch.float64).to(dev)  # a random top layer
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
                    kw = {"x_pos": xp, "alpha": alpha, "activation": act}
                    gW, gV = _energy_grads(W, V, x, **kw)
                    V_dot, w_dot = lemma4_dynamics(W, V, x, project=False, **kw)
                    cos = _abs_cos_within_rf(gW)
                    v_err = torch.maximum((V_dot - gV).norm() / gV.norm(), _v_dot_rel_err(W, V_rand, x, **kw))
                    stats = [cos.min(), cos.mean(), (w_dot - gW).norm() / gW.norm(), v_err]
                    if act in ("linear", "relu"):  # eq. 14 (linear h); with ReLU it is the control
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
                        "lemma4_v_rel_err": vals[3],
                    }
                    if act in ("linear", "relu"):
                        row["thm4_rel_err"] = vals[4]
                    rows.append(row)
        t = pd.DataFrame(rows)
        lin = t.loc[t.activation == "linear"]
        summ = {
            "linear_min_abs_cos": float(lin["min_abs_cos"].min()),
            "linear_thm4_max_rel_err": float(lin["thm4_rel_err"].max()),
        }
        for act in cfg.activations:
            if act == "linear":
                continue
            summ[f"{act}_mean_abs_cos"] = float(t.loc[t.activation == act, "mean_abs_cos"].mean())
            summ[f"{act}_max_min_abs_cos"] = float(t.loc[t.activation == act, "min_abs_cos"].max())
        relu = t.loc[t.activation == "relu"]
        summ["relu_min_abs_cos"] = float(relu["min_abs_cos"].min())
        summ["linear_mean_abs_cos"] = float(lin["mean_abs_cos"].mean())
        summ["relu_thm4_min_rel_err"] = float(relu["thm4_rel_err"].min())
        # the control of lemma4, whatever cfg.activations holds: eq. 12 for the non-homogeneous h = x²
        Wq = torch.randn(cfg.K, cfg.M, cfg.d, generator=g, dtype=torch.float64).to(dev)
        xq = model.sample(cfg.n, generator=g)[0].to(dev)
        sq, _ = top_eigvec_S(Wq, xq, activation="quadratic")
        gq, gqV = _energy_grads(Wq, sq[None, :], xq, activation="quadratic")
        vq_dot, wq_dot = lemma4_dynamics(Wq, sq[None, :], xq, activation="quadratic", project=False)
        summ["lemma4_w_rel_err_quadratic"] = float((wq_dot - gq).norm() / gq.norm())
        summ["lemma4_v_rel_err_quadratic"] = float((vq_dot - gqV).norm() / gqV.norm())
        summ["lemma4_rel_err_quadratic"] = max(summ["lemma4_w_rel_err_quadratic"], summ["lemma4_v_rel_err_quadratic"])
        homog = t.loc[t.activation.isin(["linear", "relu", "leaky_relu"])]
        summ["lemma4_w_max_rel_err_homogeneous"] = float(homog["lemma4_rel_err"].max())
        summ["lemma4_v_max_rel_err_homogeneous"] = float(homog["lemma4_v_rel_err"].max())
        summ["lemma4_max_rel_err_homogeneous"] = max(
            summ["lemma4_w_max_rel_err_homogeneous"], summ["lemma4_v_max_rel_err_homogeneous"]
        )
        summ.update(_critical_path(cfg, model, ctx.generator(1)))
        res = Result(tables={"cosines": t}, summary=summ)
        res.notes.append(
            f"Thm. 4 (2): the critical points on the path have zero energy (largest |E_α| "
            f"{summ['path_max_rel_energy']:.1e} of a random W's): with linear h and C_α[x]v_k = 0, C_α[f₂] = 0, so "
            "the path joins minima of E_α, not learned features."
        )
        res.notes.append(
            "Quadratic h(x) = x² satisfies h = ½h'(x)x, so eq. 12 holds up to the factor ½ for it "
            "(its Lemma-4 error is not part of the homogeneous check)."
        )
        return res

    def measure(self, cfg: ColinearityConfig, result: Result) -> dict:
        s = result.summary
        return {
            "linear-colinear": Measured(s["linear_min_abs_cos"], control=s["relu_min_abs_cos"]),
            "eq14": Measured(s["linear_thm4_max_rel_err"], control=s["relu_thm4_min_rel_err"]),
            "lemma4": Measured(
                s["lemma4_max_rel_err_homogeneous"],
                control=s["lemma4_rel_err_quadratic"],
                detail=f"Ẇ {s['lemma4_w_max_rel_err_homogeneous']:.1e}, "
                f"V̇ {s['lemma4_v_max_rel_err_homogeneous']:.1e}; "
                f"x²: Ẇ {s['lemma4_w_rel_err_quadratic']:.2g}, V̇ {s['lemma4_v_rel_err_quadratic']:.1e}",
            ),
            "relu-not-colinear": Measured(s["relu_mean_abs_cos"], control=s["linear_mean_abs_cos"]),
            "critical-path-zero-energy": Measured(
                s["path_max_rel_energy"], detail=f"swapped W'*: {s['swap_rel_energy']:.2e}"
            ),
            "critical-path": Measured(
                s["path_max_rel_grad"],
                control=s["control_path_max_rel_grad"],
                detail=f"{cfg.path_points} points; filters at W* differ by "
                f"min |cos| {s['path_distinct_min_abs_cos']:.3f}",
            ),
            "thm4-swap-step": Measured(
                s["swap_rel_grad"],
                detail=f"with s_k1 = s_k2 the swapped point has {s['swap_rel_grad_equal_s']:.1e}",
            ),
        }

    def plots(self, cfg: ColinearityConfig, result: Result, fig_dir: Path):
        rs = result.seed_results or [result]
        t = pd.concat([r.tables["cosines"] for r in rs])
        fig, ax = new_figure(1, 1, size=(5.6, 3.8))
        a = ax[0, 0]
        acts = list(dict.fromkeys(t["activation"]))
        for j, setting in enumerate(("uniform", "infonce")):
            vals = [t.loc[(t.activation == act) & (t.alpha == setting), "mean_abs_cos"].to_numpy() for act in acts]
            pos = np.arange(len(acts)) + (j - 0.5) * 0.3
            a.bar(pos, [v.mean() for v in vals], width=0.3, yerr=[v.std() for v in vals], capsize=3,
                  color=PALETTE[j], label="α uniform" if setting == "uniform" else "α InfoNCE")  # fmt: skip
        ref = random_abs_cos(cfg.d)
        a.axhline(
            ref, color="0.3", ls=":", lw=1.2, label=f"two random directions in $R^{{{cfg.d}}}$: E|cos| = {ref:.2f}"
        )
        a.axhline(1.0, color="0.6", lw=0.8)
        a.set_xticks(np.arange(len(acts)), [ACT_LABELS.get(act, act) for act in acts])
        a.set(ylabel="mean |cos| between filter gradients of one RF", ylim=(0, 1.12),
              title=f"Thm. 4: co-linear filter gradients with linear h\n(mean ± std over {cfg.trials} draws × "
              f"{len(rs)} seed(s))")  # fmt: skip
        a.legend(fontsize=7, loc="upper right", ncol=1)
        return [save_figure(fig, fig_dir / "colinearity.png")]


def random_abs_cos(d: int) -> float:
    """``E|cos|`` between two independent isotropic directions in ``R^d``: ``Γ(d/2) / (√π Γ((d + 1)/2))`` (the first
    coordinate of a uniform unit vector; 2/π at d = 2, ≈ √(2/(πd)) for large d)."""
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)
