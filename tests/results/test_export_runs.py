"""leaderboards/export_runs.py, the one export of run folders into a committed leaderboard folder: no evaluation
text leaves the data folder, the machine's paths stay out of run.json, and each run is swapped in whole (a failure
mid-export leaves the old export, and runs exported earlier stay)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from leaderboard_tables import correctness, write_run

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("export_runs", ROOT / "leaderboards" / "export_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(root: Path, name: str, p: float) -> Path:
    rng = np.random.default_rng(0)
    run = write_run(root / "antlm-babyllama", name, [{"phase_index": 0, "tasks": {
        "blimp": {f"s{j}": correctness(rng, 50, p) for j in range(3)}}}])
    (run / "run.json").write_text(json.dumps({"status": "finished", "config": {"output": "/home/me/runs",
                                                                                "seed": 1}}))
    return run


def _items(folder: Path):
    return [pq.read_table(f) for f in sorted(folder.rglob("_items.parquet"))]


def test_export_drops_text_and_paths_and_keeps_other_runs(tmp_path):
    export = _module()
    run = _run(tmp_path / "runs", "r-seed1", 0.6)
    source_items = _items(run)
    assert source_items and any(c in source_items[0].column_names for c in export.TEXT)
    dest = tmp_path / "results"
    kept = dest / "antlm-babyllama" / "earlier-seed9"
    kept.mkdir(parents=True)
    (kept / "run.json").write_text("{}")
    assert export.main([str(dest), str(run), str(tmp_path / "not-a-run")]) == 0
    out = dest / "antlm-babyllama" / "r-seed1"
    assert json.loads((out / "run.json").read_text())["config"] == {"seed": 1}
    (items,) = _items(out)
    assert not set(export.TEXT) & set(items.column_names) and items.num_rows == source_items[0].num_rows
    assert (kept / "run.json").read_text() == "{}"  # a run exported before, not named now: untouched
    assert not list(dest.rglob("*.new")) and not list(dest.rglob("*.old"))


def test_a_failure_mid_export_leaves_the_old_export(tmp_path, monkeypatch):
    export = _module()
    dest = tmp_path / "results"
    export.export_run(_run(tmp_path / "a", "r-seed1", 0.6), dest)
    before = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}

    def broken(*args, **kwargs):
        raise OSError("disk full (injected)")

    monkeypatch.setattr(export.pq, "write_table", broken)
    with pytest.raises(OSError):
        export.export_run(_run(tmp_path / "b", "r-seed1", 0.9), dest)
    after = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert after == before  # the half-written copy is outside the folder a board reads


def test_a_sweeps_record_is_exported_without_its_log_paths_and_its_decision_as_written(tmp_path):
    export = _module()
    sweep = tmp_path / "runs" / "babyllama" / "sweep"
    sweep.mkdir(parents=True)
    record = {"schema_version": 1, "cells": [{"name": "a-seed1", "log": "/home/me/runs/sweep/logs/a.log"}]}
    (sweep / "sweep.json").write_text(json.dumps(record))
    (sweep / "decision.json").write_text('{"status": "decided"}\n')
    dest = tmp_path / "results"
    assert export.main([str(dest), str(sweep)]) == 0
    out = dest / "babyllama" / "sweep"
    assert json.loads((out / "sweep.json").read_text())["cells"] == [{"name": "a-seed1"}]
    assert (out / "decision.json").read_text() == '{"status": "decided"}\n'
    assert sorted(p.name for p in out.iterdir()) == ["decision.json", "sweep.json"]  # no temporaries left


def _exported(tmp_path, export):
    """An exported run and sweep record, as a committed board holds them: DEST/<output's name>/..."""
    dest = tmp_path / "board"
    export.export_run(_run(tmp_path / "runs", "r-seed1", 0.6), dest)
    sweep = tmp_path / "runs" / "antlm-babyllama" / "sweep"
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({"schema_version": 1, "cells": [{"name": "r-seed1"}]}))
    (sweep / "decision.json").write_text('{"status": "running"}\n')
    export.export_sweep(sweep, dest)
    return dest / "antlm-babyllama"


def _files(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_restore_brings_back_runs_and_the_sweep_record_and_never_replaces_what_is_there(tmp_path):
    export = _module()
    exported = _exported(tmp_path, export)
    output = tmp_path / "output"
    (output / "sweep").mkdir(parents=True)
    (output / "sweep" / "sweep.json").write_text("{}")  # a live sweep's record: kept
    assert export.main(["--restore", str(exported), str(output)]) == 0
    assert _files(output / "r-seed1") == _files(exported / "r-seed1")
    assert (output / "sweep" / "sweep.json").read_text() == "{}"
    (output / "r-seed1" / "run.json").write_text('{"status": "running"}')  # a run that went on since
    assert export.main(["--restore", str(exported), str(output)]) == 0
    assert (output / "r-seed1" / "run.json").read_text() == '{"status": "running"}'
    assert not [p for p in output.iterdir() if p.name.startswith(".")]


def test_a_restore_stopped_midway_leaves_the_run_absent_and_the_next_one_finishes_it(tmp_path, monkeypatch):
    export = _module()
    exported = _exported(tmp_path, export)
    output = tmp_path / "output"
    copy = export.shutil.copyfile
    calls = []

    def failing(source, target, *args, **kwargs):
        calls.append(target)
        if len(calls) == 2:
            raise OSError("disk full (injected)")
        return copy(source, target, *args, **kwargs)

    monkeypatch.setattr(export.shutil, "copyfile", failing)
    output.mkdir()
    with pytest.raises(OSError):
        export.restore_run(exported / "r-seed1", output)
    assert not (output / "r-seed1").exists()  # only the staging folder, which no reader takes for a run
    monkeypatch.setattr(export.shutil, "copyfile", copy)
    assert export.restore_run(exported / "r-seed1", output).endswith("restored (no checkpoints)")
    assert _files(output / "r-seed1") == _files(exported / "r-seed1")
    assert sorted(p.name for p in output.iterdir()) == ["r-seed1"]


def test_restore_never_writes_through_a_planted_link(tmp_path):
    export = _module()
    exported = _exported(tmp_path, export)
    output, elsewhere = tmp_path / "output", tmp_path / "elsewhere"
    output.mkdir()
    elsewhere.mkdir()
    (output / ".r-seed1.restore").symlink_to(elsewhere)  # the staging name
    (output / "sweep").mkdir()
    (output / "sweep" / ".decision.json.restore").symlink_to(elsewhere / "decision.json")
    (output / "sweep" / "sweep.json").symlink_to(elsewhere / "sweep.json")  # a link at a record's name: kept
    assert export.main(["--restore", str(exported), str(output)]) == 0
    assert list(elsewhere.iterdir()) == []
    assert (output / "r-seed1" / "run.json").is_file() and not (output / "r-seed1").is_symlink()
    assert (output / "sweep" / "sweep.json").is_symlink()
    assert (output / "sweep" / "decision.json").read_text() == '{"status": "running"}\n'


@pytest.mark.parametrize("occupant", ["file", "folder"])
def test_restore_clears_a_staging_name_that_a_file_or_folder_holds(tmp_path, occupant):
    export = _module()
    exported = _exported(tmp_path, export)
    output = tmp_path / "output"
    (output / "sweep").mkdir(parents=True)
    for staging in (output / ".r-seed1.restore", output / "sweep" / ".decision.json.restore"):
        if occupant == "file":
            staging.write_text("left over")
        else:
            (staging / "inside").mkdir(parents=True)
    assert export.main(["--restore", str(exported), str(output)]) == 0
    assert _files(output / "r-seed1") == _files(exported / "r-seed1")
    assert (output / "sweep" / "decision.json").read_text() == '{"status": "running"}\n'
    assert not [p for p in [*output.iterdir(), *(output / "sweep").iterdir()] if p.name.startswith(".")]


def test_a_run_or_record_that_appears_during_the_restore_is_kept(tmp_path, monkeypatch):
    """Another process makes the run folder and the sweep record after the restore looked (fault injected: the
    look says the names are free): both are kept as they are, and no staging copy is left."""
    export = _module()
    exported = _exported(tmp_path, export)
    output = tmp_path / "output"
    (output / "r-seed1").mkdir(parents=True)
    (output / "r-seed1" / "run.json").write_text("live")
    (output / "sweep").mkdir()
    (output / "sweep" / "decision.json").write_text("live")
    looked = export.os.path.lexists
    monkeypatch.setattr(export.os.path, "lexists", lambda path: False if Path(path).parent.name in
                        ("output", "sweep") else looked(path))
    assert "appeared while the run was being restored" in export.restore_run(exported / "r-seed1", output)
    lines = export.restore_sweep(exported / "sweep", output)
    assert any("decision.json: kept as it is (it appeared" in line for line in lines)
    assert (output / "r-seed1" / "run.json").read_text() == "live"
    assert (output / "sweep" / "decision.json").read_text() == "live"
    assert not [p for p in [*output.iterdir(), *(output / "sweep").iterdir()] if p.name.startswith(".")]


def test_restore_of_a_missing_folder_or_into_a_file_is_one_line(tmp_path, capsys):
    export = _module()
    assert export.main(["--restore", str(tmp_path / "nowhere"), str(tmp_path / "out")]) == 2
    assert "no such exported folder" in capsys.readouterr().err
    exported = _exported(tmp_path, export)
    (tmp_path / "file").write_text("")
    assert export.main(["--restore", str(exported), str(tmp_path / "file")]) == 2
    assert "not a folder" in capsys.readouterr().err


def _sweep_output(tmp_path, rounds, decision_seeds):
    """A sweep's output: seeds 1-3 of one schedule done (seed 3 run ahead), seed 2 of another failed, a done cell
    whose run folder is gone; a decision (the committed cpu-study one, its seeds replaced) when given."""
    from antlm_bench.sweep.decision_file import read_decision

    out = tmp_path / "out"
    (out / "sweep").mkdir(parents=True)
    cells = []
    for name, seed, status in (("a-seed1", 1, "done"), ("a-seed2", 2, "reused"), ("a-seed3", 3, "done"),
                               ("b-seed2", 2, "failed"), ("gone-seed1", 1, "done")):
        cells.append({"name": name, "recipe": "antlm-babyllama", "preset": "tiny", "schedule": "1_CLM",
                      "seed": seed, "status": status})
        if name != "gone-seed1":
            (out / name).mkdir()
            (out / name / "run.json").write_text("{}")
    (out / "sweep" / "sweep.json").write_text(json.dumps({
        "schema_version": 1, "asked": {}, "started_at": "2026-12-06T00:00:00+00:00",
        "updated_at": "2026-12-06T00:00:00+00:00", "rounds": rounds, "history": [], "counts": {}, "cells": cells}))
    if decision_seeds is not None:
        committed = ROOT / "leaderboards" / "cpu-study" / "results" / "ltgbert" / "sweep" / "decision.json"
        record = read_decision(committed).model_copy(update={"seeds": decision_seeds, "comparisons": [],
                                                              "tables": {}})
        (out / "sweep" / "decision.json").write_text(record.model_dump_json())
    return out


@pytest.mark.parametrize(("rounds", "decision_seeds", "names"), [
    ([[1, 2], [3]], [1, 2], ["a-seed1", "a-seed2"]),  # the last look read 1-2: seed 3 ran ahead, not yet exported
    ([[1, 2], [3]], None, ["a-seed1", "a-seed2"]),  # before the first look: the first round's seeds
    ([], None, ["a-seed1", "a-seed2", "a-seed3"]),  # a sweep without rounds: every finished cell
])
def test_finished_cells_are_those_of_the_last_look(tmp_path, capsys, rounds, decision_seeds, names):
    export = _module()
    out = _sweep_output(tmp_path, rounds, decision_seeds)
    assert [p.name for p in export.finished_cells(out)] == names  # never a failed cell or a missing folder
    assert export.main(["--finished", str(out)]) == 0
    assert capsys.readouterr().out.split() == [str(out / name) for name in names]


def test_finished_cells_of_a_damaged_record_is_one_line(tmp_path, capsys):
    export = _module()
    out = _sweep_output(tmp_path, [[1]], None)
    (out / "sweep" / "sweep.json").write_text('{"schema_version": 1, "cells": 3}')
    assert export.main(["--finished", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sweep.json" in err[0]

