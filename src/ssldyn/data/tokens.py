"""Token-generator data of `nonlinearity` Sec. 5, Fig. 3 and App. E.2 (vectorised).

The protocol follows the paper's public reference implementation:

- K positions (receptive fields) and ``n_tokens`` tokens; token a is embedded as
  ``u_a`` (row a of :attr:`TokenGenerator.embedding`, shape ``(n_tokens, d)``): one-hot by
  default (``d = n_tokens``), or random unit-norm non-orthogonal vectors of dimension
  ``embed_dim``.
- Non-uniformity ζ > 0 (App. E.2): tokens with index ``< n_tokens // 2`` get magnitude ``1/ζ``,
  the others ``ζ`` (ζ = 1: all unit norm; ζ < 1 swaps the two halves' roles).
- Each position k has an allowed set R_k^g of P tokens (a random P-subset, independently per
  position). Each of the G generators fixes L random positions, each to one token drawn
  uniformly from that position's allowed set; the other K − L positions are wildcards.
- A sample: a generator chosen uniformly; wildcards filled uniformly over all tokens. Its
  positive view: the same generator and fixed tokens, with ``aug_degree`` of the wildcard
  positions re-drawn (default: all of them). Other samples of the batch are negatives (they
  may share a generator, as in the reference).

Sampling draws whole chunks of steps at once (no Python loop over samples or positions).
The stream of batches is a function of ``seed`` only, so the same stream is reproduced
whether a run is trained alone or as a member of an ensemble.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, overload

import torch

from ssldyn.checks import integer, positive

__all__ = ["TokenSpec", "token_magnitudes", "TokenGenerator", "TokenStream"]


@dataclass(frozen=True)
class TokenSpec:
    """Settings of the token generator (`nonlinearity` Sec. 5 defaults).

    Attributes:
        K: number of positions / receptive fields (10).
        n_tokens: number of tokens d (20).
        P: size of each position's allowed set R_k^g.
        G: number of generators (40).
        L: fixed positions per generator (5).
        zeta: non-uniformity ζ > 0 (App. E.2; the paper uses ζ >= 1); 1 means uniform. Tokens with index
            ``< n_tokens // 2`` get norm ``1/ζ``, the others ``ζ`` (:func:`token_magnitudes`), so
            ζ < 1 is ``1/ζ`` with the two halves' norms swapped.
        embed_dim: embedding dimension; ``None`` = one-hot (orthonormal), else random unit vectors.
        aug_degree: wildcard positions re-drawn for the positive view; ``None`` = all K − L.
    """

    K: int = 10
    n_tokens: int = 20
    P: int = 5
    G: int = 40
    L: int = 5
    zeta: float = 1.0
    embed_dim: int | None = None
    aug_degree: int | None = None

    def __post_init__(self) -> None:
        for name in ("K", "n_tokens", "P", "G", "L"):
            integer(getattr(self, name), name, where="TokenSpec")
        if self.P > self.n_tokens:
            raise ValueError(f"TokenSpec.P={self.P}: must be <= n_tokens={self.n_tokens}")
        if self.L > self.K:
            raise ValueError(f"TokenSpec.L={self.L}: must be <= K={self.K}")
        positive(self.zeta, "zeta", where="TokenSpec")
        if self.embed_dim is not None and self.embed_dim < 1:
            raise ValueError(f"TokenSpec.embed_dim={self.embed_dim}: must be None (one-hot) or >= 1")
        if self.aug_degree is not None and not 0 <= self.aug_degree <= self.K - self.L:
            raise ValueError(f"TokenSpec.aug_degree={self.aug_degree}: must be in [0, K-L={self.K - self.L}]")

    @property
    def dim(self) -> int:
        """Input dimension per receptive field."""
        return self.n_tokens if self.embed_dim is None else self.embed_dim


def token_magnitudes(n_tokens: int, zeta: float) -> torch.Tensor:
    """Per-token norms (App. E.2): ``1/ζ`` for index < n_tokens//2, ``ζ`` for the others (``ζ`` finite, > 0)."""
    zeta = positive(zeta, "zeta", where="token_magnitudes")
    n_tokens = integer(n_tokens, "n_tokens", where="token_magnitudes")
    mags = torch.ones(n_tokens)
    mags[: n_tokens // 2] /= zeta
    mags[n_tokens // 2 :] *= zeta
    return mags  # (n_tokens,)


class TokenGenerator:
    """One seeded token-generator data set and its stream of positive pairs.

    Attributes (all built from ``seed`` at construction):
        allowed: ``(K, P)`` allowed tokens R_k^g per position.
        patterns: ``(G, K)`` generator tokens, ``-1`` at wildcards.
        embedding: ``(n_tokens, d)`` token embeddings u_a (rows), magnitudes from ζ.
        relevant: ``(K, n_tokens)`` bool, token a appears at position k in some generator.

    ``sample(n_steps, batch)`` returns token indices ``(n_steps, 2, batch, K)`` (view axis 1);
    :meth:`embed` maps indices to inputs ``(..., K, d)``.
    """

    def __init__(self, spec: TokenSpec, seed: int) -> None:
        self.spec, self.seed = spec, int(seed)
        g = torch.Generator().manual_seed(self.seed)
        self._gen = g
        K, T, P, G, L = spec.K, spec.n_tokens, spec.P, spec.G, spec.L
        self.allowed = torch.rand(K, T, generator=g).argsort(dim=1)[:, :P]  # (K, P) random P-subsets
        pos = torch.rand(G, K, generator=g).argsort(dim=1)[:, :L]  # (G, L) fixed positions
        choice = torch.randint(0, P, (G, L), generator=g)  # (G, L) which allowed token
        tok = self.allowed[pos, choice]  # (G, L)
        self.patterns = torch.full((G, K), -1, dtype=torch.long)
        self.patterns.scatter_(1, pos, tok)  # (G, K)
        if spec.embed_dim is None:
            base = torch.eye(T)  # (T, T) one-hot
        else:
            base = torch.randn(T, spec.embed_dim, generator=g)
            base = base / base.norm(dim=1, keepdim=True)  # (T, d) random unit vectors
        self.embedding = base * token_magnitudes(T, spec.zeta)[:, None]  # (T, d)
        rel = torch.zeros(K, T, dtype=torch.bool)
        fixed = self.patterns >= 0  # (G, K)
        ks = torch.arange(K).expand(G, K)[fixed]
        rel[ks, self.patterns[fixed]] = True
        self.relevant = rel  # (K, T)

    @overload
    def sample(self, n_steps: int, batch: int, return_generators: Literal[False] = ...) -> torch.Tensor: ...

    @overload
    def sample(
        self, n_steps: int, batch: int, return_generators: Literal[True]
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def sample(
        self, n_steps: int, batch: int, return_generators: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Token indices of ``n_steps`` minibatches of ``batch`` positive pairs -> ``(n_steps, 2, batch, K)``.

        View 0: generator tokens at fixed positions, uniform tokens at wildcards. View 1: the
        same, with ``aug_degree`` wildcard positions (default all) re-drawn uniformly.
        With ``return_generators`` also the generator index of each pair ``(n_steps, batch)``.
        """
        s, g = self.spec, self._gen
        S, B, K, T = n_steps, batch, s.K, s.n_tokens
        gen_id = torch.randint(0, s.G, (S, B), generator=g)  # (S, B)
        pat = self.patterns[gen_id]  # (S, B, K)
        wild = pat < 0  # (S, B, K)
        fill = torch.randint(0, T, (S, 2, B, K), generator=g)  # (S, 2, B, K)
        v0 = torch.where(wild, fill[:, 0], pat)  # (S, B, K)
        n_wild = K - s.L
        deg = n_wild if s.aug_degree is None else s.aug_degree
        if deg >= n_wild:
            redraw = wild
        else:
            # re-draw the `deg` wildcard positions with the smallest random scores
            score = torch.rand(S, B, K, generator=g).masked_fill(~wild, 2.0)  # (S, B, K)
            rank = score.argsort(dim=-1).argsort(dim=-1)  # (S, B, K) rank of each position
            redraw = wild & (rank < deg)
        v1 = torch.where(redraw, fill[:, 1], v0)  # (S, B, K)
        out = torch.stack([v0, v1], dim=1)  # (S, 2, B, K)
        return (out, gen_id) if return_generators else out

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token indices ``(..., K)`` -> inputs ``(..., K, d)`` (x_k = u_{token at k})."""
        return self.embedding[tokens]


class TokenStream:
    """Minibatches of one :class:`TokenGenerator`, drawn ``chunk`` steps at a time.

    The chunk size is fixed, so the sequence of batches depends only on the seed and
    ``batch``: an ensemble member and a lone run with the same seed see the same data.
    """

    CHUNK = 50

    def __init__(self, gen: TokenGenerator, batch: int) -> None:
        self.gen, self.batch = gen, integer(batch, "batch", where="TokenStream")  # batch 0 drew empty batches
        self._buf: torch.Tensor | None = None
        self._i = 0

    def next(self) -> torch.Tensor:
        """The next minibatch's token indices ``(2, batch, K)``."""
        buf = self._buf
        if buf is None or self._i >= buf.shape[0]:
            buf = self._buf = self.gen.sample(self.CHUNK, self.batch)  # (CHUNK, 2, B, K)
            self._i = 0
        out = buf[self._i]
        self._i += 1
        return out
