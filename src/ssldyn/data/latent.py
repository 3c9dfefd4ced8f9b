"""Latent-variable data models of ``nonlinearity`` (Sec. 3.1, Assumption 2, App. E.1).

- :func:`latent_categorical`: ``x = u_y`` with ``y`` categorical over ``M`` values (Sec. 3.1).
- :func:`latent_summation`: ``x = U y`` with independent standardized Bernoulli ``y_m``
  (``P[y_m = y_m^+] = q_m``), Sec. 3.1.
- :func:`random_orthonormal_basis`, :func:`approx_orthogonal_basis`: ``U`` with orthonormal or
  unit-norm columns whose Gram matrix has a set ``‖UᵀU − I‖₂`` (Sec. 3.3, Fig. 1).
- :func:`circle_points`, :data:`FIG8_ANGLES`: points on the unit circle (App. E.1, Fig. 8).
- :class:`TwoRFModel`: the conditional-independence model of Assumption 2 (eq. 13):
  a global latent ``z`` with ``C`` values, and ``K`` disjoint receptive fields whose inputs
  are independent given ``z``. Each RF draws one of ``P`` patterns (rows of an orthonormal
  basis) from a ``z``-dependent categorical distribution. Its exact population (all atoms
  with their probabilities) is available through :meth:`TwoRFModel.support`.

All samplers take a ``torch.Generator`` and return float64 tensors unless ``dtype`` is given.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ssldyn.checks import integer, nonnegative, probabilities
from ssldyn.models.stiefel import random_stiefel

__all__ = [
    "FIG8_ANGLES",
    "standardized_bernoulli_values",
    "latent_categorical",
    "latent_summation",
    "latent_summation_support",
    "random_orthonormal_basis",
    "approx_orthogonal_basis",
    "circle_points",
    "TwoRFModel",
]

#: probabilities ``q_m`` of the latent patterns: a tensor, a sequence or one number (one per pattern, or shared)
Probabilities = Tensor | Sequence[float] | float

#: The nine data angles of ``nonlinearity`` App. E.1 (Fig. 8).
FIG8_ANGLES = (
    -4 * math.pi / 5,
    -math.pi / 2,
    -2 * math.pi / 5,
    -math.pi / 6,
    0.0,
    math.pi / 5,
    2 * math.pi / 5,
    3 * math.pi / 5,
    4 * math.pi / 5,
)


def _gen(generator: torch.Generator | None) -> torch.Generator:
    if generator is None:
        generator = torch.Generator()
        generator.manual_seed(0)
    return generator


def _probs(name: str, p: Probabilities, m: int | None = None) -> Tensor:
    p = torch.as_tensor(p, dtype=torch.float64).reshape(-1)
    if m is not None and p.numel() == 1:
        p = p.expand(m).clone()
    if m is not None and p.numel() != m:
        raise ValueError(f"{name}: expected {m} values, got {p.numel()}")
    if not torch.isfinite(p).all():
        raise ValueError(f"{name}: values must be finite")
    return p


def standardized_bernoulli_values(q: Probabilities) -> tuple[Tensor, Tensor]:
    """``(y⁺, y⁻) = (√((1−q)/q), −√(q/(1−q)))``: zero mean, unit variance (Sec. 3.1)."""
    q = _probs("q", q)
    if ((q <= 0) | (q >= 1)).any():
        raise ValueError(f"q: probabilities must lie in (0, 1), got {q.tolist()}")
    return torch.sqrt((1 - q) / q), -torch.sqrt(q / (1 - q))


def latent_categorical(
    n: int, U: Tensor, probs: Probabilities | None = None, *, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """Latent categorical model (Sec. 3.1): ``y ~ Cat(probs)``, ``x = u_y``.

    Args:
        n: number of samples.
        U: ``(d, M)`` patterns as columns.
        probs: ``(M,)`` probabilities (default uniform).

    Returns:
        ``x (n, d)``, ``y (n,)`` (long).
    """
    _check_n(n)
    d, m = U.shape
    p = torch.full((m,), 1.0 / m, dtype=torch.float64) if probs is None else _probs("probs", probs, m)
    probabilities(p, "probs", where="latent_categorical", atol=1e-9)
    y = torch.multinomial(p, n, replacement=True, generator=_gen(generator))  # (n,)
    return U.T[y].clone(), y


def latent_summation(
    n: int, U: Tensor, q: Probabilities, *, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """Latent summation model (Sec. 3.1): ``x = U y`` with independent standardized Bernoulli ``y_m``.

    ``y_m = y_m⁺ = √((1−q_m)/q_m)`` with probability ``q_m``, else ``y_m⁻ = −√(q_m/(1−q_m))``.

    Args:
        n: number of samples.
        U: ``(d, M)``.
        q: ``(M,)`` or a scalar, each in (0, 1).

    Returns:
        ``x (n, d)``, ``y (n, M)``.
    """
    _check_n(n)
    d, m = U.shape
    q = _probs("q", q, m)
    yp, ym = standardized_bernoulli_values(q)
    on = torch.rand(n, m, generator=_gen(generator), dtype=torch.float64) < q  # (n, M)
    y = torch.where(on, yp, ym).to(U.dtype)  # (n, M)
    return y @ U.T, y


def latent_summation_support(U: Tensor, q: Probabilities) -> tuple[Tensor, Tensor]:
    """Exact population of the summation model: all ``2^M`` atoms ``x`` and their probabilities.

    Returns ``x (2^M, d)`` and ``p (2^M,)``; use with ``weights=`` for infinite-batch ``A(w)``.
    """
    d, m = U.shape
    if m > 16:
        raise ValueError(f"latent_summation_support: M={m} gives 2^M atoms; allowed M <= 16")
    q = _probs("q", q, m)
    yp, ym = standardized_bernoulli_values(q)
    bits = torch.tensor(list(itertools.product([0, 1], repeat=m)), dtype=torch.bool)  # (2^M, M)
    y = torch.where(bits, yp, ym)  # (2^M, M)
    p = torch.where(bits, q, 1 - q).prod(-1)  # (2^M,)
    return (y.to(U.dtype) @ U.T), p.to(U.dtype)


def random_orthonormal_basis(
    d: int, m: int, *, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> Tensor:
    """``(d, m)`` random matrix with orthonormal columns, ``m <= d``: Haar-uniform, the Q of ``G = QR`` for a
    Gaussian ``G`` with the sign fix ``diag(R) > 0`` (:func:`ssldyn.models.stiefel.random_stiefel`); drawn in
    float64 from ``generator`` (None: a generator seeded with 0)."""
    if m > d:
        raise ValueError(f"random_orthonormal_basis: m={m} columns cannot be orthonormal in dimension d={d}")
    return random_stiefel(d, m, generator=_gen(generator), dtype=dtype)  # (d, m)


def approx_orthogonal_basis(
    d: int, m: int, eps: float, *, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> Tensor:
    """Unit-norm columns ``U (d, m)`` with ``‖UᵀU − I‖₂ = eps`` exactly (0 <= eps < 1).

    ``UᵀU = G = I + eps·S`` with ``S`` a random symmetric zero-diagonal matrix of spectral
    norm 1; ``U = Q G^{1/2}`` with ``Q`` orthonormal. Used for Thm. 3 / Fig. 1 ("``U`` only
    approximately orthogonal").
    """
    if not 0 <= eps < 1:
        raise ValueError(f"approx_orthogonal_basis: eps={eps} must be in [0, 1)")
    gen = _gen(generator)
    qmat = random_orthonormal_basis(d, m, generator=gen)
    if eps == 0 or m == 1:
        return qmat.to(dtype)
    s = torch.randn(m, m, generator=gen, dtype=torch.float64)
    s = s + s.T
    s.fill_diagonal_(0.0)
    s = s / torch.linalg.matrix_norm(s, ord=2)
    lam, vec = torch.linalg.eigh(torch.eye(m, dtype=torch.float64) + eps * s)
    root = vec @ torch.diag(lam.sqrt()) @ vec.T  # G^{1/2}
    return (qmat @ root).to(dtype)


def circle_points(angles: Tensor | Sequence[float] | float, *, dtype: torch.dtype = torch.float64) -> Tensor:
    """Points ``(cos θ, sin θ)`` on the unit circle, ``(n, 2)`` (App. E.1)."""
    t = torch.as_tensor(angles, dtype=dtype).reshape(-1)
    return torch.stack([torch.cos(t), torch.sin(t)], dim=-1)


@dataclass
class TwoRFModel:
    """Conditional-independence model of Assumption 2 (eq. 13) with discrete patterns.

    ``z ~ Cat(z_probs)`` (``C`` values); given ``z = c``, each RF ``k`` independently takes
    pattern ``a ~ Cat(pattern_probs[k, c])`` and ``x_k = patterns[k, a] + noise·ε``.

    Attributes:
        patterns: ``(K, P, d)`` pattern vectors of each RF.
        pattern_probs: ``(K, C, P)`` ``P[x_k = patterns[k, a] | z = c]``.
        z_probs: ``(C,)``.
        noise: standard deviation of isotropic Gaussian noise added to each ``x_k``.
    """

    patterns: Tensor
    pattern_probs: Tensor
    z_probs: Tensor
    noise: float = 0.0

    def __post_init__(self) -> None:
        k, p, _ = self.patterns.shape
        c = self.z_probs.numel()
        if tuple(self.pattern_probs.shape) != (k, c, p):
            raise ValueError(
                f"pattern_probs: expected shape (K, C, P) = {(k, c, p)}, got {tuple(self.pattern_probs.shape)}"
            )
        probabilities(self.pattern_probs, "pattern_probs (each (k, c) row)", where="TwoRFModel", atol=1e-5)
        probabilities(self.z_probs.reshape(-1), "z_probs", where="TwoRFModel", atol=1e-9)
        nonnegative(self.noise, "noise", where="TwoRFModel")  # NaN / inf noise used to pass (NaN data)

    @property
    def K(self) -> int:
        return self.patterns.shape[0]

    @property
    def d(self) -> int:
        return self.patterns.shape[2]

    @classmethod
    def random(
        cls,
        K: int = 3,
        d: int = 4,
        C: int = 2,
        P: int = 3,
        *,
        concentration: float = 1.0,
        noise: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> TwoRFModel:
        """Patterns = the first ``P`` vectors of a random orthonormal basis of each RF; the
        conditional probabilities ``P[a | z]`` are Dirichlet(``concentration``) draws."""
        gen = _gen(generator)
        if P > d:
            raise ValueError(f"TwoRFModel.random: P={P} patterns must be <= d={d}")
        pats = torch.stack([random_orthonormal_basis(d, P, generator=gen).T for _ in range(K)])  # (K, P, d)
        rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        probs = torch.as_tensor(rng.dirichlet(np.full(P, concentration), size=(K, C)))  # (K, C, P)
        zp = torch.full((C,), 1.0 / C, dtype=torch.float64)
        return cls(pats, probs, zp, noise)

    def sample(self, n: int, *, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """``x (n, K, d)`` and ``z (n,)``."""
        _check_n(n)
        gen = _gen(generator)
        z = torch.multinomial(self.z_probs, n, replacement=True, generator=gen)  # (n,)
        xs = []
        for k in range(self.K):
            a = torch.multinomial(self.pattern_probs[k, z], 1, generator=gen).squeeze(-1)  # (n,)
            xs.append(self.patterns[k, a])  # (n, d)
        x = torch.stack(xs, dim=1)  # (n, K, d)
        if self.noise > 0:
            x = x + self.noise * torch.randn(x.shape, generator=gen, dtype=x.dtype)
        return x, z

    def conditional_support(self) -> tuple[Tensor, Tensor, Tensor]:
        """Per-RF populations given ``z``: rows ``(c, a)`` with ``x[row, k] = patterns[k, a]``,
        ``z[row] = c`` and per-RF weights ``P[z = c]·P[a | z = c, k]``: ``x (C·P, K, d)``, ``z (C·P,)``,
        ``weights (C·P, K)``. Enough for every quantity that only involves one RF at a time
        given ``z`` (e.g. Thm. 5); cross-RF moments need :meth:`support`."""
        if self.noise > 0:
            raise ValueError("TwoRFModel.conditional_support: only for noise = 0")
        K, P, _ = self.patterns.shape
        C = self.z_probs.numel()
        x = self.patterns.permute(1, 0, 2).repeat(C, 1, 1)  # (C*P, K, d)
        z = torch.arange(C).repeat_interleave(P)
        w = (self.z_probs[:, None, None] * self.pattern_probs.permute(1, 2, 0)).reshape(C * P, K)  # (C*P, K)
        return x, z, w.to(self.patterns.dtype)

    def support(self) -> tuple[Tensor, Tensor, Tensor]:
        """Exact population (noise-free): atoms ``x (A, K, d)``, ``z (A,)`` and probabilities ``(A,)``."""
        if self.noise > 0:
            raise ValueError("TwoRFModel.support: only for noise = 0 (the population is then discrete)")
        K, P, _ = self.patterns.shape
        xs, zs, ps = [], [], []
        for c in range(self.z_probs.numel()):
            for combo in itertools.product(range(P), repeat=K):
                prob = float(self.z_probs[c])
                for k, a in enumerate(combo):
                    prob *= float(self.pattern_probs[k, c, a])
                if prob == 0:
                    continue
                xs.append(torch.stack([self.patterns[k, a] for k, a in enumerate(combo)]))
                zs.append(c)
                ps.append(prob)
        return torch.stack(xs), torch.tensor(zs), torch.tensor(ps, dtype=self.patterns.dtype)


def _check_n(n: int) -> None:
    integer(n, "n")
