"""Progress of a GLUE run on the terminal: per member run and epoch, with the ETA of the run and of the task."""

from __future__ import annotations

import sys
import time

import numpy as np

from antlm_bench.adapters.base import EvalContext
from antlm_bench.adapters.glue.report import member_score
from antlm_bench.adapters.glue.settings import EpochLog, FinetuneSettings, MemberOutcome


class _Reporter:
    """Progress per member run and epoch, with the ETA of the run and of the whole task.

    With a rich ``Progress`` in the context, a bar per run (its own ETA column shows the run's ETA) and epoch lines
    above it; otherwise one line per epoch on stderr (nothing when options['quiet'] is set).
    """

    def __init__(self, context: EvalContext, total_work: float) -> None:
        self.progress = context.progress
        self.quiet = bool((context.options or {}).get("quiet"))
        self.total_work = total_work
        self.done_work = 0.0
        self.started = time.perf_counter()
        self.task_id = None
        self.label = ""
        self.run_work = 0.0
        self.n_train = 0
        self.metric = "accuracy"

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress.console.print(line, highlight=False)
        elif not self.quiet:
            print(line, file=sys.stderr, flush=True)

    def start(self, label: str, settings: FinetuneSettings, n_train: int, n_dev: int) -> None:
        self.label = label
        self.n_train = n_train
        self.epochs = 1 if settings.probe else settings.epochs
        self.run_start_work = self.done_work
        if self.progress is not None:  # counted in training examples, so the bar's rate reads examples/s
            self.task_id = self.progress.add_task(label, total=self.epochs * n_train)
        method = "probe" if settings.probe else f"fine-tuning {settings.epochs} epochs"
        self.metric = settings.selection_metric
        chosen = "" if settings.probe else f"; best epoch by dev {self.metric}"
        self._say(f"{label}: {method} on {n_train} examples (dev slice {n_dev}{chosen})")

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
            f"ETA {_clock(info.eta_seconds)} this run, {_clock(remaining)} all"
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


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
