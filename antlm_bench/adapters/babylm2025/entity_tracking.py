"""Entity tracking: five continuations of a prefix, the first correct; subtasks ``regular``, ``ambiref``,
``move_contents``.

``prefix + option`` is scored over the option's tokens (offsets); value per file = mean over its numops groups,
task = mean over files. One deliberate difference from the official pipeline: a tie is never counted toward the
correct option (the official ``torch.max`` gives every tie to index 0, which is always the correct one); k options
tied at the maximum count 1/k when the correct one is among them, and ``n_ties`` counts those items.

Under a convention with ``skip_nothing_targets`` (``babylm-2026``) the items whose correct option contains
"nothing" are dropped before anything else (``--limit`` counts the items kept), as the 2026 pipeline drops them
when it writes its predictions and its leaderboard drops them from the gold (``skip_nothing_targets``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from antlm_bench.adapters.babylm2025.common import _row, _Task
from antlm_bench.adapters.base import EvalContext, TaskResult
from antlm_bench.adapters.minimal_pairs import scoring_model_for, subtask_name
from antlm_bench.data import hash_files, read_jsonl
from antlm_bench.errors import UserError
from antlm_bench.results.stats import bootstrap_macro
from antlm_bench.scoring.babylm2025 import span_seqs


def option_credit(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[items, options] summed scores, option 0 correct -> (credit 1/k when option 0 is among k tied maxima, else
    0; whether option 0 tied with another option for the maximum)."""
    top = scores.max(axis=1, keepdims=True)
    at_top = scores == top
    k = at_top.sum(axis=1)
    credit = np.where(at_top[:, 0], 1.0 / k, 0.0)
    return credit, at_top[:, 0] & (k > 1)


def entity_tracking_value(credit_by_file: dict[str, np.ndarray], numops_by_file: dict[str, np.ndarray]
                          ) -> tuple[float, dict[str, float], dict[str, dict[int, float]]]:
    """Task value = mean over files of (mean over numops groups of the group's accuracy), as the official
    sentence_zero_shot/run.py aggregates; not the micro accuracy over items."""
    groups: dict[str, dict[int, float]] = {}
    files: dict[str, float] = {}
    for name, credit in credit_by_file.items():
        numops = numops_by_file[name]
        groups[name] = {int(g): float(credit[numops == g].mean()) for g in np.unique(numops)}
        files[name] = float(np.mean(list(groups[name].values())))
    return float(np.mean(list(files.values()))), files, groups


class EntityTrackingTask(_Task):
    """Five continuations of a prefix; the first is the correct one."""

    metrics = ("accuracy",)

    def load(self, data_dir: Path, limit: int | None, skip_nothing_targets: bool = False
             ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
        """(the items of each file, how many items of each file ``skip_nothing_targets`` dropped)."""
        files = self._files(data_dir)
        self.data_files, self.data_hash = [str(f) for f in files], hash_files(files)
        out, dropped = {}, {}
        for path in files:
            records, taken = read_jsonl(path), {}
            if not records:
                raise UserError(f"{path}: no records; the data is damaged, fetch it again")
            kept, skipped = [], 0
            for index, record in enumerate(records):
                options = record.get("options")
                if not isinstance(record.get("input_prefix"), str) or not isinstance(options, list) or \
                        len(options) < 2 or not all(isinstance(o, str) for o in options):
                    raise UserError(f"{path}: record {index + 1}: needs input_prefix (text) and options (2+ texts)")
                if not all(o.strip() for o in options):
                    raise UserError(f"{path}: record {index + 1}: options holds an empty text; every option is a "
                                    "continuation to score: the data is damaged, fetch it again")
                if skip_nothing_targets and "nothing" in options[0]:
                    skipped += 1
                    continue
                group = record.get("numops", 0)
                if isinstance(group, bool) or not isinstance(group, int) or group < 0:
                    raise UserError(f"{path}: record {index + 1}: field numops is {group!r}, not a whole number of "
                                    "operations; the data is damaged, fetch it again")
                # --limit: the first N items of every numops group, so that every group keeps its say
                if limit is not None and taken.get(group, 0) >= limit:
                    continue
                taken[group] = taken.get(group, 0) + 1
                kept.append(record)
            if not kept:
                raise UserError(f"{path}: no items left to score (every correct option is a 'nothing' answer); "
                                "the data is damaged, fetch it again")
            out[subtask_name(path.name)] = kept
            dropped[subtask_name(path.name)] = skipped
        return out, dropped

    def run(self, ctx: EvalContext) -> TaskResult:
        started = time.perf_counter()
        files, dropped = self.load(ctx.data_dir, ctx.limit, ctx.convention.skip_nothing_targets)
        sm = scoring_model_for(ctx)
        method = self._method(ctx, sm)
        sentences, completions, shape = [], [], {}
        for name, records in files.items():
            for record in records:
                for option in record["options"]:  # official: plain concatenation, no space added
                    sentences.append(record["input_prefix"] + option)
                    completions.append(option)
            shape[name] = (len(records), len(records[0]["options"]))
        seqs = span_seqs(sm.tokenizer, sentences, completions, method)
        flat, notes = self._score(ctx, sm, seqs, method, shape[next(iter(shape))][1])
        if ctx.convention.skip_nothing_targets:
            notes += (f"; {ctx.convention.name}: items whose correct option is a 'nothing' answer dropped "
                      f"({sum(dropped.values())})")
        credit, tied, numops, scores, offset = {}, {}, {}, {}, 0
        for name, records in files.items():
            if any(len(r["options"]) != shape[name][1] for r in records):
                raise UserError(f"{self.name}: {name}: items have different numbers of options")
            size = shape[name][0] * shape[name][1]
            scores[name] = flat[offset:offset + size].reshape(shape[name])
            offset += size
            credit[name], tied[name] = option_credit(scores[name])
            numops[name] = np.asarray([r.get("numops", 0) for r in records])
        value, per_file, per_group = entity_tracking_value(credit, numops)
        rows = []
        for name in files:
            groups = {f"{g}": credit[name][numops[name] == g] for g in per_group[name]}
            interval = bootstrap_macro(groups)
            rows.append(_row(self.name, name, "accuracy", per_file[name], credit[name].size, method, ctx,
                             notes + "; groups " + ", ".join(f"{g}_ops={v:.4f}" for g, v in per_group[name].items()),
                             int(tied[name].sum()), (interval.low, interval.high)))
        everything = {f"{name}/{g}": credit[name][numops[name] == g] for name in files for g in per_group[name]}
        interval = bootstrap_macro(everything)
        rows.insert(0, _row(self.name, "", "accuracy", value, sum(c.size for c in credit.values()), method, ctx,
                            notes, sum(int(t.sum()) for t in tied.values()),
                            (min(interval.low, value), max(interval.high, value))))
        items = []
        if ctx.log_samples:
            for name, records in files.items():
                for i, record in enumerate(records):
                    others = scores[name][i, 1:]
                    items.append({
                        "task": self.name, "subtask": name, "item_id": str(record.get("sample_id", i)),
                        "group_id": f"{name}_{int(record.get('numops', 0))}_ops",
                        "context": record["input_prefix"], "sentence_good": record["options"][0],
                        "sentence_bad": record["options"][1 + int(np.argmax(others))],
                        "score_good": float(scores[name][i, 0]), "score_bad": float(others.max()),
                        "correct": float(credit[name][i]),
                    })
        self.seconds = time.perf_counter() - started
        result_notes = []
        if ctx.convention.skip_nothing_targets:
            result_notes.append(f"{self.name}: {ctx.convention.name}: "
                                + ", ".join(f"{name} {n} 'nothing' items dropped" for name, n in dropped.items()))
        if ctx.limit is not None:
            result_notes.append(f"{self.name}: --limit {ctx.limit}: first {ctx.limit} items of each numops group")
        return TaskResult(rows=rows, items=items, notes=result_notes)

