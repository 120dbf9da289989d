"""Paired comparisons between leaderboard rows: item alignment, seeds, and what pairing buys over unpaired gaps."""

from __future__ import annotations

import numpy as np
import pytest
from leaderboard_tables import write_run

from antlm_bench.leaderboard import (
    Cell,
    build_leaderboard,
    hierarchical_replicates,
    read_results,
    unpaired_gap,
)
from antlm_bench.stats import paired_bootstrap


def _two_schedules(tmp_path, a, b, items=True, shuffle=False, seeds_b=None):
    """Run A scored ``a`` (task -> subtask -> correct), run B ``b``; returns the built board."""
    write_run(tmp_path, "A", [{"phase_index": 0, "tasks": a}], schedule="A", items=items)
    for i, tasks in enumerate(seeds_b or [b]):
        write_run(tmp_path, f"B{i}", [{"phase_index": 0, "tasks": tasks}], schedule="B", seed=i, items=items,
                  shuffle_items=shuffle)
    return build_leaderboard(read_results([tmp_path]), macro_tasks=[], reference={"schedule": "A"})


def _small_consistent_gain(n=1000, gain=30, seed=0):
    """B = A, except that B also gets ``gain`` items right that A gets wrong: a 3-point gap on the same items."""
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < 0.6).astype(float)
    b = a.copy()
    wrong = np.flatnonzero(a == 0)[:gain]
    b[wrong] = 1.0
    return a, b


def test_one_task_without_clusters_matches_stats_paired_bootstrap():
    rng = np.random.default_rng(1)
    a = {f"s{k}": (rng.random(80) < 0.7).astype(float) for k in range(3)}
    b = {f"s{k}": (rng.random(80) < 0.6).astype(float) for k in range(3)}
    point, replicates = hierarchical_replicates({"t": {k: (a[k] - b[k], None) for k in a}})
    reference = paired_bootstrap(a, b)
    assert point == pytest.approx(reference.delta)
    low, high = np.quantile(replicates, [0.025, 0.975])
    assert (low, high) == pytest.approx((reference.low, reference.high))


def test_macro_weights_tasks_equally_not_subtasks():
    """Two tasks, one with many subtasks: the macro gap is the mean of the two task gaps."""
    big = {f"s{k}": (np.ones(10), None) for k in range(9)}  # task gap 1.0
    small = {"only": (np.zeros(10), None)}  # task gap 0.0
    point, replicates = hierarchical_replicates({"big": big, "small": small})
    assert point == pytest.approx(0.5)
    assert np.allclose(replicates, 0.5)


def test_paired_gap_is_significant_where_unpaired_is_not(tmp_path):
    a, b = _small_consistent_gain()
    board = _two_schedules(tmp_path, {"blimp": {"p": a}}, {"blimp": {"p": b}})
    (gap,) = [c for c in board.comparisons if c.column == "blimp"]
    assert gap.paired and gap.n_items == 1000
    assert gap.delta == pytest.approx(0.03)
    assert gap.significant and gap.p_value < 0.01
    assert gap.low > 0
    # the same two rows without items: the unpaired test cannot tell (the intervals overlap)
    ra, rb = board.rows[0].cells["blimp"], board.rows[1].cells["blimp"]
    delta, low, high, p = unpaired_gap(rb if board.rows[0].key[2] == "A" else ra,
                                       ra if board.rows[0].key[2] == "A" else rb, 0.05)
    assert delta == pytest.approx(0.03) and low < 0 < high and p > 0.05
    unpaired_board = _two_schedules(tmp_path / "noitems", {"blimp": {"p": a}}, {"blimp": {"p": b}}, items=False)
    (gap2,) = [c for c in unpaired_board.comparisons if c.column == "blimp"]
    assert not gap2.paired and gap2.significant is False


def test_items_align_by_id_not_by_position(tmp_path):
    a, b = _small_consistent_gain(n=300, gain=20)
    ordered = _two_schedules(tmp_path / "o", {"ewok": {"d": a}}, {"ewok": {"d": b}})
    shuffled = _two_schedules(tmp_path / "s", {"ewok": {"d": a}}, {"ewok": {"d": b}}, shuffle=True)
    assert ordered.comparisons[0].delta == pytest.approx(20 / 300)
    assert shuffled.comparisons[0].delta == pytest.approx(ordered.comparisons[0].delta)
    assert shuffled.comparisons[0].p_value == ordered.comparisons[0].p_value


def test_only_shared_items_are_paired(tmp_path):
    a, b = _small_consistent_gain(n=200, gain=10)
    board = _two_schedules(tmp_path, {"blimp": {"p": a}}, {"blimp": {"p": b[:150]}})
    gap = board.comparisons[0]
    assert gap.paired and gap.n_items == 150
    assert gap.delta == pytest.approx(np.mean(b[:150] - a[:150]))


def test_seeds_are_averaged_per_item_before_pairing(tmp_path):
    rng = np.random.default_rng(5)
    a = (rng.random(400) < 0.5).astype(float)
    seed0 = (rng.random(400) < 0.7).astype(float)
    seed1 = (rng.random(400) < 0.7).astype(float)
    board = _two_schedules(tmp_path, {"blimp": {"p": a}}, None,
                           seeds_b=[{"blimp": {"p": seed0}}, {"blimp": {"p": seed1}}])
    gap = board.comparisons[0]
    assert gap.paired and gap.n_items == 400
    assert gap.delta == pytest.approx(np.mean((seed0 + seed1) / 2 - a))
    # the replicates must be those of the per-item differences of the seed mean
    order = np.argsort(np.array([f"p-{i}" for i in range(400)]))
    diffs = ((seed0 + seed1) / 2 - a)[order]
    _, replicates = hierarchical_replicates({"blimp": {"p": (diffs, None)}})
    assert (gap.low, gap.high) == pytest.approx(tuple(np.quantile(replicates, [0.025, 0.975])))


def test_unpaired_gap_combines_the_two_intervals():
    a = Cell(0.70, 0.66, 0.74, None, 1, "clm")
    b = Cell(0.60, 0.57, 0.63, None, 1, "clm")
    delta, low, high, p = unpaired_gap(a, b, 0.05)
    half = np.hypot(0.04, 0.03)
    assert delta == pytest.approx(0.10)
    assert (low, high) == pytest.approx((0.10 - half, 0.10 + half), rel=1e-6)
    assert p < 0.001
    no_interval = Cell(0.6, None, None, None, 1, "clm")
    assert unpaired_gap(a, no_interval, 0.05)[1:] == (None, None, None)


def test_macro_gap_is_paired_when_every_macro_task_has_items(tmp_path):
    a1, b1 = _small_consistent_gain(n=400, gain=12, seed=1)
    a2, b2 = _small_consistent_gain(n=400, gain=12, seed=2)
    write_run(tmp_path, "A", [{"phase_index": 0, "tasks": {"blimp": {"x": a1}, "ewok": {"y": a2}}}], schedule="A")
    write_run(tmp_path, "B", [{"phase_index": 0, "tasks": {"blimp": {"x": b1}, "ewok": {"y": b2}}}], schedule="B")
    board = build_leaderboard(read_results([tmp_path]), macro_tasks=["blimp", "ewok"], reference={"schedule": "A"})
    macro = next(c for c in board.comparisons if c.column == "macro")
    assert macro.paired and macro.n_items == 800
    assert macro.delta == pytest.approx(0.03)
    assert macro.significant
    row_b = next(r for r in board.rows if r.key[2] == "B")
    assert row_b.macro.interval == "items"


@pytest.mark.parametrize("with_accuracy_too", [False, True])
def test_glue_with_an_f1_member_is_compared_unpaired(tmp_path, with_accuracy_too):
    """Item correctness does not average to an F1 score: such a GLUE gap must not claim to be paired, also when
    the F1 member reports its accuracy as well (as the GLUE adapter does)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    a, b = _small_consistent_gain(n=400, gain=20)
    for name, values in (("A", a), ("B", b)):
        folder = write_run(tmp_path, name, [{"phase_index": 0, "scoring": "finetune",
                                             "tasks": {"glue": {"mrpc": values, "rte": values}}}], schedule=name)
        table = pq.read_table(folder / "scores.parquet")
        mrpc = pa.compute.equal(table["subtask"], "mrpc")
        f1_rows = table.filter(mrpc)
        f1_rows = f1_rows.set_column(f1_rows.schema.get_field_index("metric"), "metric",
                                     pa.array(["f1"] * f1_rows.num_rows))
        kept = table if with_accuracy_too else table.filter(pa.compute.invert(mrpc))
        pq.write_table(pa.concat_tables([kept, f1_rows]), folder / "scores.parquet")
    board = build_leaderboard(read_results([tmp_path]), macro_tasks=[], reference={"schedule": "A"})
    (gap,) = board.comparisons
    assert gap.column == "glue" and not gap.paired
    assert all(row.cells["glue"].items is None for row in board.rows)
