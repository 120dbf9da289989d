"""The one exception type for user mistakes.

A ``UserError`` carries a single line that says what went wrong, where (file:line or field) and what to do.
The CLI prints it without a traceback and exits with status 2; library callers can catch it.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input: bad schedule, unknown task, missing or malformed data, corrupt checkpoint."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # one line, always: a multi-line message would look like a traceback in a CI log
        super().__init__(" ".join(message.split("\n")))
