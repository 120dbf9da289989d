"""One live writer per output folder, test hooks at commit points, and tidy failures.

``folder_lock(path, "train")`` is what ``train``, ``run`` (per run folder) and ``eval --output`` hold while they
write (through ``antlm_bench.results.store.output_folder``, which also makes and tidies the folder): an advisory ``fcntl.flock`` on ``<folder>/.antlm-bench.lock``, taken without waiting. A second command into
the same folder is refused at once with one line naming the holder's pid (written into the lock file, for people;
the lock itself is the kernel's, so a ``kill -9`` never leaves it stale). The same process may take it again
(``run`` holds its run folder while ``train`` inside it asks for the same one).

On the way out the lock file is removed, and a command that failed removes the folder it created itself when it
left it empty, so a typo in ``--schedule`` does not leave an empty run folder behind.

``fault_point(name)`` is the test hook of the fault-injection suite: with ``ANTLM_BENCH_FAULT=<name>`` in the
environment the process dies right there (``os._exit``, no cleanup, like a ``kill -9``), so a test can stop a
writer between any two steps of a commit without strace.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from antlm_bench.errors import UserError

LOCK_FILE = ".antlm-bench.lock"
FAULT_ENV = "ANTLM_BENCH_FAULT"
FAULT_EXIT_CODE = 86  # what a process killed by fault_point exits with (tests tell it from a real failure)

_held: dict[str, tuple[int, int]] = {}  # realpath of a lock file -> (fd, how many times this process took it)
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


def _acquire(path: Path, command: str) -> int:
    """Take the lock file's flock without waiting and write our pid into it; refuse with the holder's pid."""
    for _ in range(20):  # the holder may unlink the file between our open and our flock: then take the new one
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read_pid(fd)
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UserError(f"{path.parent}: another antlm-bench command (pid {holder}) is writing this "
                                f"folder; wait for it to finish or give `{command}` another output folder") from None
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
            return fd
        os.close(fd)  # we locked a file its holder had just removed: try again on the one now at the path
    raise UserError(f"{path}: could not take the folder lock (it keeps changing); try again")


def _release(path: Path, fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # unlink while still holding the lock: a waiter that opened the old file sees it is gone
    os.close(fd)


@contextlib.contextmanager
def folder_lock(folder: Path, command: str) -> Iterator[None]:
    """Hold ``folder``'s advisory lock for the block (re-entrant within one process). ``folder`` must exist."""
    path = Path(folder) / LOCK_FILE
    key = str(path.resolve())
    with _held_guard:
        if key in _held:
            fd, count = _held[key]
            _held[key] = (fd, count + 1)
        else:
            _held[key] = (_acquire(path, command), 1)
    try:
        yield
    finally:
        with _held_guard:
            fd, count = _held[key]
            if count > 1:
                _held[key] = (fd, count - 1)
            else:
                del _held[key]
                _release(path, fd)
