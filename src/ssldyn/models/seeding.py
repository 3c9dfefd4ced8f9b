"""The one seeding rule of every ensemble model (docs/architecture.md, "Models and ensembles").

Every model with an ensemble axis ``E`` takes keyword-only ``seeds=``, ``generator=``, ``dtype=``
and ``device=`` and draws its initial parameters **member by member** (member 0's whole
parameter set, then member 1's, …), on the CPU, before moving to ``device``:

* ``seeds=[s_0, …, s_{E−1}]`` — member ``e`` is drawn from ``torch.Generator().manual_seed(s_e)``,
  so it equals exactly the one-member model (``ensemble=1``) built with ``seeds=[s_e]``;
* ``generator=g`` — all members are drawn from ``g`` one after another, so member ``e`` equals the
  one-member model built from ``g`` in the state it has after members ``0..e−1``;
* neither — the same with torch's default generator.

Members therefore always differ, unless asked for: the same seed given twice.

A model that draws its members itself has ``init_member(e, g)`` (member ``e``'s whole parameter
set from ``g``: the :class:`EnsembleMember` protocol) and calls :func:`draw_members`, the rule
written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from ssldyn.checks import integer

__all__ = ["EnsembleMember", "member_generators", "draw_members"]


class EnsembleMember(Protocol):
    """A module whose ensemble member ``e`` can be (re)drawn from a generator (the seeding rule)."""

    def init_member(self, e: int, g: torch.Generator | None, /) -> None: ...


def member_generators(
    ensemble: int, *, seeds: Sequence[int] | None = None, generator: torch.Generator | None = None
) -> list[torch.Generator | None]:
    """The generator each member is drawn from, in drawing order (see the module docstring).

    Raises:
        ValueError: both ``seeds`` and ``generator``; ``seeds`` not one int per member.
    """
    ensemble = integer(ensemble, "ensemble")
    if seeds is None:
        return [generator] * ensemble
    if generator is not None:
        raise ValueError("pass either seeds= (one per member) or generator= (members drawn in sequence), not both")
    if isinstance(seeds, (int, str, bytes)) or not isinstance(seeds, Sequence):
        raise ValueError(
            f"seeds: expected one int per member (a list of {ensemble}), got {seeds!r}; to draw every member "
            "from one seed pass generator=torch.Generator().manual_seed(seed)"
        )
    if len(seeds) != ensemble:
        raise ValueError(f"seeds: need one seed per member ({ensemble}), got {len(seeds)}")
    return [torch.Generator().manual_seed(int(s)) for s in seeds]


def draw_members(
    module: EnsembleMember,
    ensemble: int,
    *,
    seeds: Sequence[int] | None = None,
    generator: torch.Generator | None = None,
) -> None:
    """Draw every member of ``module``: ``module.init_member(e, g_e)`` for ``e = 0 .. ensemble − 1`` in
    order, ``g_e`` from :func:`member_generators` (member by member, each one's whole parameter set).

    Raises:
        ValueError: as :func:`member_generators`, before anything is drawn.
    """
    for e, g in enumerate(member_generators(ensemble, seeds=seeds, generator=generator)):
        module.init_member(e, g)
