"""Cluster structure of embeddings, uniformity/alignment and invariance (``variational`` Sec. 4, Fig. 5–6).

* :func:`silhouette_cosine` — silhouette score of the embeddings w.r.t. the true cluster
  labels with cosine distance ``1 − cos`` (Rousseeuw 1987; equals scikit-learn's
  ``silhouette_score(z, labels, metric="cosine")``). Near 1: tight, separated clusters;
  near 0: no cluster structure.
* :func:`uniformity` / :func:`alignment` — Wang & Isola (2020):
  ``log E_{i≠j} exp(−t‖u_i − u_j‖²)`` on the normalised embeddings and ``E‖u − v‖^α`` over
  positive pairs. :func:`uniformity_reference` gives the value of n equally spaced points
  on S¹ (the uniform optimum in 2-D) or of the continuous uniform measure on S^{d−1}.
* :func:`angular_spread` — mean angle (radians) between each normalised embedding and its
  cluster's mean direction, averaged over clusters.
* :func:`invariance_gap` — ``E‖f(T(x)) − f(x)‖`` over samples and draws of the perturbation.

* :func:`silhouette_samples_cosine` / :func:`uniformity_batch` — the per-sample silhouette and the
  uniformity batched over leading axes (records × members) as float64 tensors, for measuring a
  whole trajectory at once; :func:`per_cluster_mean` averages a per-sample quantity (the
  silhouette) over each cluster.

Unless batched, they accept ``(n, d)`` tensors or arrays (one member) and return Python floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from ssldyn.checks import positive
from ssldyn.data.sphere import circle_points_even, fibonacci_sphere
from ssldyn.probes._common import ArrayLike, as_tensor
from ssldyn.probes.filters import cosine_matrix

__all__ = [
    "silhouette_cosine",
    "silhouette_samples_cosine",
    "per_cluster_mean",
    "uniformity",
    "uniformity_batch",
    "alignment",
    "uniformity_reference",
    "angular_spread",
    "invariance_gap",
]


def _float64(z) -> Tensor:
    return torch.as_tensor(np.asarray(z) if not isinstance(z, Tensor) else z).detach().to(torch.float64)


def _t(z, where: str, batched: str | None = None) -> Tensor:
    """One embedding ``(n, d)`` as float64; anything else is one error naming ``where`` (and ``batched``, the
    function that takes an ensemble ``(E, n, d)``, where there is one)."""
    z = _float64(z)
    if z.dim() != 2:
        hint = f"; for an ensemble (E, n, d) use {batched}" if batched and z.dim() == 3 else ""
        raise ValueError(f"{where}: embeddings must have shape (n, d), got {tuple(z.shape)}{hint}")
    return z


def _unit(z: Tensor) -> Tensor:
    return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-300)


def _batch(z) -> Tensor:
    """Embeddings ``(..., n, d)`` as float64."""
    z = _float64(z)
    if z.dim() < 2:
        raise ValueError(f"embeddings must have shape (..., n, d), got {tuple(z.shape)}")
    return z


def _labels(labels, device: torch.device, n: int, where: str) -> Tensor:
    """Cluster labels (a tensor on any device, an array or a list) of ``n`` samples as a long ``(n,)`` tensor
    on ``device``; any other shape, or a float label that is not a whole number (``0.2`` and ``0.7`` would both
    become cluster 0), is one error naming ``where``."""
    raw = np.asarray(labels.detach().cpu() if isinstance(labels, Tensor) else labels)
    if raw.dtype.kind == "f" and (not np.isfinite(raw).all() or (raw != np.round(raw)).any()):
        bad = raw[~np.isfinite(raw) | (raw != np.round(raw))].ravel()[:3].tolist()
        raise ValueError(f"{where}: labels must be integers (cluster labels), got non-integer values such as {bad}")
    lab = torch.as_tensor(raw).long().to(device)  # (n,)
    if lab.shape != (n,):
        raise ValueError(f"{where}: labels must have shape ({n},), one per sample, got {tuple(lab.shape)}")
    return lab


def silhouette_samples_cosine(z: ArrayLike, labels: ArrayLike) -> Tensor:
    """Per-sample silhouette with cosine distance, batched over leading axes: ``(..., n, d) -> (..., n)``.

    ``s_i = (b_i − a_i)/max(a_i, b_i)`` (Rousseeuw 1987), ``a_i`` the mean distance to the other
    members of its cluster, ``b_i`` the smallest mean distance to another cluster, distance
    ``1 − cos``; a sample of a cluster of size 1 gets 0 (scikit-learn's ``silhouette_samples``).
    Float64 on the input's device; ``labels (n,)``.
    """
    z = _batch(z)  # (..., n, d)
    lab = _labels(labels, z.device, z.shape[-2], "silhouette")  # (n,)
    classes = torch.unique(lab)
    if not 2 <= classes.numel() <= z.shape[-2] - 1:
        raise ValueError(f"silhouette: need 2 <= number of clusters <= n-1, got {classes.numel()}")
    onehot = (lab[:, None] == classes[None, :]).to(z.dtype)  # (n, C)
    dist = (1.0 - cosine_matrix(z)).clamp_min(0.0)  # (..., n, n)
    sums = dist @ onehot  # (..., n, C): sum of distances to each cluster
    counts = onehot.sum(0)  # (C,)
    own = onehot.argmax(1)  # (n,)
    own_count = counts[own]  # (n,)
    a = sums.gather(-1, own.expand(*sums.shape[:-1])[..., None])[..., 0] / (own_count - 1).clamp_min(1)  # (..., n)
    other = (sums / counts).masked_fill(onehot.bool(), math.inf)  # (..., n, C)
    b = other.min(-1).values  # (..., n)
    s = (b - a) / torch.maximum(a, b).clamp_min(1e-300)
    return torch.where(own_count > 1, s, torch.zeros_like(s))


def silhouette_cosine(z: ArrayLike, labels: ArrayLike) -> float:
    """Mean silhouette ``s_i = (b_i − a_i)/max(a_i, b_i)`` with cosine distance; clusters of size 1 give 0.

    ``z (n, d)``; the mean of :func:`silhouette_samples_cosine` (which is batched over leading axes).
    """
    return float(silhouette_samples_cosine(_t(z, "silhouette_cosine", "silhouette_samples_cosine"), labels).mean())


def per_cluster_mean(values: ArrayLike, labels: ArrayLike) -> Tensor:
    """Mean of a per-sample quantity over each cluster, batched over leading axes: ``(..., n) -> (..., C)``.

    ``m_c = (1/|I_c|) Σ_{i ∈ I_c} v_i``, ``I_c = {i: labels_i = c}``, the clusters ``c`` in increasing
    label order (``torch.unique``); e.g. the per-cluster silhouette from :func:`silhouette_samples_cosine`.
    ``labels (n,)``; the result has the dtype and device of ``values`` (integer or boolean values: float64),
    without a graph.
    """
    v = as_tensor(values)
    if v.dim() < 1:
        raise ValueError(f"per_cluster_mean: values must have shape (..., n), got {tuple(v.shape)}")
    lab = _labels(labels, v.device, v.shape[-1], "per_cluster_mean")  # (n,)
    onehot = (lab[:, None] == torch.unique(lab)[None, :]).to(v.dtype)  # (n, C)
    return (v @ onehot) / onehot.sum(0)  # (..., C)


def uniformity(z: ArrayLike, t: float = 2.0) -> float:
    """Wang & Isola (2020): ``log mean_{i≠j} exp(−t ‖u_i − u_j‖²)``, ``u = z/‖z‖``, ``t > 0``; ``z (n, d)``
    with ``n >= 2``. Lower = more uniform."""
    t = positive(t, "t", where="uniformity")
    z = _t(z, "uniformity", "uniformity_batch")
    n = z.shape[0]
    if n < 2:
        raise ValueError(f"uniformity: need n >= 2 points, got {n}")
    sq = (2.0 - 2.0 * cosine_matrix(z)).clamp_min(0.0)  # (n, n): ‖u_i − u_j‖² of the unit rows
    off = ~torch.eye(n, dtype=torch.bool, device=z.device)
    return float(torch.logsumexp(-t * sq[off], 0) - math.log(n * (n - 1)))


def uniformity_batch(z: ArrayLike, t: float = 2.0) -> Tensor:
    """:func:`uniformity` batched over leading axes: ``(..., n, d) -> (...)`` (float64, no host sync).

    ``log mean_{i≠j} exp(−t‖u_i − u_j‖²) = logsumexp_{i≠j}(2t u_iᵀu_j) − 2t − log(n(n−1))`` (unit rows).
    """
    t = positive(t, "t", where="uniformity_batch")
    z = _batch(z)  # (..., n, d)
    n = z.shape[-2]
    if n < 2:
        raise ValueError(f"uniformity_batch: need n >= 2 points, got {n}")
    logits = (2.0 * t) * cosine_matrix(z)  # (..., n, n): −t‖u_i − u_j‖² + 2t
    logits = logits.masked_fill(torch.eye(n, dtype=torch.bool, device=z.device), -math.inf)
    return torch.logsumexp(logits.flatten(-2), dim=-1) - 2.0 * t - math.log(n * (n - 1))


def alignment(z1: ArrayLike, z2: ArrayLike, alpha: float = 2.0) -> float:
    """Wang & Isola (2020): ``mean_i ‖u_i − v_i‖^α`` over positive pairs (normalised), ``α > 0``; ``z1, z2 (n, d)``."""
    alpha = positive(alpha, "alpha", where="alignment")
    u, v = _unit(_t(z1, "alignment")), _unit(_t(z2, "alignment"))
    if u.shape != v.shape:
        raise ValueError(f"alignment: z1 and z2 must be positive pairs of one shape (n, d), got {tuple(u.shape)} "
                         f"and {tuple(v.shape)}")  # fmt: skip
    return float(((u - v).norm(dim=-1) ** alpha).mean())


def uniformity_reference(n: int | None = None, *, d: int = 2, t: float = 2.0) -> float:
    """Uniformity of the uniform optimum: ``n`` equally spaced points on S¹ (``d = 2``,
    :func:`ssldyn.data.sphere.circle_points_even`) or ``n`` Fibonacci-lattice points on S² (``d = 3``,
    :func:`ssldyn.data.sphere.fibonacci_sphere`), or, with
    ``n=None``, the continuous uniform measure on S^{d−1} (``d = 2``: ``−2t + log I₀(2t)``)."""
    t = positive(t, "t", where="uniformity_reference")
    if n is not None:
        if d == 2:
            return uniformity(circle_points_even(n), t)
        if d == 3:  # Fibonacci lattice: n near-evenly spread points on S²
            return uniformity(fibonacci_sphere(n), t)
        raise ValueError("uniformity_reference: n evenly spread points are defined for d = 2, 3 only")
    if d == 2:
        from scipy.special import i0e

        return float(math.log(i0e(2 * t)))  # log(e^{-2t} I0(2t))
    # E exp(-2t(1 - cos θ)) with cos θ ~ Beta-type density on S^{d-1}
    from scipy.integrate import quad

    dens = lambda c: (1 - c * c) ** ((d - 3) / 2)  # noqa: E731
    num = quad(lambda c: math.exp(-2 * t * (1 - c)) * dens(c), -1, 1)[0]
    return float(math.log(num / quad(dens, -1, 1)[0]))


def angular_spread(z: ArrayLike, labels: ArrayLike) -> float:
    """Mean over clusters of the mean angle (rad) between ``u_i`` and the cluster's mean direction."""
    u = _unit(_t(z, "angular_spread"))
    lab = _labels(labels, u.device, u.shape[0], "angular_spread")  # (n,)
    out = []
    for c in torch.unique(lab):
        uc = u[lab == c]
        m = _unit(uc.mean(0, keepdim=True))
        out.append(torch.arccos((uc @ m.T).clamp(-1, 1)).mean())
    return float(torch.stack(out).mean())


def invariance_gap(
    f: Callable[[Tensor], Tensor], x: Tensor, perturb: Callable[[Tensor], Tensor], draws: int = 1
) -> float:
    """``E‖f(T(x)) − f(x)‖``: mean over samples and ``draws`` perturbations ``T = perturb`` of x.

    ``f`` maps ``(n, D) -> (n, d)`` (e.g. ``lambda x: F.normalize(model(x)[0], dim=-1)``),
    ``perturb`` maps ``(n, D) -> (n, D)`` (one random draw of T per call).
    """
    with torch.no_grad():
        fx = f(x)
        gaps = [(f(perturb(x)) - fx).norm(dim=-1).mean() for _ in range(draws)]
    return float(torch.stack(gaps).mean())
