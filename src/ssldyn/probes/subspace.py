"""Subspace probes (``grassmann`` Thm. 1, Thm. 3, Conj. 2, Figs. 2–6).

- :func:`principal_angles` between the column spaces of two matrices;
- :func:`projection_norms` of vectors onto a column space (Conj. 2 / Fig. 5), batched;
- :func:`distance_up_to_sign` ``min(‖a − b‖, ‖a + b‖)``: distance to a direction known up to its sign
  (an eigenvector, Thm. 3 / Fig. 3);
- :func:`pca_components`: principal directions with a sign convention (Fig. 4's PCA input);
- :func:`output_gap` ``‖u^φ − u^I‖`` (Thm. 1 / Fig. 2);
- :func:`linear_svm_accuracy`: cross-validated ``sklearn.svm.LinearSVC`` accuracy (Fig. 4 right).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from ssldyn.checks import choice, nonnegative
from ssldyn.probes._common import ArrayLike, as_tensor

__all__ = [
    "column_space_basis",
    "principal_angles",
    "projection_norms",
    "distance_up_to_sign",
    "pca_components",
    "output_gap",
    "linear_svm_accuracy",
]


def _significant(s: torch.Tensor, tol: float) -> torch.Tensor:
    """The singular values ``s (..., m)`` above ``tol`` times the largest of their matrix: a bool mask ``(..., m)``
    (the numerical rank is its sum)."""
    if not s.shape[-1]:
        return s > 0  # no singular value: an empty mask
    return s > tol * s.amax(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)


def column_space_basis(A: ArrayLike, tol: float = 1e-10) -> torch.Tensor:
    """Orthonormal basis of the column space of ``A (n, k)`` (SVD, rank by relative ``tol``) ``(n, r)``."""
    tol = nonnegative(tol, "tol", where="column_space_basis")
    U, s, _ = torch.linalg.svd(as_tensor(A), full_matrices=False)
    r = int(_significant(s, tol).sum())
    return U[:, :r]


def principal_angles(A: ArrayLike, B: ArrayLike) -> torch.Tensor:
    """Principal angles (radians, ascending) between ``span(A)`` and ``span(B)``, ``A (n, a)``, ``B (n, b)``.

    ``cos θ_k`` are the singular values of ``Q_Aᵀ Q_B`` (Björck & Golub 1973); min(rank) angles.
    Tensors or arrays.
    """
    A, B = as_tensor(A), as_tensor(B)
    if A.dim() != 2 or B.dim() != 2 or A.shape[0] != B.shape[0]:
        raise ValueError(f"principal_angles: need A (n, a) and B (n, b), got {tuple(A.shape)}, {tuple(B.shape)}")
    Qa, Qb = column_space_basis(A), column_space_basis(B)
    c = torch.linalg.svdvals(Qa.mT @ Qb).clamp(-1.0, 1.0)  # descending cosines
    return torch.arccos(c)


def projection_norms(vectors: ArrayLike, Q: ArrayLike, tol: float = 1e-10) -> torch.Tensor:
    """``‖P_{span(Q)} v_i‖ / ‖v_i‖`` for each column ``v_i`` of ``vectors (..., n, k)``; ``Q (..., n, r)`` -> ``(..., k)``.

    ``P = B Bᵀ`` with ``B`` the left singular vectors of ``Q`` whose singular values exceed ``tol`` times
    the largest (:func:`column_space_basis`, per matrix), so zero or dependent columns of ``Q`` do not count.
    Leading axes broadcast (e.g. the standard basis ``vectors = I (n, k)`` against a batch of ``Q``).

    Conj. 2: the eigenvectors of the most negative eigenvalues lie in span(q) in the limit,
    i.e. these norms tend to 1.
    """
    vectors, Q = as_tensor(vectors), as_tensor(Q)
    if vectors.dim() < 2 or Q.dim() < 2 or vectors.shape[-2] != Q.shape[-2]:
        raise ValueError(
            f"projection_norms: need vectors (..., n, k) and Q (..., n, r), got {tuple(vectors.shape)}, {tuple(Q.shape)}"
        )
    U, s, _ = torch.linalg.svd(Q, full_matrices=False)  # (..., n, m), (..., m)
    keep = _significant(s, tol)  # (..., m)
    B = U * keep[..., None, :]  # (..., n, m): the columns beyond each matrix's rank set to 0
    return (B.mT @ vectors).norm(dim=-2) / vectors.norm(dim=-2).clamp_min(1e-30)


def distance_up_to_sign(a: ArrayLike, b: ArrayLike) -> torch.Tensor:
    """``min(‖a − b‖₂, ‖a + b‖₂)`` over the last axis: ``a (..., d)``, ``b`` broadcastable -> ``(...)``.

    The distance of ``a`` to the line direction ``±b`` given up to its sign (an eigenvector: Thm. 3's
    ``q → ±v_1``). For a unit ``b`` it is ``√(‖a‖² + 1 − 2|⟨a, b⟩|)``.
    """
    a, b = as_tensor(a), as_tensor(b)
    if a.dim() == 0 or b.dim() == 0 or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"distance_up_to_sign: a and b must be vectors (..., d) of the same d, got {tuple(a.shape)} "
                         f"and {tuple(b.shape)}")  # fmt: skip
    return torch.minimum((a - b).norm(dim=-1), (a + b).norm(dim=-1))


def pca_components(X: ArrayLike, k: int) -> torch.Tensor:
    """The first ``k`` principal directions ``(k, D)`` of centered rows ``X (n, D)``, with a sign convention.

    The rows ``v_j`` of ``Vᵀ`` in the SVD ``X = U S Vᵀ`` (descending singular values). An SVD fixes each
    direction only up to its sign, and different backends (LAPACK on the CPU, cuSOLVER on a GPU) return
    different signs. Each direction is flipped so that its entry of largest magnitude is positive (the
    first such entry on ties) — scikit-learn's ``PCA.components_`` convention (``svd_flip`` with
    ``u_based_decision=False``) — so every device sees the same data. ``X`` is not centered here.
    """
    X = as_tensor(X)
    if X.dim() != 2 or not 1 <= int(k) <= min(X.shape):
        raise ValueError(f"pca_components: need X (n, D) and 1 <= k <= min(n, D), got {tuple(X.shape)}, k={k}")
    _, _, Vh = torch.linalg.svd(X, full_matrices=False)  # (min(n, D), D)
    comps = Vh[: int(k)]  # (k, D)
    idx = comps.abs().argmax(dim=1, keepdim=True)  # (k, 1)
    sign = torch.sign(comps.gather(1, idx))  # (k, 1)
    return comps * torch.where(sign == 0, torch.ones_like(sign), sign)


def output_gap(u_phi: ArrayLike, u_lin: ArrayLike, reduce: Literal["mean", "max"] = "mean") -> float | torch.Tensor:
    """``‖u^φ(x) − u^I(x)‖₂`` per point, averaged (``"mean"``) or maximised (``"max"``) over the points.

    Shapes ``(..., n, z)`` -> ``(...)``: a Python float for one embedding ``(n, z)``, a tensor for batched input.
    """
    choice(reduce, "reduce", ("mean", "max"), where="output_gap")
    u_phi, u_lin = as_tensor(u_phi), as_tensor(u_lin)
    if u_phi.shape != u_lin.shape or u_phi.dim() < 2:
        raise ValueError(
            f"output_gap: need two embeddings (..., n, z) of one shape, got {tuple(u_phi.shape)}, {tuple(u_lin.shape)}"
        )
    diff = (u_phi - u_lin).norm(dim=-1)  # (..., n)
    out = diff.mean(-1) if reduce == "mean" else diff.amax(-1)
    return float(out) if out.dim() == 0 else out


def linear_svm_accuracy(
    emb: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    *,
    folds: int = 5,
    C: float = 1.0,
    seed: int = 0,
    standardize: bool = True,
) -> float:
    """Mean stratified k-fold accuracy of ``LinearSVC`` on embeddings ``(n, z)`` (Fig. 4 right).

    Features are standardised inside each fold (``StandardScaler`` in a pipeline) when ``standardize``.
    ``seed`` fixes both the folds and liblinear's coordinate-descent shuffling (``random_state``), so the
    accuracy does not depend on numpy's global random state.
    """
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    X = emb.detach().cpu().numpy() if isinstance(emb, torch.Tensor) else np.asarray(emb)
    y = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"linear_svm_accuracy: need emb (n, z) and labels (n,), got {X.shape}, {y.shape}")
    svc = LinearSVC(C=C, max_iter=20000, random_state=seed)
    model = make_pipeline(StandardScaler(), svc) if standardize else svc
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return float(cross_val_score(model, X.astype(np.float64), y, cv=cv).mean())
