"""Errors that reach the user as one line and a non-zero exit, never as a traceback."""


class UserError(Exception):
    """Bad input or an unusable environment: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
