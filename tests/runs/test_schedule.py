"""The schedule grammar: parsing, the canonical printer, errors that point at the offending character."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antlm_bench.errors import UserError
from antlm_bench.runs.schedule import Phase, Repeat, Schedule, ScheduleError, format_number, parse_schedule


@pytest.mark.parametrize(
    ("text", "canonical", "labels", "epochs"),
    [
        ("4_CLM+16_MLM+4_CLM", "4_CLM+16_MLM+4_CLM", ["CLM", "MLM", "CLM"], [4, 16, 4]),
        (" 4 _ clm +\t0.50_Mlm ", "4_CLM+0.5_MLM", ["CLM", "MLM"], [4, 0.5]),
        ("4.0_mntp", "4_MNTP", ["MNTP"], [4]),
        (".25_CLM", "0.25_CLM", ["CLM"], [0.25]),
        ("2_mix( clm:1 , MLM:15.0 )", "2_MIX(CLM:1,MLM:15)", ["MIX(CLM:1,MLM:15)"], [2]),
        ("1_MIX(MLM:15,CLM:1)", "1_MIX(MLM:15,CLM:1)", ["MIX(MLM:15,CLM:1)"], [1]),
        ("3x(1_CLM+2_MLM)", "3x(1_CLM+2_MLM)", ["CLM", "MLM"] * 3, [1, 2] * 3),
        ("1_MLM+2X(3x(1_clm)+0.5_MNTP)", "1_MLM+2x(3x(1_CLM)+0.5_MNTP)",
         ["MLM"] + (["CLM"] * 3 + ["MNTP"]) * 2, [1] + [1, 1, 1, 0.5] * 2),
        ("4_CLM+4_CLM", "4_CLM+4_CLM", ["CLM", "CLM"], [4, 4]),  # never merged: a boundary restarts the LR
    ],
)
def test_parse_and_canonical(text: str, canonical: str, labels: list[str], epochs: list[float]) -> None:
    schedule = parse_schedule(text)
    assert schedule.canonical == canonical
    assert [p.label for p in schedule.phases] == labels
    assert [p.epochs for p in schedule.phases] == epochs
    assert parse_schedule(canonical) == schedule
    assert schedule.total_epochs == pytest.approx(sum(epochs))


def test_phase_properties() -> None:
    clm, mlm, mntp, mix = parse_schedule("1_CLM+1_MLM+1_MNTP+1_MIX(CLM:1,MLM:15)").phases
    assert [p.attention_mode for p in (clm, mlm, mntp)] == ["causal", "bidirectional", "bidirectional"]
    assert mix.weights == {"CLM": 1.0, "MLM": 15.0}
    assert mix.dominant_objective == "MLM"
    assert parse_schedule("1_MIX(CLM:2,MNTP:2)").phases[0].dominant_objective == "CLM"  # ties: the first listed
    assert clm.weights is None and clm.dominant_objective == "CLM"


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("4_CLM+x_MLM", 6, "expected a number"),
        ("4_CLM+16_MLN", 9, "expected an objective"),
        ("4CLM", 1, "'_'"),
        ("4_CLM+", 6, "at the end"),
        ("4_CLM 16_MLM", 6, "'+'"),
        ("0_CLM", 0, "positive number of epochs"),
        ("1.5x(1_CLM)", 0, "whole repeat count"),
        ("0x(1_CLM)", 0, "whole repeat count"),
        ("3x(1_CLM", 8, "')'"),
        ("3x1_CLM", 2, "'('"),
        ("4_CLM)", 5, "closes no group"),
        ("2_MIX(CLM:1,CLM:2)", 12, "once"),
        ("2_MIX(CLM:0)", 10, "positive weight"),
        ("2_MIX(MIX:1)", 6, "objective to mix"),
        ("2_MIX(CLM 1)", 10, "':'"),
        ("2_MIX(CLM:1", 11, "')'"),
        ("1.2.3_CLM", 3, "'_'"),
        ("", 0, "empty"),
        ("1000x(1000x(1_CLM))", 0, "at most"),
        ("20000x(1_CLM)", 0, "repeat count of at most 10000"),
        ("1" * 5000 + "x(1_CLM)", 0, "repeat count of at most 10000"),  # int() alone: ValueError past 4300 digits
        ("1" + "0" * 400 + "_CLM", 0, "finite number of epochs"),
        ("1x(" * 33 + "1_CLM" + ")" * 33, 98, "at most 32 nested repeat groups"),  # the 33rd '('
        ("1x(" * 400 + "1_CLM" + ")" * 400, 98, "at most 32 nested repeat groups"),  # today: RecursionError
    ],
)
def test_errors_point_at_the_character(text: str, position: int, fragment: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(text)
    err = info.value
    assert isinstance(err, UserError)
    assert err.position == position, (str(err), err.position)
    assert fragment in str(err)
    assert "\n" not in str(err)
    line, caret = err.context_lines
    assert line == text and caret == " " * position + "^"


@pytest.mark.parametrize("value", [4.0, 0.5, 1e-7, 123456789.0, 1 / 3, 2.5e16, 0.1 + 0.2])
def test_format_number_round_trips_without_exponent(value: float) -> None:
    text = format_number(value)
    assert "e" not in text.lower()
    assert float(text) == value
    assert not text.endswith(".0")


# -- property: parse(print(s)) == s for generated schedules ------------------------------------------------------

_positive = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
_mix_weights = st.lists(
    st.tuples(st.sampled_from(["CLM", "MLM", "MNTP"]), _positive), min_size=1, max_size=3, unique_by=lambda t: t[0]
).map(dict)
_phase = st.one_of(
    st.builds(Phase, _positive, st.sampled_from(["CLM", "MLM", "MNTP"])),
    st.builds(Phase, _positive, st.just("MIX"), _mix_weights),
)
_items = st.recursive(
    st.lists(_phase, min_size=1, max_size=4),
    lambda inner: st.lists(st.one_of(_phase, st.builds(Repeat, st.integers(1, 4), inner)), min_size=1, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_items)
def test_parse_print_round_trip(items: list) -> None:
    schedule = Schedule(items)
    again = parse_schedule(schedule.canonical)
    assert again == schedule
    assert again.canonical == schedule.canonical
    assert math.isclose(again.total_epochs, schedule.total_epochs)


@settings(max_examples=200, deadline=None)
@given(_items, st.randoms(use_true_random=False))
def test_whitespace_and_case_are_forgiven(items: list, rnd) -> None:
    canonical = Schedule(items).canonical
    # scatter spaces between tokens (never inside a number or a name) and flip the case of letters
    noisy = []
    for i, char in enumerate(canonical):
        boundary = i == 0 or not (char.isalnum() or char == ".") or not (canonical[i - 1].isalnum() or canonical[i - 1] == ".")
        if boundary and rnd.random() < 0.3:
            noisy.append(" " * rnd.randint(1, 2))
        noisy.append(char.lower() if rnd.random() < 0.5 else char)
    assert parse_schedule("".join(noisy)).canonical == canonical


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789._+x()CLMNTPIX:, ", max_size=25))
def test_garbage_is_a_schedule_error_or_a_valid_schedule(text: str) -> None:
    try:
        schedule = parse_schedule(text)
    except ScheduleError as err:
        assert 0 <= err.position <= len(text)
        return
    assert parse_schedule(schedule.canonical) == schedule


# -- the command ------------------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "antlm_bench", *args], capture_output=True, text=True, env=env)


def test_cli_prints_canonical_form_and_phases() -> None:
    out = _cli("schedule", " 2x( 1_clm+2_MLM) + 0.5_mix(clm:1,mlm:15)", "--model", "antlm-ltgbert")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "2x(1_CLM+2_MLM)+0.5_MIX(CLM:1,MLM:15)"
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 5
    assert "causal" in rows[0] and "bidirectional" in rows[1] and "MIX(CLM:1,MLM:15)" in rows[4]
    assert "4 cycles" in rows[0]


def test_cli_bad_schedule_is_one_line_and_a_caret() -> None:
    out = _cli("schedule", "4_CLM+16_MLX")
    assert out.returncode == 2
    assert out.stdout == ""
    error, line, caret = out.stderr.splitlines()
    assert error.startswith("error: schedule '4_CLM+16_MLX': expected an objective") and "character 10" in error
    assert line == "  4_CLM+16_MLX"
    assert caret == "  " + " " * 9 + "^"
    assert "Traceback" not in out.stderr


def test_32_nested_groups_parse_and_long_schedules_are_shortened_in_the_message() -> None:
    assert parse_schedule("1x(" * 32 + "1_CLM" + ")" * 32).canonical.count("(") == 32
    with pytest.raises(ScheduleError) as info:
        parse_schedule("1_CLM+" * 1000 + "1_XYZ")
    assert len(str(info.value)) < 300 and "..." in str(info.value)
    assert info.value.context_lines[0] == "1_CLM+" * 1000 + "1_XYZ"  # the caret line still shows all of it
