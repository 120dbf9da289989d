"""What the BabyLM 2025 zero-shot tasks share: their data files (with the ``--fast`` overrides), the scoring method
(``auto`` resolved as ``evaluate`` does: clm, pll (the official ``mlm``) or mntp), batched scoring with the notes
that go with it, and the shape of a row.

Inputs longer than the model's configured positions are scored whole where the positions extend (rotary /
relative); the rows' notes say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from antlm_bench.adapters.base import EvalContext, FileDataSpec, TaskAdapter
from antlm_bench.adapters.minimal_pairs import subtask_name
from antlm_bench.data.readers import data_files
from antlm_bench.errors import UserError
from antlm_bench.results.tables import ScoreRow
from antlm_bench.runs.record import read_record
from antlm_bench.scoring import ScoringModel
from antlm_bench.scoring.babylm2025 import merge_prefix_groups
from antlm_bench.scoring.encode import Seq, dedupe
from antlm_bench.scoring.engine import longest_input, score_seqs


class _Task(TaskAdapter):
    spec_sections = {"data": FileDataSpec}
    needs_scoring_model = True
    has_fast_subset = True

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
                            f"{self.data.get('folder')}/), set $ANTLM_BENCH_DATA, or run "
                            "`antlm-bench data fetch babylm-2025`")
        return folder

    def _files(self, data_dir: Path) -> list[Path]:
        folder = self._folder(data_dir)
        files = data_files(folder, str(self.data.get("pattern", "*.jsonl*")))
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
        notes = [f"convention={ctx.convention.name}", "reduction=sum"]
        longest, limit = longest_input(unique, method), sm.max_length
        if limit is not None and longest > limit:
            notes.append(f"positions beyond the configured {limit} used (longest input {longest} tokens)")
        record = read_record(ctx.model_path) if ctx.model_path is not None and ctx.model_path.is_dir() else None
        trained = record.seq_len if record is not None else None
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
