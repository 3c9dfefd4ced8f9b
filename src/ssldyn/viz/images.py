"""Pictures of real-image experiments: t-SNE maps coloured by class, filter grids.

* :func:`tsne_embedding` — 2-D t-SNE (van der Maaten & Hinton 2008; scikit-learn's ``TSNE``)
  of ``(n, d)`` features, seeded; used by ``variational`` Fig. 1.
* :func:`plot_tsne` — scatter of a t-SNE map coloured by class with a legend.
* :func:`tile_filters` / :func:`plot_filter_grid` — filters ``(M, h, w)`` as one image grid,
  each filter scaled to [-1, 1] by its own max |value| (``nonlinearity`` Fig. 12–13).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import torch
    from matplotlib.axes import Axes

from ssldyn.checks import choice
from ssldyn.viz.common import PALETTE

__all__ = ["tsne_embedding", "plot_tsne", "tile_filters", "plot_filter_grid"]

_COLORS = PALETTE + ["#bcbd22", "#7f7f7f"]


def tsne_embedding(
    x: torch.Tensor | npt.ArrayLike,
    *,
    seed: int = 0,
    perplexity: float = 30.0,
    pca_dims: int | None = 50,
    max_iter: int = 1000,
    method: Literal["auto", "exact", "barnes_hut"] = "auto",
) -> np.ndarray:
    """t-SNE map ``(n, 2)`` of features ``(n, ...)`` (van der Maaten & Hinton 2008; scikit-learn's ``TSNE``).

    Features are flattened to ``(n, d)`` and, when ``d > pca_dims`` and ``n > pca_dims``, reduced by
    PCA first (as is usual; a full SVD up to 2,000 points). The perplexity is capped at ``(n − 1)/3``
    (at least 2); ``init="pca"``; at least 250 iterations. ``method="auto"``: exact gradients up to
    1,000 points (faster there than Barnes–Hut), Barnes–Hut above. One thread, seeded by ``seed``.
    """
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE

    choice(method, "method", ("auto", "exact", "barnes_hut"), where="tsne_embedding")
    detach = getattr(x, "detach", None)  # a tensor (torch is not imported here)
    f = np.asarray(detach().cpu().numpy() if detach is not None else x, dtype=np.float64)
    f = f.reshape(len(f), -1)  # (n, d)
    if len(f) < 3:
        raise ValueError(f"tsne_embedding: need at least 3 points, got {len(f)}")
    if pca_dims is not None and f.shape[1] > pca_dims and len(f) > pca_dims:
        f = PCA(pca_dims, svd_solver="full" if len(f) <= 2000 else "auto", random_state=seed).fit_transform(f)
    perp = min(perplexity, max(2.0, (len(f) - 1) / 3.0))
    how = ("exact" if len(f) <= 1000 else "barnes_hut") if method == "auto" else method
    tsne = TSNE(2, perplexity=perp, init="pca", random_state=seed, max_iter=max(250, max_iter), method=how, n_jobs=1)
    return tsne.fit_transform(f)  # (n, 2)


def plot_tsne(
    ax: Axes, y2: np.ndarray, labels: npt.ArrayLike, title: str = "", *, class_names: Sequence[str] | None = None
) -> None:
    """Scatter ``y2 (n, 2)`` on ``ax`` coloured by integer ``labels``."""
    labels = np.asarray(labels)
    for c in np.unique(labels):
        m = labels == c
        name = class_names[c] if class_names is not None and c < len(class_names) else str(c)
        ax.scatter(y2[m, 0], y2[m, 1], s=3, color=_COLORS[int(c) % len(_COLORS)], label=name, alpha=0.8, linewidths=0)
    ax.set(title=title, xticks=[], yticks=[])
    ax.legend(fontsize=6, markerscale=3, loc="best", ncol=2, frameon=False)


def tile_filters(filters: np.ndarray, ncols: int | None = None, *, pad: int = 1) -> np.ndarray:
    """Filters ``(M, h, w)`` -> one image ``(rows·(h+pad)−pad, cols·(w+pad)−pad)``, each filter divided by
    its max |value| (so values are in [-1, 1]); padding is NaN (drawn blank)."""
    f = np.asarray(filters, dtype=np.float64)
    if f.ndim != 3:
        raise ValueError(f"filters must be (M, h, w), got shape {f.shape}")
    M, h, w = f.shape
    ncols = ncols or int(math.ceil(math.sqrt(M)))
    nrows = int(math.ceil(M / ncols))
    out = np.full((nrows * (h + pad) - pad, ncols * (w + pad) - pad), np.nan)
    for m in range(M):
        r, c = divmod(m, ncols)
        scale = np.abs(f[m]).max()
        out[r * (h + pad) : r * (h + pad) + h, c * (w + pad) : c * (w + pad) + w] = f[m] / (scale if scale > 0 else 1.0)
    return out


def plot_filter_grid(ax: Axes, filters: np.ndarray, title: str = "", *, ncols: int | None = None) -> None:
    """Draw :func:`tile_filters` on ``ax`` with a diverging colour map centred at 0."""
    ax.imshow(tile_filters(filters, ncols), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set(title=title, xticks=[], yticks=[])
