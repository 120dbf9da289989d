"""Where a model is asked for (``eval --model``, ``export CKPT``), a run folder stands for one of its checkpoints.

One decision, one place: ``RunLayout.model_folder`` picks which checkpoint (the final one, else the resume point
``last``); this module only tells a run folder from a model folder, so every command accepts both.
"""

from __future__ import annotations

from pathlib import Path

from antlm_bench.runs.layout import RunLayout


def model_folder(path: str | Path) -> tuple[Path, str | None]:
    """(the model folder, why that one): ``path`` itself when it holds config.json (or is no run: the caller's
    loader then says what is wrong with it), else the checkpoint its run stands for, with the reason to print."""
    path = Path(path).expanduser()
    if (path / "config.json").is_file() or not path.is_dir():
        return path, None
    layout = RunLayout(path)
    if not layout.has_run():
        return path, None
    return layout.model_folder()


__all__ = ["model_folder"]
