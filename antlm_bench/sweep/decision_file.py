"""``<output>/sweep/decision.json``: the file a ``sweep --until-decided`` decision is stored in, typed
(:class:`DecisionRecord`), written by :func:`write_decision` only, read by :func:`read_decision` only, and checked
against the tables beside it by :func:`verify_decision` (the sweep's own ``rule.compare_round`` recomputes it), so
that a board never shows a decision its results do not give.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from antlm_bench.data.readers import read_json_model
from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.results import results_reader
from antlm_bench.results.stats.sequential import UNDECIDED
from antlm_bench.results.store import StoreReader, store_digest
from antlm_bench.sweep.grid import GridCell
from antlm_bench.sweep.record import DECISION_FILE, SWEEP_DIR, SweepFolder
from antlm_bench.sweep.rule import (
    CHANCE_ROLE,
    FORCED,
    NOT_TESTED,
    SECONDARY,
    Decision,
    EndpointCheck,
    Rule,
    compare_round,
    endpoint_checks,
)

# 1: without the digests of the tables (still read: the board recomputes the decision either way); 2: without
# controls; 2 and 3: digests of the items' file bytes, which an export without the evaluation text changes (not
# compared; the decision is still recomputed from the tables); 4: digests of the tables' content
# (results.store.store_digest), the same on a run folder and on its export; 5: the sensitivity rule
# (``rule.sensitivity``, the ``endpoints`` it gave, and the baseline-vs-chance rows of the above-chance rule). A
# record before 5 is re-read with the default sensitivity rule, marked as applied after the decision was made
DECISION_SCHEMA_VERSION = 5
SENSITIVITY_SCHEMA = 5
CONTENT_DIGESTS = 4  # the first version whose table digests survive an export
METHOD = ("Lai (1976) confidence sequence for the mean of paired per-seed differences, Gaussian with unknown "
          "variance (anytime-valid: any stopping rule keeps the error rate); docs/statistics.md")


class RuleRecord(BaseModel):
    """decision.json's ``rule``: the stopping rule and how alpha was shared."""

    model_config = ConfigDict(extra="forbid")

    baseline: str
    alpha: float = Field(gt=0, lt=1)
    tolerance: float | None = Field(None, ge=0)
    max_seeds: int = Field(ge=1)
    round_seeds: int = Field(ge=1)
    comparisons: int = Field(ge=0)
    primary: list[str] = Field(default_factory=list)  # empty: every column (a record written before the key)
    margins: dict[str, float] = Field(default_factory=dict)  # per-column equivalence margins, the column's units
    forced_out: bool = False  # loss comparisons the objectives decide kept out (False: a record made before)
    positive_controls: list[str] = Field(default_factory=list)  # controls (empty: a record made before them)
    negative_control: bool = False
    # each primary endpoint's declared sensitivity rule (SENSITIVITY_RULES; a column not named takes the default,
    # Rule.sensitivity_for); None: a record made before the rule existed (schema < 5), re-read with the default
    sensitivity: dict[str, Literal["positive-control", "above-chance", "none"]] | None = None
    alpha_each: float
    correction: str
    prior_precision: float
    decided_when: str

    def rule(self) -> Rule:
        return Rule(self.baseline, self.alpha, self.tolerance, self.max_seeds, self.round_seeds,
                    tuple(self.primary), tuple(self.margins.items()), self.forced_out,
                    tuple(self.positive_controls), self.negative_control,
                    tuple((self.sensitivity or {}).items()), self.sensitivity is None)

    @classmethod
    def of(cls, rule: Rule, comparisons: int) -> RuleRecord:
        """The rule as it is stored, with how alpha was shared over the ``comparisons`` of the family."""
        return cls(**{**{k: v for k, v in asdict(rule).items() if k != "sensitivity_after"},
                      "primary": list(rule.primary), "margins": dict(rule.margins),
                      "positive_controls": list(rule.positive_controls), "sensitivity": dict(rule.sensitivity)},
                   comparisons=comparisons,
                   alpha_each=rule.alpha_each(comparisons),
                   correction=f"Bonferroni over {comparisons} tested comparison(s)"
                   + (f" of the primary endpoints ({', '.join(rule.primary)})" if rule.primary else ""),
                   prior_precision=rule.prior_precision(max(1, comparisons)),
                   decided_when="the interval excludes 0 (difference) or lies within +-tolerance (equivalent)")


class ComparisonRecord(BaseModel):
    """One comparison as decision.json stores it (non-finite numbers as null)."""

    model_config = ConfigDict(extra="forbid")

    recipe: str
    preset: str
    schedule: str
    column: str
    scoring: str
    seeds: list[int]
    mean: float | None
    low: float | None
    high: float | None
    decision: Literal["difference", "equivalent", "undecided", "not tested", "secondary", "forced"]
    unit: str = "pp"
    lower_is_better: bool = False
    first_decided_at: int | None = None
    label: str | None = None
    role: Literal["", "positive control", "negative control", "baseline vs chance"] = ""

    def comparison(self) -> Decision:
        return Decision(self.recipe, self.preset, self.schedule, self.column, self.scoring, tuple(self.seeds),
                          math.nan if self.mean is None else self.mean,
                          -math.inf if self.low is None else self.low, math.inf if self.high is None else self.high,
                          self.decision, self.unit, self.lower_is_better, self.first_decided_at, self.label,
                          self.role)

    @classmethod
    def of(cls, c: Decision) -> ComparisonRecord:
        return cls(**{**asdict(c), "seeds": list(c.seeds), "mean": None if math.isnan(c.mean) else c.mean,
                      "low": None if not math.isfinite(c.low) else c.low,
                      "high": None if not math.isfinite(c.high) else c.high})


class EndpointRecord(BaseModel):
    """One primary endpoint's sensitivity as decision.json stores it (``EndpointCheck``)."""

    model_config = ConfigDict(extra="forbid")

    recipe: str
    preset: str
    column: str
    rule: Literal["positive-control", "above-chance", "none"]
    speaks: bool
    why: str
    evidence: str = ""

    def check(self) -> EndpointCheck:
        return EndpointCheck(self.recipe, self.preset, self.column, self.rule, self.speaks, self.why, self.evidence)


class DecisionRecord(BaseModel):
    """``<output>/sweep/decision.json``, typed: written by :func:`write_decision` only, read by
    :func:`read_decision` only (every field checked: one line naming the file and the field otherwise)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1, 2, 3, 4, 5]
    status: str
    method: str
    rule: RuleRecord
    seeds: list[int]
    rounds: list[list[int]]
    comparisons: list[ComparisonRecord]
    # run folder name -> sha256 of its committed tables (results.store.store_digest) when the decision was made
    tables: dict[str, str] = Field(default_factory=dict)
    # each primary endpoint's sensitivity at the last look (schema 5; ``endpoint_checks`` of the comparisons)
    endpoints: list[EndpointRecord] = Field(default_factory=list)

    def cells(self) -> list[GridCell]:
        """The run folders the decision compared: every (recipe, preset) of its comparisons, their schedules and the
        baseline, at every seed it used."""
        keys = {(c.recipe, c.preset, c.schedule, c.label) for c in self.comparisons if c.role != CHANCE_ROLE}
        keys |= {(c.recipe, c.preset, self.rule.baseline, None) for c in self.comparisons}
        return [GridCell(recipe, preset, schedule, seed, label=label)
                for recipe, preset, schedule, label in sorted(keys, key=lambda k: (k[0], k[1], k[2], k[3] or ""))
                for seed in self.seeds]


def _table_digests(cells: Sequence[GridCell], output: Path, reader: StoreReader | None) -> dict[str, str]:
    digest = reader.digest if reader is not None else store_digest
    return {cell.name: digest(output / cell.name) for cell in sorted(set(cells), key=lambda c: c.name)}


def write_decision(folder: SweepFolder, rule: Rule, comparisons: Sequence[Decision], seeds: Sequence[int],
                   rounds: Sequence[Sequence[int]], status: str, cells: Sequence[GridCell] = (),
                   reader: StoreReader | None = None) -> DecisionRecord:
    """Store the rule, the seeds used, each comparison's decision and the digests of the tables of ``cells`` (the
    run folders it was computed from) in ``<output>/sweep/decision.json`` (atomically); ``status``: decided, max
    seeds reached, or stopped (a failed or interrupted round)."""
    n = sum(c.decision not in (NOT_TESTED, SECONDARY, FORCED) and not c.role for c in comparisons)
    record = DecisionRecord(
        schema_version=DECISION_SCHEMA_VERSION, status=status, method=METHOD, rule=RuleRecord.of(rule, n),
        seeds=list(seeds), rounds=[list(r) for r in rounds],
        comparisons=[ComparisonRecord.of(c) for c in comparisons],
        tables=_table_digests(cells, folder.output, reader),
        endpoints=[EndpointRecord(**asdict(check)) for check in endpoint_checks(comparisons, rule)],
    )
    folder.write_json(folder.decision_file, record.model_dump(mode="json"))
    return record


def read_decision(path: Path) -> DecisionRecord:
    """A decision.json read through its model: one line naming the file and the field when it is not one."""
    return read_json_model(path, DecisionRecord, "not a sweep decision file of this version",
                           "run the sweep again")


def verify_decision(path: Path, record: DecisionRecord, reader: StoreReader | None = None) -> str | None:
    """Whether the decision is what the tables beside it give: the digests of the tables it recorded (schema 2)
    are those of the tables now, and the comparisons recomputed from the tables (``compare_round``, the sweep's own
    code) are the recorded ones, decision for decision, with the recorded status. None when it holds; else why
    not, in a few words. ``reader``: the command's, whose reads the board and this share."""
    output = path.parent.parent
    reader = reader if reader is not None else results_reader()
    for name, digest in (record.tables.items() if record.schema_version >= CONTENT_DIGESTS else ()):
        if reader.digest(output / name) != digest:
            return f"the tables of {name} changed since the decision"
    if not record.comparisons:
        return None
    try:
        recomputed = compare_round(record.cells(), output, record.rule.rule(), record.seeds, reader)
    except UserError as err:
        return f"it cannot be recomputed from the tables ({err})"
    stored = [row.comparison() for row in record.comparisons]
    if [c.key for c in recomputed] != [c.key for c in stored]:
        return "the tables give other comparisons than it records"
    for mine, theirs in zip(recomputed, stored):
        same = (mine.decision, mine.seeds, mine.role) == (theirs.decision, theirs.seeds, theirs.role) and all(
            _close(getattr(mine, key), getattr(theirs, key)) for key in ("mean", "low", "high"))
        if not same:
            return (f"{theirs.schedule} on {theirs.column}: it records {theirs.decision} "
                    f"{_number(theirs.mean)}, the tables give {mine.decision} {_number(mine.mean)}")
    if record.status == "decided" and any(c.decision == UNDECIDED and not c.role for c in recomputed):
        return "it says decided, but the tables leave comparisons undecided"
    if record.schema_version >= SENSITIVITY_SCHEMA and \
            [e.check() for e in record.endpoints] != endpoint_checks(stored, record.rule.rule()):
        return "its endpoints' sensitivity is not what its comparisons give"
    return None


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _number(value: float) -> str:
    return "" if math.isnan(value) else f"({value:+.3g})"


def decision_files(folders: Sequence[Path]) -> list[Path]:
    """The decision files in ``folders`` or any folder below them (``<output>/sweep/decision.json``), each once."""
    found: list[Path] = []
    for folder in map(Path, folders):
        if folder.is_dir():
            # anything at the name, not only a regular file: a link (to a FIFO, a device, another sweep's record) or
            # a folder there is read by read_decision, which refuses it in one line, never left off without a word
            found.extend(sorted(p for p in folder.rglob(DECISION_FILE) if p.parent.name == SWEEP_DIR))
    return list(dict.fromkeys(found))


__all__ = ["CONTENT_DIGESTS", "DECISION_SCHEMA_VERSION", "METHOD", "SENSITIVITY_SCHEMA", "ComparisonRecord",
           "DecisionRecord", "EndpointRecord", "RuleRecord", "decision_files", "read_decision", "verify_decision",
           "write_decision"]
