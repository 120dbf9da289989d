"""``antlm-bench plan``: the simulation of a ``sweep --until-decided`` design is the sweep's own rule (checked against
a plain loop over ``sequential.confidence_sequence`` and ``decide``), reproduces the power the mini study's
design was measured to have, keeps the family's error under alpha, and refuses bad input in one line."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from cli_support import run_cli
from leaderboard_tables import correctness, write_run

from antlm_bench.results.stats import seed_sd_interval
from antlm_bench.results.stats.planning import (
    Design,
    Truth,
    decide_sweeps,
    fixed_sample_power,
    simulate_design,
    simulate_gaps,
)
from antlm_bench.results.stats.sequential import DIFFERENCE, EQUIVALENT, UNDECIDED, confidence_sequence, decide
from antlm_bench.results.stats.sequential import prior_precision as tuned_precision


def _reference(design: Design, d: np.ndarray) -> tuple[int, list[str]]:
    """One sweep as sweep.loop.run_sweep runs it: look after each round, stop when nothing is undecided or at the
    cap, every comparison's verdict the one at the stop."""
    c = tuned_precision(design.max_seeds, design.alpha_each)
    for n in design.looks():
        verdicts = [decide(confidence_sequence(row[:n], design.alpha_each, c), design.tolerance) for row in d]
        if UNDECIDED not in verdicts or n == design.max_seeds:
            signed = []
            for row, verdict in zip(d, verdicts):
                interval = confidence_sequence(row[:n], design.alpha_each, c)
                signed.append(("+" if interval.low > 0 else "-") if verdict == DIFFERENCE else verdict)
            return n, signed
    raise AssertionError("no stop")


@pytest.mark.parametrize("design", [Design(3, 8, 3, 1, 0.05, 1.0), Design(2, 12, 2, 3, 0.1, None),
                                    Design(1, 6, 6, 1, 0.05, 2.0)])
def test_vectorised_rule_is_the_sweeps_rule(design):
    rng = np.random.default_rng(7)
    gaps = np.asarray([1.5, -1.0, 0.0][: design.comparisons])
    d = gaps[None, :, None] + rng.standard_normal((300, design.comparisons, design.max_seeds))
    got = decide_sweeps(design, d)
    seen = set()
    for r in range(len(d)):
        n, verdicts = _reference(design, d[r])
        assert got.seeds_at_stop[r] == n
        for k, verdict in enumerate(verdicts):
            mine = ("+" if got.positive[r, k] else "-" if got.negative[r, k]
                    else EQUIVALENT if got.equivalent[r, k] else UNDECIDED)
            assert mine == verdict, (r, k)
            seen.add(verdict)
    assert len(seen) >= 3  # the draws reach differences of both signs and undecided (and equivalence where set)


def test_reproduces_the_mini_studys_power():
    """The mini-antlm design (8 comparisons, seeds 1-3 then one a round, cap 10, paired correlation ~0): 31% power
    at a 2-seed-SD gap and 2.5% at 1 SD (issue #33's figures), against 78% and 17% for a fixed-n Bonferroni t."""
    design = Design(comparisons=8, max_seeds=10, first_seeds=3, round_seeds=1)
    assert design.looks() == [3, 4, 5, 6, 7, 8, 9, 10]
    assert design.first_decidable() == 5
    rng = np.random.default_rng(1)
    two = simulate_design(design, Truth(1.0, 0.0, 2.0), 20_000, rng)
    one = simulate_design(design, Truth(1.0, 0.0, 1.0), 20_000, rng)
    assert abs(two.decided_right - 0.31) < 0.015 and two.decided_wrong_sign == 0
    assert abs(one.decided_right - 0.025) < 0.006
    assert two.mean_seeds == 10  # the seven null comparisons never decide: every sweep runs to the cap
    assert round(fixed_sample_power(design, Truth(1.0, 0.0, 2.0)), 2) == 0.79
    assert round(fixed_sample_power(design, Truth(1.0, 0.0, 1.0)), 2) == 0.17


@pytest.mark.parametrize("gap", [4.5, 10.0, -10.0, 100.0])
def test_the_fixed_n_reference_is_a_number_far_in_the_tails(gap):
    """scipy's noncentral t cdf is nan far in a tail (a 4.5-seed-SD gap at 3 comparisons and 10 seeds printed
    'nan%'); the reference power is then ~1, and the test's two tails stay a probability."""
    power = fixed_sample_power(Design(3, 10, 5), Truth(0.223, 0.0, gap * 0.223))
    assert 0.999 < power <= 1.0
    assert fixed_sample_power(Design(3, 10, 5), Truth(1.0, 0.0, 0.0)) == pytest.approx(0.05 / 3, rel=1e-3)


@pytest.mark.parametrize("design", [Design(1, 10), Design(8, 10), Design(3, 16, 5, 2, 0.05, 1.0),
                                    Design(2, 20, 2, 1, 0.1, 3.0)])
def test_a_a_family_error_is_at_most_alpha(design):
    out = simulate_design(design, Truth(1.0, 0.3, 0.0), 10_000, np.random.default_rng(3))
    assert out.family_difference <= design.alpha + 1.96 * math.sqrt(design.alpha * (1 - design.alpha) / 10_000)


def test_equivalence_margin_stops_nulls_and_gaps_stop_earlier():
    design = Design(1, 30, 3, 1, 0.05, 2.0)
    null = simulate_design(design, Truth(1.0, 0.0, 0.0), 4000, np.random.default_rng(4))
    assert null.decided_equivalent > 0.5 and null.mean_seeds < 30
    big = simulate_design(design, Truth(1.0, 0.0, 4.0), 4000, np.random.default_rng(4))
    assert big.decided_right > 0.95 and big.mean_seeds < null.mean_seeds


def test_a_design_that_cannot_decide_says_so():
    assert Design(1000, 4).first_decidable() is None
    assert Design(2, 10, 9, 5).looks() == [9, 10]


def test_plan_command_prints_the_design_and_its_table(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "plan", "-k", "8", "--max-seeds", "10", "--gap", "2", "--reps",
                             "2000", "--cpu-minutes-per-run", "13.4")
    assert code == 0, err
    assert "Bonferroni: 0.00625 each" in out and "looks at 3, 4, 5" in out
    assert "cannot decide anything" in out and "--seeds 1-5" in out
    assert "0 (A/A)" in out and "2 (2 seed SD)" in out and "CPU-hours" in out


@pytest.mark.parametrize(("args", "fragment"), [
    (["-k", "0"], "--comparisons 0"),
    (["-k", "2", "--correlation", "1"], "--correlation 1"),
    (["-k", "2", "--gap", "1,x"], "--gap 'x'"),
    (["-k", "2", "--gap", "inf"], "--gap inf"),
    (["-k", "2", "--seed-sd", "0"], "--seed-sd 0"),
    (["-k", "2", "--max-seeds", "1"], "--max-seeds 1"),
    (["-k", "2", "--first-seeds", "13"], "--first-seeds 13"),
    (["-k", "2", "--tolerance", "-1"], "--tolerance -1"),
    (["-k", "500", "--max-seeds", "1000", "--reps", "1000"], "draws"),
    (["-k", "2", "--reps", "10"], "--reps 10"),
    (["-k", "2", "--paired-sd", "1", "--correlation", "0.5"], "instead of --seed-sd and --correlation"),
    (["-k", "2", "--paired-sd", "0"], "--paired-sd 0"),
    (["-k", "2", "--observed", "1,y"], "--observed 'y'"),
    (["-k", "2", "--observed", "0.5"], "without spread give no SD"),
    (["-k", "2", "--observed", "1,1,1"], "without spread give no SD"),
    (["-k", "2", "--max-seeds", "3", "--observed", "1,2,3"], "at the cap (--max-seeds 3)"),
])
def test_bad_plan_input_is_one_line(monkeypatch, capsys, args, fragment):
    code, out, err = run_cli(monkeypatch, capsys, "plan", *args)
    assert code == 2, out + err
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], out + err


def test_an_until_decided_sweep_warns_of_looks_that_cannot_decide(monkeypatch, capsys, tmp_path):
    """1 recipe x 2 schedules x blimp (accuracy and margin) = 3 comparisons: at cap 10 nothing is bounded before
    5 seeds, so a first round of 3 wastes two looks; the sweep says so and names the plan command of its rule."""
    code, out, err = run_cli(monkeypatch, capsys, "sweep", "--model", "antlm-babyllama", "--schedule", "1_CLM,1_MLM",
                             "--until-decided", "--baseline", "1_CLM", "--seeds", "1-3", "--max-seeds", "10",
                             "--dry-run", "--tasks", "blimp", "--preset", "tiny", "--final-scoring", "clm",
                             "--output", str(tmp_path / "sweep"))
    assert code == 0, err
    assert "no interval is bounded before 5 seeds" in out and "--seeds 1-5" in out
    assert "antlm-bench plan -k 3 --max-seeds 10 --first-seeds 3" in out
    code, out, err = run_cli(monkeypatch, capsys, "sweep", "--model", "antlm-babyllama", "--schedule", "1_CLM,1_MLM",
                             "--until-decided", "--baseline", "1_CLM", "--seeds", "1-5", "--max-seeds", "10",
                             "--dry-run", "--tasks", "blimp", "--preset", "tiny", "--final-scoring", "clm",
                             "--output", str(tmp_path / "sweep"))
    assert code == 0, err
    assert "cannot decide anything" not in out and "antlm-bench plan -k 3" in out


STUDY = Path(__file__).resolve().parents[2] / "leaderboards" / "mini-antlm" / "results" / "babyllama"


def test_plan_reads_seed_sd_and_correlation_from_a_pilot(monkeypatch, capsys):
    """The committed mini-antlm BabyLlama sweep as a pilot: BLiMP's seed SD pooled over its two rows (0.70 and 0.50
    points over 10 seeds each) and the same-seed correlation of the AntLM row with 24_CLM (about 0, issue #33)."""
    code, out, err = run_cli(monkeypatch, capsys, "plan", "-k", "3", "--pilot", str(STUDY), "--baseline", "24_CLM",
                             "--column", "blimp", "--gap", "1", "--reps", "1000")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("pilot:"))
    sd = float(line.split("seed SD ")[1].split()[0])
    assert 0.5 < sd < 0.7 and "18 degree(s) of freedom" in line
    correlation = float(line.split("correlation with 24_CLM ")[1].split()[0])
    assert -0.7 < correlation < 0.7 and "10 paired seeds" in line
    # the simulation's noise is the comparison's own (the AntLM row's same-seed differences to 24_CLM), never the
    # SD pooled over rows nor the pooled correlation
    rows = next(x for x in out.splitlines() if "paired difference SD against 24_CLM" in x)
    own = float(rows.split("(each row's same-seed differences): ")[1].split()[1])
    assert f"truth: paired difference SD {own:.3g} (" in out


def test_paired_sd_is_the_simulations_noise_and_a_pilot_prints_each_rows(monkeypatch, capsys, tmp_path):
    """--paired-sd simulates exactly what a seed SD of paired / sqrt(2) at correlation 0 does (the differences are
    all the rule sees), and a pilot with --baseline prints each row's SD of its same-seed differences, computed here
    from the values written."""
    rng = np.random.default_rng(0)
    values = {}
    for seed in (1, 2, 3, 4):
        for schedule in ("2_CLM", "1_CLM+1_MLM"):
            correct = correctness(rng, 200, 0.6)
            values[schedule, seed] = 100 * float(np.mean(correct))
            write_run(tmp_path / "pilot", f"{schedule}-s{seed}", [{"phase_index": 0, "tasks": {
                "blimp": {"a": correct}}}], schedule=schedule, seed=seed, items=False)
    expected = float(np.std([values["1_CLM+1_MLM", s] - values["2_CLM", s] for s in (1, 2, 3, 4)], ddof=1))
    common = ["plan", "-k", "3", "--max-seeds", "10", "--first-seeds", "5", "--gap", "1", "--tolerance", "1",
              "--reps", "500"]
    code, out, err = run_cli(monkeypatch, capsys, *common, "--pilot", str(tmp_path / "pilot"), "--baseline",
                             "2_CLM", "--paired-sd", "0.8")
    assert code == 0, err
    line = next(x for x in out.splitlines() if "paired difference SD against 2_CLM" in x)
    assert f"1_CLM+1_MLM {expected:.3g} (4 seeds)" in line
    assert "truth: paired difference SD 0.8 (given)" in out and "1 (1.2 paired SD)" in out
    table = [x for x in out.splitlines() if x.startswith("│")]
    code, out, err = run_cli(monkeypatch, capsys, *common, "--seed-sd", str(0.8 / math.sqrt(2)),
                             "--correlation", "0")
    assert code == 0, err
    # the same simulated sweeps (same --seed): every share equal, only the gap's unit named otherwise
    assert [x.split("│", 2)[2] for x in out.splitlines() if x.startswith("│")] == [x.split("│", 2)[2] for x in table]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--baseline", "24_CLM"], "give --pilot"),
    (["--pilot", "PILOT", "--row", "1_CLM+1_MLM"], "give --baseline"),
    (["--pilot", "PILOT", "--baseline", "2_CLM", "--row", "9_CLM"], "--row 9_CLM"),
    (["--sd-seeds", "5"], "--sd-seeds"),
    (["--pilot", "PILOT", "--pilot-seeds", "1-x"], "--pilot-seeds"),
    (["--pilot", "PILOT", "--column", "nope"], "--column nope"),
    (["--pilot", "PILOT", "--baseline", "1_CLM"], "--baseline 1_CLM"),
    (["--pilot", "ONE_SEED"], "no row has two seeds"),
])
def test_bad_pilot_input_is_one_line(monkeypatch, capsys, tmp_path, args, fragment):
    rng = np.random.default_rng(0)
    for seed in (1, 2, 3):
        for schedule in ("2_CLM", "1_CLM+1_MLM"):
            write_run(tmp_path / "pilot", f"{schedule}-s{seed}", [{"phase_index": 0, "tasks": {
                "blimp": {"a": correctness(rng, 40, 0.6)}}}], schedule=schedule, seed=seed, items=False)
    write_run(tmp_path / "one", "r-s1", [{"phase_index": 0, "tasks": {"blimp": {"a": correctness(rng, 40, 0.6)}}}],
              items=False)
    args = [{"PILOT": str(tmp_path / "pilot"), "ONE_SEED": str(tmp_path / "one")}.get(a, a) for a in args]
    code, out, err = run_cli(monkeypatch, capsys, "plan", "-k", "2", *args)
    assert code == 2, out + err
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], out + err


def test_observed_seeds_give_the_conditional_share_that_averages_to_the_plans():
    """Conditional power is calibrated: over prefixes drawn from the truth, P(sweep stopped by the prefix's look and
    decided right there) plus the mean over the others of the conditional share given that prefix equals the
    unconditional share (the law of total probability). A share that ignored the observed seeds, or let a look
    the sweep already went on from stop it, breaks the equality."""
    design = Design(comparisons=1, max_seeds=12, first_seeds=3, round_seeds=1, alpha=0.1, tolerance=None)
    # a truth where about one sweep in six stops by the look at 8 seeds: the prefixes that went on are the less
    # lucky ones, so their conditional share (0.35 here) is far from a fresh sweep's (0.47 when the seeds so far are
    # ignored), and the sum comes back to the unconditional share only when both parts are right
    truth, n_seen, prefixes, reps = Truth(1.0, 0.0, 1.0), 8, 600, 400
    rng = np.random.default_rng(11)
    whole = simulate_design(design, truth, 40_000, rng).decided_right
    draws = truth.gap + truth.difference_sd * rng.standard_normal((prefixes, 1, design.max_seeds))
    early = decide_sweeps(design, draws)
    stopped = (early.seeds_at_stop <= n_seen) & early.all_decided
    total = float((stopped & early.positive[:, 0]).sum())
    for row in np.flatnonzero(~stopped):
        total += simulate_design(design, truth, reps, rng, observed=draws[row, 0, :n_seen]).decided_right
    mixed = total / prefixes
    assert 0.2 < whole < 0.8  # both parts of the sum matter at this truth
    assert abs(mixed - whole) < 0.05, (mixed, whole)  # sd of `mixed` about 0.02 (600 prefixes)
    assert 0.1 < stopped.mean() < 0.3


def test_looks_a_sweep_under_way_went_on_from_cannot_stop_it():
    """Seven observed seeds decided at every look so far: the sweep under way stops at its next look (8), where
    the same truth simulated from the first seed stops at its first (5); at the cap nothing is left to simulate."""
    design = Design(comparisons=1, max_seeds=10, first_seeds=5, tolerance=1.0)
    truth = Truth(0.1, 0.0, 1.0)
    observed = [1.0, 1.05, 0.95, 1.02, 0.98, 1.0, 1.01]
    under_way = simulate_design(design, truth, 500, np.random.default_rng(2), observed=observed)
    fresh = simulate_design(design, truth, 500, np.random.default_rng(2))
    assert under_way.decided_right == fresh.decided_right == 1.0
    assert under_way.mean_seeds == 8.0 and fresh.mean_seeds == 5.0
    with pytest.raises(ValueError, match="at its cap"):
        simulate_design(design, truth, 100, np.random.default_rng(2), observed=[0.0] * 10)


def test_a_tables_rows_are_the_a_a_gap_then_each_gap_from_one_seeded_generator():
    """``plan``'s rows: the A/A gap first (once, whether or not --gap names 0), then the gaps as given, each row's
    sweeps drawn in turn from one generator seeded by --seed (a table reproduces from its seed, and each row is
    exactly ``simulate_design``'s at that point of the stream); the fixed-n t's power only where a design planned
    in advance has one (not at gap 0, not for a sweep under way)."""
    design = Design(comparisons=2, max_seeds=6, first_seeds=3)
    plans = simulate_gaps(design, 1.0, 0.2, [1.5, 0, -1.0], 0.5, 200, 3)
    assert [p.truth for p in plans] == [Truth(1.0, 0.2, gap, 0.5) for gap in (0.0, 1.5, -1.0)]
    rng = np.random.default_rng(3)
    assert [p.outcome for p in plans] == [simulate_design(design, p.truth, 200, rng) for p in plans]
    assert [p.fixed_power for p in plans] == [None, fixed_sample_power(design, plans[1].truth),
                                              fixed_sample_power(design, plans[2].truth)]
    under_way = simulate_gaps(design, 1.0, 0.2, [1.5], 0.5, 200, 3, observed=[0.5, 1.0])
    assert [p.fixed_power for p in under_way] == [None, None]
    assert under_way[1].outcome == simulate_gaps(design, 1.0, 0.2, [1.5], 0.5, 200, 3, observed=[0.5, 1.0])[1].outcome


def test_plan_observed_prints_a_conditional_table(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "plan", "-k", "3", "--max-seeds", "10", "--first-seeds", "5",
                             "--observed=-2.1,-0.6,-0.6,-0.6,-1.1,-0.3,0.1", "--gap=-0.75", "--tolerance", "1",
                             "--reps", "500", "--runs-per-seed", "4", "--cpu-minutes-per-run", "30")
    assert code == 0, err
    assert "paired difference SD 0.7 (the observed differences')" in out  # their SD, 0.6997
    assert "7 observed paired difference(s)" in out and "conditional power" in out
    assert "continuations of the sweep after 7 seeds" in out and "CPU-hours to go" in out


def _pilot(folder: Path, seeds: tuple[int, ...], rows: dict[str, float]) -> dict[tuple[str, int], float]:
    """Pilot runs of BLiMP: each schedule its own seed noise around 60% (``rows``: its SD in points), the baseline
    2_CLM the same at each seed; returns each run's score in points."""
    values = {}
    for seed in seeds:
        shared = np.random.default_rng(seed).normal(0, 1)
        for schedule, spread in rows.items():
            rng = np.random.default_rng([seed, len(schedule)])
            correct = correctness(rng, 400, 0.6 + spread / 100 * shared)
            values[schedule, seed] = 100 * float(np.mean(correct))
            write_run(folder, f"{schedule}-s{seed}", [{"phase_index": 0, "tasks": {"blimp": {"a": correct}}}],
                      schedule=schedule, seed=seed, items=False)
    return values


def _tables(out: str) -> list[str]:
    return [x.split("│", 2)[2] for x in out.splitlines() if x.startswith("│")]


def test_a_pilot_plans_from_the_comparisons_own_noise_and_at_its_upper_bound(monkeypatch, capsys, tmp_path):
    """Issue #50 item 4: with --baseline the truth is the named comparison's own paired difference SD (by default
    the noisiest row's), not a seed SD pooled over unrelated rows; the plan is repeated at the upper 95% bound of
    that SD; and the numbers it printed, given in place of --pilot, reproduce every table."""
    values = _pilot(tmp_path / "pilot", (1, 2, 3, 4, 5, 6), {"2_CLM": 1.0, "1_CLM+1_MLM": 1.0, "0.5_CLM": 3.0})

    def own(schedule: str) -> float:
        return float(np.std([values[schedule, s] - values["2_CLM", s] for s in range(1, 7)], ddof=1))

    assert own("0.5_CLM") > own("1_CLM+1_MLM")
    common = ["plan", "-k", "3", "--max-seeds", "10", "--first-seeds", "5", "--gap", "1", "--tolerance", "1",
              "--reps", "400"]
    code, out, err = run_cli(monkeypatch, capsys, *common, "--pilot", str(tmp_path / "pilot"), "--baseline",
                             "2_CLM", "--row", "1_CLM+1_MLM")
    assert code == 0, err
    assert f"truth: paired difference SD {own('1_CLM+1_MLM'):.3g} (1_CLM+1_MLM against 2_CLM" in out
    upper = seed_sd_interval(own("1_CLM+1_MLM"), 6)[1]
    assert f"at the upper 95% bound of the paired difference SD ({upper:.3g}, from 6 seeds)" in out
    tables = _tables(out)
    assert len(tables) == 2 * 2  # two gaps (0 and 1) in each of two tables
    recorded = out.split("a design records these numbers (")[1].split(")")[0]
    assert recorded == f"--paired-sd {own('1_CLM+1_MLM'):.6g} --sd-seeds 6"
    code, again, err = run_cli(monkeypatch, capsys, *common, *recorded.split())
    assert code == 0, err
    assert _tables(again) == tables  # the recorded numbers reproduce the plan without the pilot
    code, upper_only, err = run_cli(monkeypatch, capsys, *common, "--paired-sd", f"{upper:.9g}")
    assert code == 0, err
    assert _tables(upper_only) == tables[2:]  # the second table is the plan at the upper bound
    code, out, err = run_cli(monkeypatch, capsys, *common, "--pilot", str(tmp_path / "pilot"), "--baseline", "2_CLM")
    assert code == 0, err
    assert f"truth: paired difference SD {own('0.5_CLM'):.3g} (0.5_CLM against 2_CLM" in out  # the noisiest


def test_a_frozen_pilot_reads_only_its_seeds(monkeypatch, capsys, tmp_path):
    """--pilot-seeds: a folder that has grown since the design was planned gives the design's numbers again."""
    values = _pilot(tmp_path / "pilot", (1, 2, 3, 4, 5, 6), {"2_CLM": 1.0, "1_CLM+1_MLM": 1.0})
    first = float(np.std([values["1_CLM+1_MLM", s] - values["2_CLM", s] for s in (1, 2, 3, 4)], ddof=1))
    code, out, err = run_cli(monkeypatch, capsys, "plan", "-k", "3", "--gap", "1", "--reps", "200", "--pilot",
                             str(tmp_path / "pilot"), "--baseline", "2_CLM", "--pilot-seeds", "1-4")
    assert code == 0, err
    assert f"1_CLM+1_MLM {first:.3g} (4 seeds)" in out and "seeds 1,2,3,4 only (--pilot-seeds)" in out
    assert f"--paired-sd {first:.6g} --sd-seeds 4" in out
