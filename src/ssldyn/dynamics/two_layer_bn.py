"""Two-layer α-CL with BatchNorm on the hidden nodes (``nonlinearity`` App. D, eq. 164-179).

Hidden node ``f_k = h(w_kᵀx_k)`` (one filter per RF, ``M = 1``), normalised over the ``2N`` samples of a
batch (both views, eq. 164-165): ``f_k^bn = (f_k − μ_k)/σ_k``. The top layer is ``f2 = V f^bn``.

- :func:`bn_two_layer_energy`: ``E_α = ½ tr C_α[f2]`` with a chosen BN gradient variant — ``mean_only``
  (Def. 5: only ``μ_k`` is backpropagated; ``σ_k`` is a constant), ``standard`` (both), ``none``;
  the autograd reference.
- :func:`lemma6_dynamics`: eq. 166, ``V̇ = V C_α[f^bn]``, ``ẇ = [(S ⊗ 1_d1_dᵀ) ∘ C_α[x̃^bn]] w`` with
  ``x̃_k^bn = σ_k^{-1} x̃_k`` (no projection: BN makes the output invariant to ``‖w_k‖``).
- :func:`cor3_closed_form`: Cor. 3 under conditional independence (``C = 2``, uniform α, no
  augmentation, ``N → ∞``): ``A_k^bn = σ_k^{-2}A_k``, ``d_k^bn = σ_k^{-2}d_k``, ``Δ_k^bn = σ_k^{-1}Δ_k``,
  ``s^bn`` from Bunch–Nielsen–Sorensen and ``ẇ_k = [(s_k^bn)² A_k^bn + δ_k^bn Δ_k^bnΔ_k^bnᵀ] w_k`` (eq. 178)
  with ``δ_k^bn`` of eq. 179 and ``σ_k² = V[f_k] = d_k + p₀p₁ b_k²``.

Shapes as in :mod:`ssldyn.dynamics.two_layer_alpha_cl`: ``x (N, K, d)``, ``W (K, M, d)``; Cor. 3 takes
``W (..., K, d)``. Devices: everything runs on the device of the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from ssldyn.dynamics.two_layer_alpha_cl import (
    Thm5Terms,
    lemma4_filter_velocity,
    stationary_top_layer,
    thm5_closed_form,
    two_layer_features,
    two_layer_features_and_gated_input,
)
from ssldyn.models.activations import Activation, ActivationName
from ssldyn.objectives import alpha_cl_energy, contrastive_covariance

__all__ = ["bn_statistics", "bn_two_layer_energy", "lemma6_dynamics", "Cor3Terms", "cor3_closed_form"]

BNGrad = Literal["mean_only", "standard", "none"]


def bn_statistics(f1: Tensor, f1_pos: Tensor) -> tuple[Tensor, Tensor]:
    """``(μ, σ)`` of eq. 164-165 over the ``2N`` samples of both views: ``(N, p), (N, p) -> (p,), (p,)``."""
    both = torch.cat([f1, f1_pos], 0)  # (2N, p)
    mu = both.mean(0)
    sigma = ((both - mu) ** 2).mean(0).sqrt()
    return mu, sigma


def bn_two_layer_energy(
    W: Tensor,
    V: Tensor,
    x: Tensor,
    x_pos: Tensor,
    *,
    alpha: Tensor | None = None,
    activation: ActivationName | Activation = "relu",
    bn: BNGrad = "mean_only",
) -> Tensor:
    """``E_α = ½ tr C_α[V f^bn]`` (eq. 2-3) with BatchNorm on the hidden nodes; ``bn`` picks which batch
    statistics carry gradient (``mean_only`` = Def. 5). ``W (K, M, d)``, ``V (d_out, K·M)``, ``x, x_pos (N, K, d)``."""
    f1 = two_layer_features(x, W, activation)  # (N, KM)
    f1p = two_layer_features(x_pos, W, activation)
    mu, sigma = bn_statistics(f1, f1p)
    if bn in ("none",):
        mu = mu.detach()
    if bn in ("mean_only", "none"):
        sigma = sigma.detach()
    g1, g1p = (f1 - mu) / sigma, (f1p - mu) / sigma
    return alpha_cl_energy(g1 @ V.T, g1p @ V.T, alpha)


def lemma6_dynamics(
    W: Tensor,
    V: Tensor,
    x: Tensor,
    x_pos: Tensor,
    *,
    alpha: Tensor | None = None,
    activation: ActivationName | Activation = "relu",
) -> tuple[Tensor, Tensor]:
    """Eq. 166: ``(V̇ (d_out, KM), Ẇ (K, M, d))`` with ``x̃^bn_km = σ_km^{-1} x̃_km`` (mean-backprop BN).

    Equals the gradient of :func:`bn_two_layer_energy` with ``bn="mean_only"`` for a homogeneous ``h``
    (``h(x) = h'(x)x``) at any finite batch: ``C_α[·, c] = 0`` for a batch constant ``c`` (``μ_k``, ``∂μ_k/∂w_k``).
    """
    d = W.shape[-1]
    f1, xt = two_layer_features_and_gated_input(x, W, activation)  # (N, KM), (N, KMd)
    f1p, xtp = two_layer_features_and_gated_input(x_pos, W, activation)
    mu, sigma = bn_statistics(f1, f1p)  # (KM,)
    V_dot = V @ contrastive_covariance((f1 - mu) / sigma, (f1p - mu) / sigma, alpha=alpha)
    scale = (1.0 / sigma).repeat_interleave(d)  # (KMd,): σ_km^{-1} on the d coordinates of filter km
    Cx = contrastive_covariance(xt * scale, xtp * scale, alpha=alpha)  # (KMd, KMd): C_α[x̃^bn]
    return V_dot, lemma4_filter_velocity(V, Cx, W)


@dataclass
class Cor3Terms:
    """Quantities of Cor. 3 (eq. 175-179) over leading ensemble axes ``...`` of ``W``."""

    sigma: Tensor  # (..., K)  σ_k = √V[f_k]
    A: Tensor  # (..., K, d, d)  A_k^bn
    Delta: Tensor  # (..., K, d)  Δ_k^bn
    d: Tensor  # (..., K)  d_k^bn
    b: Tensor  # (..., K)  w_kᵀΔ_k^bn
    lam: Tensor  # (...)  λ^bn
    s: Tensor  # (..., K)  s^bn
    delta: Tensor  # (..., K)  δ_k^bn (eq. 179)
    w_dot: Tensor  # (..., K, d)  eq. 178 (unprojected)
    plain: Thm5Terms  # the terms without BN (Thm. 5)


def cor3_closed_form(
    W: Tensor, x: Tensor, z: Tensor, *, weights: Tensor | None = None, activation: ActivationName | Activation = "relu"
) -> Cor3Terms:
    """Cor. 3 for ``M = 1``, ``C = 2`` (``z ∈ {0, 1}``), uniform α, no augmentation (population ``weights``).

    ``W (..., K, d)``; ``x (N, K, d)``; ``z (N,)``; ``weights (N,)`` or per-RF ``(N, K)`` (as in
    :func:`~ssldyn.dynamics.two_layer_alpha_cl.thm5_closed_form`).

    Raises:
        ValueError: a filter is dead (``V[f_k] = 0``), where ``f_k^bn`` is undefined.
    """
    t = thm5_closed_form(W, x, z, weights=weights, activation=activation)
    var_f = t.d + t.p0 * t.p1 * t.b**2  # (..., K): V[f_k] = w_kᵀA_k w_k (Lemma 5)
    if bool((var_f <= 0).any()):
        raise ValueError("W: a hidden node has zero variance (dead filter): BatchNorm (σ_k = 0) is undefined")
    sigma = var_f.sqrt()
    A = t.A / var_f[..., None, None]
    Delta = t.Delta / sigma[..., None]
    dk = t.d / var_f
    bk = t.b / sigma
    Vf = torch.diag_embed(dk) + t.p0 * t.p1 * bk[..., :, None] * bk[..., None, :]  # V[f^bn]
    lam = torch.linalg.eigvalsh(Vf)[..., -1]
    s, delta = stationary_top_layer(dk, bk, t.p0, t.p1, lam)  # s^bn ∝ b_k^bn / (λ^bn − d_k^bn); δ^bn, eq. 179
    Aw = (A @ W[..., None]).squeeze(-1)
    w_dot = (s**2)[..., None] * Aw + (delta * (Delta * W).sum(-1))[..., None] * Delta  # eq. 178
    return Cor3Terms(sigma, A, Delta, dk, bk, lam, s, delta, w_dot, t)
