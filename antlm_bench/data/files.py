"""File plumbing shared by every stage: content hashes, and the one safe way to write or read a file.

- Writes (:func:`atomic_write_bytes`, :func:`atomic_write`, :func:`append_bytes`): a file is written whole through
  a temporary renamed over it, and only ever over a regular file or a new name: a folder, a symbolic link, a FIFO,
  a device or a socket at the name is refused in one line (exit 2) and left as it is, since a rename would replace
  it. A *stream* is asked for by a path under ``/dev`` (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``,
  ``/dev/full``): it is written through, never renamed over (:func:`is_stream`).
- Reads (:func:`read_regular_file`): records and configuration files are read only when they are regular files of
  bounded size (a FIFO would hang the command, ``/dev/zero`` never ends); records of our own folders without
  following a link planted at their name.
- :func:`refuse_planted_links`: the entries a command makes in a folder it writes (a results store, a run file)
  are never links: one planted there is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from antlm_bench.errors import UserError

# where a path names a stream (a terminal, a pipe, /dev/full): written through, never replaced
STREAM_ROOT = "/dev"
# the largest record or configuration file read (a sweep.json of thousands of cells is a few MB)
MAX_READ_BYTES = 64 << 20


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


def _kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def not_regular(path: Path) -> str | None:
    """What ``path`` is, in words, when it is there and is no regular file (not following a link: "a symbolic
    link"); None for a regular file or nothing there."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    return None if stat.S_ISREG(mode) else _kind_of(mode)


def is_stream(path: Path) -> bool:
    """Whether writing ``path`` means writing to a stream: it lies under ``/dev`` and is there, as a link
    (``/dev/stdout``) or anything but a regular file (``/dev/full``, a terminal). A stream is written through."""
    absolute = os.path.abspath(path)
    if not (absolute == STREAM_ROOT or absolute.startswith(STREAM_ROOT + os.sep)):
        return False
    try:
        info = os.lstat(absolute)
    except OSError:
        return False
    return not stat.S_ISREG(info.st_mode)


def check_write_target(path: Path) -> None:
    """Refuse, in one line and before anything is written, a ``path`` that a write would replace although it is no
    regular file: a folder, a symbolic link, a FIFO, a device, a socket (a stream under /dev is written through,
    :func:`is_stream`); a parent that is a file, a link to nothing or a link loop."""
    if is_stream(path):
        return
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        check_parent_chain(path)
        return
    except NotADirectoryError:
        check_parent_chain(path)
        raise
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UserError(f"{path}: a link loop lies on the way to it; remove the loop or write elsewhere") from None
        raise
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: {_kind_of(info.st_mode)}, not a regular file; antlm-bench writes a file whole and "
                        "never replaces anything else: give a new file name (or a path under /dev, such as "
                        "/dev/stdout, to write to a stream)")


def check_parent_chain(path: Path) -> None:
    """Refuse a ``path`` whose nearest existing ancestor is no folder (a file, a link to nothing, a link loop):
    ``mkdir`` would fail there with a traceback's words."""
    for ancestor in Path(os.path.abspath(path)).parents:
        if not os.path.lexists(ancestor):
            continue
        if ancestor.is_dir():
            return
        if ancestor.is_symlink():
            raise UserError(f"{path}: {ancestor} is a link to nothing or a link loop; remove it or give another path")
        raise UserError(f"{path}: {ancestor} is a file, not a folder; give a path inside a folder")


def refuse_planted_links(folder: Path, names: Iterable[str], fix: str) -> None:
    """Refuse a symbolic link at any of ``names`` inside ``folder`` (entries the command makes itself: a results
    store, a record): writing through it would change what another folder holds."""
    for name in names:
        entry = folder / name
        if entry.is_symlink():
            raise UserError(f"{entry}: a symbolic link where antlm-bench keeps its own {name}; it was left as it "
                            f"is: {fix}")


# the streams a process already holds open: written through its own descriptor, at its own offset (opened anew,
# a file behind `> out.txt` would be written from its start by the command's other output, over this)
_OWN_DESCRIPTORS = {"/dev/stdout": 1, "/dev/stderr": 2}


def _own_descriptor(path: Path) -> int | None:
    absolute = os.path.abspath(path)
    if absolute in _OWN_DESCRIPTORS:
        return _OWN_DESCRIPTORS[absolute]
    match = re.fullmatch(r"/dev/fd/(\d+)", absolute)
    return int(match.group(1)) if match else None


def _write_all(fd: int, payload: bytes, path: Path) -> None:
    view = memoryview(payload)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as err:
        if err.filename is None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def _write_through(path: Path, payload: bytes) -> None:
    """Write ``payload`` to the stream ``path`` names: the process's own descriptor for /dev/stdout, /dev/stderr
    and /dev/fd/N (after what Python buffered for it), else the device opened for appending."""
    import sys

    own = _own_descriptor(path)
    if own is not None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        _write_all(own, payload, path)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ENXIO:  # a FIFO no process reads
            raise UserError(f"{path}: a pipe no process reads; start its reader first or write to a file") from None
        raise
    try:
        os.set_blocking(fd, True)  # opened without waiting for a reader; writes wait for a slow one
        _write_all(fd, payload, path)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Have ``write`` fill a temporary beside ``path`` and rename it over ``path``: whole or not at all. ``path``
    must be a new name or a regular file (:func:`check_write_target`); a temporary of ``path`` that a killed
    writer left is removed first, with a note on stderr (:func:`tidy_atomic_temporaries`)."""
    check_write_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tidy_atomic_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-{temporary_tag()}-", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, readable_file_mode())  # mkstemp makes 0600; a result file should read like any other
        check_write_target(path)  # nothing else appeared at the name while the temporary was written
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        if err.filename is None:  # a failed write() (disk full) names no file: name the one being written
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` whole or not at all (:func:`atomic_write`); a stream under /dev
    (``/dev/stdout``) is written through instead (:func:`is_stream`)."""
    if is_stream(path):
        _write_through(path, payload)
        return

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            handle.write(payload)

    atomic_write(path, write)


def append_bytes(path: Path, payload: bytes) -> None:
    """Append ``payload`` to ``path`` (made if missing) in one ``write``: a line never interleaves with another
    writer's. Only a regular file is appended to, never through a link planted at its name; a stream under /dev
    is written through."""
    if is_stream(path):
        _write_through(path, payload)
        return
    with open_append(path) as handle:
        handle.write(payload)


def open_append(path: Path):  # -> BinaryIO
    """``path`` opened for appending (made if missing), without following a link at its name and without waiting
    on a FIFO; anything but a regular file there is refused in one line and left as it is."""
    check_parent_chain(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     readable_file_mode())
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            check_write_target(path)  # says what is there
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        check_write_target(path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "ab")


def read_regular_file(path: Path, *, follow_links: bool = False, max_bytes: int = MAX_READ_BYTES,
                      fix: str = "") -> bytes:
    """The bytes of ``path``, read only when it is a regular file of at most ``max_bytes``: a FIFO (which would
    wait forever for a writer), a device (``/dev/zero`` never ends), a socket or a folder is refused in one line,
    and so is a symbolic link unless ``follow_links`` (a record in one of our folders is never a link: one there
    was planted)."""
    fix = f"; {fix}" if fix else ""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file" + (" (a link to nothing)" if os.path.islink(path) else "")
                        + fix) from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            what = "a symbolic link, which is not followed here" if not follow_links else "a link loop"
            raise UserError(f"{path}: {what}{fix or '; give the file itself'}") from None
        if err.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            raise UserError(f"{path}: a socket or device, not a regular file{fix}") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path}: {_kind_of(info.st_mode)}, not a regular file; only a regular file is read "
                            f"here{fix}")
        if info.st_size > max_bytes:
            raise UserError(f"{path}: {info.st_size:,} bytes, more than the {max_bytes:,} a file of its kind may "
                            f"hold{fix}")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while read
        raise UserError(f"{path}: more than the {max_bytes:,} bytes a file of its kind may hold{fix}")
    return data


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
