"""The GLUE task adapter: fine-tune the checkpoint on each member task of ``tasks/glue.yaml`` and report it on
the valid split.

``--tasks glue`` runs every member, ``--tasks glue:rte,mrpc`` a few. Per seed and member one row per metric
(``accuracy``, plus ``f1`` for MRPC and QQP), and per seed a task-level row ``score``: the mean over the members
that ran of F1 (MRPC, QQP) or accuracy (the others), as DESIGN.md defines the GLUE score. Intervals are a
(stratified) bootstrap over the reported examples. The ``scoring`` column says ``finetune`` or ``probe``; the
``seed`` column is the fine-tuning seed.

Settings (``EvalContext.options``; ``None`` means "the spec's value"): see :data:`OPTION_KEYS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from antlm_bench.adapters.base import EvalContext, TaskResult
from antlm_bench.adapters.glue.data import make_splits
from antlm_bench.adapters.glue.loop import finetune
from antlm_bench.adapters.glue.members import MemberData, find_member_files, read_member
from antlm_bench.adapters.glue.model import fresh_copy
from antlm_bench.adapters.glue.progress import _Reporter
from antlm_bench.adapters.glue.report import (
    aggregate_row,
    explain_score,
    item_records,
    majority_note,
    majority_score,
    member_rows,
    member_score,
)
from antlm_bench.adapters.glue.settings import FinetuneSettings, MemberOutcome
from antlm_bench.adapters.glue.spec import OPTION_KEYS, DataSpec, Hyper, MemberSpec, _validated
from antlm_bench.data import hash_files
from antlm_bench.errors import UserError
from antlm_bench.registry import register_task_class
from antlm_bench.results.tables import ScoreRow
from antlm_bench.tasks import TaskSpec


@register_task_class("GlueTask")
class GlueTask:
    """Adapter for ``class: GlueTask`` specs: members with text fields, labels and metrics."""

    def __init__(self, spec: TaskSpec, members: list[str] | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        where = f"{spec.source}: "
        self.data = _validated(DataSpec, spec.data, f"{where}data")
        self.defaults = _validated(Hyper, spec.defaults, f"{where}defaults")
        self.members = {name: _validated(MemberSpec, body, f"{where}members.{name}")
                        for name, body in spec.members.items()}
        if not self.members:
            raise UserError(f"{spec.source}: a GlueTask spec needs `members:`")
        selected = members or list(self.members)
        unknown = [m for m in selected if m not in self.members]
        if unknown:
            raise UserError(f"task {self.name} has no member {unknown[0]!r}; members: {', '.join(self.members)}")
        self.selected = sorted(selected)
        self.data_hash = ""
        self.data_files: list[str] = []

    # ------------------------------------------------------------------------------------------------------
    # settings

    def options(self, context: EvalContext) -> Hyper:
        given = {k: v for k, v in (context.options or {}).items() if k in OPTION_KEYS and v is not None}
        return _validated(Hyper, given, "option ")

    def settings(self, member: str, options: Hyper, context: EvalContext) -> FinetuneSettings:
        """defaults < member settings < options."""
        merged: dict[str, Any] = {}
        for layer in (self.defaults, self.members[member], options):
            merged.update({k: v for k, v in layer.model_dump(include=set(Hyper.model_fields)).items()
                           if v is not None})
        merged.pop("seed", None)
        spec = self.members[member]
        return FinetuneSettings(**merged, selection_metric=spec.score_metric, device=context.device,
                                dtype=context.dtype, eval_batch_tokens=context.batch_tokens)

    # ------------------------------------------------------------------------------------------------------
    # data

    def member_files(self, data_dir: Path, member: str) -> tuple[Path | None, Path]:
        """(training file or None when the member splits its valid file, reported file); missing -> UserError."""
        return find_member_files(self.name, self.data, self.members[member], data_dir, member)

    def check_data(self, data_dir: Path) -> None:
        """Fail fast (before a model loads) when a selected member's files are missing."""
        files = []
        for member in self.selected:
            train_path, report_path = self.member_files(Path(data_dir), member)
            files.extend(p for p in (train_path, report_path) if p is not None)
        self.data_files = [str(f) for f in files]
        self.data_hash = hash_files(files)

    def load_member(self, data_dir: Path, member: str) -> MemberData:
        return read_member(self.name, self.data, self.members[member], data_dir, member)

    # ------------------------------------------------------------------------------------------------------
    # the run

    def run(self, context: EvalContext) -> TaskResult:
        options = self.options(context)
        self.check_data(Path(context.data_dir))
        data = {m: self.load_member(Path(context.data_dir), m) for m in self.selected}
        seeds = list(context.seeds) or [self.defaults.seed or 42]
        model, tokenizer = _load_model(context)
        log = _Reporter(context, self._work(data, seeds, options, context))

        rows: list[ScoreRow] = []
        items: list[dict[str, Any]] = []
        summary: dict[str, list[float]] = {}
        notes = [n for d in data.values() for n in d.notes]
        methods = set()
        for seed in seeds:
            outcomes: dict[str, MemberOutcome] = {}
            for member in self.selected:
                settings = self.settings(member, options, context)
                report = data[member].report[: context.limit] if context.limit else data[member].report
                splits = make_splits(data[member].train, report, settings.dev_fraction,
                                     settings.max_train_examples, f"{self.name}/{member}")
                label = f"{self.name}/{member} seed {seed}"
                log.start(label, settings, len(splits.train), len(splits.dev))
                outcome = finetune(fresh_copy(model), tokenizer, splits, len(self.members[member].labels), settings,
                                   seed, on_epoch=log.epoch, on_step=log.step)
                metric = self.members[member].score_metric
                log.finish(outcome, metric, majority_score(data[member], metric, context))
                outcomes[member] = outcome
                methods.add(outcome.method)
                rows.extend(member_rows(self.name, self.members[member], member, outcome, data[member], settings,
                                        seed, context))
                if context.log_samples:
                    items.extend(item_records(self.name, self.members[member], member, outcome, seed))
                summary.setdefault(member, []).append(member_score(outcome, self.members[member].score_metric))
            rows.append(aggregate_row(self.name, self.members, outcomes, seed, context))
            summary.setdefault("", []).append(rows[-1].value)
        if len(seeds) > 1:
            for member, values in sorted(summary.items()):
                notes.append(f"{self.name}/{member or 'score'} over seeds {','.join(map(str, seeds))}: "
                             f"mean {np.mean(values):.4f}, sd {np.std(values, ddof=1):.4f}")
        notes.append(self.score_explanation(outcomes))
        notes.append(majority_note(self.name, self.members, data, context))
        if "probe" in methods:
            notes.append(f"{self.name}: probe scores (frozen features + logistic regression), not fine-tuning")
        return TaskResult(rows=rows, items=items, notes=notes)

    def score_explanation(self, outcomes: dict[str, MemberOutcome] | None = None) -> str:
        """How the task's score is made, with each member's number when ``outcomes`` are given."""
        return explain_score(self.name, self.members, outcomes)

    def _work(self, data: dict[str, MemberData], seeds: list[int], options: Hyper, context: EvalContext) -> float:
        """Total work in example-passes, for the overall ETA."""
        total = 0.0
        for member, d in data.items():
            settings = self.settings(member, options, context)
            n = min(len(d.train), settings.max_train_examples or len(d.train))
            total += n * (1 if settings.probe else settings.epochs)
        return total * len(seeds)


def _load_model(context: EvalContext) -> tuple[Any, Any]:
    """The pre-trained model (never trained itself: each run fine-tunes a copy) and its tokenizer.

    A checkpoint folder is loaded afresh in float32 even when the context carries a model: that one may be a
    scoring copy in bfloat16, and fine-tuning keeps float32 master weights.
    """
    import torch

    model = None
    if context.model_path is not None and Path(context.model_path).is_dir():
        from antlm_bench.models import load_model

        model = load_model(context.model_path, device="cpu", dtype=torch.float32)
    elif isinstance(context.model, torch.nn.Module):
        model = context.model
    else:
        raise UserError("glue: no model given; pass a checkpoint folder")
    tokenizer = context.tokenizer
    if tokenizer is None:
        if context.model_path is None:
            raise UserError("glue: no tokenizer given; pass a checkpoint folder that holds one")
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(context.model_path)
        except (OSError, ValueError) as err:
            from antlm_bench.data.readers import broken_json_message

            broken = broken_json_message(Path(context.model_path))  # name a broken config.json, not the tokenizer
            if broken is not None:
                raise UserError(broken) from None
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise UserError(f"{context.model_path}: cannot load the tokenizer ({first})") from None
    return model, tokenizer
