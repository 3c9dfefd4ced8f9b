"""User-facing errors.

A :class:`UserError` is a mistake in what the user asked for (unknown experiment, invalid
config value, missing data directory, bad tensor shape at an API boundary). The CLI prints
its message as one line and exits with code 2, without a traceback.
"""


class UserError(ValueError):
    """A mistake in user input; the message is one line naming the input and what is allowed."""
