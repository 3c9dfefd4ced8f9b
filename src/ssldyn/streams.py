"""Independent random streams from one run seed: ``derive_seed(seed, *keys)``.

At the package root (like :mod:`ssldyn.checks` and :mod:`ssldyn.files`): it imports only
:mod:`ssldyn.checks`, so the data, the experiments' context and the experiments share one rule.

Why not ``seed + offset``: additive offsets make the seeds of a run overlap — seed ``s``'s stream at
offset ``k`` is seed ``s + k``'s at offset 0, so the "independent" replicates of a claim share draws
(one seed's data noise is the next seed's initialisation). ``derive_seed`` hashes the pair with
NumPy's :class:`~numpy.random.SeedSequence` as its spawned children do (``entropy=seed``,
``spawn_key=keys``): distinct ``(seed, keys)`` give unrelated streams, whatever the numbers.

    >>> derive_seed(0, 1) == derive_seed(1, 0)
    False
    >>> derive_seed(3, 7) == derive_seed(3, 7)
    True
"""

from __future__ import annotations

import numpy as np
import torch

from ssldyn.checks import integer

__all__ = ["derive_seed", "stream"]

_SEED_MAX = 2**63
_KEY_MAX = 2**32


def derive_seed(seed: int, *keys: int) -> int:
    """The seed of stream ``keys`` of run seed ``seed``: an integer in ``[0, 2^63)``.

    ``SeedSequence(seed, spawn_key=keys).generate_state(1, uint64) >> 1``: the run seed is the
    entropy (padded to 128 bits, so seeds up to 2^63 never meet a key), the keys name the stream
    (e.g. ``(offset,)``, or ``(tag, width, draw)``). The result is the same on every platform
    and NumPy version with this SeedSequence algorithm.

    Args:
        seed: the run seed, an integer in ``[0, 2^63)``.
        keys: integers in ``[0, 2^32)`` naming the stream; none is the seed's own derived stream.

    Raises:
        ValueError: a seed or key that is not an integer in its range.
    """
    s = integer(seed, "seed", where="derive_seed", minimum=0, maximum=_SEED_MAX)
    ks = tuple(integer(k, f"keys[{i}]", where="derive_seed", minimum=0, maximum=_KEY_MAX) for i, k in enumerate(keys))
    state = np.random.SeedSequence(s, spawn_key=ks).generate_state(1, np.uint64)  # (1,) uint64
    return int(state[0]) >> 1


def stream(seed: int, *keys: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`derive_seed(seed, *keys) <derive_seed>`."""
    g = torch.Generator()
    g.manual_seed(derive_seed(seed, *keys))
    return g
