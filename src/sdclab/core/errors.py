"""Errors that the command line turns into one clear line and exit code 2."""

import errno

DISK_FULL = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded"}
"""The errors of a write that found no room for an output, and how a message says each."""


class InputError(Exception):
    """Bad input from the user: a file, a row, a column or an option that is not as expected.

    The message is the whole explanation; it is printed as one line without a traceback.
    """

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = list(details or [])

    def one_line(self) -> str:
        """The message and any further details folded onto one line.

        Messages quote user input (keys of a TOML file, values of a column, paths), which may hold
        line breaks or other control characters; those are written as escapes (``\\n``).
        """
        text = str(self)
        if self.details:
            text += " | " + " | ".join(self.details)
        return escape_control(text)


def escape_control(text: str) -> str:
    """``text`` with every non-printable character (line breaks too) written as an escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
