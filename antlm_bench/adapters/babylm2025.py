"""The BabyLM 2025 zero-shot tasks beyond minimal pairs: entity tracking, WUG adjective nominalization, reading.

Each is scored as the official pipeline (babylm/evaluation-pipeline-2025) scores it, under the convention
``babylm-2025`` (docs/babylm-2025.md has every rule with its place in the official code), with one deliberate
difference: in entity tracking a tie is never counted toward the correct option (the official ``torch.max``
gives every tie to index 0, which is always the correct one); k options tied at the maximum count 1/k when the
correct one is among them, and ``n_ties`` counts those items.

- ``EntityTrackingTask``: subtasks ``regular``, ``ambiref``, ``move_contents``; ``prefix + option`` scored over
  the option's tokens (offsets); value per file = mean over its numops groups, task = mean over files.
- ``WugAdjTask``: p_first = float32 softmax of the two variants' summed log-probabilities (it saturates at 1.0
  once the gap reaches 24 ln 2, as the official one does); value = Spearman (average ranks) against ``ratio``.
- ``ReadingTask``: word surprisal by the official sub-token chain; two metrics, ``eye_tracking`` (mean of the four
  eye-tracking measures) and ``self_paced_reading`` (one-word spill-over), each ΔR² / (1 − R²_base) stored as a
  fraction (the official report prints 100 × that).

The scoring method comes from the context (``auto`` resolved by ``evaluate``): clm, pll (the official ``mlm``)
or mntp. Inputs longer than the model's configured positions are scored whole where the positions extend
(rotary / relative); the rows' notes say so.
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from antlm_bench.adapters.base import EvalContext, TaskResult
from antlm_bench.adapters.minimal_pairs import scoring_model_for, subtask_name
from antlm_bench.checkpoint_state import auto_scoring_method, read_state
from antlm_bench.data import _open_text, hash_files, read_jsonl
from antlm_bench.errors import UserError
from antlm_bench.registry import register_task_class
from antlm_bench.scoring import ScoringModel
from antlm_bench.scoring.babylm2025 import merge_prefix_groups, next_token_seqs, reading_queries, span_seqs
from antlm_bench.scoring.encode import Seq, dedupe
from antlm_bench.scoring.engine import longest_input, score_seqs
from antlm_bench.stats import bootstrap_macro
from antlm_bench.tables import ScoreRow
from antlm_bench.tasks import TaskSpec

CONVENTION = "babylm-2025"


# -- shared ---------------------------------------------------------------------------------------------------------
class _Task:
    needs_scoring_model = True

    def __init__(self, spec: TaskSpec, members: list[str] | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.data_hash = ""
        self.data_files: list[str] = []
        self.eval_set = "full"  # evaluate() sets "fast" under --fast

    @property
    def data(self) -> dict[str, Any]:
        """The spec's data section; under --fast, with its ``fast`` overrides applied."""
        data = {k: v for k, v in self.spec.data.items() if k != "fast"}
        if self.eval_set == "fast":
            data.update(self.spec.data.get("fast") or {})
        return data

    def _folder(self, data_dir: Path) -> Path:
        folder = data_dir / str(self.data.get("folder", ""))
        if not folder.is_dir():
            raise UserError(f"{self.name}: data folder {folder} not found; pass --data-dir DIR (the folder holding "
                            f"{self.data.get('folder')}/), set $ANTLM_BENCH_DATA, or run `antlm-bench data fetch`")
        return folder

    def _files(self, data_dir: Path) -> list[Path]:
        folder = self._folder(data_dir)
        files = sorted(folder.glob(str(self.data.get("pattern", "*.jsonl*"))))
        wanted = self.data.get("files")
        if wanted is not None:
            files = [f for f in files if subtask_name(f.name) in set(wanted)]
        expected = len(wanted) if wanted is not None else self.data.get("expected_subtasks")
        if not files or (expected is not None and len(files) != int(expected)):
            raise UserError(f"{self.name}: found {len(files)} of {expected or 'some'} data files in {folder}; the "
                            "data is incomplete, check it with `antlm-bench data verify` or fetch it again")
        return files

    def check_data(self, data_dir: Path) -> None:
        self._files(data_dir)

    def _method(self, ctx: EvalContext, sm: ScoringModel) -> str:
        method = ctx.scoring
        if method == "auto":  # run outside evaluate(): resolve from the checkpoint record as evaluate does
            state = read_state(ctx.model_path) if ctx.model_path is not None else None
            method, _ = auto_scoring_method(state, sm.is_masked_lm)
        if method not in ("clm", "pll", "mntp"):
            raise UserError(f"--scoring {method}: {self.name} (BabyLM 2025) defines clm, pll (the official 'mlm') "
                            "and mntp only; use one of them or auto")
        sm.check_mode("causal" if method == "clm" else "bidirectional", method)
        return method

    def _score(self, ctx: EvalContext, sm: ScoringModel, seqs: list[Seq], method: str,
               group_size: int | None = None) -> tuple[np.ndarray, str]:
        """Summed log-probabilities of ``seqs`` (duplicates scored once) and the notes for the rows.
        ``group_size``: consecutive runs of that many sequences share a prefix (an item's options)."""
        unique, index = dedupe(seqs)
        groups = None
        if group_size:
            groups = [np.unique(index[k:k + group_size]) for k in range(0, len(seqs), group_size)]
            if method == "clm":  # one scenario's items share their prefix too: one row for all of them
                groups = merge_prefix_groups(unique, groups)
        report = None
        if ctx.progress is not None:
            bar = ctx.progress.add_task(self.name, total=len(seqs))
            scale = len(seqs) / max(1, len(unique))
            report = lambda done: ctx.progress.update(bar, advance=done * scale)  # noqa: E731
        scores = score_seqs(sm, unique, method, ctx.batch_tokens, report, groups)[index]
        notes = [f"convention={CONVENTION}", "reduction=sum"]
        longest, limit = longest_input(unique, method), sm.max_length
        if limit is not None and longest > limit:
            notes.append(f"positions beyond the configured {limit} used (longest input {longest} tokens)")
        state = read_state(ctx.model_path) if ctx.model_path is not None and ctx.model_path.is_dir() else None
        trained = (state or {}).get("seq_len")
        if isinstance(trained, int) and longest > trained:  # rotary / relative positions the model never saw
            notes.append(f"inputs up to {longest} tokens, beyond the trained length {trained}")
        if ctx.eval_set == "fast":
            notes.append("eval_set=fast")
        return scores, "; ".join(notes)


def _row(task: str, subtask: str, metric: str, value: float, n: int, method: str, ctx: EvalContext, notes: str,
         n_ties: int = 0, ci: tuple[float, float] | None = None) -> ScoreRow:
    return ScoreRow(task=task, subtask=subtask, metric=metric, value=float(value), n=int(n), scoring=method,
                    n_ties=int(n_ties), ci_low=None if ci is None else ci[0], ci_high=None if ci is None else ci[1],
                    limit=ctx.limit, notes=notes)


# -- entity tracking ------------------------------------------------------------------------------------------------
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

    def load(self, data_dir: Path, limit: int | None) -> dict[str, list[dict[str, Any]]]:
        files = self._files(data_dir)
        self.data_files, self.data_hash = [str(f) for f in files], hash_files(files)
        out = {}
        for path in files:
            records, taken = read_jsonl(path), {}
            if not records:
                raise UserError(f"{path}: no records; the data is damaged, fetch it again")
            kept = []
            for index, record in enumerate(records):
                options = record.get("options")
                if not isinstance(record.get("input_prefix"), str) or not isinstance(options, list) or \
                        len(options) < 2 or not all(isinstance(o, str) for o in options):
                    raise UserError(f"{path}: record {index + 1}: needs input_prefix (text) and options (2+ texts)")
                group = int(record.get("numops", 0))
                # --limit: the first N items of every numops group, so that every group keeps its say
                if limit is not None and taken.get(group, 0) >= limit:
                    continue
                taken[group] = taken.get(group, 0) + 1
                kept.append(record)
            out[subtask_name(path.name)] = kept
        return out

    def run(self, ctx: EvalContext) -> TaskResult:
        started = time.perf_counter()
        files = self.load(ctx.data_dir, ctx.limit)
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
        credit, tied, numops, scores, offset = {}, {}, {}, {}, 0
        for name, records in files.items():
            if any(len(r["options"]) != shape[name][1] for r in records):
                raise UserError(f"{self.name}: {name}: items have different numbers of options")
            size = shape[name][0] * shape[name][1]
            scores[name] = flat[offset:offset + size].reshape(shape[name])
            offset += size
            credit[name], tied[name] = option_credit(scores[name])
            numops[name] = np.asarray([int(r.get("numops", 0)) for r in records])
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
        if ctx.limit is not None:
            result_notes.append(f"{self.name}: --limit {ctx.limit}: first {ctx.limit} items of each numops group")
        return TaskResult(rows=rows, items=items, notes=result_notes)


# -- WUG adjective nominalization -----------------------------------------------------------------------------------
def wug_p_first(score_first: np.ndarray, score_second: np.ndarray) -> np.ndarray:
    """softmax([s0, s1])[0] in float32, as the official torch.softmax over the model's float32 scores: it is
    exactly 1.0 once s0 - s1 >= 24 ln 2, and those items tie at the top rank."""
    import torch

    pair = torch.tensor(np.stack([score_first, score_second], axis=1), dtype=torch.float32)
    return torch.softmax(pair, dim=1)[:, 0].numpy().astype(np.float64)


def spearman(values: np.ndarray, reference: np.ndarray) -> float:
    """Spearman's rho with average ranks for ties (scipy.stats.spearmanr); NaN when either side is constant."""
    from scipy.stats import spearmanr

    if np.all(values == values[0]) or np.all(reference == reference[0]):
        return float("nan")
    return float(spearmanr(values, reference).statistic)


def _bootstrap_spearman(values: np.ndarray, reference: np.ndarray, resamples: int = 1000, seed: int = 0
                        ) -> tuple[float, float] | None:
    from scipy.stats import rankdata

    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    a, b = rankdata(values[picks], axis=1), rankdata(reference[picks], axis=1)
    a -= a.mean(axis=1, keepdims=True)
    b -= b.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    rho = rho[np.isfinite(rho)]
    if not len(rho):
        return None
    low, high = np.quantile(rho, [0.025, 0.975])
    return float(low), float(high)


class WugAdjTask(_Task):
    """Two tab-separated variants (-ity first, -ness second) and the human preference for the first."""

    def run(self, ctx: EvalContext) -> TaskResult:
        started = time.perf_counter()
        files = self._files(ctx.data_dir)
        self.data_files, self.data_hash = [str(f) for f in files], hash_files(files)
        firsts, seconds, ratios = [], [], []
        for path in files:
            for index, record in enumerate(read_jsonl(path)):
                parts = str(record.get("sentences", "")).split("\t")
                if len(parts) != 2 or not isinstance(record.get("ratio"), (int, float)):
                    raise UserError(f"{path}: record {index + 1}: needs 'sentences' (two tab-separated variants) "
                                    "and a numeric 'ratio'")
                firsts.append(parts[0])
                seconds.append(parts[1])
                ratios.append(float(record["ratio"]))
        if ctx.limit is not None:
            firsts, seconds, ratios = firsts[:ctx.limit], seconds[:ctx.limit], ratios[:ctx.limit]
        sm = scoring_model_for(ctx)
        method = self._method(ctx, sm)
        both = [*firsts, *seconds]
        seqs = span_seqs(sm.tokenizer, both, both, method)  # the completion is the whole sentence
        scores, notes = self._score(ctx, sm, seqs, method)
        s0, s1 = scores[:len(firsts)], scores[len(firsts):]
        p_first, ratio = wug_p_first(s0, s1), np.asarray(ratios)
        rho = spearman(p_first, ratio)
        saturated = int(np.sum(p_first == 1.0))
        notes += f"; p_first float32 softmax, {saturated} saturated at 1.0"
        result_notes = []
        if math.isnan(rho):
            result_notes.append(f"{self.name}: every p_first is equal: Spearman's rho is undefined (NaN)")
        ci = None if math.isnan(rho) else _bootstrap_spearman(p_first, ratio)
        rows = [_row(self.name, "", "spearman", rho, len(ratio), method, ctx, notes, 0, ci)]
        self.seconds = time.perf_counter() - started
        return TaskResult(rows=rows, items=[], notes=result_notes)


# -- reading --------------------------------------------------------------------------------------------------------
# pandas' default NA strings: the official reader (pd.read_csv) turns these into NaN, "None" and "" included
PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                       "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
EYE_TRACKING = ("RTfirstfix", "RTfirstpass", "RTgopast", "RTrightbound")
SELF_PACED = "self_paced_reading_time"
NUMERIC = ("Subtlex_log10", "length", "context_length", "prev_length", *EYE_TRACKING, SELF_PACED)


@dataclass
class ReadingData:
    item: list[str]  # left context ("None" where pandas read NaN: the official fillna)
    word: list[str]
    prev_item: list[str | None]  # None where pandas read NaN (no repair, as the official code)
    prev_word: list[str | None]
    columns: dict[str, np.ndarray]  # the numeric columns, NaN where missing


def read_reading_csv(path: Path) -> ReadingData:
    """The CSV as the official ``pd.read_csv(path, dtype={'item': str})`` + ``item.fillna("None")`` sees it.

    pandas reads the strings in :data:`PANDAS_NA` as missing: the word "None" as a left context becomes NaN; the
    official fix puts "None" back in ``item`` but not in ``prev_item`` (so one row loses its ``prev_pred`` and
    drops out of the self-paced-reading fit). Reproduced, not repaired (docs/babylm-2025.md)."""
    with _open_text(path) as handle:
        reader = csv.reader(io.StringIO(handle.read()))
        header = next(reader, None)
        rows = list(reader)
    if header is None or not rows:
        raise UserError(f"{path}: empty; the data is damaged, fetch it again")
    needed = ("item", "word", "prev_item", "prev_word", *NUMERIC)
    missing = [c for c in needed if c not in header]
    if missing:
        raise UserError(f"{path}: missing column {missing[0]!r}; the data is damaged, fetch it again")
    at = {c: header.index(c) for c in needed}

    def text(row: list[str], column: str) -> str | None:
        value = row[at[column]]
        return None if value in PANDAS_NA else value

    def number(value: str, line: int, column: str) -> float:
        if value in PANDAS_NA:
            return math.nan
        try:
            return float(value)
        except ValueError:
            raise UserError(f"{path}:{line}: column {column}: {value!r} is not a number") from None

    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise UserError(f"{path}:{line}: {len(row)} fields, the header has {len(header)}")
    words = [text(row, "word") for row in rows]
    if any(w is None for w in words):
        raise UserError(f"{path}: a row has no word; the data is damaged")
    return ReadingData(
        item=[text(row, "item") or "None" for row in rows], word=[str(w) for w in words],
        prev_item=[text(row, "prev_item") for row in rows], prev_word=[text(row, "prev_word") for row in rows],
        columns={c: np.asarray([number(row[at[c]], line, c) for line, row in enumerate(rows, start=2)])
                 for c in NUMERIC},
    )


def r_squared(y: np.ndarray, design: np.ndarray) -> float:
    """Centred R² of an ordinary least-squares fit with an intercept (numpy lstsq)."""
    x = np.column_stack([np.ones(len(y)), design])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ beta
    centred = y - y.mean()
    return float(1.0 - residual @ residual / (centred @ centred))


def _gain(dv: np.ndarray, terms: dict[str, np.ndarray], pairs: list[tuple[str, str]], pred: np.ndarray) -> float:
    """100-free gain of adding ``pred``: (R²_model - R²_base) / (1 - R²_base), each fit on its own complete rows
    (the official dropna over the variables of that formula)."""
    names = list(terms)

    def fit(extra: np.ndarray | None) -> float:
        columns = [terms[n] for n in names] + [terms[a] * terms[b] for a, b in pairs]
        variables = [dv, *(terms[n] for n in names)] + ([] if extra is None else [extra])
        keep = np.all(np.isfinite(np.column_stack(variables)), axis=1)
        design = np.column_stack(columns + ([] if extra is None else [extra]))
        return r_squared(dv[keep], design[keep])

    base, model = fit(None), fit(pred)
    return (model - base) / (1.0 - base)


def reading_scores(data: ReadingData, pred: np.ndarray, prev_pred: np.ndarray) -> tuple[float, float, dict[str, float]]:
    """(eye_tracking, self_paced_reading, per-measure gains), as fractions (the official report: ×100).

    Eye tracking: per RT measure ``dv ~ S + L + C + S:L + S:C + L:C`` against the same + surprisal, the mean of
    the four gains. Self-paced reading: the five main effects S, L, C, PL, PP and all 10 pairwise products."""
    c = data.columns
    s, length, context = c["Subtlex_log10"], c["length"], c["context_length"]
    terms = {"S": s, "L": length, "C": context}
    pairs = [("S", "L"), ("S", "C"), ("L", "C")]
    gains = {dv: _gain(c[dv], terms, pairs, pred) for dv in EYE_TRACKING}
    spill = {"S": s, "L": length, "C": context, "PL": c["prev_length"], "PP": prev_pred}
    names = list(spill)
    spill_pairs = [(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))]
    gains[SELF_PACED] = _gain(c[SELF_PACED], spill, spill_pairs, pred)
    return float(np.mean([gains[dv] for dv in EYE_TRACKING])), gains[SELF_PACED], gains


def word_surprisals(tokenizer, contexts: list[str | None], words: list[str | None], method: str,
                    score: Callable[[list[Seq]], np.ndarray]) -> np.ndarray:
    """-ln P(word | context) by the official chain (NaN where the context is missing): every (context, target)
    query of every word, scored at once; a word's surprisal is the sum over its sub-tokens."""
    queries, owner = [], []
    for k, (context, word) in enumerate(zip(contexts, words)):
        if context is None or word is None:
            continue
        for query in reading_queries(tokenizer, context, word):
            queries.append(query)
            owner.append(k)
    out = np.full(len(contexts), np.nan)
    if queries:
        logprobs = score(next_token_seqs(tokenizer, queries, method))
        owners = np.asarray(owner)
        totals = np.bincount(owners, weights=-logprobs, minlength=len(contexts))
        present = np.unique(owners)
        out[present] = totals[present]
    return out


class ReadingTask(_Task):
    """Eye-tracking and self-paced reading times regressed on word surprisal."""

    def run(self, ctx: EvalContext) -> TaskResult:
        started = time.perf_counter()
        files = self._files(ctx.data_dir)
        self.data_files, self.data_hash = [str(f) for f in files], hash_files(files)
        data = read_reading_csv(files[0])
        sm = scoring_model_for(ctx)
        method = self._method(ctx, sm)
        notes_holder: list[str] = []

        def score(seqs: list[Seq]) -> np.ndarray:
            values, notes = self._score(ctx, sm, seqs, method)
            notes_holder.append(notes)
            return values

        # the current and the previous word in one pass: their queries share contexts (and prefix-tree rows)
        n = len(data.word)
        both = word_surprisals(sm.tokenizer, [*data.item, *data.prev_item], [*data.word, *data.prev_word], method,
                               score)
        pred, prev_pred = both[:n], both[n:]
        eye, spr, gains = reading_scores(data, pred, prev_pred)
        notes = notes_holder[0] + "; word tokenized alone (no leading space), official sub-token chain"
        detail = ", ".join(f"{k}={v:.6f}" for k, v in gains.items())
        n_eye = int(np.sum(np.isfinite(np.column_stack([data.columns[c] for c in
                                                        ("Subtlex_log10", "length", "context_length")])).all(axis=1)))
        spr_cols = [data.columns[c] for c in ("Subtlex_log10", "length", "context_length", "prev_length",
                                               SELF_PACED)] + [prev_pred]
        n_spr = int(np.all(np.isfinite(np.column_stack(spr_cols)), axis=1).sum())
        rows = [
            _row(self.name, "", "eye_tracking", eye, n_eye, method, ctx, notes + "; gains " + detail),
            _row(self.name, "", "self_paced_reading", spr, n_spr, method, ctx, notes),
        ]
        result_notes = []
        if ctx.limit is not None:  # a regression on a handful of rows fits them exactly: no number at all
            for row in rows:
                row.limit = None
            result_notes.append(f"{self.name}: --limit does not apply (the regressions need every row; "
                                f"{len(data.word)} words scored)")
        self.seconds = time.perf_counter() - started
        return TaskResult(rows=rows, items=[], notes=result_notes)


register_task_class("EntityTrackingTask")(EntityTrackingTask)
register_task_class("WugAdjTask")(WugAdjTask)
register_task_class("ReadingTask")(ReadingTask)
