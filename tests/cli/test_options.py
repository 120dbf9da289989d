"""The one seeds grammar (antlm_bench.options) of run --seeds, sweep --seeds, a sweep file's seeds: and eval --seeds:
same answers everywhere, linear time, absurd ranges refused at once."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.errors import UserError
from antlm_bench.options import MAX_SEEDS, parse_seeds


def test_grammar():
    assert parse_seeds("1-3,5,7-8") == [1, 2, 3, 5, 7, 8]
    assert parse_seeds(" 4 , 2-3 ") == [4, 2, 3]
    assert parse_seeds("2,1,2") == [2, 1]
    assert parse_seeds(42) == [42]
    assert parse_seeds([4, "6-7", "9,10"]) == [4, 6, 7, 9, 10]
    assert parse_seeds(f"1-{MAX_SEEDS}") == list(range(1, MAX_SEEDS + 1))


@pytest.mark.parametrize("bad", ["", ",", "x", "1,,2", "3-1", "-1", "1-", "1.5", "1-2-3", "99999999999",
                                 "1-10000000", "1-200000", f"0-{MAX_SEEDS}", "2147483648", True, [None], [[1]], 1.0])
def test_refused_with_one_line(bad):
    with pytest.raises(UserError) as err:
        parse_seeds(bad)
    assert "\n" not in str(err.value) and "--seeds" in str(err.value)


def test_absurd_range_is_refused_at_once_and_parsing_is_linear():
    """No timing (a loaded machine would make it flaky): a range is refused from its two ends, before any seed is
    made (the peak memory of the refusal stays far below what 10 million ints would take), and a long list is one
    pass (repeats counted once, order kept)."""
    import tracemalloc

    for text in ("1-10000000", "0-" + "9" * 18):
        tracemalloc.start()
        with pytest.raises(UserError):
            parse_seeds(text)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 1_000_000, f"{text}: {peak} bytes allocated before the refusal"
    assert parse_seeds(",".join(["1"] * 200_000)) == [1]
    assert parse_seeds(",".join(str(1 + i % 500) for i in range(200_000))) == list(range(1, 501))


@pytest.mark.parametrize("command", [
    ["run", "--preset", "tiny"],
    ["sweep", "--dry-run", "--preset", "tiny"],
    ["eval", "--model", "unused", "--tasks", "glue:rte"],
])
@pytest.mark.parametrize(("seeds", "says"), [("1-10000000", "more than 1000 seeds"), ("1-200000", "more than"),
                                             ("3-1", "backwards"), ("1,x", "'x'")])
def test_every_command_refuses_the_same_way(command, seeds, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    result = CliRunner().invoke(app, [*command, "--seeds", seeds, "--output", str(tmp_path / "out")])
    assert time.perf_counter() - start < 20
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: --seeds"), result.output
    assert says in lines[0]
    assert not (tmp_path / "out").exists()


def test_sweep_file_uses_the_same_grammar(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text("seeds: 1-10000000\n")
    result = CliRunner().invoke(app, ["sweep", "--config", str(tmp_path / "s.yaml"), "--dry-run"])
    assert result.exit_code == 2 and "more than 1000 seeds" in result.output, result.output
