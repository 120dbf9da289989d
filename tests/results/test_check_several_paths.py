"""``check --results A B --baseline C D`` takes several folders after one option, as ``leaderboard A B`` does
(the same as repeating the option); a value never slips to the other option."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import run_cli

# the committed study's BabyLlama runs (shipped with the repository: never missing)
RESULTS = Path(__file__).resolve().parents[2] / "leaderboards" / "mini-antlm" / "results" / "babyllama"


def _runs() -> list[str]:
    runs = sorted(str(p) for p in RESULTS.iterdir() if (p / "scores.parquet").is_dir()) if RESULTS.is_dir() else []
    assert len(runs) >= 2, f"{RESULTS}: the committed study's run folders are missing"
    return runs


def _report(monkeypatch, capsys, *args: str) -> dict:
    code, stdout, stderr = run_cli(monkeypatch, capsys, "check", *args, "--json")
    assert code in (0, 1), stderr
    return json.loads(stdout)


def test_several_values_after_one_option_equal_the_repeated_option(monkeypatch, capsys):
    runs = _runs()
    first, second = runs[0], runs[1]
    spread = _report(monkeypatch, capsys, "--results", first, second, "--baseline", first, second)
    repeated = _report(monkeypatch, capsys, "--results", first, "--results", second, "--baseline", first,
                       "--baseline", second)
    assert spread == repeated and spread["lines"]
    reordered = _report(monkeypatch, capsys, "--baseline", first, second, "--tolerance", "0.5", "--results", first,
                        second)
    assert reordered == spread


def test_a_value_after_another_option_is_not_a_results_folder(monkeypatch, capsys):
    runs = _runs()
    code, _, stderr = run_cli(monkeypatch, capsys, "check", "--results", runs[0], "--tolerance", "0.5", runs[1],
                              "--baseline", runs[0])
    assert code == 2 and "unexpected extra argument" in stderr.lower()
