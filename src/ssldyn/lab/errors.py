"""Re-export of :class:`ssldyn.errors.UserError` for the lab (the class lives at the package root)."""

from ssldyn.errors import UserError

__all__ = ["UserError"]
