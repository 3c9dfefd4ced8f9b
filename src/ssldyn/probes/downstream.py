"""Downstream evaluation of learned representations (``variational`` Fig. 1: "clustered by class").

Thin, validated wrappers of scikit-learn (one implementation of each measure in the library):

* :func:`linear_probe_accuracy` — multinomial logistic regression (``LogisticRegression(C=C)``,
  L-BFGS) on standardised training features, accuracy on held-out features.
* :func:`knn_accuracy` — k-nearest-neighbour majority vote (``KNeighborsClassifier``, cosine or
  Euclidean distance, brute force) of held-out points among the training points; ties go to the
  smallest label.
* :func:`label_silhouette` — the silhouette ``mean_i (b_i − a_i)/max(a_i, b_i)`` of the class
  labels (Rousseeuw 1987; ``silhouette_score``), with cosine (``1 − cos``) or Euclidean distance;
  used to compare the embedding with raw pixels.

Inputs are ``(n, d)`` tensors or arrays and integer label vectors ``(n,)`` (any integer values: the probes
compare labels; :func:`fit_logistic_regression`, which returns one column per class index, needs labels
``>= 0``); results are Python floats.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import torch

from ssldyn.checks import choice
from ssldyn.probes._common import ArrayLike

__all__ = ["fit_logistic_regression", "linear_probe_accuracy", "knn_accuracy", "label_silhouette"]

Metric = Literal["cosine", "euclidean"]


def _x(z: ArrayLike, where: str, name: str = "z") -> np.ndarray:
    """``z`` as an ``(n, d)`` float64 array; a wrong shape or a NaN/inf is one error naming ``where`` and ``name``."""
    x = np.asarray(z.detach().cpu().numpy() if isinstance(z, torch.Tensor) else z, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{where}: {name} must have shape (n, d), got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{where}: {name} contains NaN or inf")
    return x


def _y(y: ArrayLike, n: int, where: str, name: str = "y") -> np.ndarray:
    """``y`` as ``(n,)`` int64 class labels; otherwise one error naming ``where`` and ``name``."""
    raw = np.asarray(y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else y)
    if raw.shape != (n,):
        raise ValueError(f"{where}: {name} must have shape ({n},) (one label per row of the features), got {raw.shape}")
    if raw.dtype.kind not in "iub":
        as_float = raw.astype(np.float64) if raw.dtype.kind == "f" else None
        if as_float is None or not np.isfinite(as_float).all() or (as_float != np.round(as_float)).any():
            raise ValueError(f"{where}: {name} must be integers (class labels), got dtype {raw.dtype} with non-integer "
                             "values")  # fmt: skip
    return raw.astype(np.int64)


def _train_test(
    where: str, z_train: ArrayLike, y_train: ArrayLike, z_test: ArrayLike, y_test: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The checked ``(z_train, y_train, z_test, y_test)`` of a probe (:func:`_x`, :func:`_y`, each named)."""
    ztr, zte = _x(z_train, where, "z_train"), _x(z_test, where, "z_test")
    return ztr, _y(y_train, len(ztr), where, "y_train"), zte, _y(y_test, len(zte), where, "y_test")


def fit_logistic_regression(
    z: ArrayLike, y: ArrayLike, *, C: float = 1.0, max_iter: int = 200
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multinomial logistic regression ``(W (d, K), b (K,))`` (float64) minimising

    ``J(W, b) = Σ_i CE(softmax(z_i W + b), y_i) + ‖W‖²/(2C)``

    — scikit-learn's ``LogisticRegression(C=C)`` (L-BFGS, L2 on the weights, not the bias), which
    fits it (tolerance 1e-8 on the gradient). ``y`` holds class indices ``>= 0``; ``K = max(y) + 1``: a class
    absent from ``y`` gets the logit ``−inf`` (never predicted). Two classes: scikit-learn fits one logit difference
    ``w`` with penalty ``‖w‖²/(2C')``; ``W = (−w/2, w/2)`` has ``‖W‖² = ‖w‖²/2``, so ``C' = 2C`` minimises ``J``.
    An unconverged fit after ``max_iter`` iterations is returned as it is.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    x = _x(z, "fit_logistic_regression")
    yy = _y(y, x.shape[0], "fit_logistic_regression")
    classes = np.unique(yy)
    if len(classes) < 2:
        raise ValueError(f"fit_logistic_regression: need at least 2 classes in y, got {classes.tolist()}")
    if classes[0] < 0:
        raise ValueError(f"fit_logistic_regression: labels must be class indices >= 0 (one column of W each), got "
                         f"{classes[0]}")  # fmt: skip
    K = int(yy.max()) + 1
    binary = len(classes) == 2  # scikit-learn's binary penalty is on the logit difference: C' = 2C (docstring)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LogisticRegression(C=2 * C if binary else C, max_iter=max_iter, tol=1e-8).fit(x, yy)
    W = torch.zeros(x.shape[1], K, dtype=torch.float64)
    b = torch.full((K,), -torch.inf, dtype=torch.float64)
    coef, icpt = np.asarray(model.coef_), np.asarray(model.intercept_)
    if binary:  # scikit-learn stores one logit difference for two classes
        coef, icpt = np.stack([-coef[0] / 2, coef[0] / 2]), np.array([-icpt[0] / 2, icpt[0] / 2])
    W[:, classes] = torch.from_numpy(coef.T.copy())
    b[classes] = torch.from_numpy(icpt.copy())
    return W, b


def linear_probe_accuracy(
    z_train: ArrayLike, y_train: ArrayLike, z_test: ArrayLike, y_test: ArrayLike, *, C: float = 1.0, max_iter: int = 200
) -> float:
    """Test accuracy of a logistic-regression probe trained on ``(z_train, y_train)``.

    Features are standardised with the training mean and standard deviation; the probe is
    :func:`fit_logistic_regression` (scikit-learn's ``LogisticRegression(C=C)``) on the labels coded as class
    indices (any integer labels, e.g. ``{−1, +1}``).
    """
    ztr, ytr, zte, yte = _train_test("linear_probe_accuracy", z_train, y_train, z_test, y_test)
    _, codes = np.unique(np.concatenate([ytr, yte]), return_inverse=True)  # labels -> 0..K−1
    ytr, yte = codes[: len(ytr)], codes[len(ytr) :]
    mu, sd = ztr.mean(0), ztr.std(0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    W, b = fit_logistic_regression((ztr - mu) / sd, ytr, C=C, max_iter=max_iter)
    pred = (torch.from_numpy((zte - mu) / sd) @ W + b).argmax(1).numpy()
    return float((pred == yte).mean())


def knn_accuracy(
    z_train: ArrayLike,
    y_train: ArrayLike,
    z_test: ArrayLike,
    y_test: ArrayLike,
    *,
    k: int = 20,
    metric: Metric = "cosine",
) -> float:
    """Accuracy of the ``k``-NN majority vote (``metric`` = ``"cosine"`` or ``"euclidean"``)."""
    from sklearn.neighbors import KNeighborsClassifier

    choice(metric, "metric", ("cosine", "euclidean"), where="knn_accuracy")
    ztr, ytr, zte, yte = _train_test("knn_accuracy", z_train, y_train, z_test, y_test)
    if not 1 <= k <= len(ztr):
        raise ValueError(f"knn_accuracy: k={k} must be in [1, n_train={len(ztr)}]")
    knn = KNeighborsClassifier(n_neighbors=k, metric=metric, algorithm="brute").fit(ztr, ytr)
    return float((knn.predict(zte) == yte).mean())


def label_silhouette(z: ArrayLike, labels: ArrayLike, metric: Metric = "cosine") -> float:
    """Mean silhouette of the class labels with ``1 − cos`` (``"cosine"``) or Euclidean distance."""
    from sklearn.metrics import silhouette_score

    choice(metric, "metric", ("cosine", "euclidean"), where="label_silhouette")
    x = _x(z, "label_silhouette")
    lab = _y(labels, len(x), "label_silhouette", "labels")
    n_classes = len(np.unique(lab))
    if not 2 <= n_classes <= len(x) - 1:
        raise ValueError(f"label_silhouette: need 2 <= number of classes <= n-1, got {n_classes}")
    return float(silhouette_score(x, lab, metric=metric))
