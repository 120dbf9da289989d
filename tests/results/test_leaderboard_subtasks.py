"""``leaderboard --subtasks TASK``: each paradigm's accuracy per board row, the mean over seeds of what each seed's
items give, with the seed SD; one line for a task the board lacks, results without item tables, a format it cannot
write."""

from __future__ import annotations

import numpy as np
from cli_support import run_cli
from leaderboard_tables import write_run


def _runs(root, items: bool = True):
    """Two schedules x two seeds; paradigm ``hard`` is 0/20 and 2/20 correct under 1_CLM, 20/20 under 2_CLM."""
    values = {("1_CLM", 1): {"easy": 15, "hard": 0}, ("1_CLM", 2): {"easy": 17, "hard": 2},
              ("2_CLM", 1): {"easy": 18, "hard": 20}, ("2_CLM", 2): {"easy": 18, "hard": 20}}
    for (schedule, seed), counts in values.items():
        subtasks = {name: np.r_[np.ones(k), np.zeros(20 - k)] for name, k in counts.items()}
        write_run(root, f"{schedule}-seed{seed}", [{"phase_index": 0, "tasks": {"blimp": subtasks}}],
                  schedule=schedule, seed=seed, items=items)


def test_each_paradigm_is_the_seed_mean_with_its_sd(tmp_path, monkeypatch, capsys):
    _runs(tmp_path / "runs")
    code, out, err = run_cli(monkeypatch, capsys, "leaderboard", str(tmp_path / "runs"), "--subtasks", "blimp",
                             "--format", "markdown")
    assert code == 0, err
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("| easy") or line.startswith("| hard")}
    # board order: 2_CLM leads (#1), 1_CLM second (#2); easy 90.0 ±0 and 80.0 ±7.1 (75 and 85); hard 100 and 5.0 ±7.1
    assert rows["easy"] == ["20", "90.0 ±0.0", "80.0 ±7.1"]
    assert rows["hard"] == ["20", "100.0 ±0.0", "5.0 ±7.1"]
    assert "#1: schedule=2_CLM (0 subtask(s) at or below 10%, 2 at or above 90%)" in out
    assert "#2: schedule=1_CLM (1 subtask(s) at or below 10%, 0 at or above 90%)" in out
    out_file = tmp_path / "paradigms.md"
    code, _, err = run_cli(monkeypatch, capsys, "leaderboard", str(tmp_path / "runs"), "--subtasks", "blimp",
                           "--out", str(out_file))
    assert code == 0 and out_file.read_text().startswith("# blimp by subtask (%, clm)"), err


def test_a_task_it_cannot_show_is_one_line(tmp_path, monkeypatch, capsys):
    _runs(tmp_path / "runs")
    _runs(tmp_path / "bare", items=False)
    for folder, args, words in ((tmp_path / "runs", ("--subtasks", "ewok"), "no column ewok on this board"),
                                (tmp_path / "bare", ("--subtasks", "blimp"), "no row of this board has item tables"),
                                (tmp_path / "runs", ("--subtasks", "blimp", "--format", "html"), "not html")):
        code, out, err = run_cli(monkeypatch, capsys, "leaderboard", str(folder), *args)
        assert code == 2 and words in err and "Traceback" not in err + out, (args, err)
        assert len(err.strip().splitlines()) == 1
