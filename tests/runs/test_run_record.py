"""The run's contract (antlm_bench.runs): a checkpoint's record read back exactly, damaged records refused with one
line naming the field, the scoring method decided from the record's phase, and a run folder's layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from antlm_bench.errors import UserError
from antlm_bench.runs.layout import RunLayout, words_checkpoint_name, words_of_checkpoint
from antlm_bench.runs.record import SCHEMA_VERSION, STATE_FILE, CheckpointRecord, read_record, scoring_method
from antlm_bench.runs.schedule import parse_schedule

SCHEDULE = "1_CLM+2_MIX(CLM:1,MLM:15)+0.5_MNTP"


def _phases(schedule: str) -> tuple[dict, ...]:
    """One entry per phase of ``schedule``, as the trainer lists them (what a record of this version must hold)."""
    return tuple({"index": i, "objective": phase.label} for i, phase in enumerate(parse_schedule(schedule).phases))


def _record(**fields) -> CheckpointRecord:
    base = dict(schedule=SCHEDULE, phase_index=1, phase_objective="MIX(CLM:1,MLM:15)", step=30, epoch=3.0,
                tokens_seen=1234, seed=7, recipe="antlm-babyllama", preset="tiny", training_fingerprint="ab" * 8,
                phases=_phases(SCHEDULE))
    return CheckpointRecord(**{**base, **fields})


def _write(folder: Path, document) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STATE_FILE).write_text(json.dumps(document))
    return folder


def test_a_record_reads_back_as_written(tmp_path: Path) -> None:
    record = _record(phase_complete=True)
    (tmp_path / STATE_FILE).write_bytes(record.to_bytes())
    back = read_record(tmp_path)
    assert back == record and back.schema_version == SCHEMA_VERSION
    assert back.phase == parse_schedule(SCHEDULE).phases[1] and back.phase.dominant_objective == "MLM"
    assert not back.is_final and _record(phase_index=2, phase_objective="MNTP", phase_complete=True).is_final


@pytest.mark.parametrize(("phase_index", "objective", "method"), [
    (0, "CLM", "clm"), (1, "MIX(CLM:1,MLM:15)", "pll"), (2, "MNTP", "mntp")])
def test_auto_scoring_is_the_method_of_the_records_phase(phase_index: int, objective: str, method: str) -> None:
    assert scoring_method(_record(phase_index=phase_index, phase_objective=objective), is_masked_lm=True)[0] == method


def test_a_plain_folder_is_scored_by_its_kind(tmp_path: Path) -> None:
    assert read_record(tmp_path) is None
    assert scoring_method(None, is_masked_lm=True)[0] == "pll"
    assert scoring_method(None, is_masked_lm=False)[0] == "clm"


def test_a_record_without_a_version_reads_as_version_1(tmp_path: Path) -> None:
    document = _record().to_json()
    del document["schema_version"], document["training_fingerprint"]
    record = read_record(_write(tmp_path, document))
    assert record.schema_version == 1 and record.training_fingerprint is None and record.step == 30


@pytest.mark.parametrize(("change", "says"), [
    ({"step": "30"}, "field step: Input should be a valid integer (got '30')"),
    ({"step": -1}, "field step: Input should be greater than or equal to 0"),
    ({"epoch": "three"}, "field epoch"),
    ({"seed": True}, "field seed: Input should be a valid integer (got True)"),
    ({"phases": []}, "field phases lists no phases"),
    ({"phases": [{"index": 0, "objective": "MLM"}]}, "field phases lists [(0, 'MLM')]"),
    ({"phase_complete": "yes"}, "field phase_complete"),
    ({"schema_version": SCHEMA_VERSION + 1}, "upgrade antlm-bench"),
    ({"phase_index": 5}, "field phase_index is 5"),
    ({"phase_objective": "MLM"}, "field phase_objective is 'MLM', but phase 1"),
    ({"schedule": "4_CLM+x"}, "field schedule"),
])
def test_a_damaged_field_is_one_line_naming_it(tmp_path: Path, change: dict, says: str) -> None:
    folder = _write(tmp_path / "ckpt", {**_record().to_json(), **change})
    with pytest.raises(UserError) as caught:
        read_record(folder)
    message = str(caught.value)
    assert says in message and str(folder / STATE_FILE) in message and "\n" not in message


@pytest.mark.parametrize("document", ["{not json", "[1, 2]", '{"step": 3}'])
def test_a_broken_record_is_one_line(tmp_path: Path, document: str) -> None:
    (tmp_path / STATE_FILE).write_text(document)
    with pytest.raises(UserError, match=STATE_FILE):
        read_record(tmp_path)


def test_a_record_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).mkdir()
    with pytest.raises(UserError, match="not a file"):
        read_record(tmp_path)


def test_the_layout_finds_the_final_checkpoint_from_the_run_file(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    assert layout.read_run_file() is None and layout.final_checkpoint() is None and not layout.has_run()
    layout.run_file.write_text(json.dumps({"schedule": SCHEDULE}))
    assert layout.final_checkpoint() is None  # not saved yet
    final = layout.phase_checkpoint(2, parse_schedule(SCHEDULE).phases[2])
    final.mkdir(parents=True)
    assert final.name == "phase-2-MNTP" and layout.final_checkpoint() == final
    assert layout.model_folder()[0] == final
    mix = layout.phase_checkpoint(1, parse_schedule(SCHEDULE).phases[1])
    assert mix.name == "phase-1-MIX"


def test_an_unfinished_run_stands_for_its_resume_point(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    layout.run_file.write_text(json.dumps({"schedule": SCHEDULE}))
    with pytest.raises(UserError, match="without a final checkpoint or a resume point"):
        layout.model_folder()
    (tmp_path / ".resume" / "step-000000003").mkdir(parents=True)
    layout.last.symlink_to(Path(".resume") / "step-000000003")
    folder, why = layout.model_folder()
    assert folder == layout.last and "did not finish" in why


def test_a_damaged_run_file_is_one_line(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    layout.run_file.write_text("{")
    with pytest.raises(UserError, match="run.json"):
        layout.final_checkpoint()


@pytest.mark.parametrize(("words", "name"), [(2_000_000, "chck_2M"), (500_000, "chck_500K"), (2500, "chck_2500")])
def test_words_checkpoint_names_read_back(words: int, name: str) -> None:
    assert words_checkpoint_name(words) == name and words_of_checkpoint(name) == words
    assert words_of_checkpoint("phase-1-MLM") is None


@pytest.mark.parametrize("edit, field", [({"seed": "abc"}, "seed"), ({"status": "done?"}, "status"),
                                          ({"config": {"max_words": "many"}}, "config.max_words"),
                                          ({"schema_version": 99}, "schema_version")])
def test_a_wrong_typed_run_file_is_one_line_naming_the_field(tmp_path: Path, edit: dict, field: str) -> None:
    """run.json is read through its model (runs.run_file) by every reader: a wrong type is one line naming the file
    and the field, never a traceback or a silently wrong reuse."""
    layout = RunLayout(tmp_path)
    layout.run_file.write_text(json.dumps({"schedule": SCHEDULE, "status": "finished", "seed": 1, **edit}))
    with pytest.raises(UserError, match=rf"run\.json: field {field}: .*not a run file of this version"):
        layout.read_run_file()
    with pytest.raises(UserError, match=rf"field {field}"):
        layout.final_checkpoint()


def test_an_old_run_file_reads_with_its_fields_unknown(tmp_path: Path) -> None:
    """A run.json written before the schema version (fields of the time, one since dropped: autocast)."""
    layout = RunLayout(tmp_path)
    layout.run_file.write_text(json.dumps({"status": "finished", "schedule": SCHEDULE, "seed": 1, "autocast": "none",
                                           "training_fingerprint": "ab" * 8, "config": {"max_words": 20000}}))
    record = layout.read_run_file()
    assert record is not None and record.schema_version == 1 and record.status == "finished"
    assert record.weights_digest is None and record.config.max_words == 20000
