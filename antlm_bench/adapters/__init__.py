"""The adapters stage: tasks built on scoring, each turning a checkpoint into result rows. It owns the adapter
interface (``base``: ``EvalContext``, ``TaskAdapter``, ``TaskResult``), minimal pairs (``minimal_pairs``: BLiMP,
the supplement, EWoK), the BabyLM 2025 zero-shot tasks (``babylm2025/``), GLUE fine-tuning and its adapter
(``glue/``, formerly ``antlm_bench.finetune``) and the lm-eval model ``antlm`` (``lm_eval``, formerly
``antlm_bench.lm_eval_plugin``; imported on demand, as it needs lm-eval). Importing this package registers the
shipped adapter classes by name. Adapters may import ``scoring``, ``models``, the data-level modules (``data``),
the result row schema and statistics (``results.tables``, ``results.stats``), ``errors``, ``registry`` and
``tasks``; never ``cli``, ``pipeline``, ``training`` or the leaderboard (one exception until it moves:
``training.checkpoint_state``, the checkpoint's record that ``scoring=auto`` reads).
"""

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
