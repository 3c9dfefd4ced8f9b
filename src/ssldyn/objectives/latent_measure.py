"""NT-Xent of a latent measure on the sphere: ``variational`` Proposition 2.1.

For an invariant map the SimCLR cost only depends on the pushed-forward measure
``ρ = f#μ`` (Prop. 2.1, and the stationary-point examples of Thm. 3.2 / Fig. 3).
Here ``ρ`` is a discrete measure whose atoms are *samples*: several samples may sit at
the same location (a cluster), and they still count as different samples.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ssldyn.checks import integer

from ._common import check_positive, check_tensor

__all__ = [
    "latent_measure_nt_xent",
    "cluster_measure_nt_xent",
    "cluster_sizes",
    "LatentMeasureNTXent",
]

_LOG2 = math.log(2.0)


def latent_measure_nt_xent(
    points: Tensor,
    weights: Tensor | None = None,
    temperature: float = 0.5,
    *,
    positive_term: bool = False,
) -> Tensor:
    r"""NT-Xent cost of a discrete measure ``ρ = Σ_i w_i δ_{y_i}`` on the sphere (Prop. 2.1).

    .. math::
        L(\rho) = \mathbb{E}_{x\sim\rho} \log\Big(1 + 2\,\mathbb{E}_{y\sim\rho}
                  \big[\mathbb{1}_{x\ne y}\, e^{\mathrm{sim}(x,y)/\tau}\big]\Big)
                = \sum_i w_i \log\Big(1 + 2 \sum_{j \ne i} w_j\, e^{\mathrm{sim}(y_i, y_j)/\tau}\Big),

    ``sim`` the cosine similarity (``variational`` eq. 2; points need not be normalised).
    The atoms are samples and ``1_{x≠y}`` means *a different sample*: two samples at the
    same location (a cluster) do contribute ``e^{1/τ}`` to each other; only ``j = i`` is
    excluded. Evaluated as ``softplus(log 2 + logsumexp(...))``, stable for any τ.

    ``positive_term=True`` keeps the positive-pair denominator of eq. (1),
    ``exp(sim(T x, T' x)/τ) = e^{1/τ}`` for an invariant map, which Prop. 2.1 as printed
    omits, i.e. uses ``e^{(sim - 1)/τ}``; the default follows Prop. 2.1 literally.

    Args:
        points: atom locations ``(n, d)`` or ``(..., n, d)`` (ensemble axes), ``n >= 2``.
        weights: ``w`` of shape ``(n,)`` or ``(..., n)``, finite, non-negative, with a positive
            sum; normalised to sum to 1. Default uniform ``1/n``.
        temperature: τ > 0.
        positive_term: divide by the positive-pair term ``e^{1/τ}`` of eq. (1).

    Returns:
        ``L(ρ)``: a scalar, or shape ``(...)`` with ensemble axes (sum over atoms
        weighted by ``w``).
    """
    fn = "latent_measure_nt_xent"
    check_tensor(fn, "points", points, min_rows=2)
    tau = check_positive(fn, "temperature", temperature)
    n = points.shape[-2]
    w = _normalised_weights(fn, weights, points)  # (..., n)
    y = F.normalize(points, dim=-1)  # (..., n, d)
    logits = (y @ y.mT) / tau + torch.log(w)[..., None, :]  # (..., n, n): sim_ij/τ + log w_j
    if positive_term:
        logits = logits - 1.0 / tau
    eye = torch.eye(n, dtype=torch.bool, device=points.device)
    inner = torch.logsumexp(logits.masked_fill(eye, -math.inf), dim=-1)  # (..., n)
    return (w * F.softplus(_LOG2 + inner)).sum(-1)


def cluster_sizes(n: int, k: int) -> list[int]:
    """Split ``n`` samples into ``k`` clusters as equally as possible (first ``n mod k`` get one more)."""
    k = integer(k, "k (clusters)", where="cluster_sizes")
    n = integer(n, "n (samples)", where="cluster_sizes", minimum=k)
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def cluster_measure_nt_xent(
    centers: Tensor,
    counts: int | Sequence[int] | Tensor,
    temperature: float = 0.5,
    *,
    positive_term: bool = False,
) -> Tensor:
    r"""Prop. 2.1 cost of ``K`` clusters: ``m_k`` coincident samples at each center ``c_k``.

    Equal to :func:`latent_measure_nt_xent` of the ``n = Σ m_k`` samples (uniform weights
    ``1/n``) with ``m_k`` copies of ``c_k``, in closed form with ``π_k = m_k/n``:

    .. math::
        L = \sum_k \pi_k \log\Big(1 + 2\Big[\tfrac{m_k - 1}{n} e^{1/\tau}
            + \sum_{l\ne k} \pi_l\, e^{\mathrm{sim}(c_k, c_l)/\tau}\Big]\Big).

    This is the family of embedded distributions ``(1/K) Σ δ_{x_i}`` of ``variational``
    Fig. 3 / Remark 3.1 when ``counts`` is an ``int`` split equally (:func:`cluster_sizes`).

    Args:
        centers: ``(K, d)`` or ``(..., K, d)`` cluster locations.
        counts: total number of samples ``n >= K`` (split as equally as possible), or the
            ``K`` cluster sizes ``m_k >= 1``; ``n >= 2``.
        temperature: τ > 0.
        positive_term: as in :func:`latent_measure_nt_xent`.

    Returns:
        A scalar, or shape ``(...)`` with ensemble axes.
    """
    fn = "cluster_measure_nt_xent"
    check_tensor(fn, "centers", centers)
    tau = check_positive(fn, "temperature", temperature)
    k = centers.shape[-2]
    m = _cluster_counts(fn, counts, k).to(device=centers.device, dtype=centers.dtype)  # (K,)
    n = m.sum()
    eye = torch.eye(k, dtype=centers.dtype, device=centers.device)
    log_w = torch.log((m[None, :] - eye) / n)  # (K, K): log of other-sample mass at l seen from k
    c = F.normalize(centers, dim=-1)  # (..., K, d)
    logits = (c @ c.mT) / tau + log_w  # (..., K, K)
    if positive_term:
        logits = logits - 1.0 / tau
    inner = torch.logsumexp(logits, dim=-1)  # (..., K)
    return ((m / n) * F.softplus(_LOG2 + inner)).sum(-1)


def _cluster_counts(fn: str, counts, k: int) -> Tensor:
    if isinstance(counts, bool):
        raise ValueError(f"{fn}: counts must be an int or a sequence of K={k} ints, got {counts!r}")
    if isinstance(counts, numbers.Integral):  # an int or a NumPy integer (e.g. ``sizes.sum()``)
        total = integer(counts, f"counts (total samples of K={k} clusters)", where=fn, minimum=max(k, 2))
        return torch.tensor(cluster_sizes(total, k))
    m = torch.as_tensor(counts)
    if m.shape != (k,) or m.is_floating_point() or m.is_complex():
        raise ValueError(f"{fn}: counts must be an int or K={k} integer cluster sizes, got {counts!r}")
    if bool((m < 1).any()) or int(m.sum()) < 2:
        raise ValueError(f"{fn}: cluster sizes must be >= 1 with total >= 2, got {m.tolist()}")
    return m


def _normalised_weights(fn: str, weights: Tensor | None, points: Tensor) -> Tensor:
    n = points.shape[-2]
    if weights is None:
        return torch.full((n,), 1.0 / n, dtype=points.dtype, device=points.device)
    if not isinstance(weights, Tensor) or not weights.is_floating_point():
        raise ValueError(f"{fn}: weights must be a floating-point tensor of shape (n,) or (..., n), or None")
    if weights.dim() < 1 or weights.shape[-1] != n:
        raise ValueError(f"{fn}: weights must have shape (n,) or (..., n) with n={n} atoms, got {tuple(weights.shape)}")
    if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()) or bool((weights.sum(-1) <= 0).any()):
        raise ValueError(f"{fn}: weights must be finite, non-negative, with a positive sum")
    return weights / weights.sum(-1, keepdim=True)


class LatentMeasureNTXent(nn.Module):
    """Module form of :func:`latent_measure_nt_xent`: ``forward(points, weights=None)``."""

    def __init__(self, temperature: float = 0.5, *, positive_term: bool = False) -> None:
        super().__init__()
        self.temperature = check_positive("LatentMeasureNTXent", "temperature", temperature)
        self.positive_term = bool(positive_term)

    def forward(self, points: Tensor, weights: Tensor | None = None) -> Tensor:
        return latent_measure_nt_xent(points, weights, self.temperature, positive_term=self.positive_term)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, positive_term={self.positive_term}"
