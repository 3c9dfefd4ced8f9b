"""`grassmann` Lemma 1, Prop. 1–2, Remark 3: dimension collapse of naive SSL, and what prevents it.

On the half-moons (d = 2) with loss (1) (mean over anchors), full-batch GD:

- **Lemma 1** — the tangent kernel ``⟨∇u_l(x), ∇u_j(x')⟩`` has no cross-dimension terms
  (l ≠ j) and the same diagonal for every l: exactly for a linear model ``u = Θx`` and a
  kernel model ``u = Θψ(x)`` (random Fourier features of an RBF kernel), approximately for a
  2-layer tanh network whose first layer is also trained, increasingly so as h grows
  (measured with ``ssldyn.kernels.empirical_ntk``).
- **Prop. 1** — every output dimension follows the same dynamics: we train the z-output
  model and, separately, z one-output models started from each row of its initial weights;
  the trajectories coincide. The output collapses to one dimension (σ_min/σ_max → 0).
- **Prop. 2** — a 2-layer linear net with ``‖W1‖_F ≤ 1``, ``‖W2‖_F ≤ 1`` (projected GD)
  still collapses, towards the global solution ``[a(x), 0, …, 0]`` (a rank-one map whose row
  space is ``v_1``, the eigenvector of the most negative eigenvalue of C).
- **Remark 3** — a fixed projector ``u = AΘx`` (``A ∈ R^{r×z}``) collapses too.
- **Prop. 3** — the orthogonality constraint (Stiefel projected GD) does not collapse.

Everything runs on ``ctx.device`` (random features and initial weights drawn with the CPU
generator, then moved); GD loops use ``train_gd`` (NaN/inf data check, loss guard).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from pydantic import Field, PositiveFloat, conint

from ssldyn.dynamics.manifold import ManifoldGD, sgd_step_, train_gd
from ssldyn.experiments.grassmann._common import mean_contrastive_loss, moons_problem, torch_threads, view_inputs
from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.lab import Experiment, ExperimentConfig, Result, check, register
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.objectives import contrast_matrix
from ssldyn.probes.collapse import dimension_coupling, singular_value_ratio
from ssldyn.probes.subspace import principal_angles
from ssldyn.viz.common import PALETTE, new_figure, save_figure


class CollapseConfig(ExperimentConfig):
    n: conint(ge=10) = Field(200, description="half-moons anchors")
    moons_noise: float = Field(0.05, ge=0, description="make_moons noise")
    z: conint(ge=2) = Field(2, description="output dimension")
    lr: PositiveFloat = Field(0.05, description="GD learning rate (mean loss)")
    epochs: conint(ge=10) = Field(400, description="GD steps (full batch)")
    features: conint(ge=2) = Field(200, description="random Fourier features of the kernel model")
    hidden: conint(ge=2) = Field(20, description="width of the constrained 2-layer linear nets")
    projector_z: conint(ge=2) = Field(8, description="inner dimension z of u = AΘx (Remark 3); output r = z")
    ntk_widths: list[conint(ge=2)] = Field([10, 100, 1000], min_length=2, description="widths for Lemma 1 NTK")
    ntk_points: conint(ge=2) = Field(20, description="points for the empirical NTK")
    record_every: conint(ge=1) = Field(10, description="epochs between recorded probes")


class _Linear(torch.nn.Module):
    """u = Θ ψ(x) with fixed features ψ (identity, random Fourier, or a fixed projector A in front)."""

    def __init__(self, theta: torch.Tensor, feat=None, proj: torch.Tensor | None = None):
        super().__init__()
        self.theta = torch.nn.Parameter(theta.clone())  # (z, p)
        self.feat, self.proj = feat, proj

    def forward(self, x):
        f = self.feat(x) if self.feat is not None else x  # (B, p)
        u = f @ self.theta.T  # (B, z)
        if self.proj is not None:
            u = u @ self.proj.T  # (B, r)
        return u.unsqueeze(0)  # (1, B, z)


def _gd(model, views, lr, epochs, every, project=None, opt=None):
    """Full-batch GD (plain Euclidean steps, or ``opt.step`` e.g. Stiefel GD) with the loss guard;
    returns the embedding snapshots (T, n, z) and the parameter history (on the model's device)."""
    weights = list(model.parameters())
    snapshots = {"emb": lambda _ps: model(views.x)[0]}  # (n, z)
    snapshots.update({f"param{i}": (lambda ps, i=i: ps[i]) for i in range(len(weights))})
    update = opt.step if opt is not None else (lambda: sgd_step_(weights, lr))
    traj = train_gd(
        weights,
        lambda: mean_contrastive_loss(model, views),
        update=update,
        steps=epochs,
        every=every,
        snapshots=snapshots,
        after_step=project,
        inputs=view_inputs(views),
    ).trajectory
    _, embs = traj.stack("emb", tensors=True)  # (T, n, z)
    history = [traj.stack(f"param{i}", tensors=True)[1] for i in range(len(weights))]
    return embs, [list(ps) for ps in zip(*history)]


def _same_dynamics_dev(make, theta0, views, cfg, lr) -> float:
    """Max relative deviation between row l of the z-output run and the 1-output run from row l."""
    _, multi = _gd(make(theta0), views, lr, cfg.epochs, cfg.record_every)
    devs = [torch.zeros((), dtype=theta0.dtype, device=theta0.device)]
    for row in range(theta0.shape[0]):
        _, single = _gd(make(theta0[row : row + 1]), views, lr, cfg.epochs, cfg.record_every)
        for pm, ps in zip(multi, single):
            a, b = pm[0][row], ps[0][0]
            devs.append((a - b).norm() / b.norm())
    return float(torch.stack(devs).max())  # one host sync


@register
class Collapse(Experiment):
    name = "grassmann.collapse"
    paper = "grassmann"
    figure = "Lemma 1, Prop. 1–2, Remark 3"
    description = (
        "linear/kernel models: identical per-dimension dynamics and collapse; Frobenius and fixed "
        "projector do not help, orthogonality does"
    )
    Config = CollapseConfig
    quick = {"epochs": 300, "ntk_widths": [10, 100, 400], "ntk_points": 10, "features": 100, "record_every": 20}
    est_seconds = (8, 30)

    def run(self, cfg: CollapseConfig, ctx) -> Result:
        with torch_threads(1, ctx.device):
            return self._run(cfg, ctx)

    def _run(self, cfg: CollapseConfig, ctx) -> Result:
        dev = ctx.device
        views, C, lam, V = moons_problem(cfg.n, cfg.moons_noise, ctx.seed, device=dev)
        d, z = 2, cfg.z
        g = ctx.generator(5)  # CPU generator: the same draws on every device
        res = Result(summary={"eigenvalues_C": lam.tolist()})
        # --- models with fixed features: linear, kernel (random Fourier features), fixed projector
        omega = torch.randn(cfg.features, d, generator=g, dtype=torch.float64).to(dev)  # (p, d)
        phase = (2 * np.pi * torch.rand(cfg.features, generator=g, dtype=torch.float64)).to(dev)  # (p,)
        rff = lambda x: (2.0 / cfg.features) ** 0.5 * torch.cos(x @ omega.T + phase)  # noqa: E731  RBF, bw 1
        A = (torch.randn(z, cfg.projector_z, generator=g, dtype=torch.float64) / cfg.projector_z**0.5).to(dev)
        makers = {
            "linear": (lambda th: _Linear(th), (0.5 * torch.randn(z, d, generator=g, dtype=torch.float64)).to(dev)),
            "kernel": (
                lambda th: _Linear(th, feat=rff),
                (0.5 * torch.randn(z, cfg.features, generator=g, dtype=torch.float64)).to(dev),
            ),
        }
        # time scale of the kernel model matched to the linear one: η_k = η |λ_1(C)| / |λ_1(C_ψ)|
        C_psi = (
            contrast_matrix(
                rff(views.x),
                rff(views.x_pos.flatten(0, 1)).unflatten(0, views.x_pos.shape[:2]),
                rff(views.x_neg.flatten(0, 1)).unflatten(0, views.x_neg.shape[:2]),
            )
            / views.n
        )
        lam_psi = torch.linalg.eigvalsh(C_psi)
        lrs = {"linear": cfg.lr, "kernel": cfg.lr * float(lam[0].abs() / lam_psi[0].abs())}
        res.summary["kernel_lr"], res.summary["eigenvalues_C_kernel_2"] = lrs["kernel"], lam_psi[:2].tolist()
        for name, (make, th0) in makers.items():
            lr_m = lrs[name]
            embs, _ = _gd(make(th0), views, lr_m, cfg.epochs, cfg.record_every)
            res.arrays[f"{name}/sv_ratio"] = singular_value_ratio(embs).cpu().numpy()
            res.summary[f"{name}_final_sv_ratio"] = float(singular_value_ratio(embs[-1]))
            res.summary[f"{name}_same_dynamics_dev"] = _same_dynamics_dev(make, th0, views, cfg, lr_m)
            K = empirical_ntk(make(th0), None, views.x[: cfg.ntk_points])
            res.summary[f"{name}_ntk_cross"], res.summary[f"{name}_ntk_spread"] = dimension_coupling(K)
        th0 = (0.5 * torch.randn(cfg.projector_z, d, generator=g, dtype=torch.float64)).to(dev)
        embs, _ = _gd(_Linear(th0, proj=A), views, cfg.lr, cfg.epochs, cfg.record_every)
        res.arrays["projector/sv_ratio"] = singular_value_ratio(embs).cpu().numpy()
        res.summary["projector_final_sv_ratio"] = float(singular_value_ratio(embs[-1]))
        # --- 2-layer linear nets: Frobenius ball (Prop. 2) vs orthogonality (Prop. 3)
        for regime in ("frobenius", "orthogonal"):
            net = TwoLayerNet(
                d,
                cfg.hidden,
                z,
                "linear",
                regime,
                seeds=[ctx.seed + 3],
                init="orthogonal",
                dtype=torch.float64,
                device=dev,
            )
            if regime == "frobenius":
                embs, _ = _gd(net, views, cfg.lr, cfg.epochs, cfg.record_every, project=net.project_)
            else:  # Stiefel projected GD (polar map)
                opt = ManifoldGD(net.weights(), lr=cfg.lr, mode="projected", retraction="polar")
                embs, _ = _gd(net, views, cfg.lr, cfg.epochs, cfg.record_every, opt=opt)
            res.arrays[f"{regime}/sv_ratio"] = singular_value_ratio(embs).cpu().numpy()
            res.summary[f"{regime}_final_sv_ratio"] = float(singular_value_ratio(embs[-1]))
            with torch.no_grad():
                M = net.end_to_end()[0]  # (z, d)
                s = torch.linalg.svdvals(M)
            res.summary[f"{regime}_map_sv_ratio"] = float(s[-1] / s[0])
            if regime == "frobenius":
                res.summary["frobenius_rowspace_angle_to_v1"] = float(
                    principal_angles(torch.linalg.svd(M)[2][:1].T, V[:, :1]).max()
                )
                res.arrays["frobenius/final_embedding"] = embs[-1].cpu().numpy()
            else:
                res.arrays["orthogonal/final_embedding"] = embs[-1].cpu().numpy()
        res.arrays["epochs"] = np.arange(0, cfg.epochs + 1, cfg.record_every)
        # --- Lemma 1 for 2-layer tanh nets (both layers trained) at initialisation
        for h in cfg.ntk_widths:
            net = TwoLayerNet(
                d, h, z, "tanh", "unconstrained", seeds=[ctx.seed + h], init="normal", dtype=torch.float64, device=dev
            )
            K = empirical_ntk(net, None, views.x[: cfg.ntk_points])
            res.summary[f"tanh_h{h}_ntk_cross"], res.summary[f"tanh_h{h}_ntk_spread"] = dimension_coupling(K)
        res.notes.append(
            "Losses are means over anchors; the kernel model uses random Fourier features of the RBF "
            f"kernel (bandwidth 1, {cfg.features} features), trained with η·|λ_1(C)|/|λ_1(C_ψ)| = "
            f"{lrs['kernel']:.3g} so that its slowest-collapsing mode is not 4× slower than the linear "
            "model's; Frobenius bounds c1 = c2 = 1."
        )
        return res

    def claims(self, cfg: CollapseConfig, result: Result):
        s = result.summary
        hs = cfg.ntk_widths
        cross = [s[f"tanh_h{h}_ntk_cross"] for h in hs]
        return [
            check(
                "lemma1-linear-kernel",
                "Linear and kernel models: no interaction across output dimensions "
                "(⟨∇u_l, ∇u_j⟩ = 0 for l ≠ j, the same kernel for every l).",
                "Lemma 1",
                max(s["linear_ntk_cross"], s["linear_ntk_spread"], s["kernel_ntk_cross"], s["kernel_ntk_spread"]),
                le=1e-10,
                expected="max of cross/spread ratios of the tangent kernel <= 1e-10",
            ),
            check(
                "lemma1-wide-net",
                "For 2-layer networks the cross-dimension kernel vanishes as the width grows.",
                "Lemma 1 (h → ∞)",
                cross[-1] / cross[0],
                lt=1.0,
                expected=f"cross ratio at h={hs[-1]} / at h={hs[0]} < 1 (values {', '.join(f'{c:.3g}' for c in cross)})",
            ),
            check(
                "prop1-same-dynamics",
                "Every output dimension follows the same dynamics.",
                "Prop. 1",
                max(s["linear_same_dynamics_dev"], s["kernel_same_dynamics_dev"]),
                le=1e-8,
                expected="max relative deviation of each row of the z-output run from the 1-output run <= 1e-8",
            ),
            check(
                "prop1-collapse",
                "The output collapses to one dimension (linear and kernel models).",
                "Prop. 1",
                max(s["linear_final_sv_ratio"], s["kernel_final_sv_ratio"]),
                lt=1e-3,
                expected="final σ_min/σ_max of the embedding < 1e-3",
            ),
            check(
                "prop2-frobenius-collapses",
                "The Frobenius norm constraint does not prevent collapse: the solution is [a(x), 0, …, 0].",
                "Prop. 2",
                s["frobenius_map_sv_ratio"],
                lt=1e-3,
                expected="σ_2/σ_1 of the end-to-end map W2ᵀW1 < 1e-3",
            ),
            check(
                "prop2-direction",
                "... with a(x) along the eigenvector of the most negative eigenvalue of C.",
                "Prop. 2 (proof)",
                s["frobenius_rowspace_angle_to_v1"],
                lt=1e-2,
                expected="angle between the row space of W2ᵀW1 and v_1 < 0.01 rad",
            ),
            check(
                "remark3-projector",
                "A fixed projector does not prevent collapse.",
                "Remark 3",
                s["projector_final_sv_ratio"],
                lt=1e-3,
                expected="final σ_min/σ_max of u = AΘx < 1e-3",
            ),
            check(
                "orthogonal-no-collapse",
                "The orthogonality constraint avoids dimension collapse.",
                "Prop. 3",
                s["orthogonal_final_sv_ratio"],
                gt=0.1,
                expected="final σ_min/σ_max > 0.1",
            ),
        ]

    def plots(self, cfg: CollapseConfig, result: Result, fig_dir: Path):
        fig, ax = new_figure(2, 1, size=(4.4, 3.4))
        ep = result.arrays["epochs"]
        for i, name in enumerate(("linear", "kernel", "projector", "frobenius", "orthogonal")):
            ax[0, 0].plot(ep, np.maximum(result.arrays[f"{name}/sv_ratio"], 1e-18), color=PALETTE[i], label=name)
        ax[0, 0].set(xlabel="epoch", ylabel="σ_min/σ_max of embedding", yscale="log", title="collapse")
        ax[0, 0].legend(fontsize=8)
        hs = cfg.ntk_widths
        ax[0, 1].plot(hs, [result.summary[f"tanh_h{h}_ntk_cross"] for h in hs], "o-", label="cross (l≠j)")
        ax[0, 1].plot(hs, [result.summary[f"tanh_h{h}_ntk_spread"] for h in hs], "s--", label="spread of K_ll")
        ax[0, 1].set(
            xscale="log",
            yscale="log",
            xlabel="width h",
            ylabel="relative size",
            title="Lemma 1: 2-layer tanh tangent kernel",
        )
        ax[0, 1].legend(fontsize=8)
        return [save_figure(fig, fig_dir / "collapse.png")]
