"""The typer application every command module adds itself to, the shared consoles, and the one place that turns
a failure into one line and an exit status (see docs/errors.md for the codes)."""

from __future__ import annotations

import errno
import re
from typing import Any

import typer
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from typer.core import TyperGroup

from antlm_bench.errors import EnvironmentFailure, UserError, one_line, validation_line

try:  # typer >= 0.20 carries its own copy of click, whose exceptions are not click's
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover  (older typer: plain click)
    from click import exceptions as click_exceptions

# a command's own exit (typer.Exit(1), --help) and typer's abort pass through untouched
_PASS_THROUGH: tuple[type[BaseException], ...] = (typer.Exit, typer.Abort)

# wide enough that no table cell or line is ever cut or folded when the output is not a terminal
PIPE_WIDTH = 10_000


class WholeLineConsole(Console):
    """A console that prints whole lines when its stream is not a terminal (a CI log, ``| grep``, a file): rich
    would otherwise lay tables out at 80 columns and cut names (``antlm-ba…``). A terminal keeps its own width;
    ``$COLUMNS`` still wins when set."""

    @property
    def size(self) -> ConsoleDimensions:
        dimensions = super().size
        if self._width is None and not self.is_terminal:
            return ConsoleDimensions(PIPE_WIDTH, dimensions.height)
        return dimensions

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


console = WholeLineConsole(highlight=False)
err_console = WholeLineConsole(stderr=True, highlight=False)

# errno -> (what happened, what to do); an OSError with one of these is the machine's doing, not a bug
ENVIRONMENT_ERRNOS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space left on device", "free some space or write to another folder"),
    errno.EDQUOT: ("disk quota exceeded", "free some space or write to another folder"),
    errno.EFBIG: ("file too large for this file system or limit", "write to another folder"),
    errno.EACCES: ("permission denied", "check the permissions, or choose a folder you can write to"),
    errno.EPERM: ("operation not permitted", "check the permissions, or choose a folder you can write to"),
    errno.EROFS: ("read-only file system", "choose a folder you can write to"),
    errno.ENAMETOOLONG: ("file name too long", "use a shorter file or folder name"),
}
# libraries that wrap the OSError in their own exception (torch's file writer, safetensors' Rust core) keep only
# its text; these say which errno it was
_ERRNO_TEXT = [
    (re.compile(r"No space left on device|os error 28", re.I), errno.ENOSPC),
    (re.compile(r"Disk quota exceeded|os error 122", re.I), errno.EDQUOT),
    (re.compile(r"Permission denied|os error 13\b", re.I), errno.EACCES),
    (re.compile(r"Read-only file system|os error 30\b", re.I), errno.EROFS),
    (re.compile(r"File name too long|os error 36\b", re.I), errno.ENAMETOOLONG),
]


def environment_failure(err: BaseException) -> EnvironmentFailure | None:
    """The environment failure behind ``err`` (itself, its cause or its context), or None when it is none."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        if isinstance(current, EnvironmentFailure):
            return current
        if isinstance(current, OSError) and current.errno in ENVIRONMENT_ERRNOS:
            what, todo = ENVIRONMENT_ERRNOS[current.errno]
            paths = [str(p) for p in (current.filename, current.filename2) if p is not None]
            where = " -> ".join(paths) if paths else "(the system did not say which file)"
            return EnvironmentFailure(f"{where}: {what}; {todo}")
        current = current.__cause__ or current.__context__
    text = str(err)
    for pattern, number in _ERRNO_TEXT:
        if pattern.search(text):
            what, todo = ENVIRONMENT_ERRNOS[number]
            return EnvironmentFailure(f"{what} ({one_line(err, typed=True)}); {todo}")
    return None


class CommandFailed(SystemExit):
    """Raised after the one error line is printed: exits with the error's code. ``str()`` is the message, so a
    ``CliRunner`` result's ``exception`` still says what went wrong."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(code)
        self.message = message

    def __str__(self) -> str:
        return self.message


def print_error(message: str, context_lines: list[str] | None = None) -> None:
    """One red line on stderr. User text (a folder named ``[/bold]``, an ``:emoji:`` in a file name) is printed as
    text: markup escaped, emoji codes off."""
    line = one_line(message, keep_spacing=True)
    err_console.print(f"[red]error:[/red] {escape(line)}", soft_wrap=True, emoji=False)
    # errors that point into a line of input (a bad schedule) show that line and a caret below the message
    for extra in context_lines or []:
        err_console.print("  " + extra, markup=False, highlight=False, emoji=False, soft_wrap=True)


def fail(err: BaseException) -> CommandFailed | None:
    """Print ``err`` as one line and return the SystemExit to raise, or None when ``err`` is not ours to report."""
    if isinstance(err, (UserError, EnvironmentFailure)):
        print_error(str(err), getattr(err, "context_lines", None))
        return CommandFailed(str(err), err.exit_code)
    if isinstance(err, click_exceptions.NoArgsIsHelpError):
        return None  # typer shows the help
    if isinstance(err, click_exceptions.UsageError):  # bad option value, missing option, unknown command
        hint = f" (see `{err.ctx.command_path} --help`)" if err.ctx is not None else ""
        message = err.format_message() + hint
        print_error(message)
        return CommandFailed(message, err.exit_code)
    if isinstance(err, click_exceptions.ClickException):
        print_error(err.format_message())
        return CommandFailed(err.format_message(), err.exit_code)
    if isinstance(err, ValidationError):
        # a command's own config (RunConfig, TrainConfig, ...) rejected an option value: name the option
        message = validation_line(err, option=True)
        print_error(message)
        return CommandFailed(message, UserError.exit_code)
    environment = environment_failure(err)
    if environment is not None:
        print_error(str(environment))
        return CommandFailed(str(environment), environment.exit_code)
    exit_code = getattr(err, "exit_code", None)
    if isinstance(exit_code, int) and not isinstance(err, _PASS_THROUGH):
        # an error class of another module with its own documented code (DivergedError: 3)
        print_error(str(err), getattr(err, "context_lines", None))
        return CommandFailed(str(err), exit_code)
    return None


class ReportingGroup(TyperGroup):
    """The top-level command group: every subcommand runs inside :meth:`invoke`, so this is where a failure of
    any command (run from the shell or from ``typer.testing.CliRunner``) becomes one line and an exit status."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        # the top level's own options (``antlm-bench --bogus``) are parsed here, before invoke
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _PASS_THROUGH:
            raise
        except click_exceptions.UsageError as err:
            exit_ = fail(err)
            if exit_ is None:
                raise
            raise exit_ from None

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _PASS_THROUGH:
            raise
        except Exception as err:  # noqa: BLE001  (fail() decides; what it does not know re-raises unchanged)
            exit_ = fail(err)
            if exit_ is None:
                raise
            raise exit_ from None


app = typer.Typer(
    name="antlm-bench",
    help="Benchmark pre-training schedules (CLM / MLM alternation, AntLM) for small language models.",
    cls=ReportingGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

def flag(section: type[BaseModel], name: str, *aliases: str, default: Any = ..., cell: bool = False,
         **typer_options: Any) -> Any:
    """The typer option of a configuration field (``antlm_bench.config``): its flag, default and help are the
    field's, so every command that takes it says the same. ``default``: a command's own default where it differs
    (the field's default factory gives None: the command line's text is parsed by the field); ``cell``: a sweep's
    option that sets the field on every cell (no default: the cell's own applies)."""
    from antlm_bench.config import flag_of

    field = section.model_fields[name]
    if cell:
        default, help_text = None, f"`run {flag_of(field)}` for every cell: {field.description}"
    else:
        if default is None and field.default is not None and field.default_factory is None:
            # a command whose unset option defers to a file's value (sweep): the default still shown is the field's
            typer_options.setdefault("show_default", str(field.default))
        if default is ...:
            default = None if field.default_factory is not None else field.get_default()
            default = ... if default is PydanticUndefined else default  # a required field: a required option
        help_text = field.description
    return typer.Option(default, flag_of(field), *aliases, help=help_text, **typer_options)


def given_flags(ctx: typer.Context) -> dict[str, Any]:
    """The configuration flags the command line gave (``{"--max-words": 5}``), by their long spelling: what goes
    over a config file's values (``antlm_bench.config.run_config``); an option left at its default gives nothing."""
    from antlm_bench.config import flag_paths

    known = flag_paths()
    given = {}
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        spelling = max(param.opts, key=len) if param.opts else ""
        if spelling in known and source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            given[spelling] = ctx.params[param.name]
    return given
