"""Downstream evaluation of learned representations (``variational`` Fig. 1: "clustered by class").

* :func:`linear_probe_accuracy` — multinomial logistic regression (scikit-learn, L-BFGS) on
  standardised training features, accuracy on held-out features.
* :func:`knn_accuracy` — k-nearest-neighbour majority vote (cosine or Euclidean distance) of
  held-out points among the training points; ties go to the smallest label.
* :func:`label_silhouette` — the silhouette ``mean_i (b_i − a_i)/max(a_i, b_i)`` of the class
  labels (Rousseeuw 1987), with cosine (``1 − cos``) or Euclidean distance; used to compare the
  embedding with raw pixels.

Inputs are ``(n, d)`` tensors or arrays and label vectors ``(n,)``; results are Python floats.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ssldyn.probes.cluster import silhouette_cosine

__all__ = ["linear_probe_accuracy", "knn_accuracy", "label_silhouette"]


def _x(z) -> torch.Tensor:
    z = torch.as_tensor(z.detach().cpu().numpy() if isinstance(z, torch.Tensor) else np.asarray(z))
    if z.dim() != 2:
        raise ValueError(f"features must have shape (n, d), got {tuple(z.shape)}")
    if not torch.isfinite(z).all():
        raise ValueError("features contain NaN or inf")
    return z.to(torch.float64)


def _y(y, n: int) -> torch.Tensor:
    y = torch.as_tensor(y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)).long()
    if y.shape != (n,):
        raise ValueError(f"labels must have shape ({n},), got {tuple(y.shape)}")
    return y


def linear_probe_accuracy(z_train, y_train, z_test, y_test, C: float = 1.0, max_iter: int = 1000) -> float:
    """Test accuracy of a logistic-regression probe trained on ``(z_train, y_train)``.

    Features are standardised with the training mean and standard deviation; ``C`` is the
    inverse L2 strength of scikit-learn's :class:`~sklearn.linear_model.LogisticRegression`.
    """
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    ztr, zte = _x(z_train).numpy(), _x(z_test).numpy()
    ytr, yte = _y(y_train, len(ztr)).numpy(), _y(y_test, len(zte)).numpy()
    mu, sd = ztr.mean(0), ztr.std(0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    clf = LogisticRegression(C=C, max_iter=max_iter)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit((ztr - mu) / sd, ytr)
    return float((clf.predict((zte - mu) / sd) == yte).mean())


def knn_accuracy(z_train, y_train, z_test, y_test, k: int = 20, metric: str = "cosine") -> float:
    """Accuracy of the ``k``-NN majority vote (``metric`` = ``"cosine"`` or ``"euclidean"``)."""
    if metric not in ("cosine", "euclidean"):
        raise ValueError(f"knn_accuracy: metric {metric!r}; allowed values are cosine, euclidean")
    ztr, zte = _x(z_train), _x(z_test)
    ytr, yte = _y(y_train, len(ztr)), _y(y_test, len(zte))
    if not 1 <= k <= len(ztr):
        raise ValueError(f"knn_accuracy: k={k} must be in [1, n_train={len(ztr)}]")
    n_cls = int(max(ytr.max(), yte.max())) + 1
    correct = 0
    for s in range(0, len(zte), 1024):
        q = zte[s:s + 1024]  # (b, d)
        if metric == "cosine":
            d = 1.0 - torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(ztr, dim=1).T
        else:
            d = torch.cdist(q, ztr)  # (b, n)
        nn_idx = d.topk(k, dim=1, largest=False).indices  # (b, k)
        votes = torch.nn.functional.one_hot(ytr[nn_idx], n_cls).sum(1)  # (b, C)
        pred = votes.argmax(1)  # first max = smallest label
        correct += int((pred == yte[s:s + 1024]).sum())
    return correct / len(zte)


def label_silhouette(z, labels, metric: str = "cosine") -> float:
    """Mean silhouette of the class labels with ``1 − cos`` (``"cosine"``) or Euclidean distance."""
    if metric == "cosine":
        return silhouette_cosine(_x(z), labels)
    if metric != "euclidean":
        raise ValueError(f"label_silhouette: metric {metric!r}; allowed values are cosine, euclidean")
    x = _x(z)
    lab = _y(labels, len(x))
    classes = torch.unique(lab)
    if not 2 <= classes.numel() <= len(x) - 1:
        raise ValueError(f"label_silhouette: need 2 <= number of classes <= n-1, got {classes.numel()}")
    onehot = (lab[:, None] == classes[None, :]).to(torch.float64)  # (n, C)
    sums = torch.zeros(len(x), len(classes), dtype=torch.float64)
    for s in range(0, len(x), 2048):
        sums[s:s + 2048] = torch.cdist(x[s:s + 2048], x) @ onehot  # (b, C)
    counts = onehot.sum(0)
    own = onehot.argmax(1)
    rows = torch.arange(len(x))
    own_count = counts[own]
    a = sums[rows, own] / (own_count - 1).clamp_min(1)
    other = sums / counts
    other[rows, own] = math.inf
    b = other.min(1).values
    s = (b - a) / torch.maximum(a, b).clamp_min(1e-300)
    s = torch.where(own_count > 1, s, torch.zeros_like(s))
    return float(s.mean())
