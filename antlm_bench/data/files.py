"""File plumbing shared by every stage: content hashes and atomic writes."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_size), b""):
            digest.update(block)
    return digest.hexdigest()


def hash_files(paths: Iterable[str | os.PathLike]) -> str:
    """One sha256 over the names and contents of several files (order-independent)."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        digest.update(path.name.encode())
        digest.update(bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()


def readable_file_mode() -> int:
    """0666 less the process umask: the mode ``open()`` would have given a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write ``path`` whole or not at all: a temporary beside it, renamed over it. A temporary of ``path`` that a
    killed writer left is removed first, with a note on stderr (:func:`tidy_atomic_temporaries`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tidy_atomic_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-{temporary_tag()}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.chmod(tmp, readable_file_mode())  # mkstemp makes 0600; a result file should read like any other
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        if err.filename is None:  # a failed write() (disk full) names no file: name the one being written
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def missing_folders(path: Path) -> list[Path]:
    """The folders ``path.mkdir(parents=True)`` would create, deepest first."""
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    return missing


def remove_empty_folders(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty: undo a ``missing_folders`` mkdir that a failure
    left with nothing in it; stop at the first folder that holds something or is not ours to remove."""
    for folder in folders:
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            return


# -- temporaries a killed command left behind ------------------------------------------------------------------------

# a temporary whose name carries no live writer's pid is stale after this long (no command here writes one longer)
STALE_AFTER_S = 6 * 3600


# where a temporary's name says its writer's pid (temporary_tag's "p<pid>", training's ".last.link-<pid>")
_PID_IN_NAME = re.compile(r"(?:\.tmp-p|\.unpack\.p|\.link-)(\d{1,9})(?=[.-]|$)")


def temporary_tag() -> str:
    """``p<pid>``: the part of a temporary's name that says which process writes it (:func:`remove_stale`)."""
    return f"p{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    except OSError:
        return False
    return True


def stale_temporaries(folder: Path, pattern: str, now: float | None = None,
                      max_age_s: float = STALE_AFTER_S, by_pid: bool = True) -> list[Path]:
    """The entries of ``folder`` matching ``pattern`` (a glob) that no live process writes: their name's pid
    (``.tmp-p<pid>-``, ``.unpack.p<pid>.``, a trailing ``.link-<pid>``) is no running process, or, without a pid, they are older than
    ``max_age_s`` (default :data:`STALE_AFTER_S`)."""
    import time

    now = time.time() if now is None else now
    found = []
    try:
        entries = sorted(folder.glob(pattern))
    except OSError:
        return []
    for path in entries:
        pids = _PID_IN_NAME.findall(path.name) if by_pid else []
        if pids:
            stale = not _pid_alive(int(pids[-1]))
        else:
            try:
                stale = now - path.lstat().st_mtime > max_age_s
            except OSError:
                stale = False
        if stale:
            found.append(path)
    return found


def remove_stale(folder: Path, pattern: str, now: float | None = None, max_age_s: float = STALE_AFTER_S,
                 keep: tuple[Path, ...] = (), by_pid: bool = True) -> list[Path]:
    """Remove :func:`stale_temporaries` (files, links or folders); returns what was removed, for the caller to say
    so."""
    import shutil

    removed = []
    for path in stale_temporaries(folder, pattern, now, max_age_s, by_pid):
        if path in keep:
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue  # another command tidied it first
        removed.append(path)
    return removed


def removed_note(removed: list[Path]) -> str | None:
    """The one note that says which stale temporaries were removed, or None."""
    if not removed:
        return None
    shown = ", ".join(str(p) for p in removed[:3]) + (f" and {len(removed) - 3} more" if len(removed) > 3 else "")
    return f"removed {len(removed)} stale temporar{'y' if len(removed) == 1 else 'ies'} a stopped command left: {shown}"


def tidy_atomic_temporaries(path: Path) -> list[Path]:
    """Remove the temporaries of ``path`` (``.NAME.tmp-p<pid>-*.tmp``, or an older ``.NAME.*.tmp`` past
    :data:`STALE_AFTER_S`) whose writer is gone, and say so on stderr."""
    import sys

    removed = remove_stale(path.parent, f".{_glob_escape(path.name)}.*.tmp")
    note = removed_note(removed)
    if note is not None:
        print(f"note: {note}", file=sys.stderr)
    return removed


def _glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)
