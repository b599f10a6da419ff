"""Errors a command raises for problems with the user's input; printed as one line, never a traceback."""


class UserError(ValueError):
    """Bad input or an impossible request, explained in the message."""
