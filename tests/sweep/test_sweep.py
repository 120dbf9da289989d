"""``antlm-bench sweep`` without training: the grid's parsing, worker slots, the executors' mechanics (a fake
interpreter stands in for ``python -m antlm_bench run``), signals, the sweep folder's safety, the decision loop on
hand-made result tables, and the command's one-line errors. tests/sweep/test_sweep_run.py trains a real (tiny)
sweep."""

from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from cli_support import run_cli
from leaderboard_tables import correctness, rewrite_event_file, write_run
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.config import flag_words
from antlm_bench.errors import UserError
from antlm_bench.sweep import (
    Grid,
    GridCell,
    LocalExecutor,
    Progress,
    Rule,
    Slot,
    SlurmExecutor,
    SlurmResources,
    SweepFolder,
    SweepInterrupted,
    SweepPlan,
    SweepRecord,
    decision_lines,
    local_slots,
    next_seeds,
    parse_seeds,
    run_sweep,
    split_top_level,
)
from antlm_bench.sweep.decision_text import comparison_text
from antlm_bench.sweep.executors import Executor
from antlm_bench.sweep.plan import cells_base
from antlm_bench.sweep.record import DONE, FAILED, INTERRUPTED, REUSED, RUNNING

ROOT = Path(__file__).resolve().parents[2]

# stands in for `python -m antlm_bench run ...`: seed 13 fails; with $FAKE_SLOW it waits for a signal, which it
# answers like the trainer (a resume point, then exit 128 + signal); $FAKE_WAIT="SEED:SECONDS,..." makes those seeds
# take that long (answering a signal the same way)
FAKE_PYTHON = textwrap.dedent(f"""\
    #!{sys.executable}
    import os, signal, sys, time
    import json
    args = sys.argv[1:]
    config = json.load(open(args[args.index("--config") + 1]))  # a cell's typed configuration (run --config)
    seed = config["seeds"][0]; out = config["output"]["folder"]; schedule = config["model"]["schedule"]
    print("fake run", schedule, "seed", seed, "threads", os.environ.get("OMP_NUM_THREADS"), flush=True)
    waits = dict(item.split(":") for item in os.environ.get("FAKE_WAIT", "").split(",") if item)
    if os.environ.get("FAKE_SLOW") or str(seed) in waits:
        open(os.path.join(out, f"started-{{seed}}"), "w").close()
        def stop(signum, frame):
            open(os.path.join(out, f"resume-point-{{seed}}-{{signum}}"), "w").close()
            sys.exit(128 + signum)
        signal.signal(signal.SIGINT, stop); signal.signal(signal.SIGTERM, stop)
        time.sleep(float(waits.get(str(seed), 60)))
    sys.exit(3 if seed == 13 else 0)
""")


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    path = tmp_path / "fake-python"
    path.write_text(FAKE_PYTHON)
    path.chmod(0o755)
    return str(path)


def _record(out: Path) -> tuple[SweepFolder, SweepRecord]:
    folder = SweepFolder(out)
    folder.make()
    return folder, SweepRecord.continuing(folder, {"test": True})  # as the command makes it


# ----------------------------------------------------------------------------------------------------------
# the grid


def test_schedules_split_at_top_level_commas_only():
    assert split_top_level("4_CLM+2_MIX(CLM:1,MLM:15), 0.4_CLM,3x(1_CLM+1_MLM)") == [
        "4_CLM+2_MIX(CLM:1,MLM:15)", "0.4_CLM", "3x(1_CLM+1_MLM)"]
    for bad in ("MIX(CLM:1,MLM:15", "1_CLM),2_CLM", "1_CLM,,2_CLM", ""):
        with pytest.raises(UserError):
            split_top_level(bad)


def test_seeds_ranges_and_lists():
    assert parse_seeds("1-3,5,7-8") == [1, 2, 3, 5, 7, 8]
    assert parse_seeds("2,1,2") == [2, 1]
    assert parse_seeds([4, "6-7"]) == [4, 6, 7]
    for bad in ("3-1", "a", "1,,x", ""):
        with pytest.raises(UserError):
            parse_seeds(bad)
    assert next_seeds([1, 2, 3], 2, 12) == [4, 5]
    assert next_seeds([1, 2, 3, 9], 5, 6) == [10, 11]


def test_cells_are_run_cells_seed_major():
    base = cells_base({"max-words": 20000})
    grid = Grid(("antlm-babyllama",), ("tiny",), ("0.2_CLM+0.2_MLM", "0.4_CLM"), base)
    cells = grid.cells([1, 2], {})
    assert [(c.schedule, c.seed) for c in cells] == [("0.2_CLM+0.2_MLM", 1), ("0.4_CLM", 1),
                                                      ("0.2_CLM+0.2_MLM", 2), ("0.4_CLM", 2)]
    assert cells[0].name == "antlm-babyllama-tiny-0.2_CLM_0.2_MLM-seed1"  # run's own folder name
    # each cell a typed configuration: the grid's axes and the sweep's run options, the output the sweep's
    config = cells[3].config(Path("out"))
    assert (config.model.name, config.model.preset, config.model.schedule, config.seeds) == \
        ("antlm-babyllama", "tiny", "0.4_CLM", [2])
    assert config.data.max_words == 20000 and config.output.folder == Path("out") and config.output.quiet
    # its command line: the fields that differ from run's defaults (--model antlm-babyllama is run's default)
    assert flag_words(config) == ["--preset", "tiny", "--schedule", "0.4_CLM", "--max-words", "20000", "--output",
                                  "out", "--quiet", "--seeds", "2"]


def test_a_cell_runs_as_run_config_of_its_written_file(tmp_path):
    """The cell's file is what `run --config` reads back: the same configuration, field for field."""
    from antlm_bench.config import read_config_file, run_config
    from antlm_bench.sweep.record import SweepFolder

    base = cells_base({"max-words": 20000, "probe": True, "save-at-words": "1K,2K", "glue-epochs": "2"})
    (cell,) = Grid(("antlm-babyllama",), ("tiny",), ("0.4_CLM",), base, (("0.4_CLM", "negative-control"),)).cells(
        [7], {})[1:]
    folder = SweepFolder(tmp_path / "out")
    command = folder.cell_command(cell)
    assert command[:4] == ["-m", "antlm_bench", "run", "--config"]
    written = Path(command[4])
    assert written == tmp_path / "out" / "sweep" / "cells" / f"{cell.name}.json"
    again = run_config(read_config_file(written, "a run's configuration", "model:, ..."))
    assert again == cell.config(tmp_path / "out") and again.label == "negative-control" and again.training.save_at_words == [1000, 2000]


def test_worker_slots_follow_cores_threads_and_gpus():
    slots, _ = local_slots(None, 8, 1, [], 1)
    assert len(slots) == 8 and all(s.env == {"OMP_NUM_THREADS": "1"} for s in slots)
    slots, _ = local_slots(None, 8, 8, [], 1)
    assert len(slots) == 1 and slots[0].env == {"OMP_NUM_THREADS": "8"}
    slots, _ = local_slots(4, 8, 8, [], 1)  # four workers never get more than their share of the cores
    assert len(slots) == 4 and slots[0].env == {"OMP_NUM_THREADS": "2"}
    slots, _ = local_slots(None, 16, 4, ["0", "3"], 2)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0", "3", "0", "3"]
    with pytest.raises(UserError):
        local_slots(0, 8, 1, [], 1)


# ----------------------------------------------------------------------------------------------------------
# executors


def test_local_executor_runs_every_cell_and_a_failure_names_its_log(tmp_path, fake_python):
    folder, record = _record(tmp_path / "out")
    cells = [GridCell("antlm-babyllama", "tiny", "0.4_CLM", seed) for seed in (1, 13, 2)]
    record.add(cells)
    executor = LocalExecutor(fake_python, folder.output, folder, [Slot("a", {"OMP_NUM_THREADS": "1"}),
                                                                  Slot("b", {"OMP_NUM_THREADS": "1"})], poll_s=0.05)
    executor.run(cells, record, Progress(record, 2, terminal=False))
    assert [record.states[c.name].status for c in cells] == [DONE, FAILED, DONE]
    assert record.states[cells[1].name].returncode == 3
    assert "fake run 0.4_CLM seed 13 threads 1" in folder.log_of(cells[1]).read_text()
    saved = json.loads(folder.record_file.read_text())
    assert saved["counts"]["failed"] == 1 and saved["counts"]["done"] == 2
    assert {c["log"] for c in saved["cells"]} == {str(folder.log_of(c)) for c in cells}


def test_sigterm_stops_every_cell_which_keeps_its_resume_point(tmp_path, fake_python):
    out = tmp_path / "out"
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        from antlm_bench.sweep import GridCell, LocalExecutor, Progress, Slot, SweepFolder, SweepInterrupted, SweepRecord
        folder = SweepFolder(Path({str(out)!r})); folder.make()
        record = SweepRecord(folder, {{}})
        cells = [GridCell("antlm-babyllama", "tiny", "0.4_CLM", s) for s in (1, 2, 3)]
        record.add(cells)
        try:
            LocalExecutor({fake_python!r}, folder.output, folder, [Slot("a"), Slot("b")], poll_s=0.05).run(
                cells, record, Progress(record, 2, terminal=False))
        except SweepInterrupted as stop:
            print("left:", ",".join(str(s.cell.seed) for s in record.unfinished()), flush=True)
            sys.exit(stop.exit_code)
        """))
    proc = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "FAKE_SLOW": "1"}, text=True)
    deadline = time.time() + 60
    while not ((out / "started-1").exists() and (out / "started-2").exists()) and time.time() < deadline:
        time.sleep(0.1)
    assert (out / "started-2").exists(), proc.stderr.read() if proc.poll() is not None else "no cell started"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert (out / "resume-point-1-15").exists() and (out / "resume-point-2-15").exists()
    assert not (out / "started-3").exists()  # nothing new starts after the signal
    assert "left: 1,2,3" in stdout
    saved = json.loads((out / "sweep" / "sweep.json").read_text())
    assert saved["counts"] == {"waiting": 1, "running": 0, "done": 0, "reused": 0, "failed": 0, "interrupted": 2}


def _round(*seeds: int) -> list[GridCell]:
    return [GridCell("antlm-babyllama", "tiny", "0.4_CLM", seed) for seed in seeds]


def test_an_idle_worker_runs_a_cell_of_the_next_round_ahead_which_that_round_takes_over(tmp_path, fake_python,
                                                                                         monkeypatch):
    """Three cells on two workers leave one idle while the third runs: it starts the next round's first cell, the
    call returns when its own round is done (the ahead cell still running), and the next round takes the cell over
    instead of starting it again."""
    monkeypatch.setenv("FAKE_WAIT", "3:2,4:8")
    folder, record = _record(tmp_path / "out")
    executor = LocalExecutor(fake_python, folder.output, folder, [Slot("a"), Slot("b")], poll_s=0.05)
    progress = Progress(record, 2, terminal=False)
    first, second = _round(1, 2, 3), _round(4, 5)
    with executor.session(record):
        record.add(first)
        executor.run(first, record, progress, ahead=second)
        assert [record.states[c.name].status for c in first] == [DONE, DONE, DONE]
        assert record.states[second[0].name].status == RUNNING  # started ahead, still running
        assert second[1].name not in record.states  # the round ended before a second worker was idle
        record.add(second)
        executor.run(second, record, progress)
    assert [record.states[c.name].status for c in second] == [DONE, DONE]
    assert folder.log_of(second[0]).read_text().count("fake run") == 1  # taken over, not started again


def test_a_cell_run_ahead_that_no_round_takes_is_stopped_at_its_resume_point(tmp_path, fake_python, monkeypatch):
    monkeypatch.setenv("FAKE_WAIT", "2:4,3:60")
    out = tmp_path / "out"
    folder, record = _record(out)
    executor = LocalExecutor(fake_python, folder.output, folder, [Slot("a"), Slot("b")], poll_s=0.05)
    with executor.session(record):
        record.add(_round(1, 2))
        executor.run(_round(1, 2), record, Progress(record, 2, terminal=False), ahead=_round(3))
        assert record.states[_round(3)[0].name].status == RUNNING
    # the sweep stopped (decided): the cell is stopped as the trainer is, resumable, and recorded so
    assert (out / "resume-point-3-15").exists()
    assert record.states[_round(3)[0].name].status == INTERRUPTED
    assert json.loads(folder.record_file.read_text())["counts"]["interrupted"] == 1


def test_a_signal_between_rounds_reaches_the_cells_run_ahead(tmp_path, fake_python, monkeypatch):
    """While a look is computed no round runs, but cells run ahead do: a SIGTERM then is the sweep's (not the
    default's, which would leave them running on their own) and stops them at their resume point."""
    monkeypatch.setenv("FAKE_WAIT", "2:4,3:60")
    out = tmp_path / "out"
    folder, record = _record(out)
    executor = LocalExecutor(fake_python, folder.output, folder, [Slot("a"), Slot("b")], poll_s=0.05)
    progress = Progress(record, 2, terminal=False)
    with executor.session(record):
        record.add(_round(1, 2))
        executor.run(_round(1, 2), record, progress, ahead=_round(3))
        os.kill(os.getpid(), signal.SIGTERM)  # during the look
        with pytest.raises(SweepInterrupted) as stopped:
            executor.run(_round(3), record, progress)
    assert stopped.value.exit_code == 128 + signal.SIGTERM
    assert (out / "resume-point-3-15").exists() and record.states[_round(3)[0].name].status == INTERRUPTED
    assert signal.getsignal(signal.SIGTERM) is not executor._on_signal  # the handler is given back


# a `run` that writes its cell's result table as TableExecutor does (2_CLM 15 points better), in its own process;
# cells in $FAKE_WAIT ("SCHEDULE@SEED:SECONDS,...") first wait that long (a signal: a resume point, as the trainer)
FAKE_TABLE_PYTHON = textwrap.dedent(f"""\
    #!{sys.executable}
    import os, signal, sys, time
    sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
    import numpy as np
    from pathlib import Path
    from leaderboard_tables import correctness, write_run
    import json
    args = sys.argv[1:]
    config = json.load(open(args[args.index("--config") + 1]))  # a cell's typed configuration (run --config)
    seed = config["seeds"][0]; out = Path(config["output"]["folder"]); schedule = config["model"]["schedule"]
    waits = dict(item.split(":") for item in os.environ.get("FAKE_WAIT", "").split(",") if item)
    if f"{{schedule}}@{{seed}}" in waits:
        def stop(signum, frame):
            (out / f"resume-point-{{schedule}}-{{seed}}").touch()
            sys.exit(128 + signum)
        signal.signal(signal.SIGTERM, stop)
        time.sleep(float(waits[f"{{schedule}}@{{seed}}"]))
    rng = np.random.default_rng([seed, len(schedule)])
    p = 0.6 + np.random.default_rng(seed).normal(0, 0.01) + (0.15 if schedule == "2_CLM" else 0.0)
    name = f"antlm-babyllama-tiny-{{schedule}}-seed{{seed}}"
    write_run(out, name, [{{"phase_index": 0, "tasks": {{"blimp_supplement": {{f"s{{j}}": correctness(rng, 400, p)
                                                                         for j in range(5)}}}}}}],
              recipe="antlm-babyllama", preset="tiny", schedule=schedule, seed=seed)
""")


def test_a_cell_run_ahead_never_enters_the_look_and_is_stopped_when_the_look_decides(tmp_path, monkeypatch):
    """The whole loop with local workers: the first round's last cell leaves a worker idle, which starts the next
    round's first cell (slow here); the look decides at the first round on its seeds alone, and the cell run ahead
    is stopped at its resume point, recorded interrupted, its seed in no comparison."""
    fake = tmp_path / "fake-table-python"
    fake.write_text(FAKE_TABLE_PYTHON)
    fake.chmod(0o755)
    # the round's last two cells start together; 2_CLM's is slower, so 1_CLM's worker is left idle
    monkeypatch.setenv("FAKE_WAIT", "2_CLM@4:4,1_CLM@5:60")
    out = tmp_path / "out"
    folder, record = _record(out)
    grid = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM"))
    # its tables decide at 4 (no sensitivity check: the baseline's interval against chance needs more seeds, and
    # this test is about the cell run ahead)
    plan = SweepPlan(grid, [1, 2, 3, 4], {}, out, Rule("1_CLM", 0.05, None, 8, 1, sensitivity=(("*", "none"),)))
    executor = LocalExecutor(str(fake), out, folder, [Slot("a"), Slot("b")], poll_s=0.05)

    def pending(cells):
        return [c for c in cells if not (out / c.name / "scores.parquet").exists()]

    outcome = run_sweep(plan, executor, record, Progress(record, 2, terminal=False), pending, lambda line: None)
    ahead = GridCell("antlm-babyllama", "tiny", "1_CLM", 5)
    assert outcome.status == "decided" and outcome.comparisons[0].seeds == (1, 2, 3, 4)
    assert record.rounds == [[1, 2, 3, 4]]
    assert record.states[ahead.name].status == INTERRUPTED and (out / "resume-point-1_CLM-5").exists()
    assert not (out / ahead.name).exists()  # it wrote nothing a board could read


def test_the_loop_offers_the_next_rounds_unfinished_cells_and_none_at_the_cap(tmp_path):
    """Each round offers the executor the next round's cells that are not finished, and the last round (the cap)
    none."""
    out = tmp_path / "out"
    folder, record = _record(out)
    grid = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM"))
    plan = SweepPlan(grid, [1, 2, 3], {}, out, Rule("1_CLM", 0.05, None, 5, 1))

    class Offered(TableExecutor):
        def __init__(self, output, gaps):
            super().__init__(output, gaps)
            self.offered = []

        def run(self, cells, record, progress, ahead=()):
            self.offered.append(sorted((c.schedule, c.seed) for c in ahead))
            super().run(cells, record, progress)

    executor = Offered(out, {})
    finished = [GridCell("antlm-babyllama", "tiny", "2_CLM", 4)]  # a cell of round 2 that a sweep before ran
    record.add(finished)
    TableExecutor(out, {}).run(finished, record, None)

    def pending(cells):
        return [c for c in cells if not (out / c.name).exists()]

    run_sweep(plan, executor, record, Progress(record, 1, terminal=False), pending, lambda line: None)
    assert executor.offered == [[("1_CLM", 4)], [("1_CLM", 5), ("2_CLM", 5)], []]


def test_slurm_executor_runs_a_job_array_with_submitits_local_executor(tmp_path, fake_python):
    folder, record = _record(tmp_path / "out")
    cells = [GridCell("antlm-babyllama", "tiny", "0.4_CLM", seed) for seed in (1, 13)]
    record.add(cells)
    executor = SlurmExecutor(fake_python, folder.output, folder, SlurmResources(time_min=5), cluster="local",
                             poll_s=0.2)
    executor.run(cells, record, Progress(record, 2, terminal=False))
    assert [record.states[c.name].status for c in cells] == [DONE, FAILED]
    assert "fake run 0.4_CLM seed 1" in folder.log_of(cells[0]).read_text()
    assert (folder.folder / "slurm").is_dir()  # submitit's own files stay in the sweep folder


def test_the_dry_run_script_is_one_array_with_the_resources():
    folder = SweepFolder(Path("/nonexistent/out"))
    resources = SlurmResources(partition="gpu", time_min=90, cpus_per_task=4, gpus_per_task=1, mem_gb=16,
                               array_parallelism=2, extra={"account": "proj"})
    script = SlurmExecutor(sys.executable, folder.output, folder, resources).sbatch_script(5)
    for line in ("#SBATCH --array=0-4%2", "#SBATCH --partition=gpu", "#SBATCH --time=90", "#SBATCH --cpus-per-task=4",
                 "#SBATCH --gpus-per-task=1", "#SBATCH --mem=16384MB", "#SBATCH --account=proj"):
        assert line in script
    assert "submitit.core._submit" in script


def test_planted_links_are_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "sweep").symlink_to(elsewhere)
    with pytest.raises(UserError, match="symbolic link"):
        SweepFolder(out).make()
    (out / "sweep").unlink()
    folder = SweepFolder(out)
    folder.make()
    cell = GridCell("antlm-babyllama", "tiny", "0.4_CLM", 1)
    target = tmp_path / "victim.txt"
    target.write_text("keep")
    folder.log_of(cell).symlink_to(target)
    with pytest.raises(UserError, match="symbolic link"):
        folder.open_log(cell)
    assert target.read_text() == "keep"


# ----------------------------------------------------------------------------------------------------------
# --until-decided on hand-made result tables


class TableExecutor(Executor):
    """Writes each cell's result table as if it had trained: schedule ``better`` wins ``gap`` more of the items;
    seed s shifts both schedules alike (paired seeds)."""

    def __init__(self, output: Path, gaps: dict[str, float]) -> None:
        self.output, self.gaps, self.ran = output, gaps, []

    @property
    def parallel(self) -> int:
        return 1

    def describe(self) -> str:
        return "tables"

    def check_ready(self) -> None:
        pass

    def run(self, cells, record, progress, ahead=()) -> None:
        for cell in cells:
            seed_effect = np.random.default_rng(cell.seed).normal(0, 0.01)
            rng = np.random.default_rng([cell.seed, len(cell.schedule)])
            p = 0.6 + seed_effect + self.gaps.get(cell.schedule, 0.0)
            subtasks = {f"s{j}": correctness(rng, 400, p) for j in range(5)}
            write_run(self.output, cell.name, [{"phase_index": 0, "tasks": {"blimp_supplement": subtasks}}],
                      recipe=cell.recipe, preset=cell.preset, schedule=cell.schedule, seed=cell.seed)
            self.ran.append(cell)
            record.set(cell, DONE, returncode=0)


def _decide(tmp_path: Path, gaps: dict[str, float], tolerance: float | None, max_seeds: int = 8):
    out = tmp_path / "out"
    folder, record = _record(out)
    grid = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM"))
    plan = SweepPlan(grid, [1, 2, 3], {}, out, Rule("1_CLM", 0.05, tolerance, max_seeds, 2))
    executor = TableExecutor(out, gaps)

    def pending(cells):
        return [c for c in cells if not (out / c.name).exists()]

    said: list[str] = []
    outcome = run_sweep(plan, executor, record, Progress(record, 1, terminal=False), pending, said.append)
    return outcome, executor, folder, record, said


def test_a_clear_gap_is_decided_before_the_last_seed(tmp_path):
    outcome, executor, folder, record, _ = _decide(tmp_path, {"2_CLM": 0.15}, tolerance=None)
    assert outcome.status == "decided"
    (comparison,) = [c for c in outcome.comparisons if not c.role]  # and the baseline's row against chance
    assert comparison.decision == "difference" and comparison.mean > 0 and comparison.low > 0
    seeds = comparison.seeds
    assert len(seeds) < 8 and len(executor.ran) == 2 * len(seeds)  # no cell ran twice
    assert comparison.first_decided_at == len(seeds)  # it stopped at the round that decided it
    assert len(record.rounds) > 1 and {s.status for s in record.states.values()} == {DONE}  # earlier rounds: done
    decision = json.loads(folder.decision_file.read_text())
    assert decision["status"] == "decided" and decision["seeds"] == list(seeds)
    assert decision["rule"]["baseline"] == "1_CLM" and decision["rule"]["alpha_each"] == 0.05
    assert decision["rounds"][0] == [1, 2, 3]
    lines = decision_lines([folder.output])
    assert "decided" in lines[0] and "anytime-valid" in lines[1]
    assert "2_CLM - baseline on blimp_supplement" in lines[2]
    assert f"first decided at {len(seeds)} seeds" in lines[2]
    assert decision["comparisons"][0]["first_decided_at"] == len(seeds)


def test_no_gap_runs_to_the_maximum_or_decides_equivalence(tmp_path):
    outcome, executor, _, record, said = _decide(tmp_path / "a", {}, tolerance=None, max_seeds=6)
    assert outcome.status == "max seeds reached" and outcome.comparisons[0].decision == "undecided"
    assert len(outcome.comparisons[0].seeds) == 6 and outcome.comparisons[0].first_decided_at is None
    assert record.rounds == [[1, 2, 3], [4, 5], [6]]
    assert any("adding seeds 4,5" in line for line in said)
    outcome, *_ = _decide(tmp_path / "b", {}, tolerance=10.0, max_seeds=12)
    assert outcome.status == "decided" and outcome.comparisons[0].decision == "equivalent"


class TwoTaskExecutor(TableExecutor):
    """blimp_supplement with the schedule's gap, and ewok with none: a primary and a null secondary endpoint."""

    def run(self, cells, record, progress, ahead=()) -> None:
        for cell in cells:
            seed_effect = np.random.default_rng(cell.seed).normal(0, 0.01)
            rng = np.random.default_rng([cell.seed, len(cell.schedule)])
            tasks = {"blimp_supplement": {f"s{j}": correctness(rng, 400, 0.6 + seed_effect
                                                               + self.gaps.get(cell.schedule, 0.0))
                                          for j in range(5)},
                     "ewok": {f"e{j}": correctness(rng, 400, 0.55 + seed_effect) for j in range(5)}}
            write_run(self.output, cell.name, [{"phase_index": 0, "tasks": tasks}], recipe=cell.recipe,
                      preset=cell.preset, schedule=cell.schedule, seed=cell.seed)
            self.ran.append(cell)
            record.set(cell, DONE, returncode=0)


@pytest.mark.parametrize("primary", [(), ("blimp_supplement",)])
def test_only_primary_endpoints_take_alpha_and_must_be_decided(tmp_path, primary):
    """Declared primary endpoints form the family alone: the null secondary column (ewok) gets an interval and no
    verdict, takes no share of alpha, and does not keep the sweep running; without the declaration it does."""
    out = tmp_path / "out"
    folder, record = _record(out)
    grid = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM"))
    rule = Rule("1_CLM", 0.05, None, 8, 2, primary)
    plan = SweepPlan(grid, [1, 2, 3], {}, out, rule)
    executor = TwoTaskExecutor(out, {"2_CLM": 0.15})
    outcome = run_sweep(plan, executor, record, Progress(record, 1, terminal=False),
                        lambda cells: [c for c in cells if not (out / c.name).exists()], lambda line: None)
    by_column = {c.column: c for c in outcome.comparisons if not c.role}
    assert by_column["blimp_supplement"].decision == "difference"
    decision = json.loads(folder.decision_file.read_text())
    if primary:
        assert outcome.status == "decided" and by_column["ewok"].decision == "secondary"
        assert decision["rule"]["primary"] == ["blimp_supplement"] and decision["rule"]["alpha_each"] == 0.05
        assert "secondary endpoint" in comparison_text(by_column["ewok"])
    else:
        assert outcome.status == "max seeds reached" and by_column["ewok"].decision == "undecided"
        assert decision["rule"]["alpha_each"] == 0.05 / 2
    assert not any("NOT SHOWN" in line for line in decision_lines([out]))  # recomputed from the tables: the same


def test_the_round_line_counts_the_family_not_the_secondary_columns(tmp_path):
    """A round that adds seeds says how many of the *family's* comparisons are undecided: the secondary column
    (ewok) has no verdict to wait for, so it is in neither count (the LTG-BERT study once printed '3 of 7')."""
    out = tmp_path / "out"
    _, record = _record(out)
    grid = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM"))
    rule = Rule("1_CLM", 0.05, None, 5, 2, ("blimp_supplement",))
    said: list[str] = []
    outcome = run_sweep(SweepPlan(grid, [1, 2, 3], {}, out, rule), TwoTaskExecutor(out, {}), record,
                        Progress(record, 1, terminal=False),
                        lambda cells: [c for c in cells if not (out / c.name).exists()], said.append)
    assert outcome.status == "max seeds reached"
    assert "1 of the family's 1 comparison(s) undecided after 3 seeds: adding seeds 4,5" in said


def test_a_margin_per_endpoint_lets_a_null_endpoint_end_equivalent(tmp_path):
    """ewok (no gap) has its own equivalence margin, blimp_supplement none: the sweep stops once ewok is
    equivalent within its margin and the supplement's gap is decided, and the record keeps each margin."""
    out = tmp_path / "out"
    folder, record = _record(out)
    grid = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM"))
    rule = Rule("1_CLM", 0.05, None, 12, 2, ("blimp_supplement", "ewok"), (("ewok", 10.0),))
    assert rule.margin_for("ewok", "pp") == 10.0 and rule.margin_for("blimp_supplement", "pp") is None
    outcome = run_sweep(SweepPlan(grid, [1, 2, 3], {}, out, rule), TwoTaskExecutor(out, {"2_CLM": 0.15}), record,
                        Progress(record, 1, terminal=False),
                        lambda cells: [c for c in cells if not (out / c.name).exists()], lambda line: None)
    by_column = {c.column: c for c in outcome.comparisons if not c.role}
    assert outcome.status == "decided"
    assert by_column["blimp_supplement"].decision == "difference" and by_column["ewok"].decision == "equivalent"
    decision = json.loads(folder.decision_file.read_text())
    assert decision["rule"]["margins"] == {"ewok": 10.0}
    lines = decision_lines([out])
    assert "ewok +-10" in lines[0] and not any("NOT SHOWN" in line for line in lines)


def test_objective_epochs_and_forced_losses():
    from antlm_bench.sweep.rule import forced_reason, objective_epochs

    assert objective_epochs("4_CLM+16_MLM+4_CLM", "CLM") == 8 and objective_epochs("24_CLM", "MLM") == 0
    assert objective_epochs("2_MIX(CLM:1,MLM:3)", "CLM") == 0.5
    assert forced_reason("4_CLM+16_MLM+4_CLM", "24_CLM", "loss", "clm") == "CLM trained 8 against 24 epochs"
    assert forced_reason("4_CLM+16_MLM+4_CLM", "24_CLM", "loss", "pll") == "MLM trained 16 against 0 epochs"
    assert forced_reason("12_CLM+12_MLM", "12_MLM+12_CLM", "loss", "clm") is None  # equal exposure: a question
    assert forced_reason("4_CLM+16_MLM+4_CLM", "24_CLM", "accuracy", "clm") is None


class LossExecutor(TableExecutor):
    """The held-out causal loss of each cell, lower for the schedule with more CLM epochs."""

    def run(self, cells, record, progress, ahead=()) -> None:
        from leaderboard_tables import write_loss_run

        for cell in cells:
            rng = np.random.default_rng([cell.seed, 7])
            loss = 4.5 - 0.3 * float(cell.schedule.split("_")[0])
            write_loss_run(self.output, cell.name, cell.schedule, cell.seed, {"dev": loss + rng.normal(0, 0.3, 200)},
                           recipe=cell.recipe)
            record.set(cell, DONE, returncode=0)


@pytest.mark.parametrize("forced_out", [False, True])
def test_a_loss_the_objectives_decide_leaves_the_family(tmp_path, forced_out):
    """2_CLM trains the causal loss twice as long as 1_CLM: with forced_out (every new sweep) its held-out loss is
    labelled forced, takes no alpha and is not a decision; a decision recorded before keeps its rule and verdict."""
    out = tmp_path / "out"
    folder, record = _record(out)
    grid = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM"))
    rule = Rule("1_CLM", 0.05, None, 8, 2, forced_out=forced_out)
    outcome = run_sweep(SweepPlan(grid, [1, 2, 3], {}, out, rule), LossExecutor(out, {}), record,
                        Progress(record, 1, terminal=False),
                        lambda cells: [c for c in cells if not (out / c.name).exists()], lambda line: None)
    (heldout,) = outcome.comparisons
    decision = json.loads(folder.decision_file.read_text())
    if forced_out:
        assert heldout.decision == "forced" and "forced by the objectives" in comparison_text(heldout)
        assert outcome.status.startswith("nothing to decide: no comparison is in the family")
        assert decision["rule"]["forced_out"] is True and decision["rule"]["comparisons"] == 0
    else:
        assert heldout.decision == "difference" and outcome.status == "decided"  # as the mini study's were
        assert decision["rule"]["forced_out"] is False
    assert not any("NOT SHOWN" in line for line in decision_lines([out]))


class ControlExecutor(TableExecutor):
    """As TableExecutor, with each cell's seed effect drawn from its training seed (runs.identity.training_seed), as
    a real run's: the negative control's seed s is another draw than the baseline's seed s."""

    def run(self, cells, record, progress, ahead=()) -> None:
        from antlm_bench.runs.identity import training_seed

        for cell in cells:
            seed = training_seed(cell.seed, cell.label)
            seed_effect = np.random.default_rng(seed).normal(0, 0.01)
            rng = np.random.default_rng([seed, len(cell.schedule)])
            p = 0.6 + seed_effect + self.gaps.get(cell.schedule, 0.0)
            subtasks = {f"s{j}": correctness(rng, 400, p) for j in range(5)}
            write_run(self.output, cell.name, [{"phase_index": 0, "tasks": {"blimp_supplement": subtasks}}],
                      recipe=cell.recipe, preset=cell.preset, schedule=cell.schedule, seed=cell.seed,
                      label=cell.label)
            self.ran.append(cell)
            record.set(cell, DONE, returncode=0)


def _controlled(tmp_path: Path, gaps: dict[str, float]):
    from antlm_bench.sweep.grid import NEGATIVE_CONTROL

    out = tmp_path / "out"
    folder, record = _record(out)
    grid = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM", "0.25_CLM"), labelled=(("1_CLM", NEGATIVE_CONTROL),))
    rule = Rule("1_CLM", 0.05, None, 10, 1, ("blimp_supplement",), forced_out=True, positive_controls=("0.25_CLM",),
                negative_control=True)
    said: list[str] = []
    outcome = run_sweep(SweepPlan(grid, [1, 2, 3, 4], {}, out, rule), ControlExecutor(out, gaps), record,
                        Progress(record, 1, terminal=False),
                        lambda cells: [c for c in cells if not (out / c.name).exists()], said.append)
    return outcome, folder, said


def test_controls_take_no_alpha_never_hold_the_sweep_and_say_whether_they_pass(tmp_path):
    """2_CLM is better by 15 points, the positive control 0.25_CLM worse by 15, the negative control is the baseline
    again under its label: the family is the one studied comparison (alpha not shared with the controls), the sweep
    stops when it is decided, and each control says it passes; the board recomputes the same decision."""
    outcome, folder, said = _controlled(tmp_path, {"2_CLM": 0.15, "0.25_CLM": -0.15})
    by_row = {c.row: c for c in outcome.comparisons if c.role != "baseline vs chance"}
    assert set(by_row) == {"2_CLM", "0.25_CLM", "1_CLM [negative-control]"}
    assert outcome.status == "decided" and by_row["2_CLM"].decision == "difference" and by_row["2_CLM"].role == ""
    assert by_row["0.25_CLM"].role == "positive control" and by_row["0.25_CLM"].is_worse
    negative = by_row["1_CLM [negative-control]"]
    assert negative.role == "negative control" and negative.decision == "undecided" and negative.label
    assert negative.seeds == by_row["2_CLM"].seeds  # paired by seed label
    decision = json.loads(folder.decision_file.read_text())
    assert decision["schema_version"] == 5 and decision["rule"]["comparisons"] == 1
    assert decision["rule"]["alpha_each"] == 0.05 and decision["rule"]["positive_controls"] == ["0.25_CLM"]
    assert decision["rule"]["negative_control"] is True
    assert ("positive control antlm-babyllama tiny 0.25_CLM: blimp_supplement decided worse: shows its known gap on "
            "1 of 1 primary endpoints (blimp_supplement)") in said
    assert ("negative control antlm-babyllama tiny 1_CLM [negative-control]: blimp_supplement undecided: passes: no "
            "difference decided on any of 1 primary endpoints") in said
    # the positive control saw its gap on the one endpoint: it speaks, by the rule recorded before the first seed
    assert any(line.startswith("sensitivity antlm-babyllama tiny (rule: positive-control on blimp_supplement; "
                               "declared before the first seed): the study has shown it can see a gap on "
                               "blimp_supplement") and "no verdict" not in line for line in said)
    assert decision["rule"]["sensitivity"] == {} and decision["endpoints"][0]["speaks"] is True
    lines = decision_lines([folder.output])
    assert not any("NOT SHOWN" in line for line in lines)  # recomputed from the tables, labels and all
    assert any("1_CLM [negative-control] - baseline on blimp_supplement" in line and "no share of alpha" in line
               for line in lines)
    assert any("negative control" in line and "passes" in line for line in lines)
    assert not any("no verdict" in line for line in lines)


def test_a_control_that_the_design_gets_wrong_is_named_a_failure(tmp_path):
    """A 'positive control' that is in truth better, and a negative control whose tables were edited to differ,
    are reported as FAILS (the first by the rule, the second by the board's recomputation)."""
    outcome, folder, said = _controlled(tmp_path, {"2_CLM": 0.15, "0.25_CLM": 0.15})
    assert any(line.startswith("positive control") and "FAILS: decided better" in line for line in said)
    from antlm_bench.sweep.decision_text import control_lines
    from antlm_bench.sweep.rule import Decision

    wrong = Decision("r", "p", "1_CLM", "blimp", "clm vs clm", (1, 2, 3, 4, 5), -3.0, -5.0, -1.0, "difference",
                     label="negative-control", role="negative control")
    assert control_lines([wrong]) == ["negative control r p 1_CLM [negative-control]: blimp decided worse: FAILS: "
                                      "decided a difference on blimp, where the truth is none"]


def test_a_reused_cell_is_not_run_again(tmp_path):
    _decide(tmp_path, {"2_CLM": 0.15}, tolerance=None)
    outcome, executor, _, record, _ = _decide(tmp_path, {"2_CLM": 0.15}, tolerance=None)
    assert executor.ran == [] and outcome.status == "decided"
    assert {s.status for s in record.states.values()} == {REUSED}


def test_a_later_sweep_keeps_what_the_earlier_one_recorded(tmp_path):
    """Re-running a finished sweep (to check it, or to add a schedule) must not erase how its cells were run: a
    study's wall time is read from the record."""
    folder, first = _record(tmp_path / "out")
    cells = Grid(("antlm-babyllama",), ("tiny",), ("1_CLM", "2_CLM")).cells([1], {})
    first.add(cells)
    for cell in cells:
        first.set(cell, RUNNING, where="cpu 1")
        first.set(cell, DONE, returncode=0)
    ran = {c["name"]: c for c in json.loads(folder.record_file.read_text())["cells"]}
    _, second = _record(tmp_path / "out")
    second.add(cells)
    second.set(cells[0], REUSED, returncode=None)
    saved = json.loads(folder.record_file.read_text())
    kept = saved["cells"][0]
    assert kept["status"] == REUSED and kept["where"] == "cpu 1" and kept["ran_in"] == first.started_at
    assert kept["seconds"] == ran[cells[0].name]["seconds"] is not None
    (earlier,) = saved["history"]
    assert earlier["started_at"] == first.started_at and earlier["counts"]["done"] == 2 and earlier["updated_at"]
    _, third = _record(tmp_path / "out")  # history grows, the run's own facts stay
    third.add(cells)
    third.set(cells[0], REUSED, returncode=None)
    saved = json.loads(folder.record_file.read_text())
    assert len(saved["history"]) == 2 and saved["cells"][0]["ran_in"] == first.started_at
    document = json.loads(folder.record_file.read_text())
    document["cells"][0]["seconds"] = "abc"  # a wrong type: one line naming the field, never a traceback
    folder.record_file.write_text(json.dumps(document))
    with pytest.raises(UserError, match=r"sweep\.json: field cells\.0\.seconds: .*not a sweep record this version"):
        _record(tmp_path / "out")
    folder.record_file.write_text("{not json")
    with pytest.raises(UserError, match=r"sweep\.json:1: not a sweep record this version reads"):
        _record(tmp_path / "out")


# ----------------------------------------------------------------------------------------------------------
# the command's one-line errors (no training: they fail before any cell runs)


@pytest.mark.parametrize("args, needle", [
    (["--schedule", "MIX(CLM:1,MLM:15"], "never closed"),
    (["--seeds", "3-1"], "backwards"),
    (["--run-option", "bogus=1"], "run option bogus"),
    (["--run-option", "seeds=4"], "set by the sweep's grid"),
    (["--run-option", "eval-every=sometimes"], "--eval-every"),
    (["--until-decided", "--schedule", "1_CLM,2_CLM"], "needs --baseline"),
    (["--until-decided", "--schedule", "1_CLM,2_CLM", "--baseline", "3_CLM"], "not among the sweep's schedules"),
    (["--max-seeds", "4"], "option of --until-decided"),
    (["--until-decided", "--schedule", "1_CLM,2_CLM", "--baseline", "1_CLM", "--max-seeds", "2"], "bounds nothing"),
    (["--preset", "huge"], "huge"),
    (["--negative-control"], "option of --until-decided"),
    (["--until-decided", "--schedule", "1_CLM,2_CLM", "--baseline", "1_CLM", "--positive-control", "1_CLM"],
     "the baseline itself"),
    (["--until-decided", "--schedule", "1_CLM,0.25_CLM", "--baseline", "1_CLM", "--positive-control", "0.25_CLM"],
     "at least one schedule besides the controls"),
    (["--run-option", "label=mine"], "set by the sweep's grid"),
])
def test_bad_options_are_one_line(tmp_path, monkeypatch, capsys, args, needle):
    code, out, err = run_cli(monkeypatch, capsys, "sweep", "--output", str(tmp_path / "out"), "--dry-run", *args)
    assert code == 2, out + err
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_bad_field_in_the_sweep_file_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text("models: [antlm-babyllama]\nslurm:\n  partiton: gpu\n")
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--config", str(path), "--dry-run")
    assert code == 2 and f"{path}: field slurm.partiton" in " ".join(err.split())
    path.write_text("models: [antlm-babyllama\n")
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--config", str(path), "--dry-run")
    assert code == 2 and "not valid YAML" in err
    # the controls' keys: a wrong type is one line naming the key; a control that is the baseline, one line too
    path.write_text("schedules: [1_CLM, 2_CLM]\nuntil_decided: {baseline: 1_CLM, negative_control: maybe}\n")
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--config", str(path), "--dry-run")
    assert code == 2 and "field until_decided.negative_control" in err and len(err.strip().splitlines()) == 1
    path.write_text("schedules: [1_CLM, 2_CLM]\nuntil_decided: {baseline: 1_CLM, positive_controls: [1_CLM]}\n")
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--config", str(path), "--dry-run")
    assert code == 2 and "the baseline itself" in err and len(err.strip().splitlines()) == 1


def test_the_sweep_file_and_the_command_line_combine(tmp_path, monkeypatch, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent("""\
        schedules: ["0.2_CLM+0.2_MIX(CLM:1,MLM:3)", 0.4_CLM]
        seeds: 1-2
        presets: tiny
        run: {max-words: 20000, tasks: blimp_supplement}
        executor: slurm
        slurm: {partition: gpu, time_min: 30}
        """))
    code, out, err = run_cli(monkeypatch, capsys, "sweep", "--config", str(path), "--seeds", "5", "--partition",
                             "big", "--dry-run", "--output", str(tmp_path / "out"))
    assert code == 0, out + err
    assert "2 cells" in out and "--seeds 5" in out and "--max-words 20000" in out
    assert "--schedule '0.2_CLM+0.2_MIX(CLM:1,MLM:3)'" in out
    assert "#SBATCH --partition=big" in out and "#SBATCH --time=30" in out
    assert "#SBATCH --array=0-1%2" in out
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


def test_the_leaderboard_prints_the_decision_under_the_table(tmp_path, monkeypatch, capsys):
    _, _, folder, _, _ = _decide(tmp_path, {"2_CLM": 0.15}, tolerance=None)
    code, out, err = run_cli(monkeypatch, capsys, "leaderboard", str(folder.output))
    assert code == 0, err
    table_end = out.index("sweep decision (decided;")
    assert out.index("2_CLM") < table_end  # under the table
    assert "2_CLM - baseline on blimp_supplement: +" in out[table_end:] and "decided: better than the baseline" in out
    # the board's gaps are to the baseline (1_CLM), as the decision's are: 2_CLM's is positive there too
    assert "gaps are to the sweep's --baseline (recipe=antlm-babyllama, preset=tiny, schedule=1_CLM)" in out


def test_a_board_written_to_a_file_holds_the_decision_as_the_terminal_shows_it(tmp_path, monkeypatch, capsys):
    """``-o board.txt`` is the terminal's text, decision included (a study commits it as its decision file), and
    the Markdown and HTML pages carry the same lines: a board of a sweep without its decision invites reading the
    fixed-sample gaps as the verdict."""
    _, _, folder, _, _ = _decide(tmp_path, {"2_CLM": 0.15}, tolerance=None)
    code, shown, err = run_cli(monkeypatch, capsys, "leaderboard", str(folder.output))
    assert code == 0, err
    decision = [line for line in shown.splitlines() if "sweep decision (decided;" in line
                or line.startswith("  antlm-babyllama tiny: 2_CLM - baseline on blimp_supplement")]
    assert len(decision) == 2
    for name in ("board.txt", "board.md", "board.html"):
        code, out, err = run_cli(monkeypatch, capsys, "leaderboard", str(folder.output), "-o", str(tmp_path / name))
        assert code == 0, err
        assert "sweep decision" not in out  # in the file, not also on the terminal
        text = (tmp_path / name).read_text()
        for line in decision:
            assert html.escape(line, quote=False) in text if name.endswith(".html") else line in text, (name, line)
    assert (tmp_path / "board.txt").read_text() == shown  # the same text, laid out in whole lines
    code, _, err = run_cli(monkeypatch, capsys, "leaderboard", str(folder.output), "-o", str(tmp_path / "b.parquet"))
    assert code == 0, err  # a table: the decision stays in the sweep's own record

def test_a_definitions_board_prints_the_decisions_of_the_sweeps_below_its_results(tmp_path, monkeypatch, capsys):
    """A study keeps one sweep per architecture under one results folder: ``-d`` names the folder, and every
    sweep's decision is printed under the table, with the reminder that the table's fixed-sample numbers assumed
    a fixed seed count."""
    _decide(tmp_path / "study" / "first", {"2_CLM": 0.15}, tolerance=None)
    _decide(tmp_path / "study" / "second", {}, tolerance=None, max_seeds=4)
    definition = tmp_path / "board.yaml"
    definition.write_text("name: study\nresults: [study]\ntasks: [blimp_supplement]\n")
    code, out, err = run_cli(monkeypatch, capsys, "leaderboard", "-d", str(definition), "--wide")  # one line each
    assert code == 0, err
    headers = [line for line in out.splitlines() if line.startswith("sweep decision (")]
    assert [h.split(";")[0] for h in headers] == ["sweep decision (decided", "sweep decision (max seeds reached"]
    assert "first" in headers[0] and "second" in headers[1]
    assert out.count("fixed-sample interval or p-value on the same seeds assumes") == 2


def test_each_lazy_export_of_the_sweep_package_is_its_modules_own():
    """``antlm_bench.sweep`` imports a name's module on first use (``_EXPORTS``): every name it exports resolves to
    what its module defines, so a module split or renamed without its entry fails here, not at a user's import."""
    import importlib

    import antlm_bench.sweep as sweep

    assert sorted(name for names in sweep._EXPORTS.values() for name in names) == sweep.__all__
    for module, names in sweep._EXPORTS.items():
        for name in names:
            assert getattr(sweep, name) is getattr(importlib.import_module(f"antlm_bench.sweep.{module}"), name)


def test_a_comparison_reads_in_its_metrics_units_and_direction():
    from antlm_bench.sweep import Decision

    loss = Decision("r", "tiny", "2_CLM", "heldout", "clm vs clm", (1, 2, 3, 4, 5), -0.05, -0.08, -0.02,
                      "difference", "nats/token", lower_is_better=True)
    assert "-0.05 nats/token [-0.08, -0.02], decided: better than the baseline" in comparison_text(loss)
    accuracy = Decision("r", "tiny", "2_CLM", "blimp", "clm vs clm", (1, 2, 3, 4, 5), -1.5, -2.5, -0.5,
                          "difference")
    assert "-1.5 pp [-2.5, -0.5], decided: worse than the baseline" in comparison_text(accuracy)


def test_a_second_sweep_into_the_same_folder_is_refused(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    SweepFolder(out).make()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""\
        import sys, time
        from pathlib import Path
        from antlm_bench.locking import folder_lock
        with folder_lock(Path({str(out / "sweep")!r}), "sweep"):
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = run_cli(monkeypatch, capsys, "sweep", "--schedule", "1_CLM", "--seeds", "1", "--preset",
                               "tiny", "--tasks", "blimp_supplement", "--output", str(out))
        assert code == 2 and f"pid {holder.pid}" in err
        assert not (out / "sweep" / "sweep.json").exists() and not (out / "antlm-babyllama-tiny-1_CLM-seed1").exists()
    finally:
        holder.kill()
        holder.wait()


def test_slurm_without_a_cluster_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun here
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--schedule", "1_CLM", "--seeds", "1", "--preset", "tiny",
                           "--tasks", "blimp_supplement", "--output", str(tmp_path / "out"), "--executor", "slurm")
    assert code == 2 and "srun" in err and "--dry-run" in err
    assert not (tmp_path / "out").exists()


def test_a_decision_that_its_tables_do_not_give_is_never_shown_as_decided(tmp_path):
    """decision.json records the digests of the tables it was computed from; the board recomputes it. An edited
    comparison, a status flipped to decided, or tables changed since: one line says it does not match, and no
    comparison is printed as decided."""
    import shutil

    outcome, _, folder, _, _ = _decide(tmp_path, {}, tolerance=None, max_seeds=4)
    assert outcome.status == "max seeds reached"
    path = folder.decision_file
    original = json.loads(path.read_text())
    assert original["schema_version"] == 5 and len(original["tables"]) == 8  # 2 schedules x 4 seeds
    assert "max seeds reached" in decision_lines([folder.output])[0]

    edited = json.loads(json.dumps(original))
    edited["status"], edited["comparisons"][0]["decision"] = "decided", "difference"
    path.write_text(json.dumps(edited))
    (line,) = decision_lines([folder.output])
    assert line.startswith("sweep decision NOT SHOWN") and "it records difference" in line
    result = CliRunner().invoke(app, ["leaderboard", str(folder.output)])
    assert result.exit_code == 0 and "NOT SHOWN" in result.output and "decided: " not in result.output

    path.write_text(json.dumps(original))
    run = sorted(original["tables"])[0]
    extra = tmp_path / "extra"
    write_run(extra, run, [{"phase_index": 0, "tasks": {"blimp_supplement": {"s0": [1.0, 0.0]}}}])
    for event in (extra / run / "scores.parquet").iterdir():
        shutil.copytree(event, folder.output / run / "scores.parquet" / event.name)
    (line,) = decision_lines([folder.output])
    assert f"the tables of {run} changed since the decision" in line


@pytest.mark.parametrize("edit, field", [({"comparisons": "all"}, "comparisons"),
                                          ({"rule": {"baseline": "1_CLM"}}, "rule.alpha"),
                                          ({"seeds": ["one"]}, "seeds.0")])
def test_a_malformed_decision_is_one_line_naming_the_field(tmp_path, edit, field):
    outcome, _, folder, _, _ = _decide(tmp_path, {"2_CLM": 0.15}, tolerance=None)
    document = {**json.loads(folder.decision_file.read_text()), **edit}
    folder.decision_file.write_text(json.dumps(document))
    result = CliRunner().invoke(app, ["leaderboard", str(folder.output)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"decision.json: field {field}" in result.output


def test_a_dry_run_says_which_comparisons_it_cannot_test(tmp_path, monkeypatch, capsys):
    """1_CLM against 1_MLM under --final-scoring auto: clm vs pll, said before anything runs; --final-scoring clm
    scores both alike and passes to every cell."""
    args = ("sweep", "--schedule", "1_CLM,1_MLM", "--seeds", "1", "--preset", "tiny", "--tasks", "blimp,glue",
            "--dry-run", "--output", str(tmp_path / "out"))
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, out + err
    lines = [line for line in out.splitlines() if "cannot test" in line]
    assert len(lines) == 1 and "1_CLM against 1_MLM on blimp" in lines[0] and "clm vs pll" in lines[0]
    assert lines[0].startswith("note:") and "--final-scoring clm" in lines[0]
    assert out.index("cannot test") < out.index("still to run")
    code, out, err = run_cli(monkeypatch, capsys, *args, "--final-scoring", "clm")
    assert code == 0, out + err
    assert "cannot test" not in out and out.count("--final-scoring clm") == 2  # one per cell


def test_untestable_pairs_are_each_against_the_baseline():
    from antlm_bench.sweep.instruments import untestable_comparisons

    schedules = ["1_CLM", "1_MLM", "1_CLM+1_MLM"]
    assert len(untestable_comparisons(schedules, "auto", ["blimp"])) == 2  # CLM with each MLM-ending one
    lines = untestable_comparisons(schedules, "auto", ["blimp"], baseline="1_MLM")
    assert len(lines) == 1 and "cannot test 1_CLM against 1_MLM" in lines[0]
    assert untestable_comparisons(schedules, "pll", ["blimp"]) == []
    assert untestable_comparisons(schedules, "auto", []) == []  # GLUE alone: fine-tuned, no method to differ


def test_a_decision_is_verified_on_its_export_and_not_on_a_changed_one(tmp_path):
    """The committed study is an export (leaderboards/export_runs.py: no evaluation text, numbers re-encoded): the
    decision's table digests are of the tables' content, so the export still verifies (schema 3's file-byte digests
    did not), while a changed outcome in the export is caught."""
    import importlib.util

    import pyarrow as pa
    import pyarrow.parquet as pq

    outcome, folder, _ = _controlled(tmp_path, {"2_CLM": 0.15, "0.25_CLM": -0.15})
    assert outcome.status == "decided"
    runs = sorted(p for p in folder.output.iterdir() if (p / "scores.parquet").is_dir())
    for run in runs:  # as a real run: the evaluation text in its items, a run.json with the machine's paths
        (run / "run.json").write_text(json.dumps({"status": "finished", "config": {"output": str(run)}}))
        for part in run.rglob("_items.parquet"):
            items = pq.read_table(part)
            text = pa.array(["The cat sleeps."] * items.num_rows)
            rewrite_event_file(part, items.set_column(items.column_names.index("sentence_good"), "sentence_good", text))
    assert not any("NOT SHOWN" in line for line in decision_lines([folder.output]))

    spec = importlib.util.spec_from_file_location("export_runs", ROOT / "leaderboards" / "export_runs.py")
    export = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export)
    dest = tmp_path / "results"
    assert export.main([str(dest), *map(str, runs), str(folder.output / "sweep")]) == 0
    exported = dest / folder.output.name
    assert not any("sentence_good" in pq.read_table(p).column_names for p in exported.rglob("_items.parquet"))
    lines = decision_lines([exported])
    assert lines and not any("NOT SHOWN" in line for line in lines)

    part = next(exported.rglob("_items.parquet"))
    items = pq.read_table(part)
    flipped = pa.array([1.0 - items["correct"][0].as_py(), *items["correct"].to_pylist()[1:]])
    pq.write_table(items.set_column(items.column_names.index("correct"), "correct", flipped), part)
    assert any("NOT SHOWN" in line and "changed since the decision" in line for line in decision_lines([exported]))


def test_an_endpoint_whose_positive_control_is_not_decided_gets_no_verdict_and_the_sweep_goes_on(tmp_path):
    """The positive control is no worse in truth (the endpoint cannot show it sees a gap): 2_CLM's 15-point gap is
    decided by its interval, but the endpoint may not speak, so the comparison reads 'no verdict' and keeps the sweep
    running to the cap; the record stores the rule and the endpoint's check, and the board re-reads the same."""
    outcome, folder, said = _controlled(tmp_path, {"2_CLM": 0.15, "0.25_CLM": 0.0})
    studied = next(c for c in outcome.comparisons if c.row == "2_CLM")
    assert studied.decision == "difference" and outcome.status == "max seeds reached"
    assert len(studied.seeds) == 10
    assert any("of them decided by the interval alone, on an endpoint that has not shown it can see a gap" in line
               for line in said)
    decision = json.loads(folder.decision_file.read_text())
    (endpoint,) = decision["endpoints"]
    assert endpoint["column"] == "blimp_supplement" and endpoint["rule"] == "positive-control"
    assert endpoint["speaks"] is False and "not decided worse" in endpoint["why"]
    lines = decision_lines([folder.output])
    assert not any("NOT SHOWN" in line for line in lines)
    (line,) = [line for line in lines if "2_CLM - baseline on blimp_supplement" in line]
    assert "no verdict: this endpoint does not separate these models" in line and "decided: better" not in line
    # an edited endpoint check is caught: the record must say what its comparisons give
    decision["endpoints"][0]["speaks"] = True
    folder.decision_file.write_text(json.dumps(decision))
    assert any("NOT SHOWN" in line and "sensitivity" in line for line in decision_lines([folder.output]))


def test_a_swept_board_gives_each_comparison_one_verdict_the_sweeps(tmp_path, monkeypatch, capsys):
    """Issue #50 item 3: under a sweep decision the gaps the sweep decided print its verdict and no fixed-sample
    test (a p-value on seeds the data chose is not valid), a column it did not declare (a board's own average)
    gets no verdict at all, and the same tables without the decision keep their fixed-sample tests."""
    _, _, folder, _, _ = _decide(tmp_path, {"2_CLM": 0.15}, tolerance=None)
    definition = tmp_path / "board.yaml"
    definition.write_text(f"name: study\nresults: [{folder.output}]\ntasks: [blimp_supplement]\n"
                          "macro_tasks: [blimp_supplement]\ngroup_by: [recipe, preset, schedule]\n"
                          "reference: {schedule: 1_CLM}\n")
    code, out, err = run_cli(monkeypatch, capsys, "leaderboard", "-d", str(definition), "-o",
                             str(tmp_path / "board.md"))
    assert code == 0, err
    board = (tmp_path / "board.md").read_text()
    gaps = [line for line in board.splitlines() if line.startswith("| schedule=2_CLM |")]
    assert len(gaps) == 2, board
    assert "descriptive; sweep: decided better" in gaps[0] and "p=" not in gaps[0] and "**" not in gaps[0]
    assert "not a declared endpoint: no verdict" in gaps[1] and "significant" not in gaps[1]
    assert "no other gap is tested" in board
    code, _, err = run_cli(monkeypatch, capsys, "leaderboard", "-d", str(definition), "-o",
                           str(tmp_path / "board.parquet"))
    assert code == 0, err
    stored = json.loads(pq.read_schema(tmp_path / "board.parquet").metadata[b"antlm_bench.gaps"])
    assert {(g["column"], g["p_value"], g["significant"], g["sweep_verdict"]) for g in stored} == {
        ("blimp_supplement", None, None, "decided better"), ("macro", None, None, "not a declared endpoint: no verdict")}
    folder.decision_file.unlink()  # the same tables, no sweep decision: the board's own tests again
    code, out, err = run_cli(monkeypatch, capsys, "leaderboard", "-d", str(definition), "-o",
                             str(tmp_path / "plain.md"))
    assert code == 0, err
    plain = [line for line in (tmp_path / "plain.md").read_text().splitlines() if line.startswith("| schedule=2_CLM |")]
    assert all("significant, row better" in line and "descriptive" not in line for line in plain), plain


def test_a_piped_board_fits_200_columns_with_the_same_numbers_and_words(tmp_path, monkeypatch, capsys):
    """#55 item 3: where the output is not a terminal the board is at most 200 columns (compact cells, the intervals
    in a table of their own, prose wrapped at words), every number and word of ``--wide`` still there; ``--wide``
    keeps one line per note and every cell in full."""
    from antlm_bench.results.leaderboard import leaderboard_from_paths
    from antlm_bench.results.leaderboard.text import compact_cell_text, interval_text

    _, _, folder, _, _ = _decide(tmp_path, {"2_CLM": 0.15}, tolerance=None)
    code, out, err = run_cli(monkeypatch, capsys, "leaderboard", str(folder.output))
    assert code == 0, err
    code, wide, err = run_cli(monkeypatch, capsys, "leaderboard", str(folder.output), "--wide")
    assert code == 0, err
    assert max(map(len, out.splitlines())) <= 200 < max(map(len, wide.splitlines()))
    board = leaderboard_from_paths([folder.output], family="none")
    for row in board.rows:
        for cell in row.cells.values():
            assert compact_cell_text(cell, False) in out and interval_text(cell).strip() in out
    # the prose under the tables: the same words in the same order, only the line breaks differ
    def prose(text: str) -> list[str]:
        return text[text.index("Scores are percentages"):].split()

    assert prose(out) == prose(wide)
    code, _, err = run_cli(monkeypatch, capsys, "leaderboard", str(folder.output), "-o", str(tmp_path / "b.txt"))
    assert code == 0, err
    assert (tmp_path / "b.txt").read_text() == out  # a file holds what the pipe shows
