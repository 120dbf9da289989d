"""The one check of a path option against what its command expects, at the edge, before any work is done.

Each kind is a typer callback (``callback=output_folder``) and a plain function of the same rule for paths that do
not come from an option (a sweep file's ``output:``). A path that cannot be what the command expects is refused
with one line naming the option (exit 2, docs/errors.md):

- ``output_folder``: a folder the command creates or fills (``--output``, ``--dest``, ``--cache-dir``, export's
  OUT): not an existing file, not under a pseudo file system (``/proc``, ``/sys``, ``/dev``);
- ``output_file``: a file the command writes (``leaderboard --out``, ``check --markdown``): a new name or a regular
  file (not a folder, a link, a FIFO, a device or a socket: a write never replaces one), not under ``/proc`` or
  ``/sys``; a path under ``/dev`` is a stream (``/dev/stdout``, ``/dev/full``), written through
  (``antlm_bench.data.files.is_stream``);
- ``input_file``: a file the command reads (``sweep --config``): it exists and is a regular file (a FIFO or a
  device would hang the command);
- ``input_folder``: a folder the command reads (``train``/``run``/``data prepare --corpus``): it exists and is a
  folder.

Every kind refuses an empty path (``--output ''`` is no name for the working folder: give ``.``), a name that is
not UTF-8 (records and tables store paths as UTF-8 text), and an output whose nearest existing parent is a file,
a link to nothing or a link loop. Each option takes its text through :func:`path_text` (``parser=``), which sees
the empty string before it becomes ``.``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from antlm_bench.data.files import check_parent_chain, check_write_target, is_stream
from antlm_bench.errors import UserError

# file systems of the kernel's making: nothing written there is a result
PSEUDO_ROOTS_FOR_FOLDERS = ("/proc", "/sys", "/dev")
PSEUDO_ROOTS_FOR_FILES = ("/proc", "/sys")


def _under(path: Path, roots: tuple[str, ...]) -> str | None:
    """The pseudo root ``path`` lies under (itself or resolved: /proc/self -> /proc/123), or None."""
    for candidate in (os.path.abspath(path), os.path.realpath(path)):
        for root in roots:
            if candidate == root or candidate.startswith(root + os.sep):
                return root
    return None


def path_text(text: str) -> Path:
    """An option's text as a path (the ``parser=`` of every path option): an empty one is refused here, where it
    is still empty (``Path("")`` is the working folder)."""
    if isinstance(text, Path):  # a default
        return text
    if text == "":
        raise typer.BadParameter("an empty path; give a name (`.` for the working folder)")
    return Path(text)


def _common(path: Path, option: str) -> None:
    """What no path option takes: a name that is not UTF-8 text."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{option} {os.fsencode(path)!r}: the name is not UTF-8 text; records and tables keep "
                        "paths as UTF-8: rename it or give another") from None


def _kind_of_existing(path: Path, option: str, wanted: str) -> None:
    """Refuse a link to nothing or a link loop at ``path`` itself, and a parent that is no folder."""
    if path.is_symlink() and not path.exists():
        raise UserError(f"{option} {path}: a link to nothing or a link loop; remove it or give another {wanted}")
    try:
        check_parent_chain(path)
    except UserError as err:
        raise UserError(f"{option} {err}") from None


def check_output_folder(path: Path, option: str) -> Path:
    _common(path, option)
    root = _under(path, PSEUDO_ROOTS_FOR_FOLDERS)
    if root is not None:
        raise UserError(f"{option} {path}: lies under {root}, a file system of the kernel's, not a place for "
                        f"results; give a folder on a disk")
    if path.exists() and not path.is_dir():
        raise UserError(f"{option} {path}: a file, not a folder; give a folder (a new name is created)")
    _kind_of_existing(path, option, "folder")
    return path


def check_output_file(path: Path, option: str) -> Path:
    _common(path, option)
    if is_stream(path):  # /dev/stdout resolves into /proc (/proc/self/fd/1): a stream, asked for by its /dev name
        return path
    root = _under(path, PSEUDO_ROOTS_FOR_FILES)
    if root is not None:
        raise UserError(f"{option} {path}: lies under {root}, a file system of the kernel's, not a place for "
                        f"results; give a file on a disk")
    if path.is_dir():
        raise UserError(f"{option} {path}: a folder, not a file; give a file name (e.g. {path / 'board.md'})")
    _kind_of_existing(path, option, "file")
    try:
        check_write_target(path)
    except UserError as err:
        raise UserError(f"{option} {err}") from None
    return path


def check_input_file(path: Path, option: str) -> Path:
    _common(path, option)
    if path.is_dir():
        raise UserError(f"{option} {path}: a folder, not a file; give the file itself")
    if not path.exists():
        raise UserError(f"{option} {path}: no such file" + (" (a link to nothing)" if path.is_symlink() else ""))
    if not path.is_file():
        raise UserError(f"{option} {path}: not a regular file (a FIFO, a device or a socket), which could be "
                        "endless or wait forever; give a file")
    return path


def check_input_folder(path: Path, option: str) -> Path:
    _common(path, option)
    if not path.exists():
        raise UserError(f"{option} {path}: not a folder (it does not exist"
                        + (", a link to nothing)" if path.is_symlink() else ")"))
    if not path.is_dir():
        raise UserError(f"{option} {path}: a file, not a folder; give the folder")
    return path


def _callback(check: Callable[[Path, str], Path]) -> Callable[..., Any]:
    def callback(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None or ctx.resilient_parsing:
            return value
        option = max(param.opts, key=len) if param.opts and param.opts[0].startswith("-") else (
            (param.name or "PATH").upper())
        if isinstance(value, (list, tuple)):
            return type(value)(check(Path(v), option) for v in value)
        return check(Path(value), option)

    callback.__name__ = check.__name__.removeprefix("check_")
    return callback


output_folder = _callback(check_output_folder)
output_file = _callback(check_output_file)
input_file = _callback(check_input_file)
input_folder = _callback(check_input_folder)

# every kind, for the bad-input corpus (tests/cli/test_bad_inputs_by_class.py) to generate its cases from
KINDS = {"output_folder": check_output_folder, "output_file": check_output_file, "input_file": check_input_file,
         "input_folder": check_input_folder}

__all__ = ["KINDS", "check_input_file", "check_input_folder", "check_output_file", "check_output_folder",
           "input_file", "input_folder", "output_file", "output_folder", "path_text"]
