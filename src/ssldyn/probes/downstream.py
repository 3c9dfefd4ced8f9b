"""Downstream evaluation of learned representations (``variational`` Fig. 1: "clustered by class").

* :func:`linear_probe_accuracy` — multinomial logistic regression (scikit-learn's objective,
  solved with torch L-BFGS in float64) on standardised training features, accuracy on held-out
  features.
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

__all__ = ["fit_logistic_regression", "linear_probe_accuracy", "knn_accuracy", "label_silhouette"]


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


def fit_logistic_regression(z, y, C: float = 1.0, max_iter: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    """Multinomial logistic regression ``(W (d, K), b (K,))`` minimising, in float64 with L-BFGS,

    ``J(W, b) = Σ_i CE(softmax(z_i W + b), y_i) + ‖W‖²/(2C)``

    (scikit-learn's ``LogisticRegression(C=C)`` objective: L2 on the weights, not the bias).
    """
    x, yy = _x(z), _y(y, len(z))
    K = int(yy.max()) + 1
    W = torch.zeros(x.shape[1], K, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(K, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [W, b],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        history_size=20,
        line_search_fn="strong_wolfe",
    )
    n = len(x)

    def closure():
        opt.zero_grad()
        # scaled by 1/n for conditioning; the minimiser is unchanged
        loss = (torch.nn.functional.cross_entropy(x @ W + b, yy, reduction="sum") + (W**2).sum() / (2 * C)) / n
        loss.backward()
        return loss

    opt.step(closure)
    return W.detach(), b.detach()


def linear_probe_accuracy(z_train, y_train, z_test, y_test, C: float = 1.0, max_iter: int = 200) -> float:
    """Test accuracy of a logistic-regression probe trained on ``(z_train, y_train)``.

    Features are standardised with the training mean and standard deviation; the probe is
    :func:`fit_logistic_regression` (scikit-learn's ``LogisticRegression(C=C)`` objective).
    """
    ztr, zte = _x(z_train), _x(z_test)
    ytr, yte = _y(y_train, len(ztr)), _y(y_test, len(zte))
    mu, sd = ztr.mean(0), ztr.std(0, unbiased=False)
    sd = torch.where(sd > 1e-12, sd, torch.ones_like(sd))
    W, b = fit_logistic_regression((ztr - mu) / sd, ytr, C, max_iter)
    pred = (((zte - mu) / sd) @ W + b).argmax(1)
    return float((pred == yte).double().mean())


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
        q = zte[s : s + 1024]  # (b, d)
        if metric == "cosine":
            d = 1.0 - torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(ztr, dim=1).T
        else:
            d = torch.cdist(q, ztr)  # (b, n)
        nn_idx = d.topk(k, dim=1, largest=False).indices  # (b, k)
        votes = torch.nn.functional.one_hot(ytr[nn_idx], n_cls).sum(1)  # (b, C)
        pred = votes.argmax(1)  # first max = smallest label
        correct += int((pred == yte[s : s + 1024]).sum())
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
        sums[s : s + 2048] = torch.cdist(x[s : s + 2048], x) @ onehot  # (b, C)
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
