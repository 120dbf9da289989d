"""Seed-aware gaps on the board and in ``check``: the design follows the seeds on each side, nothing missing
passes, one seed a side is never called significant without a seed SD, user text cannot inject markup."""

from __future__ import annotations

import sys
import zlib

import numpy as np
import pytest
from leaderboard_tables import write_run

from antlm_bench.cli import main
from antlm_bench.results.check import report_markdown, run_check
from antlm_bench.results.leaderboard import build_leaderboard, read_results, render_markdown
from antlm_bench.results.leaderboard.comparability import Incomparable


def _correct(seed: int, n: int, p: float) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


def _run(root, name, schedule, seed, p, n=400, subtasks=("a", "b"), limit=None, tasks=("blimp",), network=None,
         config=None):
    # a stable seed per (run, task, subtask): Python's hash() of strings is salted per process, which made this
    # module's data (and so its verdicts) change from one run of the suite to the next
    data = {t: {s: _correct(zlib.crc32(f"{name}\0{t}\0{s}".encode()), n, p) for s in subtasks} for t in tasks}
    return write_run(root, name, [{"phase_index": 0, "tasks": data}], schedule=schedule, seed=seed, limit=limit,
                     weights_digest=network, config_fingerprint=config)


def _cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["antlm-bench", "check", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    return exited.value.code or 0, out, err


def test_board_pairs_by_seed_when_the_seeds_match_and_uses_welch_otherwise(tmp_path):
    for seed in (1, 2, 3):
        _run(tmp_path, f"clm-s{seed}", "24_CLM", seed, 0.6)
        _run(tmp_path, f"antlm-s{seed}", "4_CLM+16_MLM+4_CLM", seed, 0.6)
        _run(tmp_path, f"mlm-s{seed + 10}", "24_MLM", seed + 10, 0.6)
    board = build_leaderboard(read_results([tmp_path]), reference={"schedule": "24_CLM"})
    designs = {(c.row[2], c.column): c.design for c in board.comparisons}
    assert designs[("4_CLM+16_MLM+4_CLM", "blimp")] == "paired-seeds"
    assert designs[("24_MLM", "blimp")] == "welch"
    for c in board.comparisons:
        assert c.paired and c.n_items == 800 and c.mde is not None and c.p_value is not None and c.p_value > 0


def test_one_seed_a_side_is_not_tested_and_says_so(tmp_path):
    _run(tmp_path, "a", "24_CLM", 1, 0.55)
    _run(tmp_path, "b", "24_MLM", 2, 0.75)  # 20 points apart: still seed variance unknown
    board = build_leaderboard(read_results([tmp_path]))
    (gap,) = [c for c in board.comparisons if c.column == "blimp"]
    assert gap.design == "unknown" and gap.significant is None and gap.p_value is None
    assert "seed variance unknown" in render_markdown(board)


def test_check_uses_same_seed_only_for_the_same_network(tmp_path):
    """The same seed number is not the same network (a training-code change re-draws masks, data order or
    initialisation); equal training fingerprints are."""
    _run(tmp_path / "base", "r", "24_CLM", 7, 0.6, network="net-7")
    _run(tmp_path / "new", "r2", "24_CLM", 7, 0.6, network="net-7")
    assert {line.test for line in run_check([tmp_path / "new"], [tmp_path / "base"]).lines} == {"same-seed"}
    _run(tmp_path / "redrawn", "r3", "24_CLM", 7, 0.6, network="net-7b")
    _run(tmp_path / "unrecorded", "r4", "24_CLM", 7, 0.6)
    for other in ("redrawn", "unrecorded"):
        assert {line.test for line in run_check([tmp_path / other], [tmp_path / "base"]).lines} == {"unknown"}


def test_check_new_seed_against_baseline_seeds_of_its_configuration_uses_their_sd(tmp_path):
    for seed in (1, 2, 3):
        _run(tmp_path / "base", f"b{seed}", "24_CLM", seed, 0.6, config="cfg-1")
    _run(tmp_path / "new", "n", "24_CLM", 42, 0.6, config="cfg-1")
    report = run_check([tmp_path / "new"], [tmp_path / "base"])
    assert {line.test for line in report.lines} == {"pooled"}
    assert report.exit_code == 0
    # another configuration under the same names (the recipe's masking changed): its SD is not borrowed
    _run(tmp_path / "changed", "n", "24_CLM", 42, 0.6, config="cfg-2")
    report = run_check([tmp_path / "changed"], [tmp_path / "base"])
    assert {line.test for line in report.lines} == {"unknown"}
    assert any("fingerprints differ" in note for note in report.notes)


def test_board_keeps_seeds_of_two_configurations_apart_and_marks_unrecorded_ones(tmp_path):
    for seed in (1, 2):
        _run(tmp_path, f"old{seed}", "24_CLM", seed, 0.6, config="cfg-old")
        _run(tmp_path, f"new{seed}", "24_CLM", seed + 10, 0.6, config="cfg-new")
    board = build_leaderboard(read_results([tmp_path]))
    assert sorted(r.key[2] for r in board.rows) == ["24_CLM [config cfg-new]", "24_CLM [config cfg-old]"]
    assert all(not r.mixed_configurations for r in board.rows)
    mixed = tmp_path / "mixed"
    _run(mixed, "a", "24_CLM", 1, 0.6, config="cfg-new")
    _run(mixed, "b", "24_CLM", 2, 0.6)  # trained before fingerprints were recorded
    (row,) = build_leaderboard(read_results([mixed])).rows
    assert row.mixed_configurations and any("more than one configuration fingerprint" in n for n in row.notes)
    assert "(mixed configs)" in render_markdown(build_leaderboard(read_results([mixed])))


def test_check_one_seed_a_side_needs_a_seed_sd_to_fail(tmp_path, monkeypatch, capsys):
    _run(tmp_path / "base", "b", "24_CLM", 1, 0.7, n=2000)
    _run(tmp_path / "new", "n", "24_CLM", 2, 0.5, n=2000)  # -20 points
    code, out, _ = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base")
    assert code == 0 and "drop, seed variance unknown" in out and "--seed-sd" in out
    code, out, err = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base",
                          "--seed-sd", "1.0")
    assert code == 1 and "regression" in out


@pytest.mark.parametrize("what", ["task", "subtask", "limit"])
def test_check_never_passes_what_it_did_not_compare(tmp_path, monkeypatch, capsys, what):
    _run(tmp_path / "base", "b", "24_CLM", 1, 0.6, tasks=("blimp", "ewok"))
    if what == "task":
        _run(tmp_path / "new", "n", "24_CLM", 1, 0.6, tasks=("blimp",))
    elif what == "subtask":
        _run(tmp_path / "new", "n", "24_CLM", 1, 0.6, subtasks=("a",), tasks=("blimp", "ewok"))
    else:
        _run(tmp_path / "new", "n", "24_CLM", 1, 0.6, n=100, tasks=("blimp", "ewok"))
    code, out, err = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base")
    assert code == 1 and "missing" in out and "--allow-missing" in err
    code, _, _ = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base",
                      "--allow-missing")
    assert code == 0


def test_holm_adjusts_a_groups_p_values_together(tmp_path):
    for seed in (1, 2, 3):
        _run(tmp_path / "base", f"b{seed}", "24_CLM", seed, 0.6, tasks=("blimp", "ewok", "blimp_supplement"))
        _run(tmp_path / "new", f"n{seed}", "24_MLM", seed, 0.6, tasks=("blimp", "ewok", "blimp_supplement"))
    plain = run_check([tmp_path / "new"], [tmp_path / "base"], family="none")
    adjusted = run_check([tmp_path / "new"], [tmp_path / "base"])
    for a, b in zip(plain.lines, adjusted.lines):
        assert b.comparison.p_value >= a.comparison.p_value
        assert b.comparison.p_raw == a.comparison.p_value
    assert "each group" in report_markdown(adjusted) and "--family none" in report_markdown(plain)


def test_the_board_states_its_holm_family(tmp_path):
    for seed in (1, 2, 3):
        for schedule in ("24_CLM", "24_MLM", "4_CLM+16_MLM+4_CLM"):
            _run(tmp_path, f"{schedule}-{seed}", schedule, seed, 0.6, tasks=("blimp", "ewok"))
    results = read_results([tmp_path])
    board = build_leaderboard(results, reference={"schedule": "24_CLM"})
    row = build_leaderboard(results, reference={"schedule": "24_CLM"}, family="row")
    tested = [c for c in board.comparisons if c.p_raw is not None]
    assert len(tested) == 4
    assert "Holm-adjusted over the board's 4 tests" in render_markdown(board)
    assert "each row's 2 tests" in render_markdown(row)
    for b, r in zip(board.comparisons, row.comparisons):
        assert b.p_value >= r.p_value


def test_user_text_is_escaped_in_terminal_and_markdown(tmp_path, monkeypatch, capsys):
    _run(tmp_path / "base", "b", "[/bold]<script>x</script>", 1, 0.6)
    _run(tmp_path / "new", "n", "[/bold]<script>x</script>", 1, 0.6)
    summary = tmp_path / "summary.md"
    code, out, _ = _cli(monkeypatch, capsys, "--results", tmp_path / "new", "--baseline", tmp_path / "base",
                        "--markdown", summary)
    assert code == 0 and "[/bold]" in out
    assert "<script>" not in summary.read_text() and "&lt;script&gt;" in summary.read_text()
    board = build_leaderboard(read_results([tmp_path]), group_by=["schedule", "run_id"])
    assert "<script>" not in render_markdown(board)


def test_seeds_needed_matches_the_simulated_power_and_grows_with_the_gap_shrinking():
    from antlm_bench.results.stats import seeds_needed

    # 3 seed SDs with negligible item noise: 5 seeds a side suffice (test_stats_calibration measures >= 80%)
    assert seeds_needed(0.03, 0.01, 0.0) <= 5
    assert seeds_needed(0.01, 0.01, 0.0) > seeds_needed(0.02, 0.01, 0.0) > seeds_needed(0.04, 0.01, 0.0)
    assert seeds_needed(0.01, 0.01, 1e-4) is None  # the items' noise alone (1 point SE) exceeds the gap


def test_power_command_prints_every_row_and_task(tmp_path, monkeypatch, capsys):
    for seed in (1, 2, 3):
        _run(tmp_path, f"clm-s{seed}", "24_CLM", seed, 0.6 + 0.01 * seed)
    monkeypatch.setattr(sys, "argv", ["antlm-bench", "power", str(tmp_path), "--gap", "2"])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exited:
        main()
    assert not exited.value.code
    out = capsys.readouterr().out
    assert "seeds needed to detect a 2-point gap" in out and "blimp" in out and "docs/statistics.md" in out


def test_two_scoring_methods_are_never_compared(tmp_path, monkeypatch, capsys):
    """One instrument per comparison: a board shows the gap between a clm and a pll cell untested (the macro too),
    and check refuses it with one line naming both methods."""
    rng = np.random.default_rng(9)
    for seed in (1, 2, 3):
        for schedule, scoring in (("24_CLM", "clm"), ("24_MLM", "pll")):
            data = {"blimp": {"a": (rng.random(300) < 0.6) * 1.0}, "ewok": {"d": (rng.random(300) < 0.6) * 1.0}}
            write_run(tmp_path / schedule, f"{schedule}-{seed}", [{"phase_index": 0, "scoring": scoring,
                                                                  "tasks": data}], schedule=schedule, seed=seed)
    board = build_leaderboard(read_results([tmp_path]), reference={"schedule": "24_CLM"}, macro_tasks=["blimp", "ewok"])
    assert board.comparisons and all(c.p_value is None and c.significant is None for c in board.comparisons)
    # the reason travels typed: every task gap by scoring method, the macro by its tasks
    assert {c.column: c.incomparable for c in board.comparisons} == {
        "blimp": Incomparable.SCORING, "ewok": Incomparable.SCORING, "macro": Incomparable.TASKS}
    assert "different instruments" in render_markdown(board)
    code, _, err = _cli(monkeypatch, capsys, "--results", tmp_path / "24_MLM", "--baseline", tmp_path / "24_CLM",
                        "--by", "recipe,preset")
    assert code == 2 and "pll" in err and "clm" in err and len(err.strip().splitlines()) == 1


def test_power_does_not_read_a_seed_count_from_seeds_that_scored_alike(tmp_path, monkeypatch, capsys):
    """Three seeds with identical scores (a tiny model that ties every item) measure no seed variance: zero SD
    would 'need' two seeds for any gap, so the count is unknown, said in words."""
    from antlm_bench.results.leaderboard.power import power_lines

    tied = np.full(400, 0.5)
    for seed in (1, 2, 3):
        write_run(tmp_path / f"s{seed}", f"tie-s{seed}", [{"phase_index": 0, "scoring": "clm",
                                                          "tasks": {"blimp": {"a": tied}}}], seed=seed)
    (line,) = power_lines(build_leaderboard(read_results([tmp_path])), 0.01)
    assert line.seed_sd == 0.0 and line.no_seed_variance and line.seeds_for_gap is None and not line.reachable
    monkeypatch.setattr(sys, "argv", ["antlm-bench", "power", str(tmp_path)])
    monkeypatch.setenv("COLUMNS", "250")
    with pytest.raises(SystemExit) as exited:
        main()
    assert not exited.value.code
    assert "unknown (seeds scored alike)" in capsys.readouterr().out
