"""``antlm-bench check``: exit 0 / 1 / 2 on hand-made result tables, and the rule that decides a regression."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from leaderboard_tables import write_run

from antlm_bench.cli import main
from antlm_bench.results.check import Tolerances, run_check
from antlm_bench.results.store import commit_results


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["antlm-bench", "check", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "160")
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    return exited.value.code or 0, out, err


def _pair(n: int, flips: int, seed: int = 0, p: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    """(baseline, current): current = baseline with ``flips`` correct items turned wrong (a consistent drop)."""
    rng = np.random.default_rng(seed)
    base = (rng.random(n) < p).astype(float)
    current = base.copy()
    current[np.flatnonzero(base == 1)[:flips]] = 0.0
    return base, current


def _write(root, name, tasks, items=True):
    """One run; base and new share a training fingerprint: the same network scored before and after a change."""
    return write_run(root, name, [{"phase_index": 0, "tasks": tasks}], items=items, weights_digest="net-0")


def test_same_scores_pass_with_a_table(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(0)
    tasks = {"blimp": {"a": (rng.random(200) < 0.7).astype(float)}, "ewok": {"d": (rng.random(200) < 0.6) * 1.0}}
    _write(tmp_path / "base", "base", tasks)
    _write(tmp_path / "new", "new", tasks)
    code, out, _ = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base")
    assert code == 0
    assert "no regression" in out
    assert "blimp" in out and "ewok" in out and "mean(blimp,ewok) = mean of blimp, ewok" in out
    # one meaning of "macro" (issue #50 item 5): a two-task average is named by its tasks, never "macro"
    assert not any(line.split()[:2] and "macro" in line.split()[:3] for line in out.splitlines())
    assert "+0.00" in out


def test_significant_paired_drop_beyond_tolerance_fails(tmp_path, monkeypatch, capsys):
    base, current = _pair(1000, 30)  # -3 pp on the same items: tiny noise, clearly significant when paired
    _write(tmp_path / "base", "base", {"blimp": {"a": base}})
    _write(tmp_path / "new", "new", {"blimp": {"a": current}})
    code, out, err = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline",
                          tmp_path / "base" / "base" / "scores.parquet")
    assert code == 1
    assert "regression" in out and "paired" in out and "-3.00" in out
    assert "1 score(s) dropped" in err
    # what the gate can see, in points, from the line's MDE
    detects = next(line for line in out.splitlines() if "this gate detects drops >=" in line)
    assert " points on blimp" in detects and "alpha 0.05" in detects and "more seeds" in detects


def test_drop_within_tolerance_passes_even_if_significant(tmp_path):
    base, current = _pair(10000, 30)  # -0.3 pp, paired over 10k items
    _write(tmp_path / "base", "base", {"blimp": {"a": base}})
    _write(tmp_path / "new", "new", {"blimp": {"a": current}})
    report = run_check([tmp_path / "new"], [tmp_path / "base"], tolerances=Tolerances(points=0.5))
    (line,) = report.lines
    assert line.comparison.significant and line.comparison.delta == pytest.approx(-0.003)
    assert line.status == "ok" and report.exit_code == 0
    assert run_check([tmp_path / "new"], [tmp_path / "base"], tolerances=Tolerances(points=0.2)).exit_code == 1


def test_noisy_drop_is_not_a_regression_unless_the_rule_is_tolerance(tmp_path):
    rng = np.random.default_rng(3)
    base = (rng.random(100) < 0.6).astype(float)
    current = (rng.random(100) < 0.6).astype(float)  # unrelated coin flips: any gap is noise
    current[: int(100 * (current.mean() - base.mean())) + 3] = 0.0  # make sure the mean dropped by > 0.5 pp
    assert base.mean() - current.mean() > 0.005
    _write(tmp_path / "base", "base", {"blimp": {"a": base}})
    _write(tmp_path / "new", "new", {"blimp": {"a": current}})
    report = run_check([tmp_path / "new"], [tmp_path / "base"])
    assert report.lines[0].status == "drop, not significant" and report.exit_code == 0
    strict = run_check([tmp_path / "new"], [tmp_path / "base"], rule="tolerance")
    assert strict.lines[0].test == "tolerance" and strict.exit_code == 1


def test_without_items_the_unpaired_test_decides(tmp_path):
    base, current = _pair(1000, 30)
    _write(tmp_path / "base", "base", {"blimp": {"a": base}}, items=False)
    _write(tmp_path / "new", "new", {"blimp": {"a": current}}, items=False)
    report = run_check([tmp_path / "new"], [tmp_path / "base"])
    (line,) = report.lines
    # the same -3 pp that the item-paired test flags is within the noise of two independent intervals
    assert line.test == "same-seed" and not line.comparison.paired and line.status == "drop, not significant"
    big_base, big_current = _pair(1000, 200)
    _write(tmp_path / "base2", "base", {"blimp": {"a": big_base}}, items=False)
    _write(tmp_path / "new2", "new", {"blimp": {"a": big_current}}, items=False)
    report = run_check([tmp_path / "new2"], [tmp_path / "base2"])
    assert report.lines[0].test == "same-seed" and report.lines[0].status == "regression"


def test_no_interval_at_all_falls_back_to_the_tolerance(tmp_path):
    base, current = _pair(200, 4)  # -2 pp
    for name, values in (("base", base), ("new", current)):
        folder = _write(tmp_path / name, name, {"blimp": {"a": values}}, items=False)
        table = pq.read_table(folder / "scores.parquet")
        for column in ("ci_low", "ci_high"):
            table = table.set_column(table.schema.get_field_index(column), column,
                                     pa.nulls(table.num_rows, pa.float64()))
        commit_results(folder, table)  # the same keys: these rows replace the first ones
    report = run_check([tmp_path / "new"], [tmp_path / "base"])
    assert report.lines[0].test == "tolerance" and report.exit_code == 1


def test_improvement_and_macro_over_shared_tasks(tmp_path, monkeypatch, capsys):
    base_b, better_b = _pair(1000, 0)
    better_b = better_b.copy()
    better_b[np.flatnonzero(base_b == 0)[:50]] = 1.0  # +5 pp
    base_e, _ = _pair(500, 0, seed=1)
    _write(tmp_path / "base", "base", {"blimp": {"a": base_b}, "ewok": {"d": base_e}, "glue": {"rte": base_e}})
    _write(tmp_path / "new", "new", {"blimp": {"a": better_b}, "ewok": {"d": base_e}})
    report = run_check([tmp_path / "new"], [tmp_path / "base"])
    by_column = {line.column: line for line in report.lines}
    # glue: only in the baseline; the average of the two shared tasks is named by them ("macro" is the paper's four)
    assert set(by_column) == {"blimp", "ewok", "mean(blimp,ewok)"}
    assert by_column["blimp"].status == "improved"
    assert by_column["mean(blimp,ewok)"].comparison.delta == pytest.approx(0.025)
    assert by_column["mean(blimp,ewok)"].comparison.paired
    # glue was not compared: that is no pass, unless the user allows it
    assert report.exit_code == 1 and any("task glue" in m for m in report.missing)
    summary = tmp_path / "summary.md"
    code, out, err = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base",
                          "--markdown", summary)
    assert code == 1 and "missing" in err and "glue" in out
    code, _, _ = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base",
                      "--markdown", summary, "--allow-missing")
    assert code == 0
    text = summary.read_text()
    assert "no regression" in text and "| blimp |" in text and "improved" in text


def test_unusable_input_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    base, _ = _pair(100, 0)
    _write(tmp_path / "base", "base", {"blimp": {"a": base}})
    _write(tmp_path / "other", "other", {"ewok": {"d": base}})
    cases = [
        (["--results", tmp_path / "missing", "--baseline", tmp_path / "base"], "no such file"),
        (["--results", tmp_path / "other", "--baseline", tmp_path / "base"], "no task in common"),
        (["--results", tmp_path / "base", "--baseline", tmp_path / "base", "--alpha", "2"], "--alpha"),
    ]
    bad = tmp_path / "bad" / "scores.parquet"
    (bad / "0-bad").mkdir(parents=True)  # a committed event whose part is not a scores table
    pq.write_table(pa.table({"run_id": ["x"], "score": [1.0]}), bad / "0-bad" / "part.parquet")
    cases.append((["--results", tmp_path / "base", "--baseline", bad], "the scores table lacks column"))
    for args, message in cases:
        code, _, err = _cli(monkeypatch, capsys, *args)
        assert code == 2, args
        assert message in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_runs_are_matched_by_group_and_extra_groups_noted(tmp_path):
    base_a, cur_a = _pair(500, 0)
    base_b, cur_b = _pair(500, 60, seed=2)
    write_run(tmp_path / "base", "A", [{"phase_index": 0, "tasks": {"blimp": {"a": base_a}}}], schedule="A",
              weights_digest="net-A")
    write_run(tmp_path / "base", "B", [{"phase_index": 0, "tasks": {"blimp": {"a": base_b}}}], schedule="B",
              weights_digest="net-B")
    write_run(tmp_path / "new", "A", [{"phase_index": 0, "tasks": {"blimp": {"a": cur_a}}}], schedule="A",
              weights_digest="net-A")
    write_run(tmp_path / "new", "B", [{"phase_index": 0, "tasks": {"blimp": {"a": cur_b}}}], schedule="B",
              weights_digest="net-B")
    write_run(tmp_path / "new", "C", [{"phase_index": 0, "tasks": {"blimp": {"a": cur_b}}}], schedule="C",
              weights_digest="net-C")
    report = run_check([tmp_path / "new"], [tmp_path / "base"])
    status = {line.group.split("schedule=")[1]: line.status for line in report.lines}
    assert status == {"A": "ok", "B": "regression"}
    assert any("schedule=C" in note and "not in the baseline" in note for note in report.notes)


def test_json_report_and_whole_lines_when_piped(tmp_path, monkeypatch, capsys):
    """--json prints the report as data with the same exit status; without COLUMNS and not on a terminal, the
    table is printed whole (no folded task names such as ``blimp_s``/``uppleme``)."""
    import json

    base, current = _pair(1000, 30)
    tasks = {"blimp_supplement": {"a_long_subtask_name": base}}
    _write(tmp_path / "base", "base", tasks)
    _write(tmp_path / "new", "new", {"blimp_supplement": {"a_long_subtask_name": current}})
    code, out, _ = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base",
                        "--json")
    assert code == 1
    report = json.loads(out)
    assert report["verdict"] == "regression" and report["exit_code"] == 1
    line = report["lines"][0]
    assert line["task"] == "blimp_supplement" and line["status"] == "regression"
    assert abs(line["delta"] - (-3.0)) < 1e-9 and line["paired_by_item"] and line["n_items"] == 1000
    monkeypatch.setattr(sys, "argv", ["antlm-bench", "check", "--results", str(tmp_path / "new"),
                                      "--baseline", str(tmp_path / "base")])
    monkeypatch.delenv("COLUMNS", raising=False)
    with pytest.raises(SystemExit):
        main()
    out, _ = capsys.readouterr()
    table_line = next(line for line in out.splitlines() if "blimp_supplement" in line)
    assert "regression" in table_line and "-3.00" in table_line
    assert max(len(line) for line in out.splitlines()) > 80
