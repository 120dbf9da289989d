"""GLUE: fine-tuning (or frozen-feature probing) of any language model on sentence(-pair) classification, and the
``GlueTask`` adapter that runs it on the members of ``tasks/glue.yaml``.

One concept per module; import a name from the module that owns it:

- ``spec``: the shape of a ``class: GlueTask`` spec (data folder, members, hyper-parameters), validated;
- ``data``: a member's examples read from its files, their deterministic splits, the sealed reported split;
- ``encoding``: examples to token ids (the tokenizer's pair template, or "a <sep> b") and padded batches;
- ``model``: the classifier (backbone, pooling, head);
- ``finetune``: a run's settings and outcome, the training loop with model selection on the examples it is given,
  inference;
- ``probe``: frozen pooled features and a logistic regression;
- ``protocol``: ``default`` (best epoch on a slice of the training split) or ``babylm-official`` (as the BabyLM 2025
  pipeline: best epoch on the reported split, first-position pooling), decided once per task run;
- ``options``: ``GlueOptions``, the settings a user gives for the whole task, built once at the edge and carried
  down typed;
- ``task``: the ``GlueTask`` adapter, its result rows and notes, and its progress on the terminal.
"""

from __future__ import annotations

from antlm_bench.adapters.glue.task import GlueTask

__all__ = ["GlueTask"]
