"""The adapters stage: tasks built on scoring, each turning a checkpoint into result rows. It owns the adapter
interface (``base``: ``EvalContext``, ``TaskAdapter``, ``TaskResult``), minimal pairs (``minimal_pairs``: BLiMP,
the supplement, EWoK), the BabyLM 2025 zero-shot tasks (``babylm2025/``), GLUE fine-tuning and its adapter
(``glue/``), the held-out loss on the corpus's dev split (``heldout``) and the lm-eval model ``antlm`` (``lm_eval``, imported on demand, as it needs lm-eval). Task specs find
the adapter classes through ``antlm_bench.registry.TASK_CLASSES``, which imports a module when its class is first
looked up.
"""

from __future__ import annotations

from antlm_bench.adapters.base import EvalContext, TaskAdapter, TaskResult

__all__ = ["EvalContext", "TaskAdapter", "TaskResult"]
