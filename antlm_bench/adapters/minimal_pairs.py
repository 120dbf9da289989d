"""Minimal-pair tasks: BLiMP, the BLiMP supplement (``MinimalPairTask``) and EWoK (``EwokTask``).

A task reads its subtask files (one per BLiMP paradigm, supplement file or EWoK domain), scores both members of
every pair with the context's scoring method, and returns two metrics, each as one row per subtask plus the task row
(``subtask=""``: the unweighted mean over subtasks, with a stratified bootstrap interval): ``accuracy`` (a pair is
correct when the good member scores higher; a tie counts half and is counted in ``n_ties``) and ``margin``, the
mean of log P(good) - log P(bad) in nats, which moves where accuracy does not (more signal per seed).

EWoK: every line of a domain file is one item, Target1 (fits Context1) against Target2, both scored as
continuations of Context1. Lines 2k and 2k+1 are an item and its swapped twin; they share ``group_id`` k so the
bootstrap resamples them together. The zip is read in memory only, and the items table leaves EWoK's text out
(its terms of use forbid plain-text copies): the scores and the line index are kept.
"""

from __future__ import annotations

import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from antlm_bench.adapters.base import EvalContext, FileDataSpec, TaskAdapter, TaskResult, TextFields
from antlm_bench.data import hash_files, list_zip_members, read_jsonl, read_zip_jsonl, sha256_file
from antlm_bench.data.readers import data_files
from antlm_bench.errors import UserError, did_you_mean
from antlm_bench.results.stats import bootstrap_macro, bootstrap_mean, win_score
from antlm_bench.results.tables import ScoreRow
from antlm_bench.tasks import TaskSpec

if TYPE_CHECKING:  # the scoring engine (torch) is imported when a task scores, not when a board asks what it is
    from antlm_bench.scoring import ScoringModel


@dataclass
class Subtask:
    name: str
    source: str  # file (or zip!member) the items came from, for messages
    item_ids: list[str]
    good: list[str]
    bad: list[str]
    contexts: list[str] | None = None
    groups: list[str] | None = None
    n_total: int = 0  # items in the file before --limit


@dataclass
class PairScores:
    """Scores of one task's items, subtask by subtask (what aggregation needs)."""

    correct: dict[str, np.ndarray] = field(default_factory=dict)  # 1 / 0.5 / 0 per item
    margin: dict[str, np.ndarray] = field(default_factory=dict)  # log P(good) - log P(bad) per item, in nats
    groups: dict[str, np.ndarray] = field(default_factory=dict)


def subtask_name(file_name: str) -> str:
    """``adjunct_island.jsonl.xz`` -> ``adjunct_island``; ``ewok_filtered/social-relations.jsonl`` -> its stem."""
    name = Path(file_name).name
    for suffix in (".xz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name


def scoring_model_for(ctx: EvalContext) -> ScoringModel:
    """The context's scoring model: given (a ScoringModel or a model + tokenizer), else loaded once and kept."""
    from antlm_bench.scoring import ScoringModel, load_scoring_model, wrap_model

    if isinstance(ctx.model, ScoringModel):
        return ctx.model
    if ctx.model is not None:
        if ctx.tokenizer is None:
            raise UserError("an in-memory model was given without its tokenizer; pass tokenizer=...")
        return wrap_model(ctx.model, ctx.tokenizer)
    if ctx.model_path is None:
        raise UserError("no model to score: give --model PATH")
    ctx.model = load_scoring_model(ctx.model_path, ctx.device, ctx.dtype)
    ctx.tokenizer = ctx.model.tokenizer
    return ctx.model


def aggregate(
    task: str, subtasks: list[str], scores: PairScores, method: str, limit: int | None, notes: str = ""
) -> list[ScoreRow]:
    """Per subtask and for the task (the unweighted mean over its subtasks), two metrics with bootstrap intervals
    over items (clusters: EWoK's pairs): ``accuracy`` (wins + ties / 2) and ``margin``, the mean of
    log P(good) - log P(bad) in nats: continuous, so it separates models whose accuracies tie (more signal per
    seed; Signal and Noise, arXiv 2508.13144)."""
    groups = {n: scores.groups[n] for n in subtasks if n in scores.groups}
    rows = []
    for metric, values in (("accuracy", scores.correct), ("margin", scores.margin)):
        ties = metric == "accuracy"
        task_rows = []
        for name in subtasks:
            interval = bootstrap_mean(values[name], groups.get(name))
            task_rows.append(ScoreRow(
                task=task, subtask=name, metric=metric, value=interval.value, n=int(values[name].size),
                scoring=method, n_ties=int(np.sum(scores.correct[name] == 0.5)) if ties else 0,
                ci_low=interval.low, ci_high=interval.high, limit=limit, notes=notes))
        macro = bootstrap_macro({n: values[n] for n in subtasks}, groups)
        task_rows.insert(0, ScoreRow(
            task=task, subtask="", metric=metric, value=macro.value, n=int(sum(values[n].size for n in subtasks)),
            scoring=method, n_ties=int(sum(np.sum(scores.correct[n] == 0.5) for n in subtasks)) if ties else 0,
            ci_low=macro.low, ci_high=macro.high, limit=limit, notes=notes))
        rows.extend(task_rows)
    return rows


class MinimalPairTask(TaskAdapter):
    """A folder of JSONL files of (good, bad) sentence pairs, one subtask per file."""

    metrics = ("accuracy", "margin")
    spec_sections = {"data": FileDataSpec, "fields": TextFields}
    needs_scoring_model = True
    has_fast_subset = True
    keep_text_in_items = True
    selects_subtasks = True  # blimp:adjunct_island

    def __init__(self, spec: TaskSpec, members: list[str] | None = None) -> None:
        super().__init__(spec, members)
        self.members = members
        self.seconds = 0.0

    def _chosen(self, names: list[str], where: Path) -> list[int]:
        """Indices of the subtasks ``task:subtask`` selected (all without a selection); an unknown name: one line
        with the closest ones."""
        if not self.members:
            return list(range(len(names)))
        for member in self.members:
            if member not in names:
                raise UserError(f"{self.name}:{member}: no such subtask; {did_you_mean(member, names)}the "
                                f"{len(names)} subtasks are the data's files in {where}")
        return [i for i, name in enumerate(names) if name in self.members]

    @property
    def data(self) -> dict:
        """The spec's data section; under --fast, with its ``fast`` overrides (the official fast subsets)."""
        data = {k: v for k, v in self.spec.data.items() if k != "fast"}
        if self.eval_set == "fast":
            data.update(self.spec.data.get("fast") or {})
        return data

    # -- data ---------------------------------------------------------------------------------------------------
    def _field(self, key: str, default: str | None = None) -> str:
        value = self.spec.fields.get(key, default)
        if value is None:
            raise UserError(f"{self.spec.source}: fields.{key} missing")
        return str(value)

    def _check_count(self, found: int, where: Path) -> None:
        expected = self.data.get("expected_subtasks")
        if expected is not None and found != int(expected):
            raise UserError(
                f"{self.name}: found {found} of {expected} subtask files in {where}; the data is incomplete, "
                "check it with `antlm-bench data verify` or fetch it again"
            )

    def _data_folder(self, data_dir: Path) -> Path:
        folder = data_dir / str(self.data.get("folder", ""))
        if not folder.is_dir():
            raise UserError(
                f"{self.name}: data folder {folder} not found; pass --data-dir DIR (the folder holding "
                f"{self.data.get('folder')}/), set $ANTLM_BENCH_DATA, or run `antlm-bench data fetch`"
            )
        return folder

    def check_data(self, data_dir: Path) -> None:
        """Fail fast (before the model loads) when the data is missing or incomplete."""
        folder = self._data_folder(data_dir)
        self._check_count(len(data_files(folder, str(self.data.get("pattern", "*.jsonl*")))), folder)

    def _build(self, name: str, source: str, records: list[dict[str, Any]], limit: int | None) -> Subtask:
        if not records:
            # an empty subtask would average to NaN and pass silently into the tables
            raise UserError(f"{source}: no records (the file is empty or blank); the data is damaged, check it "
                            "with `antlm-bench data verify` or fetch it again")
        good_key, bad_key = self._field("good"), self._field("bad")
        id_key = self.spec.fields.get("id")
        subset = records if limit is None else records[:limit]
        sub = Subtask(name, source, [], [], [], n_total=len(records))
        first_of: dict[str, int] = {}
        for index, record in enumerate(subset):
            for key in (good_key, bad_key):
                if not isinstance(record.get(key), str):
                    raise UserError(f"{source}: record {index + 1}: field {key!r} missing or not a string")
                if not record[key].strip():  # an empty sentence scores 0 on both sides: a tie counted as data
                    raise UserError(f"{source}: record {index + 1}: field {key!r} is empty; the data is damaged, "
                                    "check it with `antlm-bench data verify` or fetch it again")
            sub.good.append(record[good_key])
            sub.bad.append(record[bad_key])
            item_id = str(record[id_key]) if id_key and id_key in record else str(index)
            if item_id in first_of:  # two items of one id: one would replace the other in the item tables
                raise UserError(f"{source}: record {index + 1}: field {id_key!r} is {item_id}, as in record "
                                f"{first_of[item_id] + 1}; item ids are unique within a file: the data is damaged, "
                                "fetch it again")
            first_of[item_id] = index
            sub.item_ids.append(item_id)
        same = sum(g == b for g, b in zip(sub.good, sub.bad))
        if same * 2 > len(sub.good):  # a few equal pairs are in the official data (ties); most is damage
            raise UserError(f"{source}: {same} of {len(sub.good)} pairs have {good_key!r} equal to {bad_key!r}, "
                            "which can only tie; the data is damaged, fetch it again")
        return sub

    def load(self, data_dir: Path, limit: int | None = None) -> list[Subtask]:
        folder = self._data_folder(data_dir)
        files = data_files(folder, str(self.data.get("pattern", "*.jsonl*")))
        self._check_count(len(files), folder)
        if not files:
            raise UserError(f"{self.name}: no data files in {folder}; run `antlm-bench data verify`")
        files = [files[i] for i in self._chosen([subtask_name(f.name) for f in files], folder)]
        self.data_files = [str(f) for f in files]
        self.data_hash = hash_files(files)
        return [self._build(subtask_name(f.name), str(f), read_jsonl(f), limit) for f in files]

    # -- scoring ------------------------------------------------------------------------------------------------
    def run(self, ctx: EvalContext) -> TaskResult:
        from antlm_bench.scoring import check_method, score_pairs

        started = time.perf_counter()
        subtasks = self.load(ctx.data_dir, ctx.limit)
        sm = scoring_model_for(ctx)
        method = ctx.scoring
        check_method(method)
        good = [s for sub in subtasks for s in sub.good]
        bad = [s for sub in subtasks for s in sub.bad]
        contexts = None
        if any(sub.contexts is not None for sub in subtasks):
            contexts = [c for sub in subtasks for c in (sub.contexts or [None] * len(sub.good))]
        report = None
        if ctx.progress is not None:
            progress_task = ctx.progress.add_task(self.name, total=len(good))
            report = lambda done: ctx.progress.update(progress_task, advance=done)
        score_good, score_bad = score_pairs(sm, good, bad, method, contexts, ctx.batch_tokens,
                                            ctx.convention.leading_space, report)
        if ctx.progress is not None:
            ctx.progress.update(progress_task, completed=len(good))
        correct = win_score(score_good, score_bad)

        scores, items, offset = PairScores(), [], 0
        for sub in subtasks:
            part = slice(offset, offset + len(sub.good))
            offset += len(sub.good)
            scores.correct[sub.name] = correct[part]
            scores.margin[sub.name] = score_good[part] - score_bad[part]
            if sub.groups is not None:
                scores.groups[sub.name] = np.asarray(sub.groups)
            if ctx.log_samples:
                items.extend(self._items(sub, score_good[part], score_bad[part], correct[part]))
        notes = self._row_notes(ctx)
        rows = aggregate(self.name, [s.name for s in subtasks], scores, method, ctx.limit, notes)
        self.seconds = time.perf_counter() - started
        result_notes = []
        if ctx.limit is not None:
            result_notes.append(f"{self.name}: --limit {ctx.limit}: first {ctx.limit} items of each subtask")
        return TaskResult(rows=rows, items=items, notes=result_notes)

    def _row_notes(self, ctx: EvalContext) -> str:
        parts = ["reduction=sum"] + (["eval_set=fast"] if self.eval_set == "fast" else [])
        return "; ".join(parts)

    def _items(self, sub: Subtask, good: np.ndarray, bad: np.ndarray, correct: np.ndarray) -> list[dict[str, Any]]:
        keep = self.keep_text_in_items
        return [
            {
                "task": self.name, "subtask": sub.name, "item_id": sub.item_ids[i],
                "group_id": sub.groups[i] if sub.groups is not None else sub.item_ids[i],
                "context": sub.contexts[i] if keep and sub.contexts is not None else None,
                "sentence_good": sub.good[i] if keep else None, "sentence_bad": sub.bad[i] if keep else None,
                "score_good": float(good[i]), "score_bad": float(bad[i]), "correct": float(correct[i]),
            }
            for i in range(len(sub.good))
        ]


class EwokTask(MinimalPairTask):
    """EWoK from its password-protected zip: Target1 vs Target2 as continuations of Context1."""

    keep_text_in_items = False  # EWoK terms of use: never a plain-text copy

    def _members(self, data_dir: Path) -> tuple[Path, list[str]]:
        zip_path = data_dir / str(self.data.get("zip", ""))
        if not zip_path.is_file():
            raise UserError(
                f"{self.name}: {zip_path} not found; pass --data-dir DIR (the folder holding "
                f"{self.data.get('zip')}), set $ANTLM_BENCH_DATA, or run `antlm-bench data fetch`"
            )
        try:
            members = list_zip_members(zip_path, str(self.data.get("folder", "")))
        except zipfile.BadZipFile as err:
            raise UserError(f"{zip_path}: not a readable zip ({err}); fetch the data again") from None
        self._check_count(len(members), zip_path)
        return zip_path, members

    def check_data(self, data_dir: Path) -> None:
        self._members(data_dir)

    def load(self, data_dir: Path, limit: int | None = None) -> list[Subtask]:
        zip_path, members = self._members(data_dir)
        folder = str(self.data.get("folder", ""))
        if not members:
            raise UserError(f"{self.name}: {zip_path} holds no {folder}/*.jsonl files; fetch the data again")
        password = self.data.get("password")
        self.data_files = [str(zip_path)]
        self.data_hash = sha256_file(zip_path)
        context_key = self._field("context")
        subtasks = []
        members = [members[i] for i in self._chosen([subtask_name(m) for m in members], zip_path)]
        for member in members:
            source = f"{zip_path}!{member}"
            records = read_zip_jsonl(zip_path, member, password)
            sub = self._build(subtask_name(member), source, records, limit)
            sub.contexts, sub.groups = [], []
            for index, record in enumerate(records[: len(sub.good)]):
                if not isinstance(record.get(context_key), str):
                    raise UserError(f"{source}: record {index + 1}: field {context_key!r} missing or not a string")
                sub.contexts.append(record[context_key])
                # full set: lines 2k, 2k+1 are an item and its swapped twin; the fast subset keeps no such order
                sub.groups.append(str(index // 2 if self.eval_set == "full" else index))
            sub.item_ids = [str(index) for index in range(len(sub.good))]  # the line index within the domain
            subtasks.append(sub)
        return subtasks

