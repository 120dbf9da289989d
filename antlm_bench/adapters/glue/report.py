"""What a GLUE run reports: score rows (per member and the task's ``score``), item records, and the notes that
explain the score and give the majority-class floor.

Intervals are a (stratified) bootstrap over the reported examples. The ``scoring`` column says ``finetune`` or
``probe``; the ``seed`` column is the fine-tuning seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from antlm_bench.adapters.base import EvalContext
from antlm_bench.adapters.glue.members import MemberData
from antlm_bench.adapters.glue.settings import FinetuneSettings, MemberOutcome, classification_metrics
from antlm_bench.adapters.glue.spec import MemberSpec
from antlm_bench.results.stats import bootstrap_classification
from antlm_bench.results.tables import ScoreRow


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
    if outcome.method == "finetune":
        chosen = (f"best epoch {outcome.best_epoch}/{settings.epochs} "
                  f"(dev {settings.selection_metric} {max(outcome.dev_history):.4f})")
    else:
        chosen = "probe"
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


def aggregate_row(task: str, members: dict[str, MemberSpec], outcomes: dict[str, MemberOutcome], seed: int,
                  context: EvalContext) -> ScoreRow:
    strata = {m: (o.labels, o.predictions, members[m].score_metric) for m, o in outcomes.items()}
    interval = bootstrap_classification(strata)
    method = "probe" if all(o.method == "probe" for o in outcomes.values()) else "finetune"
    which = ", ".join(f"{m} {members[m].score_metric}" for m in sorted(outcomes))
    notes = f"mean over {len(outcomes)}/{len(members)} members: {which}"
    if method == "probe":
        notes += "; probe"
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
