"""Errors that reach the user as one line and a non-zero exit, never as a traceback."""

from roofbench.boundary import Refusal


class UserError(Refusal):
    """Bad input or an unusable environment: printed as one line, exit code ``code`` (2 unless
    given; roofbench/boundary.py holds the table)."""
