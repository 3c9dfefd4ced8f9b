"""User-facing errors, at the package root so every layer can raise them.

A :class:`UserError` is a mistake in what the user asked for (unknown experiment, invalid
config value, missing data directory, bad tensor shape at an API boundary). The CLI prints
its message as one line and exits with code 2, without a traceback.
"""

__all__ = ["UserError"]


class UserError(ValueError):
    """A mistake in user input; the message is one line naming the input and what is allowed."""
