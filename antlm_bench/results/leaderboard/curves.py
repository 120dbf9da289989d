"""Training curves: per column, the seed-averaged score at each scored checkpoint of a run group."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from antlm_bench.results.leaderboard.checkpoints import RunCheckpoint
from antlm_bench.results.leaderboard.definition import (
    FINETUNED_SCORING,
    MACRO,
)
from antlm_bench.results.leaderboard.model import CurvePoint


def curves_of(checkpoints: Mapping[str, list[RunCheckpoint]], run_ids: Sequence[str], columns: Sequence[str],
            macro_columns: Sequence[str]) -> dict[str, list[CurvePoint]]:
    """Per column, the seed-averaged score at each checkpoint (same phase index and epoch across seeds)."""
    points: dict[str, dict[tuple, list[tuple[RunCheckpoint, float, str]]]] = defaultdict(lambda: defaultdict(list))
    for run_id in run_ids:
        # one sample size along the curve: the per-phase scores use --eval-limit, the final evaluation may use
        # more items; the curve keeps the limit of the run's first scored checkpoint wherever that exists
        curve_limit: dict[str, int | None] = {}
        for ckpt in checkpoints[run_id]:
            for column, cell_row in ckpt.cells.items():
                curve_limit.setdefault(column, cell_row["limit"])
        for ckpt in checkpoints[run_id]:
            at = (ckpt.ckpt[0], ckpt.ckpt[1])
            chosen = {column: ckpt.by_limit.get(column, {}).get(curve_limit[column], cell_row)
                      for column, cell_row in ckpt.cells.items()}
            for column, cell_row in chosen.items():
                points[column][at].append((ckpt, cell_row["value"], cell_row["scoring"], cell_row["ci_low"],
                                           cell_row["ci_high"], cell_row["limit"]))
            if macro_columns and all(c in chosen for c in macro_columns):
                value = float(np.mean([chosen[c]["value"] for c in macro_columns]))
                methods = "/".join(sorted({chosen[c]["scoring"] for c in macro_columns},
                                          key=lambda m: (m in FINETUNED_SCORING, m)))
                points[MACRO][at].append((ckpt, value, methods, None, None,
                                          _subset({chosen[c]["limit"] for c in macro_columns})))
    curves: dict[str, list[CurvePoint]] = {}
    for column in [*columns, MACRO]:
        if column not in points:
            continue
        curve = []
        for at in sorted(points[column]):
            entries = points[column][at]
            meta = entries[0][0].meta
            tokens = [e[0].meta["tokens_seen"] for e in entries if e[0].meta["tokens_seen"] is not None]
            words = [e[0].meta.get("words_seen") for e in entries]
            bounds = [(e[3], e[4]) for e in entries if e[3] is not None and e[4] is not None]
            limits = {e[5] for e in entries}
            curve.append(CurvePoint(meta["phase_index"], meta["epoch"], float(np.mean(tokens)) if tokens else None,
                                    float(np.mean([e[1] for e in entries])),
                                    "+".join(dict.fromkeys(e[2] for e in entries)),
                                    float(np.mean([b[0] for b in bounds])) if len(bounds) == len(entries) else None,
                                    float(np.mean([b[1] for b in bounds])) if len(bounds) == len(entries) else None,
                                    _subset(limits), len(entries),
                                    None if None in words else float(np.mean(words))))
        curves[column] = curve
    return curves


def _subset(limits: set[int | None]) -> int | None:
    """The items per subtask behind a point pooled from several numbers: the smallest limit among them (a point
    that stands partly on a subset is marked as one), None when every number stands on every item."""
    given = [limit for limit in limits if limit is not None]
    return min(given) if given else None
