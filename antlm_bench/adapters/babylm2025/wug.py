"""WUG adjective nominalization: two tab-separated variants (-ity first, -ness second) and the human preference
for the first.

p_first = float32 softmax of the two variants' summed log-probabilities (it saturates at 1.0 once the gap reaches
24 ln 2, as the official one does); value = Spearman (average ranks) against ``ratio``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from antlm_bench.adapters.babylm2025.common import _row, _Task
from antlm_bench.adapters.base import EvalContext, TaskResult
from antlm_bench.adapters.minimal_pairs import scoring_model_for
from antlm_bench.data import hash_files, read_jsonl
from antlm_bench.errors import UserError
from antlm_bench.scoring.babylm2025 import span_seqs


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

    metrics = ("spearman",)

    def run(self, ctx: EvalContext) -> TaskResult:
        started = time.perf_counter()
        files = self._files(ctx.data_dir)
        self.data_files, self.data_hash = [str(f) for f in files], hash_files(files)
        firsts, seconds, ratios = [], [], []
        for path in files:
            for index, record in enumerate(read_jsonl(path)):
                parts = str(record.get("sentences", "")).split("\t")
                if len(parts) != 2 or not all(p.strip() for p in parts) or not isinstance(record.get("ratio"), (int, float)) \
                        or isinstance(record["ratio"], bool) or not math.isfinite(record["ratio"]):
                    raise UserError(f"{path}: record {index + 1}: needs 'sentences' (two tab-separated variants) "
                                    "and a finite numeric 'ratio'")
                firsts.append(parts[0])
                seconds.append(parts[1])
                ratios.append(float(record["ratio"]))
        if len(ratios) < 3:  # Spearman's rho of fewer than three pairs is no measurement
            raise UserError(f"{', '.join(map(str, files))}: {len(ratios)} record(s); the WUG task needs at least 3: "
                            "the data is damaged, fetch it again")
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

