"""The results store: one rename per event, the latest row per key, schema versions, the folder lock, tidy folders."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from antlm_bench.errors import UserError
from antlm_bench.locking import LOCK_FILE, folder_lock
from antlm_bench.results.store import (
    EVENT_PART,
    ITEMS_PART,
    PART,
    SCHEMA_VERSION,
    STAGING_PREFIX,
    commit_results,
    find_results,
    output_folder,
    read_results_folder,
    store_digest,
    tidy_results,
)
from antlm_bench.results.tables import CheckpointInfo, RunInfo, ScoreRow, item_table, score_table

REPO = Path(__file__).resolve().parents[2]


def scores(run_id: str = "r", subtasks: dict[str, float] | None = None, limit: int | None = None,
           checkpoint: str = "c"):
    """A scores table of one task; ``subtasks``: name -> value (n = 4 each)."""
    subtasks = subtasks or {"a": 0.5, "b": 0.75}
    rows = [ScoreRow("blimp", name, "accuracy", value, 4, "clm", limit=limit) for name, value in subtasks.items()]
    rows.append(ScoreRow("blimp", "", "accuracy", float(np.mean(list(subtasks.values()))), 4 * len(subtasks), "clm",
                         limit=limit))
    return score_table(RunInfo(run_id=run_id, seed=1, git_commit="test"),
                       CheckpointInfo(checkpoint=checkpoint, phase_index=0), rows)


def items(run_id: str = "r", subtasks: tuple[str, ...] = ("a", "b"), correct: float = 1.0, checkpoint: str = "c"):
    return item_table([{"run_id": run_id, "checkpoint": checkpoint, "phase_index": 0, "scoring": "clm",
                        "task": "blimp", "subtask": name, "item_id": f"{name}-{i}", "correct": correct}
                       for name in subtasks for i in range(4)])


def values(table) -> dict[tuple, float]:
    return {(r["run_id"], r["subtask"], r["limit"]): r["value"] for r in table.to_pylist()}


def test_each_commit_is_one_event_and_the_latest_row_of_a_key_wins(tmp_path):
    first = commit_results(tmp_path, scores(subtasks={"a": 0.5, "b": 0.75}), items())
    second = commit_results(tmp_path, scores(subtasks={"a": 1.0}))  # re-scores a (and the task row), not b
    store = tmp_path / "scores.parquet"
    assert sorted(p.name for p in store.iterdir()) == [first, second] and first < second
    assert sorted(p.name for p in (store / first).iterdir()) == sorted([PART, ITEMS_PART, EVENT_PART])
    read = read_results_folder(store)
    assert values(read.scores) == {("r", "a", None): 1.0, ("r", "b", None): 0.75, ("r", "", None): 1.0}
    assert read.events == [first, second]
    # items of a stay only where their scores stand: a was re-scored without --log-samples, b was not
    assert sorted(set(read.items["subtask"].to_pylist())) == ["b"] and read.items.num_rows == 4
    # the store is a plain Arrow dataset too (every committed part, no de-duplication), items as well
    assert pq.read_table(store).num_rows == 5
    assert pq.read_table(tmp_path / "items.parquet").num_rows == 8


def test_another_limit_is_another_key_and_keeps_its_items(tmp_path):
    commit_results(tmp_path, scores(), items())
    commit_results(tmp_path, scores(limit=2))
    read = read_results_folder(tmp_path / "scores.parquet")
    assert read.scores.num_rows == 6 and read.items.num_rows == 8


def test_a_group_takes_its_items_from_one_event_only(tmp_path):
    commit_results(tmp_path, scores(), items(correct=0.0))
    commit_results(tmp_path, scores(), items(subtasks=("a", "b"), correct=1.0))
    read = read_results_folder(tmp_path / "scores.parquet")
    assert read.items.num_rows == 8 and set(read.items["correct"].to_pylist()) == {1.0}


def test_glue_rows_of_each_seed_are_separate_keys(tmp_path):
    rows = [ScoreRow("glue", "rte", "accuracy", 0.5 + seed / 100, 10, "finetune", seed=seed) for seed in (1, 2, 3)]
    commit_results(tmp_path, score_table(RunInfo(run_id="g", git_commit="t"), CheckpointInfo(), rows))
    assert read_results_folder(tmp_path / "scores.parquet").scores.num_rows == 3


def test_every_event_records_its_schema_version_and_one_without_it_reads_as_version_1(tmp_path):
    event = commit_results(tmp_path, scores(), items(), {"kind": "test", "schema_version": 99})
    store = tmp_path / "scores.parquet"
    record = json.loads((store / event / EVENT_PART).read_text(encoding="utf-8"))
    assert record["schema_version"] == SCHEMA_VERSION == 2  # what was written, not what the caller's record said
    del record["schema_version"]  # an event written before the field existed (version 1: no data digests)
    del record["data_sha256"]
    (store / event / EVENT_PART).write_text(json.dumps(record), encoding="utf-8")
    read = read_results_folder(store)
    assert read.events == [event] and read.scores.num_rows == 3 and read.items.num_rows == 8


@pytest.mark.parametrize("version", [3, "2", True])
def test_an_event_of_an_unknown_schema_version_is_refused_in_one_line(tmp_path, version):
    commit_results(tmp_path, scores())
    newer = commit_results(tmp_path, scores(run_id="newer"))
    record_file = tmp_path / "scores.parquet" / newer / EVENT_PART
    record = json.loads(record_file.read_text(encoding="utf-8"))
    record_file.write_text(json.dumps({**record, "schema_version": version}), encoding="utf-8")
    with pytest.raises(UserError) as refused:
        read_results_folder(tmp_path / "scores.parquet")
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{record_file}: schema_version {version!r}")
    assert "reads versions 1, 2" in message and "re-run the evaluation" in message


def test_an_event_record_that_does_not_parse_is_one_line_naming_it(tmp_path):
    event = commit_results(tmp_path, scores())
    record_file = tmp_path / "scores.parquet" / event / EVENT_PART
    record_file.write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match=f"^{record_file}:1: not a readable event record"):
        read_results_folder(tmp_path / "scores.parquet")
    record_file.write_text("[1]", encoding="utf-8")
    with pytest.raises(UserError, match=f"^{record_file}: not an event record"):
        read_results_folder(tmp_path / "scores.parquet")


def test_a_single_file_where_the_store_belongs_is_refused_by_reader_and_writer(tmp_path):
    """The single-file layout of earlier versions is not read (nor turned into a store): one line naming it."""
    pq.write_table(scores(), tmp_path / "scores.parquet")
    (found,) = find_results([tmp_path])
    with pytest.raises(UserError, match="scores.parquet: a file, not a results store"):
        read_results_folder(found)
    with pytest.raises(UserError, match="scores.parquet: a file, not a results store"):
        commit_results(tmp_path, scores(run_id="new"))
    assert (tmp_path / "scores.parquet").is_file() and pq.read_table(tmp_path / "scores.parquet").num_rows == 3


def test_the_committed_study_is_in_the_store_layout():
    """Every run the committed sweeps record is a store of the current layout, with items and no sentence text."""
    study = REPO / "leaderboards" / "mini-antlm" / "results"
    cells = [(arch, cell["name"]) for arch in ("babyllama", "ltgbert")
             for cell in json.loads((study / arch / "sweep" / "sweep.json").read_text())["cells"]]
    found = find_results([study])
    assert sorted(found) == sorted(study / arch / name / "scores.parquet" for arch, name in cells)
    for store in found:
        read = read_results_folder(store, with_items=False)
        assert read.scores.num_rows
        assert read.scores["eval_set"].null_count == 0 and read.scores["convention"].null_count == 0
        items = list(store.glob("*/_items.parquet"))
        assert items and all(pq.read_metadata(part).num_rows for part in items)
        for part in items:  # the evaluation data stays in the data folder
            assert not {"context", "sentence_good", "sentence_bad"} & set(pq.read_schema(part).names), part


def test_readers_skip_staging_and_tidy_removes_it_only_when_no_writer_is_busy(tmp_path):
    commit_results(tmp_path, scores())
    store = tmp_path / "scores.parquet"
    orphan = store / f"{STAGING_PREFIX}dead"
    orphan.mkdir()
    pq.write_table(scores(subtasks={"z": 0.0}), orphan / PART)
    assert read_results_folder(store).scores.num_rows == 3 and pq.read_table(store).num_rows == 3
    # a writer staging right now holds the store's shared lock: tidy leaves its folder alone
    import fcntl

    fd = os.open(store, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        assert tidy_results(tmp_path) == [] and orphan.is_dir()
    finally:
        os.close(fd)
    done = tidy_results(tmp_path)
    assert len(done) == 1 and not orphan.exists()


def test_a_failed_write_commits_nothing_and_leaves_no_staging(tmp_path, monkeypatch):
    commit_results(tmp_path, scores())

    def explode(table, where, *args, **kwargs):
        Path(where).write_bytes(b"PAR1 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", explode)
    with pytest.raises(OSError) as caught:
        commit_results(tmp_path, scores(subtasks={"c": 0.0}), items())
    assert caught.value.filename and str(tmp_path) in caught.value.filename and "\n" not in str(caught.value)
    assert [p.name for p in (tmp_path / "scores.parquet").iterdir() if p.name.startswith(".")] == []
    assert read_results_folder(tmp_path / "scores.parquet").scores.num_rows == 3
    with pytest.raises(OSError):
        commit_results(tmp_path / "fresh", scores())
    assert list((tmp_path / "fresh").iterdir()) == []  # no empty store that a plain dataset read would trip on


def test_files_and_folders_are_readable_by_others_under_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        event = commit_results(tmp_path / "out", scores(), items())
    finally:
        os.umask(old)
    store = tmp_path / "out" / "scores.parquet"
    for path in (store, store / event, tmp_path / "out" / "items.parquet"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, path
    for path in (store / event / PART, store / event / ITEMS_PART, store / event / EVENT_PART):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


# -- the folder lock ---------------------------------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from antlm_bench.locking import folder_lock
    with folder_lock(Path(sys.argv[1]), "train"):
        print("held", flush=True)
        time.sleep(120)
""")


def hold_lock(folder: Path) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_second_writer_is_refused_naming_the_holder_and_a_kill_frees_the_lock(tmp_path):
    folder = tmp_path / "run"
    child = hold_lock(folder)
    try:
        with pytest.raises(UserError, match=rf"pid {child.pid}\b.*writing this folder") as caught:
            with folder_lock(folder, "train"):
                pass
        assert "\n" not in str(caught.value)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert (folder / LOCK_FILE).exists()  # kill -9 leaves the file, but not the lock
    with folder_lock(folder, "train"):
        assert (folder / LOCK_FILE).read_text().split()[0] == str(os.getpid())
    assert not (folder / LOCK_FILE).exists()


def test_the_lock_is_reentrant_in_one_process_and_released_on_an_exception(tmp_path):
    with pytest.raises(RuntimeError):
        with folder_lock(tmp_path, "run"), folder_lock(tmp_path, "train"):
            raise RuntimeError("boom")
    with folder_lock(tmp_path, "eval"):
        pass


def test_a_failing_command_removes_the_folder_it_made_and_left_empty(tmp_path):
    with pytest.raises(UserError):
        with output_folder(tmp_path / "new" / "deeper", "eval"):
            raise UserError("bad --schedule")
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    with pytest.raises(UserError):
        with output_folder(tmp_path / "kept", "eval"):
            raise UserError("bad")
    assert (tmp_path / "kept").is_dir()  # not made by this command
    with pytest.raises(UserError):
        with output_folder(tmp_path / "partly", "eval") as folder:
            (folder / "checkpoints").mkdir()
            raise UserError("diverged")
    assert (tmp_path / "partly" / "checkpoints").is_dir()  # not empty: what was written stays
    with output_folder(tmp_path / "ok", "eval"):
        pass
    assert (tmp_path / "ok").is_dir() and list((tmp_path / "ok").iterdir()) == []


def test_evaluate_and_train_take_the_lock_before_anything_else(tmp_path):
    from antlm_bench.config import TrainConfig
    from antlm_bench.evaluate import evaluate
    from antlm_bench.training.trainer import train

    folder = tmp_path / "busy"
    child = hold_lock(folder)
    try:
        with pytest.raises(UserError, match=f"pid {child.pid}"):
            evaluate(tmp_path / "no-model", "blimp", output_dir=folder)
        with pytest.raises(UserError, match=f"pid {child.pid}"):
            train(TrainConfig(model="antlm-babyllama", preset="tiny", output=folder))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with pytest.raises(UserError, match="not a folder"):  # the model is checked once the lock is ours
        evaluate(tmp_path / "no-model", "blimp", output_dir=tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()  # made by the failing eval, left empty: removed


def test_the_cli_refuses_a_second_eval_into_one_folder_in_one_line(tmp_path):
    folder = tmp_path / "busy"
    child = hold_lock(folder)
    try:
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "antlm_bench", "eval", "--model", str(tmp_path), "--tasks", "blimp", "--output",
             str(folder), "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
        assert time.monotonic() - started < 300
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {child.pid}" in lines[0] and "Traceback" not in result.stderr


def test_tidy_removes_the_empty_store_a_killed_first_commit_left(tmp_path):
    (tmp_path / "scores.parquet" / f"{STAGING_PREFIX}dead").mkdir(parents=True)
    assert len(tidy_results(tmp_path)) == 1 and list(tmp_path.iterdir()) == []
    commit_results(tmp_path, scores())
    assert read_results_folder(tmp_path / "scores.parquet").scores.num_rows == 3


def test_an_items_table_without_its_correct_column_is_refused(tmp_path, real_data_dir):
    """Read with the schema, a part missing ``correct`` came back as nulls and changed intervals and p-values."""
    import pyarrow.parquet as pq
    from leaderboard_tables import rewrite_event_file
    from tiny_models import build_tiny_llama, build_tiny_tokenizer

    from antlm_bench.errors import UserError
    from antlm_bench.evaluate import evaluate
    from antlm_bench.results.store import read_results_folder

    evaluate((build_tiny_llama(), build_tiny_tokenizer("bpe")), "blimp_supplement", limit=2, data_dir=real_data_dir,
             progress=False, log_samples=True, output_dir=tmp_path / "out")
    (items,) = (tmp_path / "out" / "scores.parquet").glob("*/_items.parquet")
    rewrite_event_file(items, pq.read_table(items).drop_columns(["correct"]))  # as a writer without it would
    with pytest.raises(UserError, match=r"_items.parquet: the items table lacks column correct"):
        read_results_folder(tmp_path / "out")


def test_the_recorded_commit_says_when_the_code_that_ran_was_not_the_commit(tmp_path):
    """A score row's ``git_commit`` names the code: a checkout with an edited tracked file is marked ``+dirty``
    (the commit alone would claim code that did not run); an untracked file (a run folder, a cache) is not code of
    the commit and leaves it clean; outside a checkout there is no commit to name."""
    import shutil
    import subprocess

    from antlm_bench.results.tables import DIRTY, current_git_commit

    if shutil.which("git") is None:
        pytest.fail("git is not on PATH: the project is a git checkout, and this test needs the git command")
    assert current_git_commit(tmp_path) == ""  # no checkout
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "model.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "model.py"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert current_git_commit(tmp_path) == head
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "scores.parquet").write_bytes(b"untracked")
    assert current_git_commit(tmp_path) == head
    (tmp_path / "model.py").write_text("x = 2\n")
    assert current_git_commit(tmp_path) == head + DIRTY


# -- every event's data carries its digest (layout version 2), checked whenever it is read -------------------------


@pytest.mark.parametrize("part", [PART, ITEMS_PART])
def test_a_data_file_edited_after_its_commit_is_refused_naming_it(tmp_path, part):
    """An edited part.parquet (every score 1.0: a board would rank it at 100) or _items.parquet, valid Parquet with
    the right columns, is refused in one line naming the file: its bytes are not those its event recorded."""
    event = commit_results(tmp_path, scores(), items())
    path = tmp_path / "scores.parquet" / event / part
    table = pq.read_table(path)
    column, edited = ("value", 1.0) if part == PART else ("correct", 0.0)  # every item now wrong
    pq.write_table(table.set_column(table.schema.get_field_index(column), column,
                                    pa.array([edited] * table.num_rows, table.schema.field(column).type)), path)
    with pytest.raises(UserError) as refused:
        read_results_folder(tmp_path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: not the bytes its event recorded")


@pytest.mark.parametrize("damage", ["missing", "not a mapping", "a file left out", "a file too many"])
def test_a_version_2_record_must_name_each_data_file_with_its_digest(tmp_path, damage):
    event = commit_results(tmp_path, scores(), items() if damage != "a file too many" else None)
    record_file = tmp_path / "scores.parquet" / event / EVENT_PART
    record = json.loads(record_file.read_text(encoding="utf-8"))
    if damage == "missing":
        del record["data_sha256"]
    elif damage == "not a mapping":
        record["data_sha256"] = "abc"
    elif damage == "a file left out":
        del record["data_sha256"][ITEMS_PART]
    else:
        record["data_sha256"][ITEMS_PART] = "0" * 64
    record_file.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(UserError, match=f"^{record_file}: (field data_sha256 does not name the event's data files|"
                                        "not an event record .*data_sha256)"):
        read_results_folder(tmp_path)


def test_an_unchanged_store_reads_and_its_digest_is_the_data_not_the_record(tmp_path):
    commit_results(tmp_path, scores(), items())
    before = store_digest(tmp_path)
    assert read_results_folder(tmp_path).scores.num_rows == 3
    (record_file,) = (tmp_path / "scores.parquet").glob("*/_event.json")
    record = json.loads(record_file.read_text(encoding="utf-8"))
    record_file.write_text(json.dumps({**record, "note": "annotated"}), encoding="utf-8")
    assert store_digest(tmp_path) == before


def test_the_recorded_content_digest_gives_the_store_digest_and_is_checked(tmp_path):
    """A reader takes an event's items digest from its record (the bytes checked first) instead of recomputing it:
    the same store digest as computing it from the tables; a record whose content digest is not a sha256 is
    refused."""
    from antlm_bench.results.leaderboard.results import results_reader

    commit_results(tmp_path, scores(), items())
    commit_results(tmp_path, scores(run_id="other"), items(run_id="other", correct=0.0))
    assert results_reader().digest(tmp_path) == store_digest(tmp_path)
    record_file = sorted((tmp_path / "scores.parquet").glob("*/_event.json"))[0]
    record = json.loads(record_file.read_text(encoding="utf-8"))
    assert len(record["data_sha256"]["items_content"]) == 64
    record["data_sha256"]["items_content"] = "not a digest"
    record_file.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(UserError, match="field data_sha256 does not name"):
        read_results_folder(tmp_path)


@pytest.mark.parametrize("field, value", [("scores_rows", "3"), ("scores_rows", -1), ("kind", ["final-eval"]),
                                          ("settings", "none"), ("data_sha256", [1])])
def test_an_event_record_with_a_wrong_typed_field_is_refused_naming_it(tmp_path, field, value):
    """The fields readers use (``pipeline``'s reuse of a final evaluation reads kind, task, settings, spec and
    scores_rows) are typed: a record that is JSON but not an event record is one line naming the field."""
    event = commit_results(tmp_path, scores(), None, {"kind": "final-eval", "task": "blimp"})
    record_file = tmp_path / "scores.parquet" / event / EVENT_PART
    record = json.loads(record_file.read_text(encoding="utf-8"))
    record_file.write_text(json.dumps({**record, field: value}), encoding="utf-8")
    with pytest.raises(UserError, match=f"^{record_file}: not an event record .*{field}"):
        read_results_folder(tmp_path)
