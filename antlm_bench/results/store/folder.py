"""A command's output folder: made on first use, locked for the command, tidied of killed writers' staging, and
removed again when the command fails before writing anything into a folder it made."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from antlm_bench.data.files import missing_folders, remove_empty_folders
from antlm_bench.locking import folder_lock
from antlm_bench.results.store.write import tidy_results


@contextlib.contextmanager
def output_folder(folder: str | Path, command: str, *, lock: bool = True, shared: bool = False) -> Iterator[Path]:
    """Create ``folder`` if needed, hold its lock and tidy it (staging of killed writers) for the block.

    ``shared``: the command only appends events to the results store (``eval``), so other such commands may write
    into ``folder`` at the same time; ``train`` and ``run`` hold it alone (``antlm_bench.locking``).

    If the block fails and ``folder`` did not exist before, the folders this call created are removed again when
    the failure left them empty: a failing command leaves no empty output folder behind.
    """
    path = Path(folder).expanduser()
    created = missing_folders(path)
    path.mkdir(parents=True, exist_ok=True)
    ok = False
    try:
        with folder_lock(path, command, shared=shared) if lock else contextlib.nullcontext():
            tidy_results(path)
            yield path
            ok = True
    finally:
        if not ok:
            remove_empty_folders(created)
