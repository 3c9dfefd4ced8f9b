"""nn.Modules of the papers; all accept an ensemble size E (leading parameter axis)."""

from ssldyn.models.ensemble import EnsembleLinear, broadcast_members

__all__ = ["EnsembleLinear", "broadcast_members"]
