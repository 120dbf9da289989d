"""The bad-input corpus by class (issue #34): for each class of bad input, cases generated over every command that
takes that kind of input, so that the next instance of a class is caught here and not by a probe.

Classes (docs/errors.md lists them with their counts):

- paths: a path that is not what the command expects (an existing file as an output folder, a folder as an output
  or input file, a missing or dangling input file, a path under /proc or /sys), over every option that takes one;
- numbers: values the statistics must not swallow (out-of-range SDs and gaps, non-finite values in a baseline,
  NaN rows left off a board: said in a note);
- models: models that cannot be right (sizes below 1, hidden size not divisible by heads, a pickle weights file,
  a tokenizer larger than the embedding, NaN weights refused before heldout);
- sweep: inputs of a sweep (empty lists, line breaks in sbatch values, a sweep.json of the wrong shape, slurm
  without submitit);
- seeds: the one seeds grammar on every command that takes seeds (tests/test_options.py holds the grammar);
- leftovers: temporaries of a killed command removed by the next one, which says so.

CLI cases run through ``test_bad_inputs.run_case`` (exit code, one ``error:`` line, no traceback, nothing left
behind); the rest call the library where the CLI would need a trained model.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_bad_inputs import MINI_RUN, C, Case, _write, run_case, run_dir  # noqa: F401  (run_dir: a fixture)
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.errors import UserError

REPO = Path(__file__).resolve().parents[1]
MINI_RESULTS = REPO / "leaderboards" / "mini-antlm" / "results" / "babyllama"

# -- paths: every option of a kind x every way a path can be the wrong kind ------------------------------------------

# option id -> (args with {path}, the kind of path, fixtures needed)
PATH_OPTIONS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {
    "train--output": (("train", "-o", "{path}", "--max-steps", "1", "--no-progress"), "output_folder", ()),
    "train--cache-dir": (("train", "-o", "{tmp}/out", "--cache-dir", "{path}"), "output_folder", ()),
    "eval--output": (("eval", "--model", "{model}", "--tasks", "blimp", "--output", "{path}"), "output_folder",
                     ("model",)),
    "run--output": (("run", "--preset", "tiny", "--output", "{path}"), "output_folder", ()),
    "sweep--output": (("sweep", "--dry-run", "--preset", "tiny", "--output", "{path}"), "output_folder", ()),
    "data-fetch--dest": (("data", "fetch", "--url", "http://127.0.0.1:9/x.tar.gz", "--dest", "{path}"),
                         "output_folder", ()),
    "data-prepare--cache-dir": (("data", "prepare", "--corpus", "{tmp}", "--cache-dir", "{path}"),
                                "output_folder", ()),
    "export-OUT": (("export", "{tmp}/m", "{path}"), "output_folder", ()),
    "leaderboard--out": (("leaderboard", "{run}", "--out", "{path}"), "output_file", ("run",)),
    "check--markdown": (("check", "--results", "{run}", "--baseline", "{run}", "--markdown", "{path}"),
                        "output_file", ("run",)),
    "sweep--config": (("sweep", "--config", "{path}", "--dry-run"), "input_file", ()),
    "train--corpus": (("train", "-o", "{tmp}/out", "--corpus", "{path}"), "input_folder", ()),
    "run--corpus": (("run", "--preset", "tiny", "-o", "{tmp}/out", "--corpus", "{path}"), "input_folder", ()),
    "data-prepare--corpus": (("data", "prepare", "--corpus", "{path}", "--cache-dir", "{tmp}/cache"),
                             "input_folder", ()),
    "data-verify--manifest": (("data", "verify", "--data-dir", "{tmp}", "--manifest", "{path}"), "input_file", ()),
}


def _afile(t: Path) -> None:
    _write(t / "afile", "the user's file\n")


def _adir(t: Path) -> None:
    (t / "adir").mkdir()
    _write(t / "adir" / "keep.txt", "x")


def _dangling(t: Path) -> None:
    (t / "dangling").symlink_to(t / "nowhere")


# kind -> [(variant, path, setup, a piece of the line)]
BAD_PATHS = {
    "output_folder": [("an-existing-file", "{tmp}/afile", _afile, "a file, not a folder"),
                      ("under-proc", "/proc/self/antlm-bench-out", None, "under /proc"),
                      ("under-sys", "/sys/antlm-bench-out", None, "under /sys"),
                      ("under-dev", "/dev/antlm-bench-out", None, "under /dev")],
    "output_file": [("a-folder", "{tmp}/adir", _adir, "a folder, not a file"),
                    ("under-proc", "/proc/self/board.md", None, "under /proc")],
    "input_file": [("a-folder", "{tmp}/adir", _adir, "a folder, not a file"),
                   ("missing", "{tmp}/none.yaml", None, "no such file"),
                   ("dangling-link", "{tmp}/dangling", _dangling, "a link to nothing")],
    "input_folder": [("a-file", "{tmp}/afile", _afile, "a file, not a folder"),
                     ("missing", "{tmp}/none", None, "not a folder"),
                     ("dangling-link", "{tmp}/dangling", _dangling, "a link to nothing")],
}


def _path_cases() -> list[Case]:
    cases = []
    for option, (args, kind, needs) in PATH_OPTIONS.items():
        for variant, path, setup, says in BAD_PATHS[kind]:
            filled = tuple(a.replace("{path}", path) for a in args)
            cases.append(C(f"path-{option}-{variant}", *filled, says=says, setup=setup, needs=needs))
    return cases


# -- numbers, models, sweep inputs, seeds: through the CLI -----------------------------------------------------------

def _recipe(t: Path, text: str) -> None:
    _write(t / "spec" / "r.yaml", text)


# the shipped recipe, renamed, its tiny preset with 3 heads for 64 dimensions
BAD_HEADS = (REPO / "trainers" / "antlm-babyllama.yaml").read_text(encoding="utf-8").replace(
    "name: antlm-babyllama", "name: r", 1).replace("n_heads: 2,  hidden_size: 64,", "n_heads: 3,  hidden_size: 64,", 1)


def _sweep_file(text: str):
    return lambda t: _write(t / "s.yaml", text)


def _sweep_json(t: Path, payload: object) -> None:
    _write(t / "results" / "sweep" / "sweep.json", json.dumps(payload))


SWEEP_JSON_CELL = {"name": "c", "recipe": "antlm-babyllama", "preset": "tiny", "schedule": "1_CLM", "seed": 1,
                   "status": "done", "seconds": 1.0}
# a whole sweep.json but for the field a case damages (sweep.record.SweepFile)
SWEEP_JSON_BASE = {"asked": {}, "started_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:00+00:00",
                   "rounds": [], "history": [], "counts": {}, "cells": []}

OTHER_CASES: list[Case] = [
    # numbers the statistics must not swallow
    *[C(f"numbers-power-seed-sd-{v}", "power", "{run}", "--seed-sd", v, says="--seed-sd", needs=("run",))
      for v in ("inf", "1e308", "nan", "0", "-1", "101")],
    *[C(f"numbers-power-gap-{v}", "power", "{run}", "--gap", v, says="--gap", needs=("run",))
      for v in ("inf", "1e308", "nan", "0")],
    *[C(f"numbers-check-seed-sd-{v}", "check", "--results", "{run}", "--baseline", "{run}", "--seed-sd", v,
        says="--seed-sd", needs=("run",)) for v in ("inf", "1e308", "nan", "0")],
    *[C(f"numbers-plan-paired-sd-{v}", "plan", "-k", "2", "--paired-sd", v, says="--paired-sd")
      for v in ("inf", "1e308", "nan", "0", "-1", "101")],
    # models that cannot be right: a recipe that cannot build
    C("models-recipe-hidden-not-divisible-by-heads-train", "train", "--model", "r", "--include-path", "{tmp}/spec",
      "-o", "{tmp}/out", says="not divisible", setup=lambda t: _recipe(t, BAD_HEADS)),
    C("models-recipe-hidden-not-divisible-by-heads-schedule", "schedule", "1_CLM", "--model", "r", "--include-path",
      "{tmp}/spec", says="not divisible", setup=lambda t: _recipe(t, BAD_HEADS)),
    C("models-recipe-hidden-not-divisible-by-heads-list", "list", "models", "--include-path", "{tmp}/spec",
      says="not divisible", setup=lambda t: _recipe(t, BAD_HEADS)),
    # sweep inputs
    *[C(f"sweep-empty-{field}", "sweep", "--config", "{tmp}/s.yaml", "--dry-run", says=field,
        setup=_sweep_file(f"{field}: []\n")) for field in ("schedules", "models", "presets")],
    C("sweep-slurm-extra-newline", "sweep", "--config", "{tmp}/s.yaml", "--dry-run", "--executor", "slurm",
      says="one line", setup=_sweep_file("slurm: {extra: {account: \"proj\\n#SBATCH --qos=high\"}}\n")),
    C("sweep-slurm-partition-newline", "sweep", "--config", "{tmp}/s.yaml", "--dry-run", "--executor", "slurm",
      says="one line", setup=_sweep_file("slurm: {partition: \"gpu\\n#SBATCH --qos=high\"}\n")),
    # seeds: one grammar on every command that takes seeds
    *[C(f"seeds-{cmd}-{name}", *args, "--seeds", value, says=says, needs=needs)
      for cmd, args, needs in [("run", ("run", "--preset", "tiny", "-o", "{tmp}/out"), ()),
                               ("sweep", ("sweep", "--dry-run", "--preset", "tiny", "-o", "{tmp}/out"), ()),
                               ("eval", ("eval", "--model", "{model}", "--tasks", "glue:rte"), ("model",))]
      for name, value, says in [("absurd-range", "1-10000000", "more than 1000"), ("backwards", "3-1", "backwards"),
                                ("not-a-number", "1,x", "'x'"), ("negative", "-1", "'-1'"),
                                ("too-large", "4294967296", "seeds run from 0")]],
]


CASES = [*_path_cases(), *OTHER_CASES]


def test_corpus_ids_unique_and_classes_covered():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    classes = {i.split("-")[0] for i in ids}
    assert {"path", "numbers", "models", "sweep", "seeds"} <= classes
    # every path option meets every wrong kind of path of its kind
    assert len(_path_cases()) == sum(len(BAD_PATHS[kind]) for _, kind, _ in PATH_OPTIONS.values())


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_bad_input_by_class(case: Case, tmp_path, monkeypatch, request):
    run_case(case, tmp_path, monkeypatch, request)


@pytest.mark.parametrize(("change", "says"), [
    ({"cells": [{**SWEEP_JSON_CELL, "seconds": "abc"}]}, "cells.0.seconds"),
    ({"cells": [{**SWEEP_JSON_CELL, "seconds": -1}]}, "cells.0.seconds"),
    ({"history": "abc", "cells": []}, "history"),
    ({"history": ["abc"], "cells": []}, "history"),
    ({"cells": "abc"}, "cells"),
    ({"cells": [{"seconds": 1.0}]}, "cells.0"),
    ({"cells": [{**SWEEP_JSON_CELL, "where": 5}]}, "cells.0.where"),
])
def test_a_sweep_record_of_the_wrong_shape_is_one_line_and_kept(tmp_path, change, says):
    from antlm_bench.sweep import record

    payload = {"schema_version": record.SCHEMA_VERSION, **SWEEP_JSON_BASE, **change}
    _sweep_json(tmp_path, payload)
    before = (tmp_path / "results" / "sweep" / "sweep.json").read_bytes()
    with pytest.raises(UserError) as err:
        record.SweepRecord.continuing(record.SweepFolder(tmp_path / "results"), {})
    assert says in str(err.value) and "sweep.json" in str(err.value) and "\n" not in str(err.value)
    assert (tmp_path / "results" / "sweep" / "sweep.json").read_bytes() == before


def test_slurm_dry_run_without_submitit_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit -> ImportError
    monkeypatch.setitem(sys.modules, "submitit.slurm", None)
    monkeypatch.setitem(sys.modules, "submitit.slurm.slurm", None)
    result = CliRunner().invoke(app, ["sweep", "--dry-run", "--executor", "slurm", "--preset", "tiny", "--schedule",
                                      "1_CLM", "--seeds", "1"])
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1 and "submitit" in lines[0], result.output
    assert not isinstance(result.exception, ImportError)


def test_the_slurm_script_has_no_line_a_value_did_not_ask_for(tmp_path):
    from antlm_bench.sweep import SlurmSettings

    with pytest.raises(Exception) as err:
        SlurmSettings(extra={"account": "proj\n#SBATCH --qos=high"})
    assert "one line" in str(err.value)


# -- numbers: notes on the board, a baseline that is no number -------------------------------------------------------

def _results(change) -> object:
    from antlm_bench.results.leaderboard import read_results

    results = read_results([MINI_RESULTS])
    results.rows = [change(dict(row)) for row in results.rows]
    return results


def _nan_if(run_id: str, task: str | None = None, metric: str | None = None):
    def change(row: dict) -> dict:
        if row["run_id"] == run_id and (task is None or row["task"] == task) and (metric is None
                                                                                  or row["metric"] == metric):
            row["value"] = math.nan
        return row
    return change


def test_a_run_whose_values_are_all_nan_is_named_in_a_note():
    from antlm_bench.results.leaderboard import build_leaderboard

    run = "antlm-babyllama-tiny-24_CLM-seed1"
    board = build_leaderboard(_results(_nan_if(run)))
    assert run not in {r for row in board.rows for r in row.run_ids}
    assert any(run in note and "left off the board" in note for note in board.notes), board.notes


def test_one_seeds_nan_margins_are_named_in_a_note():
    from antlm_bench.results.leaderboard import build_leaderboard

    run = "antlm-babyllama-tiny-24_CLM-seed2"
    board = build_leaderboard(_results(_nan_if(run, "blimp", "margin")))
    assert any(run in note and "blimp margin" in note and "NaN" in note for note in board.notes), board.notes
    assert run in {r for row in board.rows for r in row.run_ids}  # its other values stay


def test_an_empty_results_store_is_a_note(tmp_path):
    from antlm_bench.results.leaderboard import read_results
    from antlm_bench.results.store import commit_results
    from antlm_bench.results.tables import SCORE_SCHEMA

    (tmp_path / "empty").mkdir()
    commit_results(tmp_path / "empty", SCORE_SCHEMA.empty_table())
    results = read_results([tmp_path / "empty", MINI_RUN])
    assert any("no score rows" in note for note in results.notes), results.notes


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("side", ["--baseline", "--results"])
def test_check_refuses_a_side_whose_value_is_no_number(monkeypatch, value, side, _linked_results):
    import antlm_bench.results.check as check
    from antlm_bench.results.leaderboard import read_results as real

    def read(paths, reader=None):
        results = real(paths, reader)
        if str(paths[0]).endswith("baseline") == (side == "--baseline"):
            for row in results.rows:
                if row["task"] == "heldout" and row["subtask"] == "":
                    row["value"] = value
        return results

    monkeypatch.setattr(check, "read_results", read)
    with pytest.raises(UserError) as err:
        check.run_check([_linked_results / "results"], [_linked_results / "baseline"])
    assert side in str(err.value) and "heldout" in str(err.value) and "no finite" in str(err.value)


@pytest.fixture()
def _linked_results(tmp_path):
    (tmp_path / "results").symlink_to(MINI_RESULTS)
    (tmp_path / "baseline").symlink_to(MINI_RESULTS)
    return tmp_path


# -- models that cannot be right --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    from tiny_models import save_tiny

    return save_tiny("llama", tmp_path_factory.mktemp("m") / "m")


def _copy_model(llama: Path, tmp_path: Path) -> Path:
    import shutil

    folder = tmp_path / "m"
    shutil.copytree(llama, folder)
    return folder


def _config(folder: Path, **fields) -> None:
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def _pickle_weights(folder: Path) -> None:
    import pickle

    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"x": os.system}))  # a pickle that is no tensors


def _nan_weights(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    save_file({k: torch.full_like(v, math.nan) for k, v in weights.items()}, folder / "model.safetensors",
              metadata={"format": "pt"})


def _big_tokenizer(folder: Path) -> None:
    _config(folder, vocab_size=8)  # the embedding (and the weights) keep their rows; transformers checks shapes
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    save_file({k: (v[:8] if v.shape and v.shape[0] > 8 and ("embed" in k or "lm_head" in k) else v)
               for k, v in weights.items()}, folder / "model.safetensors", metadata={"format": "pt"})


MODEL_DAMAGE = {
    "num-hidden-layers-minus-1": (lambda f: _config(f, num_hidden_layers=-1), "num_hidden_layers"),
    "num-attention-heads-0": (lambda f: _config(f, num_attention_heads=0), "num_attention_heads"),
    "hidden-not-divisible-by-heads": (lambda f: _config(f, num_attention_heads=7), "not divisible"),
    "pickle-weights": (_pickle_weights, "pickle"),
    "nan-weights": (_nan_weights, "NaN"),
    "tokenizer-beyond-embedding": (_big_tokenizer, "embedding"),
}


@pytest.mark.parametrize("task", ["blimp", "heldout"])
@pytest.mark.parametrize("damage", list(MODEL_DAMAGE))
def test_a_model_that_cannot_be_right_is_refused_before_scoring(llama, tmp_path, real_data_dir, damage, task):
    folder = _copy_model(llama, tmp_path)
    apply, says = MODEL_DAMAGE[damage]
    apply(folder)
    result = CliRunner().invoke(app, ["eval", "--model", str(folder), "--tasks", task, "--limit", "2",
                                      "--data-dir", str(real_data_dir), "--output", str(tmp_path / "out")])
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1, (result.output, result.exception)
    assert says in lines[0] and "Traceback" not in result.output, lines
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # loads lm-eval and a model in a child process: ~50 s; -m slow
def test_lm_eval_batch_tokens_not_a_number_is_one_line(llama):
    pytest.importorskip("lm_eval")
    done = subprocess.run([sys.executable, "-m", "antlm_bench.adapters.lm_eval", "--model", "antlm", "--model_args",
                           f"pretrained={llama},batch_tokens=abc", "--tasks", "antlm_blimp_filtered_adjunct_island",
                           "--include_path", str(REPO / "antlm_bench" / "lm_eval_tasks"), "--limit", "1"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)})
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(errors) == 1 and "batch_tokens=abc" in errors[0]


# -- leftovers: a killed command's temporaries, removed by the next run, which says so -------------------------------

def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_are_found_by_pid_and_by_age(tmp_path):
    from antlm_bench.data.files import STALE_AFTER_S, remove_stale, temporary_tag

    dead = _dead_pid()
    (tmp_path / f".out.tmp-p{dead}-abc").mkdir()
    (tmp_path / f".out.tmp-{temporary_tag()}-abc").mkdir()  # ours: alive
    (tmp_path / ".last.link-999999999").symlink_to("nowhere")
    old = tmp_path / ".out.tmp-old_abc"
    old.mkdir()
    os.utime(old, (time.time() - STALE_AFTER_S - 10,) * 2)
    (tmp_path / ".out.tmp-new_abc").mkdir()  # no pid, young: may be another command's
    (tmp_path / ".p2-0-x.tmp-new_abc").mkdir()  # digits in the name are no pid
    removed = {p.name for p in remove_stale(tmp_path, ".out.tmp-*")} | {
        p.name for p in remove_stale(tmp_path, ".last.link-*")}
    assert removed == {f".out.tmp-p{dead}-abc", ".last.link-999999999", ".out.tmp-old_abc"}
    assert not remove_stale(tmp_path, ".p2-0-x.tmp-*")
    assert {p.name for p in tmp_path.iterdir()} == {f".out.tmp-{temporary_tag()}-abc", ".out.tmp-new_abc",
                                                    ".p2-0-x.tmp-new_abc"}


def test_export_removes_a_killed_exports_staging_and_says_so(llama, tmp_path):
    dead = _dead_pid()
    stale = tmp_path / f".out.tmp-p{dead}-x1y2"
    stale.mkdir()
    (stale / "model").mkdir()
    result = CliRunner().invoke(app, ["export", str(llama), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert not stale.exists() and "stale" in result.output and stale.name in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_training_removes_a_half_made_last_link_and_says_so(tmp_path):
    from trainer_support import cli_args, tiny_config

    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM")
    (tmp_path / "run").mkdir()
    dead = _dead_pid()
    (tmp_path / "run" / f".last.link-{dead}").symlink_to(".resume/step-000000001")
    result = CliRunner().invoke(app, cli_args(config))
    assert result.exit_code == 0, result.output
    assert not os.path.lexists(tmp_path / "run" / f".last.link-{dead}")
    assert "stale" in result.output


def test_a_last_that_is_a_plain_file_is_refused_before_resume(tmp_path):
    from trainer_support import cli_args, tiny_config

    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM", resume=True)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "last").write_text("not a link\n")
    result = CliRunner().invoke(app, cli_args(config))
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1 and "plain file" in lines[0], result.output
    assert (tmp_path / "run" / "last").read_text() == "not a link\n"


def test_two_fetches_into_one_cache_do_not_share_the_part_file(tmp_path):
    """The second fetch is refused at once, naming the first one's pid, while the first holds the cache."""
    from antlm_bench.data.fetch import fetch
    from antlm_bench.locking import folder_lock

    downloads = tmp_path / ".downloads"
    downloads.mkdir()
    with folder_lock(downloads, "data fetch"):
        child = subprocess.run([sys.executable, "-c", "import sys; from antlm_bench.data.fetch import fetch; "
                                f"fetch('http://127.0.0.1:9/x.tar.gz', None, __import__('pathlib').Path({str(tmp_path / 'data')!r}))"],
                               capture_output=True, text=True, timeout=120,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.returncode != 0 and "another antlm-bench command" in child.stderr, child.stderr[-500:]
    assert fetch  # the library entry point the CLI calls


# -- other: eval into a run folder adds to its seed ------------------------------------------------------------------

def test_eval_into_a_run_folder_does_not_count_its_seed_twice(tmp_path, real_data_dir):
    from trainer_support import tiny_config

    from antlm_bench.results.leaderboard import build_leaderboard, read_results
    from antlm_bench.training.trainer import train

    run = tmp_path / "antlm-babyllama-tiny-0.25_CLM_0.25_MLM-seed3"  # as `run` names it: no '+' in a folder name
    train(tiny_config(tmp_path, run, schedule="0.25_CLM+0.25_MLM"))
    for _ in range(2):
        result = CliRunner().invoke(app, ["eval", "--model", str(run), "--tasks", "blimp", "--limit", "2",
                                          "--data-dir", str(real_data_dir), "--output", str(run)])
        assert result.exit_code == 0, result.output
    results = read_results([run])
    assert {row["run_id"] for row in results.rows} == {run.name}
    board = build_leaderboard(results)
    assert [len(row.run_ids) for row in board.rows] == [1]
    assert not any("more than once" in note for row in board.rows for note in row.notes)


def test_an_atomic_write_removes_its_killed_predecessors_temporary_and_says_so(tmp_path, capsys):
    from antlm_bench.data.files import atomic_write_bytes, temporary_tag

    dead = _dead_pid()
    target = tmp_path / "eval.json"
    (tmp_path / f".eval.json.tmp-p{dead}-abcd.tmp").write_text("half")
    (tmp_path / f".eval.json.tmp-{temporary_tag()}-live.tmp").write_text("ours, being written")
    (tmp_path / ".other.json.tmp-p1-x.tmp").write_text("another file's")
    atomic_write_bytes(target, b"{}\n")
    assert target.read_bytes() == b"{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f".eval.json.tmp-{temporary_tag()}-live.tmp", ".other.json.tmp-p1-x.tmp", "eval.json"]
    assert "stale" in capsys.readouterr().err
