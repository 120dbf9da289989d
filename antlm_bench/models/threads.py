"""How many CPU threads torch gets for a model: one decision shared by ``train``, ``run`` and ``eval``.

On a CPU shared with other jobs, OpenMP threads that wait for each other make the small matrix products of a tiny
model many times slower (a tiny model trained at 35,966 tok/s on one thread against 3,379 with torch's default
under a load of 3; a 2-thread PLL pass was 2.5x slower than one thread). So below
:data:`SMALL_MODEL_PARAMETERS` a model gets one thread unless ``--threads`` or ``$OMP_NUM_THREADS`` says
otherwise; larger models keep torch's default. The caller applies the choice (``torch.set_num_threads``) and
records it with its reason (``config.torch_threads``, ``config.torch_threads_reason``).
"""

from __future__ import annotations

import os

import torch

from antlm_bench.errors import UserError

SMALL_MODEL_PARAMETERS = 10_000_000  # below this, one CPU thread: more threads mostly wait for each other


def choose_threads(threads: int | None, n_parameters: int | None, device: str) -> tuple[int, str]:
    """(CPU threads for torch, why): ``--threads`` wins, then $OMP_NUM_THREADS, then the model's size (small
    models get 1), else torch's default."""
    if threads is not None:
        if threads < 1:
            raise UserError(f"--threads {threads}: must be at least 1")
        return threads, "--threads"
    if os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
        return torch.get_num_threads(), "$OMP_NUM_THREADS"
    if not str(device).startswith("cpu"):
        return torch.get_num_threads(), f"torch default (model on {device})"
    if n_parameters is not None and n_parameters < SMALL_MODEL_PARAMETERS:
        return 1, f"model size ({n_parameters / 1e6:.2f}M parameters < {SMALL_MODEL_PARAMETERS / 1e6:g}M: 1 thread)"
    return torch.get_num_threads(), "torch default" + (
        f" ({n_parameters / 1e6:.1f}M parameters)" if n_parameters is not None else "")


__all__ = ["SMALL_MODEL_PARAMETERS", "choose_threads"]
