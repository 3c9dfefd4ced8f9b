"""Online monitors of a representation: probes ``z -> float`` (or ``(E,)`` per member) for training loops.

A probe of the dynamics contract (docs/architecture.md, "Dynamics") receives the flow's observable — for
:func:`ssldyn.dynamics.train_ssl`, the embeddings ``z`` of a fixed probe set, ``(n, d)`` for a
plain model or ``(E, n, d)`` for an ensemble — and returns a float, or one value per member.

* :class:`LinearProbe` — accuracy of a logistic-regression probe
  (:func:`ssldyn.probes.downstream.linear_probe_accuracy`: scikit-learn ``LogisticRegression`` on
  standardised features) trained on one part of the probe set and tested on the other (the linear
  evaluation protocol of SimCLR, Chen et al. 2020).
* :class:`KNNProbe` — accuracy of a ``k``-nearest-neighbour classifier
  (:func:`ssldyn.probes.downstream.knn_accuracy`: scikit-learn ``KNeighborsClassifier``, cosine
  distance by default; Wu et al. 2018) on the same split.

Both use one fixed stratified split of the probe set (``test_size``, ``seed``), so values at
different steps are comparable, and score with the library's one implementation of each measure.
Inputs may be tensors or arrays; labels of any sortable type (they are coded ``0..K−1`` in sorted order).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from ssldyn.checks import choice, real
from ssldyn.probes.downstream import Metric, knn_accuracy, linear_probe_accuracy

__all__ = ["LinearProbe", "KNNProbe"]


def _numpy(z: Any) -> np.ndarray:
    if isinstance(z, Tensor):
        z = z.detach().cpu()
        z = z.to(torch.float64) if z.is_floating_point() else z
        return z.numpy()
    return np.asarray(z)


class _SplitProbe:
    """Shared part of :class:`LinearProbe` and :class:`KNNProbe`: labels, a fixed stratified split."""

    name = "probe"

    def __init__(self, labels: Any, *, test_size: float, seed: int) -> None:
        y = _numpy(labels)
        if y.ndim != 1 or len(y) < 4:
            raise ValueError(f"{self.name}: labels must be a vector (n,) with n >= 4, got shape {tuple(y.shape)}")
        if not 0.0 < float(test_size) < 1.0:
            raise ValueError(f"{self.name}: test_size must be in (0, 1), got {test_size!r}")
        self.labels, self.test_size, self.seed = y, float(test_size), int(seed)
        _, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
        self.codes = codes.reshape(-1)  # (n,) labels as 0..K-1, in sorted order (ties: the smallest label)
        stratify = y if counts.min() >= 2 else None
        idx = np.arange(len(y))
        from sklearn.model_selection import train_test_split  # scikit-learn loads on first use

        self.train_idx, self.test_idx = train_test_split(
            idx, test_size=self.test_size, random_state=self.seed, stratify=stratify
        )

    def __call__(self, z: Any) -> float | Tensor:
        arr = _numpy(z)
        if arr.ndim not in (2, 3) or arr.shape[-2] != len(self.labels):
            raise ValueError(
                f"{self.name}: embeddings must be (n, d) or (E, n, d) with n = {len(self.labels)} "
                f"(one row per label), got shape {tuple(arr.shape)}"
            )
        if not np.isfinite(arr).all():
            raise ValueError(f"{self.name}: embeddings contain NaN or inf")
        if arr.ndim == 3:
            return torch.tensor([self._score(a) for a in arr], dtype=torch.float64)
        return self._score(arr)

    def _score(self, z: np.ndarray) -> float:
        tr, te = self.train_idx, self.test_idx
        return self._accuracy(z[tr], self.codes[tr], z[te], self.codes[te])

    def _accuracy(self, z_train, y_train, z_test, y_test) -> float:  # pragma: no cover - overridden
        raise NotImplementedError


class LinearProbe(_SplitProbe):
    """Linear-probe accuracy of embeddings: :func:`~ssldyn.probes.downstream.linear_probe_accuracy`
    (features standardised with the training part's mean and sd, scikit-learn ``LogisticRegression(C)``).

    Fits on ``1 − test_size`` of the probe set and reports the accuracy on the rest (one fixed
    stratified split drawn with ``seed``).

    Args:
        labels: ``(n,)`` class labels of the probe set (tensor or array).
        test_size: fraction of the probe set held out for the accuracy.
        seed: seed of the split.
        C: inverse L2 strength of the logistic regression (scikit-learn's ``C``).
        max_iter: iterations of the solver (lbfgs).

    Example:
        >>> import torch
        >>> labels = torch.arange(40) % 2
        >>> z = torch.randn(40, 3, generator=torch.Generator().manual_seed(0)) + 4.0 * labels[:, None]
        >>> LinearProbe(labels)(z)
        1.0
    """

    name = "LinearProbe"

    def __init__(self, labels: Any, *, test_size: float = 0.5, seed: int = 0, C: float = 1.0, max_iter: int = 1000):
        C = real(C, "C", where="LinearProbe")
        if not C > 0:  # inf is scikit-learn's unregularised fit, as in linear_probe_accuracy
            raise ValueError(f"LinearProbe: C must be > 0 (inf: no regularisation), got {C!r}")
        super().__init__(labels, test_size=test_size, seed=seed)
        self.C, self.max_iter = float(C), int(max_iter)

    def _accuracy(self, z_train, y_train, z_test, y_test) -> float:
        return linear_probe_accuracy(z_train, y_train, z_test, y_test, C=self.C, max_iter=self.max_iter)


class KNNProbe(_SplitProbe):
    """k-NN accuracy of embeddings: :func:`~ssldyn.probes.downstream.knn_accuracy` (scikit-learn
    ``KNeighborsClassifier(k, metric)``, majority vote).

    Args:
        labels: ``(n,)`` class labels of the probe set.
        k: neighbours (at most the size of the training part).
        metric: ``"cosine"`` (default, as in the SSL k-NN monitor of Wu et al. 2018) or ``"euclidean"``.
        test_size, seed: the fixed stratified split (as :class:`LinearProbe`).

    Ties between classes go to the smallest label (scikit-learn's rule).

    Example:
        >>> import torch
        >>> labels = torch.arange(40) % 2
        >>> z = torch.randn(40, 3, generator=torch.Generator().manual_seed(0)) + 4.0 * labels[:, None]
        >>> KNNProbe(labels, k=5, metric="euclidean")(z)
        1.0
    """

    name = "KNNProbe"

    def __init__(self, labels: Any, *, k: int = 20, metric: Metric = "cosine", test_size: float = 0.5, seed: int = 0):
        choice(metric, "metric", ("cosine", "euclidean"), where="KNNProbe")
        super().__init__(labels, test_size=test_size, seed=seed)
        if not 1 <= int(k) <= len(self.train_idx):
            raise ValueError(f"KNNProbe: k={k} must be in [1, {len(self.train_idx)}] (the training part of the split)")
        self.k = int(k)
        self.metric: Metric = metric

    def _accuracy(self, z_train, y_train, z_test, y_test) -> float:
        return knn_accuracy(z_train, y_train, z_test, y_test, k=self.k, metric=self.metric)
