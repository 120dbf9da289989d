"""The one exception type for user mistakes, and the one way an error becomes a line.

A ``UserError`` carries a single line that says what went wrong, where (file:line or field) and what to do.
The CLI prints it without a traceback and exits with status 2; library callers can catch it. ``one_line`` makes any
exception's text (or any text) fit such a line; ``validation_line`` says a pydantic ``ValidationError``'s first
problem the one way every edge says it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class UserError(Exception):
    """A mistake in the user's input: bad schedule, unknown task, missing or malformed data, corrupt checkpoint."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # one line, always: a multi-line message would look like a traceback in a CI log
        super().__init__(one_line(message, keep_spacing=True))


def one_line(source: BaseException | str, limit: int | None = None, *, typed: bool = False,
             keep_spacing: bool = False) -> str:
    """``source`` (an exception, or a text such as a tool's stderr) as one line for an error message: each run of
    whitespace (line breaks, a traceback's indentation) one space. An exception whose text is empty is its type's
    name; ``typed=True`` puts the type's name first (``OSError: text``). Past ``limit`` characters the line is
    cut and ends in ``...``. ``keep_spacing=True`` turns only the line breaks into spaces: our own messages,
    whose paths keep their spaces."""
    text = str(source)
    text = " ".join(text.splitlines()) if keep_spacing else " ".join(text.split())
    if isinstance(source, BaseException):
        name = type(source).__name__
        if typed:
            text = f"{name}: {text}" if text else name
        text = text or name
    return text if limit is None or len(text) <= limit else text[:limit] + "..."


def validation_line(err: Any, *, option: bool = False, flags: Mapping[str, str] | None = None,
                    section: str | None = None) -> str:
    """The first problem of a pydantic ``ValidationError`` as one line: ``field a.b.0: message (got value)`` for a
    file's field (``section``: the part of the file the model validated, named before the field), or ``--name:
    message (got value)`` for a command's option (``option=True``; ``flags`` maps a field to its flag where that
    is not ``--<field>``). The one wording of a rejected value, whichever edge rejected it."""
    first = err.errors()[0]
    shown = repr(first.get("input"))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    if option:
        field = str(first["loc"][0]) if first["loc"] else "option"
        flag = (flags or {}).get(field) or "--" + field.replace("_", "-")
        return f"{flag}: {first['msg']} (got {shown})"
    field = ".".join(str(part) for part in [*([section] if section else []), *first["loc"]]) or "(top level)"
    return f"field {field}: {first['msg']} (got {shown})"


class EnvironmentFailure(Exception):
    """The machine, not the input, stopped the command: disk full, permission denied, a name too long.

    The CLI turns such an ``OSError`` (raised anywhere in a command) into one line naming the path, exit status 4;
    library code may raise this class itself when it knows better what to say.
    """

    exit_code = 4

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message, keep_spacing=True))


class DivergedError(UserError):
    """Training stopped because the loss or the gradient norm stopped being a finite number (exit status 3).

    Not the user's input exactly, but told the same way: one line naming the step and the last good checkpoint,
    which the trainer keeps as it was.
    """

    exit_code = 3


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"did you mean blimp? "`` for a misspelt ``name`` (difflib's closest of ``known``), else ``""``: the start
    of a refusal's advice."""
    from difflib import get_close_matches

    close = get_close_matches(name.lower(), sorted(known), n=2, cutoff=0.6)
    return f"did you mean {' or '.join(close)}? " if close else ""
