"""Half-moons with positives and negatives for the simple contrastive loss (``grassmann`` Example 1).

The anchors are ``sklearn.datasets.make_moons(n, noise=noise)`` (default n = 200 points,
noise = 0.05; the paper does not state them). For every anchor ``x_i``:

- ``p`` positives ``x_i⁺ = x_i + ε`` with ``ε ~ N(0, σ²·I)`` and ``σ² = 0.1`` (Example 1 writes
  ``N(0, 0.1·I)``: 0.1 is the *covariance*, i.e. std √0.1 ≈ 0.316);
- ``q`` negatives ``x_i⁻``: independent samples from the data set (uniformly random other
  anchors, never ``x_i`` itself).

The contrast matrix of eq. (7) for these views is ``ssldyn.objectives.contrast_matrix``.
The random draws are numpy's (CPU); the tensors are then created on ``device`` (the labels,
used only by CPU-side probes and plots, stay on the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ssldyn.checks import integer, nonnegative
from ssldyn.streams import derive_seed

__all__ = ["SSLViews", "make_views", "half_moons"]


@dataclass(frozen=True)
class SSLViews:
    """Anchors with their positive and negative views.

    Attributes:
        x: anchors ``(n, d)``.
        x_pos: positives ``(n, p, d)``.
        x_neg: negatives ``(n, q, d)``.
        labels: class of each anchor ``(n,)`` (moon index), for downstream probes only.
    """

    x: torch.Tensor
    x_pos: torch.Tensor
    x_neg: torch.Tensor
    labels: torch.Tensor

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def d(self) -> int:
        return self.x.shape[1]


def make_views(
    x: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor | None = None,
    *,
    p: int = 1,
    q: int = 1,
    noise_var: float = 0.1,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> SSLViews:
    """Positives ``x + ε`` (``ε ~ N(0, noise_var·I)``) and negatives drawn from the other points.

    Args:
        x: data ``(n, d)``, n ≥ 2.
        labels: optional ``(n,)`` integer labels (zeros when omitted).
        p: positives per anchor (≥ 1).
        q: negatives per anchor (≥ 0; q = 0 gives an empty ``(n, 0, d)`` tensor, non-contrastive use).
        noise_var: variance σ² of the additive Gaussian augmentation (≥ 0).
        seed: seed of the numpy generator used for ε and for the negative indices.
        device: device of ``x``, ``x_pos``, ``x_neg`` (drawn on the CPU, then moved; default CPU).
    """
    xa = np.asarray(x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    if xa.ndim != 2 or xa.shape[0] < 2:
        raise ValueError(f"make_views: x must have shape (n, d) with n >= 2, got {xa.shape}")
    if not np.isfinite(xa).all():
        raise ValueError("make_views: x contains NaN or inf")
    p, q = integer(p, "p", where="make_views"), integer(q, "q", where="make_views", minimum=0)
    noise_var = nonnegative(noise_var, "noise_var", where="make_views")
    n, d = xa.shape
    rng = np.random.default_rng(seed)
    eps = rng.normal(0.0, np.sqrt(noise_var), size=(n, p, d))
    x_pos = xa[:, None, :] + eps  # (n, p, d)
    # negatives: a uniformly random *other* point (shift by 1..n-1 so that j != i)
    j = (np.arange(n)[:, None] + rng.integers(1, n, size=(n, q))) % n  # (n, q)
    x_neg = xa[j]  # (n, q, d)
    lab = (
        np.zeros(n, dtype=np.int64)
        if labels is None
        else np.asarray(labels.cpu().numpy() if isinstance(labels, torch.Tensor) else labels, dtype=np.int64)
    )
    if lab.shape != (n,):
        raise ValueError(f"make_views: labels must have shape ({n},), got {lab.shape}")
    t = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
    return SSLViews(t(xa), t(x_pos), t(x_neg), torch.as_tensor(lab))


def half_moons(
    n: int = 200,
    *,
    noise: float = 0.05,
    p: int = 1,
    q: int = 1,
    noise_var: float = 0.1,
    extra_stds: tuple[float, ...] = (),
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> SSLViews:
    """The half-moons data of Example 1 / Fig. 1a with ``p`` positives and ``q`` negatives per anchor.

    Args:
        n: number of anchors (``make_moons(n_samples=n)``), ≥ 2.
        noise: std of the Gaussian noise of ``make_moons`` (shape of the moons), ≥ 0.
        p, q, noise_var: see :func:`make_views` (augmentation covariance 0.1·I by default).
        extra_stds: optional extra coordinates appended to the 2-D moons, coordinate k drawn
            i.i.d. N(0, extra_stds[k]²) (d = 2 + len(extra_stds)); used where an experiment needs
            d > 2 (e.g. z = 3 in Fig. 5) with distinct eigenvalues of C.
        seed: one seed for the moons (``make_moons(random_state=seed)``), the views
            (``derive_seed(seed, 1)``, :mod:`ssldyn.streams`) and the extra coordinates (``derive_seed(seed, 2)``).
        device: device of the view tensors (see :func:`make_views`).

    Returns:
        :class:`SSLViews` with d = 2 + len(extra_stds) (the 2-D moons, then the extra coordinates).
    """
    from sklearn.datasets import make_moons

    if int(n) < 2:
        raise ValueError(f"half_moons: n must be >= 2, got {n}")
    noise = nonnegative(noise, "noise", where="half_moons")
    for k, std in enumerate(extra_stds):
        nonnegative(std, f"extra_stds[{k}]", where="half_moons")
    x, y = make_moons(n_samples=int(n), noise=float(noise), random_state=seed)
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y)  # (n, 2), (n,)
    if len(extra_stds):
        rng = np.random.default_rng(derive_seed(seed, 2))
        x = np.concatenate([x, rng.normal(size=(x.shape[0], len(extra_stds))) * np.asarray(extra_stds)], axis=1)
    return make_views(x, y, p=p, q=q, noise_var=noise_var, seed=derive_seed(seed, 1), dtype=dtype, device=device)
