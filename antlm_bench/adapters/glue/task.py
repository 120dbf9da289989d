"""The GLUE task adapter: fine-tune (or probe) the checkpoint on each member task of ``tasks/glue.yaml``, report it
on the valid split, and show the progress on the terminal.

``--tasks glue`` runs every member, ``--tasks glue:rte,mrpc`` a few. Per seed and member one row per metric
(``accuracy``, plus ``f1`` for MRPC and QQP), and per seed a task-level row ``score``: the mean over the members
that ran of F1 (MRPC, QQP) or accuracy (the others), as docs/design.md defines the GLUE score. Intervals are a
(stratified) bootstrap over the reported examples. The ``scoring`` column says ``finetune``, ``finetune-official``
(the ``babylm-official`` protocol: ``protocol``) or ``probe``; the ``seed`` column is the fine-tuning seed.

Settings: ``EvalContext.options``, a :class:`~antlm_bench.adapters.glue.options.GlueOptions` built at the edge
(``None`` in a field means "the spec's value").
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from antlm_bench.adapters.base import EvalContext, TaskAdapter, TaskResult
from antlm_bench.adapters.glue.data import MemberData, Splits, find_member_files, read_member
from antlm_bench.adapters.glue.finetune import (
    EpochLog,
    FinetuneSettings,
    MemberOutcome,
    classification_metrics,
    finetune,
)
from antlm_bench.adapters.glue.model import fresh_copy
from antlm_bench.adapters.glue.options import GlueOptions
from antlm_bench.adapters.glue.probe import probe
from antlm_bench.adapters.glue.protocol import GlueProtocol, glue_protocol
from antlm_bench.adapters.glue.spec import DataSpec, Hyper, MemberSpec, validated
from antlm_bench.data import hash_files
from antlm_bench.errors import UserError, one_line
from antlm_bench.models.precision import Precision, resolve_precision
from antlm_bench.progress import clock, line_printer
from antlm_bench.results.stats import bootstrap_classification
from antlm_bench.results.tables import ScoreRow
from antlm_bench.tasks import TaskSpec


class GlueTask(TaskAdapter):
    """Adapter for ``class: GlueTask`` specs: members with text fields, labels and metrics."""

    metrics = ("score",)  # the task's row; each member's own metric is in its spec (adapters.glue.spec)
    takes_options = True

    def __init__(self, spec: TaskSpec, members: list[str] | None = None) -> None:
        super().__init__(spec, members)
        self.data = validated(DataSpec, spec.data, spec.source, "data")
        self.defaults = validated(GlueOptions, spec.defaults, spec.source, "defaults")  # a bad protocol name too
        self.members = {name: validated(MemberSpec, body, spec.source, f"members.{name}")
                        for name, body in spec.members.items()}
        if not self.members:
            raise UserError(f"{spec.source}: a GlueTask spec needs `members:`")
        selected = members or list(self.members)
        unknown = [m for m in selected if m not in self.members]
        if unknown:
            raise UserError(f"task {self.name} has no member {unknown[0]!r}; members: {', '.join(self.members)}")
        self.selected = sorted(selected)

    # ------------------------------------------------------------------------------------------------------
    # settings

    def options(self, context: EvalContext) -> GlueOptions:
        """The context's options (built and validated at the edge), or none given."""
        return context.options or GlueOptions()

    def protocol(self, options: GlueOptions) -> GlueProtocol:
        """The options' protocol, else the spec's, else the default: one for the whole task run."""
        return glue_protocol(options.protocol or self.defaults.protocol)

    def settings(self, member: str, options: GlueOptions, context: EvalContext,
                 precision: Precision | None = None) -> FinetuneSettings:
        """defaults < member settings < options, under the task's protocol; ``precision`` resolved once per run."""
        merged: dict[str, Any] = {}
        for layer in (self.defaults, self.members[member], options):
            merged.update({k: v for k, v in layer.model_dump(include=set(Hyper.model_fields)).items()
                           if v is not None})
        merged.pop("seed", None)
        spec = self.members[member]
        settings = FinetuneSettings(**merged, selection_metric=spec.score_metric, device=context.device,
                                    precision=precision or Precision("fp32", "default"),
                                    eval_batch_tokens=context.batch_tokens)
        return self.protocol(options).settings(settings, member)

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
        protocol = self.protocol(options)
        self.check_data(Path(context.data_dir))
        data = {m: self.load_member(Path(context.data_dir), m) for m in self.selected}
        seeds = list(context.seeds) or [self.defaults.seed or 42]
        model, tokenizer = _load_model(context)
        # the rule training follows (models.precision), decided once for every member and seed of this run
        import torch

        precision = resolve_precision(options.precision or "auto", torch.device(context.device),
                                      getattr(getattr(model, "config", None), "hidden_size", None),
                                      option="--glue-precision")
        log = _TerminalProgress(context, self._work(data, seeds, options, context))

        rows: list[ScoreRow] = []
        items: list[dict[str, Any]] = []
        summary: dict[str, list[float]] = {}
        notes = [n for d in data.values() for n in d.notes]
        methods = set()
        for seed in seeds:
            outcomes: dict[str, MemberOutcome] = {}
            for member in self.selected:
                settings = self.settings(member, options, context, precision)
                report = data[member].report[: context.limit] if context.limit else data[member].report
                splits = protocol.splits(data[member].train, report, settings, f"{self.name}/{member}")
                label = f"{self.name}/{member} seed {seed}"
                log.start(label, settings, splits)
                num_labels = len(self.members[member].labels)
                if settings.probe:
                    outcome = probe(fresh_copy(model), tokenizer, splits, num_labels, settings, seed,
                                    f"{self.name}/{member}")
                else:
                    outcome = finetune(fresh_copy(model), tokenizer, splits, num_labels, settings, seed,
                                       on_epoch=log.epoch, on_step=log.step)
                metric = self.members[member].score_metric
                log.finish(outcome, metric, majority_score(data[member], metric, context))
                outcomes[member] = outcome
                methods.add(outcome.method)
                rows.extend(member_rows(self.name, self.members[member], member, outcome, data[member], settings,
                                        seed, context))
                if context.log_samples:
                    items.extend(item_records(self.name, self.members[member], member, outcome, seed))
                summary.setdefault(member, []).append(member_score(outcome, self.members[member].score_metric))
            floor = float(np.mean([majority_score(data[m], self.members[m].score_metric, context) for m in outcomes]))
            rows.append(aggregate_row(self.name, self.members, outcomes, seed, context, protocol, floor))
            summary.setdefault("", []).append(rows[-1].value)
        if len(seeds) > 1:
            for member, values in sorted(summary.items()):
                notes.append(f"{self.name}/{member or 'score'} over seeds {','.join(map(str, seeds))}: "
                             f"mean {np.mean(values):.4f}, sd {np.std(values, ddof=1):.4f}")
        notes.append(f"{self.name}: glue protocol {protocol.name} ({protocol.summary}); fine-tuned in "
                     f"{precision.name} ({precision.reason})")
        notes.append(self.score_explanation(outcomes))
        notes.append(majority_note(self.name, self.members, data, context))
        if "probe" in methods:
            notes.append(f"{self.name}: probe scores (frozen features + logistic regression), not fine-tuning")
        return TaskResult(rows=rows, items=items, notes=notes)

    def score_explanation(self, outcomes: dict[str, MemberOutcome] | None = None) -> str:
        """How the task's score is made, with each member's number when ``outcomes`` are given."""
        return explain_score(self.name, self.members, outcomes)

    def _work(self, data: dict[str, MemberData], seeds: list[int], options: GlueOptions, context: EvalContext
              ) -> float:
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
            raise UserError(f"{context.model_path}: cannot load the tokenizer ({one_line(err, 160)})") from None
    return model, tokenizer


# ----------------------------------------------------------------------------------------------------------------
# what a run reports: score rows (per member and the task's ``score``), item records, and the notes that
# explain the score and give the majority-class floor


def member_score(outcome: MemberOutcome, metric: str) -> float:
    return classification_metrics(outcome.labels, outcome.predictions)[metric]


def explain_score(task: str, members: dict[str, MemberSpec], outcomes: dict[str, MemberOutcome] | None = None
                  ) -> str:
    """How the task's score is made, with each member's number when ``outcomes`` are given."""
    names = sorted(outcomes) if outcomes is not None else sorted(members)
    by_metric: dict[str, list[str]] = {}
    for member in names:
        by_metric.setdefault(members[member].score_metric, []).append(member)
    how = "; ".join(f"{'F1 (positive class)' if metric == 'f1' else metric} for {', '.join(group)}"
                    for metric, group in sorted(by_metric.items()))
    text = f"{task} score = unweighted mean over {len(names)} members of each member's own metric ({how})"
    if outcomes:
        text += ": " + ", ".join(f"{m} {members[m].score_metric} "
                                 f"{member_score(outcomes[m], members[m].score_metric):.4f}" for m in names)
    return text


def majority_score(d: MemberData, metric: str, context: EvalContext) -> float:
    """What always guessing the training split's most frequent label scores on the reported examples."""
    report = d.report[: context.limit] if context.limit else d.report
    labels = np.array([e.label for e in report])
    majority = int(np.bincount([e.label for e in d.train]).argmax())
    return float(classification_metrics(labels, np.full_like(labels, majority))[metric])


def majority_note(task: str, members: dict[str, MemberSpec], data: dict[str, MemberData], context: EvalContext
                  ) -> str:
    """What always guessing the training split's most frequent label scores: the floor to read a small
    model's numbers against (MRPC's F1 is 0.81 for it)."""
    values = [majority_score(d, members[member].score_metric, context) for member, d in data.items()]
    return (f"{task}: the majority-class guess (the training split's most frequent label) would score "
            f"{np.mean(values):.4f} on these {len(values)} members (same metrics)")


def member_rows(task: str, spec: MemberSpec, member: str, outcome: MemberOutcome, data: MemberData,
                settings: FinetuneSettings, seed: int, context: EvalContext) -> list[ScoreRow]:
    metrics = classification_metrics(outcome.labels, outcome.predictions)
    if outcome.method == "probe":
        chosen = "probe"
    else:
        chosen = (f"best epoch {outcome.best_epoch}/{settings.epochs} "
                  f"({outcome.selected_on} {settings.selection_metric} {max(outcome.dev_history):.4f})")
    notes = "; ".join([*data.notes, *outcome.notes, chosen, f"n_train={outcome.n_train}, n_dev={outcome.n_dev}"])
    rows = []
    for metric in spec.metrics:
        interval = bootstrap_classification({member: (outcome.labels, outcome.predictions, metric)})
        rows.append(ScoreRow(
            task=task, subtask=member, metric=metric, value=metrics[metric], n=len(outcome.labels),
            scoring=outcome.method, ci_low=interval.low, ci_high=interval.high, limit=context.limit,
            notes=notes, seed=seed,
        ))
    return rows


# the task score row's notes carry the majority-class floor of the same members and examples, so that every summary
# of the score (eval's, run's) can print the floor beside it (``majority_floor`` reads it back)
FLOOR_NOTE = "majority-class floor "


def majority_floor(notes: str) -> float | None:
    """The majority-class floor a GLUE task-score row's notes record (``aggregate_row``); None for another row (or
    one written before the floor was recorded)."""
    for part in notes.split("; "):
        if part.startswith(FLOOR_NOTE):
            try:
                return float(part.removeprefix(FLOOR_NOTE))
            except ValueError:
                return None
    return None


def aggregate_row(task: str, members: dict[str, MemberSpec], outcomes: dict[str, MemberOutcome], seed: int,
                  context: EvalContext, protocol: GlueProtocol, floor: float) -> ScoreRow:
    strata = {m: (o.labels, o.predictions, members[m].score_metric) for m, o in outcomes.items()}
    interval = bootstrap_classification(strata)
    method = "probe" if all(o.method == "probe" for o in outcomes.values()) else protocol.scoring
    which = ", ".join(f"{m} {members[m].score_metric}" for m in sorted(outcomes))
    notes = f"mean over {len(outcomes)}/{len(members)} members: {which}; glue protocol {protocol.name}"
    if method == "probe":
        notes += "; probe"
    notes += f"; {FLOOR_NOTE}{floor:.6f}"  # the same members' majority-class guess, same metrics, same examples
    return ScoreRow(
        task=task, subtask="", metric="score", value=interval.value,
        n=int(sum(len(o.labels) for o in outcomes.values())), scoring=method, ci_low=interval.low,
        ci_high=interval.high, limit=context.limit, notes=notes, seed=seed,
    )


def item_records(task: str, spec: MemberSpec, member: str, outcome: MemberOutcome, seed: int
                 ) -> list[dict[str, Any]]:
    names = spec.labels
    records = []
    for example, label, prediction, probs in zip(outcome.report_examples, outcome.labels, outcome.predictions,
                                                 outcome.probabilities):
        others = np.delete(probs, label)
        records.append({
            "scoring": outcome.method, "task": task, "subtask": member, "item_id": example.id,
            "group_id": example.group, "context": example.text_a, "sentence_good": example.text_b,
            # probability of the gold label against the strongest other label: correct iff good > bad
            "score_good": float(probs[label]), "score_bad": float(others.max()),
            "correct": float(prediction == label), "prediction": names[int(prediction)],
            "label": names[int(label)], "seed": seed,
        })
    return records


# ----------------------------------------------------------------------------------------------------------------
# progress on the terminal: per member run and epoch, with the ETA of the run and of the task


class _TerminalProgress:
    """Progress per member run and epoch, with the ETA of the run and of the whole task.

    With a rich ``Progress`` in the context, a bar per run (its own ETA column shows the run's ETA) and epoch lines
    above it; otherwise one line per epoch on stderr (nothing when the options say ``quiet``).
    """

    def __init__(self, context: EvalContext, total_work: float) -> None:
        self.progress = context.progress
        quiet = context.options is not None and context.options.quiet
        # above the bar when there is one, else on stderr (nothing when quiet)
        self._say = line_printer(self.progress.console if self.progress is not None else not quiet)
        self.total_work = total_work
        self.done_work = 0.0
        self.started = time.perf_counter()
        self.task_id = None
        self.label = ""
        self.n_train = 0
        self.metric = "accuracy"

    def start(self, label: str, settings: FinetuneSettings, splits: Splits) -> None:
        self.label = label
        self.n_train = n_train = len(splits.train)
        self.epochs = 1 if settings.probe else settings.epochs
        self.run_start_work = self.done_work
        if self.progress is not None:  # counted in training examples, so the bar's rate reads examples/s
            self.task_id = self.progress.add_task(label, total=self.epochs * n_train)
        method = "probe" if settings.probe else f"fine-tuning {settings.epochs} epochs"
        self.metric = settings.selection_metric
        chosen = "" if settings.probe else f"; best epoch by its {self.metric}"
        self._say(f"{label}: {method} on {n_train} examples ({splits.selected_on} {len(splits.dev)}{chosen})")

    def step(self, done: int, total: int) -> None:
        if self.progress is not None and self.task_id is not None:
            self.progress.update(self.task_id, completed=done)

    def epoch(self, info: EpochLog) -> None:
        self.done_work = self.run_start_work + self.n_train * info.epoch
        elapsed = time.perf_counter() - self.started
        remaining = elapsed / max(self.done_work, 1e-9) * (self.total_work - self.done_work)
        self._say(
            f"{self.label} epoch {info.epoch}/{info.epochs}: loss {info.train_loss:.4f}, dev {self.metric} "
            f"{info.dev_metric:.4f} (best {info.best_metric:.4f} @ epoch {info.best_epoch}), {info.seconds:.1f}s; "
            f"ETA {clock(info.eta_seconds)} this run, {clock(remaining)} all"
        )

    def finish(self, outcome: MemberOutcome, metric: str, majority: float) -> None:
        self.done_work = self.run_start_work + self.n_train * self.epochs
        if self.progress is not None and self.task_id is not None:
            self.progress.update(self.task_id, completed=self.epochs * self.n_train)
            self.progress.remove_task(self.task_id)
            self.task_id = None
        value = member_score(outcome, metric)
        also = "" if metric == "accuracy" else f", accuracy {float(np.mean(outcome.labels == outcome.predictions)):.4f}"
        self._say(f"{self.label}: reported {metric} {value:.4f} (majority class {majority:.4f}{also}) on "
                  f"{len(outcome.labels)} examples ({outcome.train_examples_per_second:.0f} train examples/s)")
