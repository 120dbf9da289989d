"""One live writer per output folder (or several evaluations at once), test hooks at commit points, and tidy failures.

``folder_lock(path, "train")`` is what ``train`` and ``run`` (per run folder) hold while they write, and
``folder_lock(path, "eval", shared=True)`` what ``eval --output`` holds (through
``antlm_bench.results.store.output_folder``, which also makes and tidies the folder): an advisory ``fcntl.flock``
on ``<folder>/.antlm-bench.lock``, taken without waiting. ``train`` and ``run`` take it exclusively (``LOCK_EX``):
they rewrite checkpoints and run.json, so a second command into the same folder is refused at once with one line
naming the holder's pid (written into the lock file, for people; the lock itself is the kernel's, so a ``kill -9``
never leaves it stale). Evaluations only add events to the results store, which commits concurrent events safely,
so they share it (``LOCK_SH``): several ``eval``s append into one folder at once, while an ``eval`` into a folder
that ``train``/``run`` is writing, or the other way round, is still refused. The same process may take it again
(``run`` holds its run folder while ``train`` inside it asks for the same one).

The lock file is opened with ``O_NOFOLLOW`` and must be a plain file with one name: a symbolic link, a hard link,
a folder or a device planted at ``.antlm-bench.lock`` (results folders travel in archives and in git) is refused
with one line and left as it is, so the lock never truncates a file elsewhere.

On the way out the last holder removes the lock file, and a command that failed removes the folder it created
itself when it left it empty, so a typo in ``--schedule`` does not leave an empty run folder behind.

``fault_point(name)`` is the test hook of the fault-injection suite: with ``ANTLM_BENCH_FAULT=<name>`` in the
environment the process dies right there (``os._exit``, no cleanup, like a ``kill -9``), so a test can stop a
writer between any two steps of a commit without strace.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from antlm_bench.errors import UserError

LOCK_FILE = ".antlm-bench.lock"
FAULT_ENV = "ANTLM_BENCH_FAULT"
FAULT_EXIT_CODE = 86  # what a process killed by fault_point exits with (tests tell it from a real failure)

_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
_held: dict[str, tuple[int, int, bool]] = {}  # realpath of a lock file -> (fd, times this process took it, shared)
_held_guard = threading.Lock()


def fault_point(name: str) -> None:
    """Die here, like ``kill -9``, when ``$ANTLM_BENCH_FAULT`` names this point (the fault-injection tests)."""
    wanted = os.environ.get(FAULT_ENV)
    if wanted and name in wanted.split(","):
        os._exit(FAULT_EXIT_CODE)


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").split()
    except OSError:
        return "?"
    return text[0] if text else "?"


def _not_a_lock_file(path: Path, what: str) -> UserError:
    return UserError(f"{path}: {what}, not the plain lock file antlm-bench makes; it was left as it is: remove it "
                     "if you trust the folder, or write to another folder")


def _open_lock_file(path: Path) -> int:
    """The lock file, opened without following a link; refused (and left untouched) if it is anything but a plain
    file with one name."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _not_a_lock_file(path, "a symbolic link") from None
        if err.errno == errno.EISDIR:
            raise _not_a_lock_file(path, "a folder") from None
        if err.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            raise _not_a_lock_file(path, "a socket or device") from None
        raise
    info = os.fstat(fd)
    problem = ("not a regular file" if not stat.S_ISREG(info.st_mode)
               else f"a hard link (one of {info.st_nlink} names of one file)" if info.st_nlink > 1 else None)
    if problem is not None:
        os.close(fd)
        raise _not_a_lock_file(path, problem)
    return fd


def _busy(path: Path, fd: int, command: str, shared: bool) -> UserError:
    """The one-line refusal, naming who holds the lock: an exclusive holder wrote its pid; sharing holders
    (evaluations) write none."""
    held_shared = False
    if not shared:
        try:  # a shared lock we can take means the holders share it: evaluations
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held_shared = True
        except OSError:
            pass
    if held_shared:
        holder = "antlm-bench eval (one or more) is evaluating into this folder"
    else:
        holder = f"another antlm-bench command (pid {_read_pid(fd)}) is writing this folder"
    return UserError(f"{path.parent}: {holder}; wait for it to finish or give `{command}` another output folder")


def _acquire(path: Path, command: str, shared: bool) -> int:
    """Take the lock file's flock without waiting (shared or exclusive); an exclusive holder writes its pid into
    it. Refuse with the holder named."""
    operation = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    for attempt in range(40):  # the holder may unlink the file between our open and our flock: take the new one
        fd = _open_lock_file(path)
        try:
            fcntl.flock(fd, operation)
        except OSError as err:
            if err.errno not in _BUSY:
                os.close(fd)
                raise
            # a last evaluation leaving holds the file exclusively for a moment while it removes it: look again
            if shared and attempt < 20:
                os.close(fd)
                time.sleep(0.01)
                continue
            refusal = _busy(path, fd, command, shared)
            os.close(fd)
            raise refusal from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            same = False
        if same:
            if not shared:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
            return fd
        os.close(fd)  # we locked a file its holder had just removed: try again on the one now at the path
    raise UserError(f"{path}: could not take the folder lock (it keeps changing); try again")


def _release(path: Path, fd: int, shared: bool) -> None:
    """Unlock; the last holder removes the file (while still holding it exclusively: a waiter that opened the old
    file sees it is gone)."""
    last = not shared
    if shared:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            last = True
        except OSError:
            pass  # other evaluations still hold it; the last of them removes it
    if last:
        # only the file this process locked: the folder may have been swapped for another since (export renames a
        # new folder onto the one it locked), whose lock file, if any, is another holder's
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                path.unlink()
    os.close(fd)


@contextlib.contextmanager
def folder_lock(folder: Path, command: str, *, shared: bool = False) -> Iterator[None]:
    """Hold ``folder``'s advisory lock for the block: exclusive, or ``shared`` with other sharing holders
    (re-entrant within one process). ``folder`` must exist."""
    path = Path(folder) / LOCK_FILE
    key = str(path.parent.resolve() / LOCK_FILE)
    with _held_guard:
        if key in _held:
            fd, count, held_shared = _held[key]
            _held[key] = (fd, count + 1, held_shared)
        else:
            _held[key] = (_acquire(path, command, shared), 1, shared)
    try:
        yield
    finally:
        with _held_guard:
            fd, count, held_shared = _held[key]
            if count > 1:
                _held[key] = (fd, count - 1, held_shared)
            else:
                del _held[key]
                _release(path, fd, held_shared)
