"""Export run folders' committed tables for a leaderboard folder in this repository: without evaluation text.

    python3 leaderboards/export_runs.py DEST RUN [RUN ...]    # a RUN may be a sweep's sweep/ folder

Each RUN (a run folder of `antlm-bench run`/`sweep`) becomes DEST/<its parent's name>/<its name>/: every committed
event of its results store (part.parquet, _event.json, and _items.parquet without the sentences: evaluation data is
never committed, and without GLUE's per-example predictions, which no statistic reads), and its run.json without
the machine's output path. Item floats are written byte-stream split and zstd-compressed (about half the size,
lossless). Each run is written in a staging folder beside DEST (``.<DEST>.export/``, outside what a board reads) and
swapped in whole, so a stopped export leaves every run's old or new tables (at worst, between the two renames, the
run missing, never half of it), and runs exported before that are not named here stay as they are.

A sweep's record folder (``OUTPUT/sweep/``) becomes DEST/<OUTPUT's name>/sweep/: its sweep.json without the log
paths (the logs stay with the run folders) and its decision.json as written, each replaced atomically, so that the
board prints the sweep's decision (recomputed from the exported tables) under the table. Used by
leaderboards/cpu-presets/run.sh, leaderboards/mini-antlm/run_study.sh and leaderboards/cpu-study/run_study.sh.

    python3 leaderboards/export_runs.py --finished OUTPUT

prints the run folders of OUTPUT's sweep to export (finished cells of the seeds its last look read:
:func:`finished_cells`), one a line, for the study scripts.

    python3 leaderboards/export_runs.py --restore DEST/<OUTPUT's name> OUTPUT

goes the other way, for a study that outlasts the machine its run folders were on: each exported run becomes
OUTPUT/<run>/ again (its run.json and committed events, no checkpoints), and the sweep's record and decision
OUTPUT/sweep/. A finished run without its checkpoints is reused by `run` and `sweep` where its store keeps every
asked evaluation, each verified against the request (antlm_bench.pipeline.kept_final_evaluations); anything else
about it needs the weights and is refused in one line. A name OUTPUT already holds (a run folder, a file, a link)
is left as it is: a restore never replaces a live or earlier run. Each run is copied into a staging folder beside
it and renamed in one step, so a stopped restore leaves each run whole or absent.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq

from antlm_bench.results.store import EVALUATION_TEXT, statistics_items
from antlm_bench.results.store.write import record_data_digests

TEXT = list(EVALUATION_TEXT)  # evaluation data is never committed
FLOATS = ["score_good", "score_bad", "value"]  # byte-stream split: about half the size, lossless


def export_run(run: Path, dest: Path) -> Path:
    """``run``'s tables and run.json under ``dest/<parent>/<name>``, swapped in whole; the folder written."""
    target = dest / run.parent.name / run.name
    # staged beside DEST, not in it: a board reads every store under DEST, and a half-written copy must not count
    staging = dest.parent / f".{dest.name}.export" / run.parent.name
    fresh, old = staging / f"{run.name}.new", staging / f"{run.name}.old"
    shutil.rmtree(fresh, ignore_errors=True)
    for event in sorted(e for e in (run / "scores.parquet").iterdir() if e.is_dir() and e.name[0] not in "._"):
        store = fresh / "scores.parquet" / event.name
        store.mkdir(parents=True)
        for name in ("part.parquet", "_event.json"):
            if (event / name).is_file():
                shutil.copy(event / name, store / name)
        if (event / "_items.parquet").is_file():
            # what a board and a decision read (results.store.store_digest covers the same, so the export keeps
            # the digests a sweep's decision.json recorded)
            items = statistics_items(pq.read_table(event / "_items.parquet"))
            if not items.num_rows:
                continue
            floats = [c for c in FLOATS if c in items.column_names]
            pq.write_table(items, store / "_items.parquet", compression="zstd", compression_level=19,
                           use_dictionary=[c for c in items.column_names if c not in floats],
                           use_byte_stream_split=floats)
            record_data_digests(store)  # the items' bytes changed, not their content
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta.get("config", {}).pop("output", None)
    fresh.mkdir(parents=True, exist_ok=True)
    (fresh / "run.json").write_text(json.dumps(meta, indent=1, sort_keys=True), encoding="utf-8")
    shutil.rmtree(old, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.rename(old)
    fresh.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def export_sweep(sweep: Path, dest: Path) -> Path:
    """A sweep's record and decision under ``dest/<its output's name>/sweep/``, each file replaced atomically."""
    out = dest / sweep.parent.name / "sweep"
    out.mkdir(parents=True, exist_ok=True)
    record = json.loads((sweep / "sweep.json").read_text(encoding="utf-8"))
    for cell in record.get("cells", []):
        cell.pop("log", None)  # the logs stay with the run folders
    documents = {"sweep.json": json.dumps(record, indent=1) + "\n"}
    if (sweep / "decision.json").is_file():
        documents["decision.json"] = (sweep / "decision.json").read_text(encoding="utf-8")
    for name, text in documents.items():
        (out / f".{name}.new").write_text(text, encoding="utf-8")
        (out / f".{name}.new").replace(out / name)
    return out


EVENT_FILES = ("part.parquet", "_event.json", "_items.parquet")  # what an exported event holds


def _plain_files(folder: Path) -> list[Path]:
    """The plain files of an exported event (a link is never followed out of the export)."""
    return [folder / name for name in EVENT_FILES if (folder / name).is_file() and not (folder / name).is_symlink()]


def _clear(path: Path) -> None:
    """Whatever stands at one of our staging names (what a stopped restore left, or a planted link, file or
    folder) removed; a link is unlinked, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def restore_run(exported: Path, output: Path) -> str:
    """The exported run ``exported`` back as the run folder ``output/<its name>``, without checkpoints; what was
    done, in a few words."""
    target = output / exported.name
    if os.path.lexists(target):
        return f"{target}: kept as it is (a restore never replaces a run folder)"
    staging = output / f".{exported.name}.restore"
    _clear(staging)
    store = exported / "scores.parquet"
    for event in sorted(e for e in store.iterdir() if e.is_dir() and not e.is_symlink() and e.name[0] not in "._"):
        (staging / "scores.parquet" / event.name).mkdir(parents=True)
        for path in _plain_files(event):
            shutil.copyfile(path, staging / "scores.parquet" / event.name / path.name)
    staging.mkdir(parents=True, exist_ok=True)
    if (exported / "run.json").is_symlink():
        shutil.rmtree(staging)
        return f"{exported / 'run.json'}: a link, not an exported record; nothing restored"
    shutil.copyfile(exported / "run.json", staging / "run.json")
    try:
        # THE step. A run folder (not empty) or a file that appeared at the name since the check makes it fail and
        # stays untouched; an empty folder there holds no run and is taken (rename(2) has no no-replace flag here)
        staging.rename(target)
    except OSError:
        _clear(staging)
        return f"{target}: kept as it is (it appeared while the run was being restored)"
    return f"{target}: restored (no checkpoints)"


def restore_sweep(exported: Path, output: Path) -> list[str]:
    """The exported sweep record and decision back into ``output/sweep/`` where that folder lacks them."""
    folder = output / "sweep"
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        return [f"{folder}: not a folder; nothing restored into it"]
    folder.mkdir(exist_ok=True)
    done = []
    for name in ("sweep.json", "decision.json"):
        source, target = exported / name, folder / name
        if not source.is_file() or source.is_symlink():
            continue
        if os.path.lexists(target):
            done.append(f"{target}: kept as it is")
            continue
        staging = folder / f".{name}.restore"
        _clear(staging)
        shutil.copyfile(source, staging)
        kept = f"{target}: kept as it is (it appeared while the record was being restored)"
        try:
            os.link(staging, target)  # published only where the name is free: a live record is never replaced
            done.append(f"{target}: restored")
        except FileExistsError:
            done.append(kept)
        except OSError:  # a file system without hard links: check, then rename (a narrow race left)
            if os.path.lexists(target):
                done.append(kept)
            else:
                staging.rename(target)
                done.append(f"{target}: restored")
        finally:
            staging.unlink(missing_ok=True)
    return done


def restore(exported: Path, output: Path) -> int:
    """Every exported run of ``exported`` (a board's folder of one sweep output) and its sweep record into
    ``output``."""
    if not exported.is_dir():
        print(f"{exported}: no such exported folder; give a folder export_runs.py wrote (DEST/<output's name>)",
              file=sys.stderr)
        return 2
    if output.is_symlink() or (output.exists() and not output.is_dir()):
        print(f"{output}: not a folder; give the sweep's --output folder", file=sys.stderr)
        return 2
    output.mkdir(parents=True, exist_ok=True)
    for run in sorted(p for p in exported.iterdir() if p.is_dir() and not p.is_symlink() and p.name != "sweep"):
        if (run / "run.json").is_file() and (run / "scores.parquet").is_dir():
            print(restore_run(run, output))
    if (exported / "sweep").is_dir() and not (exported / "sweep").is_symlink():
        for line in restore_sweep(exported / "sweep", output):
            print(line)
    return 0


def finished_cells(output: Path) -> list[Path]:
    """The run folders of ``output``'s sweep to export: the cells it recorded done or reused (training and every
    evaluation committed; a run whose evaluations still run waits for a later export) of the seeds its last look
    read (decision.json's; before the first look, the first round's; every seed for a sweep without rounds). A cell
    run ahead joins the export with the look that reads it, so a board shows the seeds its decision rests on (a row
    with a seed more than its baseline would be compared by Welch's t instead of paired by seed). Both records are
    read through their models: a damaged one is one line naming the file and the field."""
    from antlm_bench.data.readers import read_json_model
    from antlm_bench.sweep.decision_file import read_decision
    from antlm_bench.sweep.record import FINISHED, SweepFile

    folder = output / "sweep"
    record = read_json_model(folder / "sweep.json", SweepFile, "not a sweep record this version reads",
                             "export it with the antlm-bench that wrote it")
    decision = folder / "decision.json"
    if decision.is_file():
        looked: set[int] | None = set(read_decision(decision).seeds)
    else:
        looked = set(record.rounds[0]) if record.rounds else None
    return [output / cell.name for cell in record.cells
            if cell.status in FINISHED and (looked is None or cell.seed in looked)
            and (output / cell.name / "run.json").is_file()]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--finished"]:
        if len(argv) != 2:
            print("usage: export_runs.py --finished OUTPUT", file=sys.stderr)
            return 2
        from antlm_bench.errors import UserError

        try:
            for run in finished_cells(Path(argv[1])):
                print(run)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    if argv[:1] == ["--restore"]:
        if len(argv) != 3:
            print("usage: export_runs.py --restore EXPORTED OUTPUT", file=sys.stderr)
            return 2
        return restore(Path(argv[1]), Path(argv[2]))
    if len(argv) < 2:
        print("usage: export_runs.py DEST RUN [RUN ...]  |  export_runs.py --restore EXPORTED OUTPUT  |  "
              "export_runs.py --finished OUTPUT", file=sys.stderr)
        return 2
    dest = Path(argv[0])
    for run in map(Path, argv[1:]):
        if run.name == "sweep" and (run / "sweep.json").is_file():
            print(f"exported {export_sweep(run, dest)}")
            continue
        if not ((run / "run.json").is_file() and (run / "scores.parquet").is_dir()):
            print(f"{run}: not a run folder with results (run.json and scores.parquet/); skipped", file=sys.stderr)
            continue
        print(f"exported {export_run(run, dest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
