"""``ssldyn.streams``: seeds derived from (seed, keys) are NumPy's SeedSequence children and never overlap."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from ssldyn.contract import Context
from ssldyn.streams import derive_seed, stream


def test_derive_seed_is_the_seed_sequence_child():
    # independent reference: SeedSequence(seed).spawn(k + 1)[k] has spawn_key (k,)
    for seed in (0, 1, 12345, 2**63 - 1):
        children = np.random.SeedSequence(seed).spawn(4)
        for k, child in enumerate(children):
            assert derive_seed(seed, k) == int(child.generate_state(1, np.uint64)[0]) >> 1
    grandchild = np.random.SeedSequence(7).spawn(3)[2].spawn(6)[5]
    assert derive_seed(7, 2, 5) == int(grandchild.generate_state(1, np.uint64)[0]) >> 1


def test_seeds_and_offsets_do_not_share_streams():
    # the additive scheme this replaces: seed s at offset k was seed s + k at offset 0
    first = {}
    for seed in range(6):
        for offset in range(6):
            x = torch.randn(8, generator=Context(seed=seed).generator(offset))
            first[(seed, offset)] = tuple(x.tolist())
    assert len(set(first.values())) == len(first)
    assert first[(0, 1)] != first[(1, 0)]
    # seeds = [s] pinned per call: the same stream whichever ctx.seed asks
    a = torch.randn(4, generator=Context(seed=3).generator(2, seed=5))
    b = torch.randn(4, generator=stream(5, 2))
    assert torch.equal(a, b)


def test_derived_seeds_are_63_bit_and_key_order_matters():
    vals = [derive_seed(s, k) for s in range(50) for k in range(20)]
    assert all(0 <= v < 2**63 for v in vals)
    assert len(set(vals)) == len(vals)
    assert derive_seed(1, 2, 3) != derive_seed(1, 3, 2)
    assert derive_seed(1) != derive_seed(1, 0)


@pytest.mark.parametrize(
    ("args", "word"),
    [
        ((-1,), "seed"),
        ((2**63,), "seed"),
        ((1.5,), "seed"),
        ((True,), "seed"),
        ((0, -2), "keys[0]"),
        ((0, 1, 2**32), "keys[1]"),
        ((0, "3"), "keys[0]"),
    ],  # fmt: skip
)
def test_bad_seed_or_key_is_one_clear_error(args, word):
    with pytest.raises(ValueError, match="derive_seed: " + re.escape(word) + " must be an integer in"):
        derive_seed(*args)
