"""Task adapters. Importing this package registers the shipped adapter classes by name."""

from __future__ import annotations

import importlib

from antlm_bench.adapters.base import EvalContext, TaskAdapter, TaskResult

# modules whose classes the shipped task specs name; a module not written yet is skipped
for _module in ("antlm_bench.adapters.minimal_pairs", "antlm_bench.adapters.glue", "antlm_bench.adapters.babylm2025"):
    try:
        importlib.import_module(_module)
    except ModuleNotFoundError as _err:
        if _err.name != _module:
            raise

__all__ = ["EvalContext", "TaskAdapter", "TaskResult"]
