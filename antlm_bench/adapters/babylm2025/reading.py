"""Reading: eye-tracking and self-paced reading times regressed on word surprisal.

Word surprisal by the official sub-token chain; two metrics, ``eye_tracking`` (mean of the four eye-tracking
measures) and ``self_paced_reading`` (one-word spill-over), each ΔR² / (1 − R²_base) stored as a fraction (the
official report prints 100 × that).

Intervals: a 95% percentile cluster bootstrap over sentences (``sent_id``; 205 sentences of 4-14 words), B=1000,
each replicate refitting every regression of both metrics on the resampled sentences (weighted normal equations
over per-sentence moments, so a replicate costs a few small solves). Words of one sentence share its reader and
context, so they are resampled together. On simulated reading times with a known population gain (1% and 3%; 300
data sets each, tests/adapters/test_reading_intervals.py) the intervals covered 92-95% of the time: slightly short of
95%, as cluster bootstraps with about 200 clusters tend to be. Efron's bias correction and BCa did no better there.
"""

from __future__ import annotations

import csv
import io
import lzma
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from antlm_bench.adapters.babylm2025.common import _row, _Task
from antlm_bench.adapters.base import EvalContext, TaskResult
from antlm_bench.adapters.minimal_pairs import scoring_model_for
from antlm_bench.data import hash_files, open_text
from antlm_bench.errors import UserError
from antlm_bench.scoring.babylm2025 import next_token_seqs, reading_queries
from antlm_bench.scoring.encode import Seq

# pandas' default NA strings: the official reader (pd.read_csv) turns these into NaN, "None" and "" included
PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                       "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
EYE_TRACKING = ("RTfirstfix", "RTfirstpass", "RTgopast", "RTrightbound")
SELF_PACED = "self_paced_reading_time"
MIN_COMPLETE_ROWS = 30  # per measure: well above the 17 coefficients of the largest (self-paced) regression
NUMERIC = ("Subtlex_log10", "length", "context_length", "prev_length", *EYE_TRACKING, SELF_PACED)


@dataclass
class ReadingData:
    item: list[str]  # left context ("None" where pandas read NaN: the official fillna)
    word: list[str]
    prev_item: list[str | None]  # None where pandas read NaN (no repair, as the official code)
    prev_word: list[str | None]
    columns: dict[str, np.ndarray]  # the numeric columns, NaN where missing
    sentence: list[str] = field(default_factory=list)  # sent_id: the bootstrap's clusters (empty: one per row)


def read_reading_csv(path: Path) -> ReadingData:
    """The CSV as the official ``pd.read_csv(path, dtype={'item': str})`` + ``item.fillna("None")`` sees it.

    pandas reads the strings in :data:`PANDAS_NA` as missing: the word "None" as a left context becomes NaN; the
    official fix puts "None" back in ``item`` but not in ``prev_item`` (so one row loses its ``prev_pred`` and
    drops out of the self-paced-reading fit). Reproduced, not repaired (docs/babylm-2025.md)."""
    try:
        with open_text(path) as handle:
            reader = csv.reader(io.StringIO(handle.read()))
            header = next(reader, None)
            rows = list(reader)
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte {err.start} of a block: {err.reason}); convert the file "
                        "to UTF-8 or fetch it again") from None
    except (lzma.LZMAError, EOFError) as err:
        raise UserError(f"{path}: cannot be read ({err}); the file is corrupt or not xz, fetch it again") from None
    except csv.Error as err:
        raise UserError(f"{path}: not a readable CSV (line {reader.line_num}: {err}); the data is damaged, fetch "
                        "it again") from None
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
    columns = {c: np.asarray([number(row[at[c]], line, c) for line, row in enumerate(rows, start=2)])
               for c in NUMERIC}
    predictors = np.isfinite(columns["Subtlex_log10"]) & np.isfinite(columns["length"]) \
        & np.isfinite(columns["context_length"])
    for measure in (*EYE_TRACKING, SELF_PACED):  # a regression needs rows to fit: fewer end in a division by zero
        complete = int(np.sum(predictors & np.isfinite(columns[measure])))
        if complete < MIN_COMPLETE_ROWS:
            raise UserError(f"{path}: column {measure}: {complete} rows with a value (and the predictors), at least "
                            f"{MIN_COMPLETE_ROWS} are needed for its regression; the data is damaged, fetch it again")
    return ReadingData(
        item=[text(row, "item") or "None" for row in rows], word=[str(w) for w in words],
        prev_item=[text(row, "prev_item") for row in rows], prev_word=[text(row, "prev_word") for row in rows],
        columns=columns, sentence=[row[header.index("sent_id")] for row in rows] if "sent_id" in header else [],
    )


def r_squared(y: np.ndarray, design: np.ndarray) -> float:
    """Centred R² of an ordinary least-squares fit with an intercept (numpy lstsq)."""
    x = np.column_stack([np.ones(len(y)), design])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ beta
    centred = y - y.mean()
    return float(1.0 - residual @ residual / (centred @ centred))


def _formula(dv: np.ndarray, terms: dict[str, np.ndarray], pairs: list[tuple[str, str]],
             extra: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, design, rows kept) of one formula: main effects, pairwise products, ``extra``; the complete rows of its
    own variables (the official dropna)."""
    names = list(terms)
    columns = [terms[n] for n in names] + [terms[a] * terms[b] for a, b in pairs]
    variables = [dv, *(terms[n] for n in names)] + ([] if extra is None else [extra])
    keep = np.all(np.isfinite(np.column_stack(variables)), axis=1)
    design = np.column_stack(columns + ([] if extra is None else [extra]))
    return dv[keep], design[keep], keep


def _gain(dv: np.ndarray, terms: dict[str, np.ndarray], pairs: list[tuple[str, str]], pred: np.ndarray) -> float:
    """100-free gain of adding ``pred``: (R²_model - R²_base) / (1 - R²_base), each fit on its own complete rows
    (the official dropna over the variables of that formula)."""
    base = r_squared(*_formula(dv, terms, pairs, None)[:2])
    model = r_squared(*_formula(dv, terms, pairs, pred)[:2])
    return (model - base) / (1.0 - base)


def _bootstrap_r_squared(y: np.ndarray, design: np.ndarray, cluster: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """R² of the OLS fit in each bootstrap replicate: ``counts`` (B, n_clusters) says how often each cluster was
    drawn; a row's weight is its cluster's count. Per-cluster moments make a replicate a (p, p) solve."""
    x = np.column_stack([np.ones(len(y)), (design - design.mean(0)) / (design.std(0) + 1e-300)])
    n_clusters = counts.shape[1]
    xtx = np.zeros((n_clusters, x.shape[1], x.shape[1]))
    np.add.at(xtx, cluster, x[:, :, None] * x[:, None, :])
    xty = np.zeros((n_clusters, x.shape[1]))
    np.add.at(xty, cluster, x * y[:, None])
    yty, sy = np.bincount(cluster, y * y, n_clusters), np.bincount(cluster, y, n_clusters)
    weights = counts.astype(np.float64)
    a, b = np.einsum("bc,cij->bij", weights, xtx), weights @ xty
    beta = np.linalg.pinv(a) @ b[:, :, None]
    total_y, total_y2, total_n = weights @ sy, weights @ yty, weights @ np.bincount(cluster, None, n_clusters)
    residual = total_y2 - np.einsum("bi,bi->b", beta[:, :, 0], b)
    centred = total_y2 - total_y ** 2 / total_n
    return 1.0 - residual / centred


def _bootstrap_gain(dv: np.ndarray, terms: dict[str, np.ndarray], pairs: list[tuple[str, str]], pred: np.ndarray,
                    cluster: np.ndarray, counts: np.ndarray) -> np.ndarray:
    fits = []
    for extra in (None, pred):
        y, design, keep = _formula(dv, terms, pairs, extra)
        fits.append(_bootstrap_r_squared(y, design, cluster[keep], counts))
    base, model = fits
    return (model - base) / (1.0 - base)


def _regressions(data: ReadingData, prev_pred: np.ndarray) -> dict[str, tuple]:
    """measure -> (dv, terms, pairs) of its regression."""
    c = data.columns
    terms = {"S": c["Subtlex_log10"], "L": c["length"], "C": c["context_length"]}
    pairs = [("S", "L"), ("S", "C"), ("L", "C")]
    out = {dv: (c[dv], terms, pairs) for dv in EYE_TRACKING}
    spill = {**terms, "PL": c["prev_length"], "PP": prev_pred}
    names = list(spill)
    out[SELF_PACED] = (c[SELF_PACED], spill, [(names[i], names[j]) for i in range(len(names))
                                             for j in range(i + 1, len(names))])
    return out


def reading_scores(data: ReadingData, pred: np.ndarray, prev_pred: np.ndarray) -> tuple[float, float, dict[str, float]]:
    """(eye_tracking, self_paced_reading, per-measure gains), as fractions (the official report: ×100).

    Eye tracking: per RT measure ``dv ~ S + L + C + S:L + S:C + L:C`` against the same + surprisal, the mean of
    the four gains. Self-paced reading: the five main effects S, L, C, PL, PP and all 10 pairwise products."""
    gains = {dv: _gain(*spec, pred) for dv, spec in _regressions(data, prev_pred).items()}
    return float(np.mean([gains[dv] for dv in EYE_TRACKING])), gains[SELF_PACED], gains


BOOTSTRAP_REPLICATES = 1000
INTERVAL_METHOD = "95% percentile cluster bootstrap over sentences (sent_id), B=1000"



def reading_intervals(data: ReadingData, pred: np.ndarray, prev_pred: np.ndarray,
                      n_boot: int = BOOTSTRAP_REPLICATES, seed: int = 0) -> tuple[tuple[float, float], ...]:
    """95% percentile intervals of (eye_tracking, self_paced_reading): sentences resampled with replacement, every
    regression refitted on each replicate (see the module docstring)."""
    labels = data.sentence or [str(i) for i in range(len(data.word))]
    _, cluster = np.unique(np.asarray(labels), return_inverse=True)
    n_clusters = int(cluster.max()) + 1
    rng = np.random.default_rng(seed)
    counts = np.stack([np.bincount(rng.integers(0, n_clusters, n_clusters), minlength=n_clusters)
                       for _ in range(n_boot)])
    gains = {dv: _bootstrap_gain(*spec, pred, cluster, counts)
             for dv, spec in _regressions(data, prev_pred).items()}
    eye = np.mean([gains[dv] for dv in EYE_TRACKING], axis=0)
    return tuple((float(np.percentile(g, 2.5)), float(np.percentile(g, 97.5))) for g in (eye, gains[SELF_PACED]))


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

    metrics = ("eye_tracking", "self_paced_reading")

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
        eye_ci, spr_ci = reading_intervals(data, pred, prev_pred)
        notes = (notes_holder[0] + "; word tokenized alone (no leading space), official sub-token chain; interval: "
                 + INTERVAL_METHOD)
        detail = ", ".join(f"{k}={v:.6f}" for k, v in gains.items())
        n_eye = int(np.sum(np.isfinite(np.column_stack([data.columns[c] for c in
                                                        ("Subtlex_log10", "length", "context_length")])).all(axis=1)))
        spr_cols = [data.columns[c] for c in ("Subtlex_log10", "length", "context_length", "prev_length",
                                               SELF_PACED)] + [prev_pred]
        n_spr = int(np.all(np.isfinite(np.column_stack(spr_cols)), axis=1).sum())
        rows = [
            _row(self.name, "", "eye_tracking", eye, n_eye, method, ctx, notes + "; gains " + detail, ci=eye_ci),
            _row(self.name, "", "self_paced_reading", spr, n_spr, method, ctx, notes, ci=spr_ci),
        ]
        result_notes = []
        if ctx.limit is not None:  # a regression on a handful of rows fits them exactly: no number at all
            for row in rows:
                row.limit = None
            result_notes.append(f"{self.name}: --limit does not apply (the regressions need every row; "
                                f"{len(data.word)} words scored)")
        self.seconds = time.perf_counter() - started
        return TaskResult(rows=rows, items=[], notes=result_notes)

