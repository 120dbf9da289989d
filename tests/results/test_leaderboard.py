"""Leaderboard aggregation on hand-made result tables: final checkpoints, seeds, macro, scoring columns."""

from __future__ import annotations

import datetime
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from leaderboard_tables import correctness, four_tasks, write_run

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard import (
    LeaderboardDefinition,
    board_table,
    build_leaderboard,
    cell_text,
    load_definition,
    read_results,
    render_markdown,
)
from antlm_bench.results.store import commit_results, read_results_folder


def _study(tmp_path, seeds=(0, 1), items=True):
    """Two schedules x seeds; the MLM-final schedule is clearly better on every task."""
    rng = np.random.default_rng(7)
    runs = {}
    for schedule, objective, scoring, p in (("4_CLM", "CLM", "clm", 0.6), ("4_CLM+16_MLM", "MLM", "pll", 0.8)):
        for seed in seeds:
            run_id = f"{schedule}-s{seed}"
            early = four_tasks(rng, dict.fromkeys(("blimp", "blimp_supplement", "ewok", "glue"), 0.95))
            final = four_tasks(rng, dict.fromkeys(("blimp", "blimp_supplement", "ewok", "glue"), p))
            write_run(tmp_path, run_id, [
                # an earlier checkpoint with higher scores: the leaderboard must ignore it (not final)
                {"phase_index": 0, "objective": "CLM", "epoch": 4.0, "tokens": 4000, "scoring": "clm", "tasks": early},
                {"phase_index": 1, "objective": objective, "epoch": 20.0, "tokens": 20000,
                 "scoring": {"blimp": scoring, "blimp_supplement": scoring, "ewok": scoring, "glue": "finetune"},
                 "tasks": final},
            ], schedule=schedule, seed=seed, items=items)
            runs[run_id] = final
    return runs


def _task_value(subtasks):
    return float(np.mean([np.mean(v) for v in subtasks.values()]))


def test_one_row_per_group_seeds_averaged_final_checkpoint_macro(tmp_path):
    runs = _study(tmp_path)
    board = build_leaderboard(read_results([tmp_path]))
    assert [r.key for r in board.rows] == [("antlm-babyllama", "tiny", "4_CLM+16_MLM"),
                                          ("antlm-babyllama", "tiny", "4_CLM")]
    assert board.columns == ["blimp", "blimp_supplement", "ewok", "glue"]
    for row in board.rows:
        schedule = row.key[2]
        assert len(row.run_ids) == 2
        for task in board.columns:
            seed_values = [_task_value(runs[f"{schedule}-s{s}"][task]) for s in (0, 1)]
            cell = row.cells[task]
            assert cell.value == pytest.approx(np.mean(seed_values))
            assert cell.spread == pytest.approx(np.std(seed_values, ddof=1))
            assert cell.n_seeds == 2
            assert cell.low < cell.value < cell.high
            assert cell.interval == "t over 2 seeds + items"
        assert row.macro.value == pytest.approx(np.mean([row.cells[t].value for t in board.columns]))
        assert row.macro.low < row.macro.value < row.macro.high
    best = board.rows[0]
    assert best.cells["blimp"].scoring == "pll" and best.cells["glue"].scoring == "finetune"
    assert board.rows[1].cells["blimp"].scoring == "clm"
    # Figure-2 curves: both checkpoints, in training order, the early one scored clm
    curve = best.curves["blimp"]
    assert [p.epoch for p in curve] == [4.0, 20.0]
    assert [p.scoring for p in curve] == ["clm", "pll"]
    assert curve[0].value > curve[1].value


def test_seed_interval_is_student_t_over_seeds_with_the_items_variance_added(tmp_path):
    """Two seeds: mean +- t(1) * sqrt(s2_seeds / 2 + V_items), V_items from the per-seed item matrix (two-way)."""
    from scipy import stats as sp

    from antlm_bench.results.stats import ItemMatrix, item_variance

    runs = _study(tmp_path)
    board = build_leaderboard(read_results([tmp_path]))
    row = next(r for r in board.rows if r.key[2] == "4_CLM")
    matrices = {}
    for name, first in runs["4_CLM-s0"]["ewok"].items():
        ids = np.array([f"{name}-{i}" for i in range(first.size)])
        order = np.argsort(ids)  # items are aligned by id, held in id order
        matrices[name] = ItemMatrix(ids[order], np.stack([first[order], runs["4_CLM-s1"]["ewok"][name][order]]))
    seeds = [_task_value(runs[f"4_CLM-s{s}"]["ewok"]) for s in (0, 1)]
    half = sp.t.ppf(0.975, 1) * np.sqrt(np.var(seeds, ddof=1) / 2 + item_variance(matrices))
    cell = row.cells["ewok"]
    # cut at the accuracy's range (0..1): t(1) = 12.7 reaches past it
    low, high = np.mean(seeds) - half, np.mean(seeds) + half
    assert cell.low == pytest.approx(max(low, 0.0)) and cell.high == pytest.approx(min(high, 1.0))
    assert cell.bounded == ("uninformative" if high - low >= 1 else "clipped" if low < 0 or high > 1 else "")
    # one seed: its run's own interval (the one eval printed), and the cell says that its seed variance is unknown
    one_seed = build_leaderboard(read_results([tmp_path / "4_CLM-s0"])).rows[0].cells["ewok"]
    stored = max((r for r in read_results([tmp_path / "4_CLM-s0"]).rows if r["task"] == "ewok" and not r["subtask"]),
                 key=lambda r: r["phase_index"])
    assert (one_seed.low, one_seed.high) == (stored["ci_low"], stored["ci_high"])
    assert "items only" in one_seed.interval
    assert "(1 seed)" in cell_text(one_seed)
    assert cell.high - cell.low > one_seed.high - one_seed.low  # the seeds' spread is counted, not averaged away


def test_missing_task_means_no_macro_unless_defined(tmp_path):
    rng = np.random.default_rng(0)
    tasks = four_tasks(rng, dict.fromkeys(("blimp", "blimp_supplement", "ewok", "glue"), 0.7))
    del tasks["glue"]
    write_run(tmp_path, "r1", [{"phase_index": 0, "tasks": tasks}])
    results = read_results([tmp_path])
    board = build_leaderboard(results)
    assert board.rows[0].macro is None
    assert "glue" not in board.columns
    assert "| - |" in render_markdown(board).replace("**-**", "-")
    defined = LeaderboardDefinition(macro_tasks=["blimp", "ewok"])
    board = build_leaderboard(results, defined)
    row = board.rows[0]
    assert row.macro.value == pytest.approx((row.cells["blimp"].value + row.cells["ewok"].value) / 2)
    # one meaning of "macro" (issue #50 item 5): this average is named by its tasks in every rendering
    text = render_markdown(board)
    assert "| mean(blimp,ewok) |" in text and "| macro |" not in text
    assert "Rows ranked by mean(blimp,ewok), the mean of these tasks alone (not the paper's four-task macro)" in text


def test_every_board_says_chance_beside_the_accuracies_and_macro_is_the_papers_four(tmp_path):
    """Issue #50 item 5: the footnotes give each column's chance level (50% for a minimal pair's accuracy, 0 nats
    for its margin) and say GLUE has a majority-class floor instead; the four AntLM tasks' mean is "macro"."""
    rng = np.random.default_rng(0)
    write_run(tmp_path, "r1", [{"phase_index": 0, "tasks": four_tasks(
        rng, dict.fromkeys(("blimp", "blimp_supplement", "ewok", "glue"), 0.7))}])
    board = build_leaderboard(read_results([tmp_path]))
    text = render_markdown(board)
    chance = next(line for line in text.splitlines() if line.startswith("- Chance: "))
    assert "50.0% on blimp, blimp_supplement, ewok (a coin flip between a pair's two sentences)" in chance
    assert "none single on glue (each member's majority class is its floor" in chance
    assert "| macro |" in text and "Rows ranked by the macro (the AntLM paper's four-task mean)" in text


def test_probe_rows_get_their_own_column_and_stay_out_of_the_macro(tmp_path):
    rng = np.random.default_rng(1)
    tasks = four_tasks(rng, dict.fromkeys(("blimp", "blimp_supplement", "ewok", "glue"), 0.7))
    probe = {"glue": {"rte": correctness(rng, 100, 0.55)}}
    write_run(tmp_path, "r1", [{"phase_index": 0, "scoring": {"glue": "finetune"}, "tasks": tasks}])
    write_run(tmp_path / "probe", "r1p", [{"phase_index": 0, "scoring": {"glue": "probe"}, "tasks": probe}])
    # the probe of the same run lives in another file but shares the run id
    table = pq.read_table(tmp_path / "probe" / "r1p" / "scores.parquet")
    table = table.set_column(table.schema.get_field_index("run_id"), "run_id",
                             pa.array(["r1"] * table.num_rows))
    table = table.set_column(table.schema.get_field_index("checkpoint"), "checkpoint",
                             pa.array(["r1/ckpt0"] * table.num_rows))
    probe_items = read_results_folder(tmp_path / "probe" / "r1p" / "scores.parquet").items
    shutil.rmtree(tmp_path / "probe" / "r1p")
    commit_results(tmp_path / "probe" / "r1p", table, probe_items)
    board = build_leaderboard(read_results([tmp_path]))
    row = board.rows[0]
    assert any("appears in 2 tables" in note for note in board.notes)
    assert board.columns == ["blimp", "blimp_supplement", "ewok", "glue", "glue:probe"]
    assert row.cells["glue"].scoring == "finetune" and row.cells["glue:probe"].scoring == "probe"
    assert row.cells["glue:probe"].value == pytest.approx(np.mean(probe["glue"]["rte"]))
    four = [row.cells[t].value for t in ("blimp", "blimp_supplement", "ewok", "glue")]
    assert row.macro.value == pytest.approx(np.mean(four))


def test_scoring_that_matches_the_last_phase_wins(tmp_path):
    rng = np.random.default_rng(2)
    clm = {"blimp": {"a": correctness(rng, 100, 0.6)}}
    pll = {"blimp": {"a": correctness(rng, 100, 0.9)}}
    for run_id, objective in (("mlm-last", "MLM"), ("clm-last", "CLM")):
        write_run(tmp_path / run_id, run_id, [
            {"phase_index": 2, "objective": objective, "scoring": "clm", "tasks": clm},
        ], schedule=run_id)
        # the same checkpoint scored a second way, appended to the run's own table
        folder = write_run(tmp_path / "tmp", run_id, [
            {"phase_index": 2, "objective": objective, "scoring": "pll", "tasks": pll}], schedule=run_id)
        commit_results(tmp_path / run_id / run_id, pq.read_table(folder / "scores.parquet"))
    chosen = {run_id: build_leaderboard(read_results([tmp_path / run_id])).rows[0].cells["blimp"].scoring
              for run_id in ("mlm-last", "clm-last")}
    assert chosen == {"mlm-last": "pll", "clm-last": "clm"}
    # on one board, both runs have rows by both methods: one method stands for both, so their gap is tested
    board = build_leaderboard(read_results([tmp_path / "mlm-last", tmp_path / "clm-last"]))
    assert {r.cells["blimp"].scoring for r in board.rows} == {"clm"}
    assert all(c.incomparable is None for c in board.comparisons)
    # a definition can pin the method instead
    pinned = build_leaderboard(read_results([tmp_path / "mlm-last"]), LeaderboardDefinition(scoring={"blimp": ["clm"]}))
    assert pinned.rows[0].cells["blimp"].scoring == "clm"


def test_final_scoring_rows_make_a_comparable_board(tmp_path):
    """`run --final-scoring clm`: an MLM-ending run has the last phase's quick pll look (--limit) and the final clm
    evaluation on all items; a CLM-ending run has clm only. The board compares both by clm."""
    rng = np.random.default_rng(4)
    write_run(tmp_path / "clm-last", "clm-last", [
        {"phase_index": 1, "objective": "CLM", "scoring": "clm", "tasks": {"blimp": {"a": correctness(rng, 100, 0.6)}}},
    ], schedule="1_MLM+1_CLM")
    write_run(tmp_path / "mlm-last", "mlm-last", [
        {"phase_index": 1, "objective": "MLM", "scoring": "pll", "tasks": {"blimp": {"a": correctness(rng, 20, 0.9)}}},
    ], schedule="1_CLM+1_MLM", limit=20)
    folder = write_run(tmp_path / "tmp", "mlm-last", [
        {"phase_index": 1, "objective": "MLM", "scoring": "clm", "tasks": {"blimp": {"a": correctness(rng, 100, 0.7)}}},
    ], schedule="1_CLM+1_MLM")
    commit_results(tmp_path / "mlm-last" / "mlm-last", pq.read_table(folder / "scores.parquet"))
    alone = build_leaderboard(read_results([tmp_path / "mlm-last"]))
    assert alone.rows[0].cells["blimp"].scoring == "clm"  # all items beat the last phase's --limit look
    board = build_leaderboard(read_results([tmp_path / "mlm-last", tmp_path / "clm-last"]))
    assert {r.cells["blimp"].scoring for r in board.rows} == {"clm"}
    gaps = [c for c in board.comparisons if c.column == "blimp"]
    assert gaps and all(c.incomparable is None for c in gaps)


def test_group_by_schedule_pools_recipes_and_says_so(tmp_path):
    rng = np.random.default_rng(3)
    for recipe in ("antlm-babyllama", "babyllama-clm-only"):
        write_run(tmp_path, recipe, [{"phase_index": 0, "tasks": {"blimp": {"a": correctness(rng, 50, 0.7)}}}],
                  recipe=recipe)
    board = build_leaderboard(read_results([tmp_path]), group_by=["schedule"])
    assert len(board.rows) == 1 and len(board.rows[0].run_ids) == 2
    assert any("recipes" in note for note in board.rows[0].notes)
    with pytest.raises(UserError, match="--by nonsense"):
        build_leaderboard(read_results([tmp_path]), group_by=["nonsense"])


def test_unusable_input_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_results([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no scores.parquet"):
        read_results([tmp_path / "empty"])
    bad = tmp_path / "bad" / "scores.parquet"
    (bad / "0-bad").mkdir(parents=True)  # a committed event whose part is not a scores table
    pq.write_table(pa.table({"run_id": ["x"], "value": [1.0]}), bad / "0-bad" / "part.parquet")
    with pytest.raises(UserError, match="the scores table lacks column"):
        read_results([bad])
    (bad / "0-bad" / "part.parquet").write_bytes(b"not parquet")
    with pytest.raises(UserError, match="not a readable scores table"):
        read_results([bad])


def test_parquet_and_markdown_renderings(tmp_path):
    _study(tmp_path / "runs", seeds=(0,))
    board = build_leaderboard(read_results([tmp_path / "runs"]))
    table = board_table(board)
    rows = table.to_pylist()
    macro = [r for r in rows if r["column"] == "macro"]
    assert [r["rank"] for r in macro] == [1, 2]
    assert macro[0]["value"] == pytest.approx(board.rows[0].macro.value)
    assert b"antlm_bench.gaps" in table.schema.metadata
    text = render_markdown(board)
    first = text.index("4_CLM+16_MLM |")
    second = text.index("| 4_CLM |")
    assert first < second
    assert f"{100 * board.rows[0].cells['blimp'].value:.1f}" in text
    assert "paired" in text


def test_the_same_results_render_the_same_board_stamped_with_their_newest_row(tmp_path, monkeypatch):
    # a committed board must change only when its results do: its stamp is the newest score row's time, not the
    # time of rendering (a re-export of unchanged results once churned every board's footer)
    _study(tmp_path / "runs", seeds=(0, 1))
    results = read_results([tmp_path / "runs"])
    newest = max(row["created_at"] for row in results.rows)
    first = render_markdown(build_leaderboard(results))
    assert f"results as of {newest:%Y-%m-%d %H:%M} UTC" in first
    assert render_markdown(build_leaderboard(read_results([tmp_path / "runs"]))) == first
    # a seed written later moves the stamp to its rows' time
    later = datetime.datetime(2031, 5, 4, 3, 2, tzinfo=datetime.timezone.utc)
    monkeypatch.setattr("antlm_bench.results.tables.utc_now", lambda: later)
    _study(tmp_path / "later", seeds=(2,))
    again = render_markdown(build_leaderboard(read_results([tmp_path / "runs", tmp_path / "later"])))
    assert "results as of 2031-05-04 03:02 UTC" in again and again != first


def test_definition_file_with_results_glob(tmp_path):
    _study(tmp_path / "board" / "results", seeds=(0,))
    definition = tmp_path / "board.yaml"
    definition.write_text("name: demo\nresults: ['board/results/*']\ntasks: [blimp, ewok]\nmacro_tasks: [blimp, ewok]\n"
                          "reference: {schedule: 4_CLM}\n")
    from antlm_bench.results.leaderboard import definition_result_paths

    loaded = load_definition(definition)
    assert len(definition_result_paths(loaded)) == 2
    board = build_leaderboard(read_results(definition_result_paths(loaded)), loaded)
    assert board.columns == ["blimp", "ewok"]
    assert board.reference[2] == "4_CLM"
    assert {c.column for c in board.comparisons} == {"blimp", "ewok", "macro"}
    definition.write_text("name: demo\ntask: [blimp]\n")
    with pytest.raises(UserError, match="field task"):
        load_definition(definition)


def test_final_evaluation_beats_the_last_phases_limited_score_of_the_same_weights(tmp_path):
    """The trainer scores each phase on a --limit subset; the final evaluation of the same weights (another
    checkpoint name, all items) is the leaderboard's number, even when the limited row was written later."""
    rng = np.random.default_rng(9)
    full = {"blimp": {"a": correctness(rng, 300, 0.6)}}
    write_run(tmp_path / "full", "r", [{"phase_index": 1, "epoch": 2.0, "tasks": full}])
    write_run(tmp_path / "limited", "r", [{"phase_index": 1, "epoch": 2.0,
                                           "tasks": {"blimp": {"a": np.ones(20)}}}], limit=20)
    limited = pq.read_table(tmp_path / "limited" / "r" / "scores.parquet")
    limited = limited.set_column(limited.schema.get_field_index("checkpoint"), "checkpoint",
                                 pa.array(["r/last"] * limited.num_rows))
    commit_results(tmp_path / "full" / "r", limited)
    cell = build_leaderboard(read_results([tmp_path / "full"])).rows[0].cells["blimp"]
    assert cell.value == pytest.approx(np.mean(full["blimp"]["a"]))
    assert cell.n == 300
    # `antlm-bench run --eval-limit 10 --limit 40`: both rows limited; the larger sample is the final number
    write_run(tmp_path / "forty", "r", [{"phase_index": 1, "epoch": 2.0, "tasks": {"blimp": {"a": np.zeros(40)}}}],
              limit=40)
    commit_results(tmp_path / "forty" / "r", limited)
    cell = build_leaderboard(read_results([tmp_path / "forty"])).rows[0].cells["blimp"]
    assert cell.value == 0.0 and cell.n == 40


def test_shipped_definitions_load():
    from antlm_bench.registry import shipped_folder

    names = sorted(p.stem for p in shipped_folder("leaderboards").glob("*.yaml"))
    assert {"mini-antlm", "zero-shot", "glue-probe"} <= set(names)
    for name in names:
        definition = load_definition(name)
        assert definition.name == name
        assert {c.split(":")[0] for c in definition.effective_macro_tasks()} <= set(definition.tasks)


def test_curves_keep_the_per_phase_sample_size(tmp_path):
    """Per-phase scores on 10 items, the final evaluation on 40: the row shows the 40-item score, the curve stays
    on the 10-item scores (a curve that switched sample size at its last point would jump for no reason)."""
    phases = [{"phase_index": i, "epoch": float(i + 1), "tasks": {"blimp": {"a": np.full(10, v)}}}
              for i, v in enumerate((0.0, 0.5))]
    write_run(tmp_path / "per_phase", "r", phases, limit=10)
    write_run(tmp_path / "final", "r", [{"phase_index": 1, "epoch": 2.0, "tasks": {"blimp": {"a": np.ones(40)}}}],
              limit=40)
    commit_results(tmp_path / "per_phase" / "r", pq.read_table(tmp_path / "final" / "r" / "scores.parquet"))
    row = build_leaderboard(read_results([tmp_path / "per_phase"])).rows[0]
    assert row.cells["blimp"].value == 1.0 and row.cells["blimp"].n == 40
    assert [p.value for p in row.curves["blimp"]] == [0.0, 0.5]


def test_without_a_definition_other_tasks_are_shown_after_the_antlm_ones(tmp_path):
    from antlm_bench.results.leaderboard import leaderboard_from_paths

    rng = np.random.default_rng(4)
    write_run(tmp_path, "r", [{"phase_index": 0, "tasks": {"my_task": {"x": correctness(rng, 50, 0.5)},
                                                           "ewok": {"d": correctness(rng, 50, 0.5)}}}])
    board = leaderboard_from_paths([tmp_path])
    assert board.columns == ["ewok", "my_task"]
    assert board.rows[0].macro is None
    zero_shot = leaderboard_from_paths([tmp_path], definition="zero-shot")
    assert zero_shot.columns == ["ewok"]


def test_command_writes_every_format_and_refuses_bad_options(tmp_path, monkeypatch, capsys):
    import sys

    from antlm_bench.cli import main

    _study(tmp_path / "runs", seeds=(0,))

    def run(*args):
        monkeypatch.setattr(sys, "argv", ["antlm-bench", "leaderboard", *map(str, args)])
        with pytest.raises(SystemExit) as exited:
            main()
        return exited.value.code or 0, capsys.readouterr()

    code, _ = run(tmp_path / "runs", "--out", tmp_path / "b.html", "--plots", tmp_path / "plots")
    assert code == 0 and (tmp_path / "b.html").read_text().startswith("<!DOCTYPE html>")
    assert {p.suffix for p in (tmp_path / "plots").iterdir()} == {".png", ".svg"}
    code, _ = run(tmp_path / "runs", "-f", "parquet", "-o", tmp_path / "b.parquet", "--reference", "schedule=4_CLM")
    assert code == 0 and pq.read_table(tmp_path / "b.parquet").num_rows == 10
    code, captured = run(tmp_path / "runs", "-f", "markdown")
    assert code == 0 and "| 4_CLM |" in captured.out
    for args, message in ((["-f", "pdf"], "--format pdf"), (["--by", "colour"], "--by colour"),
                          (["--reference", "schedule"], "expected KEY=VALUE"), (["-d", "nope"], "unknown leaderboard"),
                          (["-o", str(tmp_path / "board.xlsx")], "no format writes .xlsx files")):
        code, captured = run(tmp_path / "runs", *args)
        assert code == 2 and message in captured.err and "Traceback" not in captured.err
    assert not (tmp_path / "board.xlsx").exists()


def test_a_row_with_every_pair_task_within_chance_says_so(tmp_path):
    rng = np.random.default_rng(7)
    write_run(tmp_path, "chance", [{"phase_index": 0, "tasks": {"blimp": {"a": np.tile([0.0, 1.0], 100)},
                                                                "ewok": {"d": np.tile([1.0, 0.0], 100)}}}],
              schedule="1_CLM")
    write_run(tmp_path, "clear", [{"phase_index": 0, "tasks": {"blimp": {"a": correctness(rng, 200, 0.9)},
                                                               "ewok": {"d": np.tile([1.0, 0.0], 100)}}}],
              schedule="2_CLM")
    board = build_leaderboard(read_results([tmp_path]))
    notes = {r.key[2]: r.notes for r in board.rows}
    (line,) = [n for n in notes["1_CLM"] if "within chance" in n]
    assert "blimp 50.0" in line and "ewok 50.0" in line and "contains 50%" in line and "test:" in line
    assert not any("within chance" in n for n in notes["2_CLM"])  # BLiMP is clear of chance there
