"""``antlm-bench export CKPT --format babylm OUT``: the final model with tokenizer and code, words-seen
checkpoints as chck_<N>M folders, no optimizer state; the folder loads with transformers' Auto classes."""

from __future__ import annotations

import json
import os

import pytest
import torch
from checkpoint_support import damage_weights
from transformers import AutoModelForMaskedLM, AutoTokenizer
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.data.tokenizer import train_tokenizer
from antlm_bench.errors import UserError
from antlm_bench.export import export_babylm
from antlm_bench.models import ltgbert
from antlm_bench.runs.record import CheckpointRecord
from antlm_bench.training.checkpoint import write_checkpoint


def _record(step: int) -> CheckpointRecord:
    return CheckpointRecord(schedule="1_CLM+1_MLM", phase_index=1, phase_objective="MLM", step=step,
                            phases=({"index": 0, "objective": "CLM"}, {"index": 1, "objective": "MLM"}))


TEXT = ["the cat sat on the mat and the dog ran to the park with a ball"] * 20


def _run(tmp_path):
    """A run folder: two phase checkpoints (one a resume point with optimizer state) and two words-seen ones."""
    tokenizer = train_tokenizer(TEXT, vocab_size=300)
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id, "mask_token_id": tokenizer.mask_token_id}
    torch.manual_seed(0)
    config = ltgbert.make_config(vocab_size=300, hidden_size=32, n_layers=1, n_heads=2, intermediate_size=48,
                                 max_position_embeddings=64, position_bucket_size=8, tie_word_embeddings=True,
                                 dropout=0.0, **ids)
    model = ltgbert.LtgBertForMaskedLM(config).eval()
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"schedule": "1_CLM+1_MLM"}))  # its final checkpoint: phase-1-MLM
    for name, step in (("phase-0-CLM", 5), ("chck_10M", 8), ("chck_1M", 2), ("phase-1-MLM", 10)):
        with torch.no_grad():  # every checkpoint its own weights, as training gives them; the final one is `model`
            next(model.parameters()).add_(0.01)
        write_checkpoint(run / "checkpoints" / name, model, tokenizer, _record(step),
                         trainer_state={"step": step} if name == "phase-1-MLM" else None)
    return run, model


def test_export_babylm_layout_and_loading(tmp_path):
    run, model = _run(tmp_path)
    out = tmp_path / "submission"
    result = CliRunner().invoke(app, ["export", str(run), "--format", "babylm", str(out)])
    assert result.exit_code == 0, result.output
    # one sentence saying what was exported where (issue #55: it read "exported RUN is a run folder: its ...")
    assert result.output.splitlines()[0] == (f"exported the final checkpoint of the run {run} "
                                             f"(checkpoints/phase-1-MLM) to {out}")
    assert "chck_1M, chck_10M" in result.output
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "modeling_ltgbert.py", "chck_1M", "chck_10M"} <= names
    assert "trainer_state.pt" not in names and json.loads((out / "antlm_state.json").read_text())["step"] == 10
    for folder in (out, out / "chck_1M"):
        assert (folder / "modeling_ltgbert.py").is_file() and "auto_map" in json.loads((folder / "config.json").read_text())
    loaded = AutoModelForMaskedLM.from_pretrained(out, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    ids = tokenizer("the cat sat", return_tensors="pt").input_ids
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, model(ids).logits)


def test_export_refuses_existing_output_and_non_models(tmp_path):
    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    export_babylm(run / "checkpoints" / "phase-0-CLM", out)
    with pytest.raises(UserError, match="already exists"):
        export_babylm(run, out)
    assert export_babylm(run, out, overwrite=True).source.name == "phase-1-MLM"
    with pytest.raises(UserError, match="neither a model folder"):
        export_babylm(tmp_path / "nothing", tmp_path / "out2")
    result = CliRunner().invoke(app, ["export", str(run), "--format", "zip", str(tmp_path / "out3")])
    assert result.exit_code == 2 and "unknown" in result.output


# -- what an export passes on: only code antlm-bench generates, only weights eval would load -----------------------

PLANTED = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


def _plant_code(folder, marker):
    """The checkpoint's modeling file replaced, and an evil.py named by auto_map, each writing ``marker`` if run."""
    (folder / "modeling_ltgbert.py").write_text(PLANTED.format(marker=str(marker)) + (
        folder / "modeling_ltgbert.py").read_text())
    (folder / "evil.py").write_text(PLANTED.format(marker=str(marker)))
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoModelForMaskedLM": "evil.EvilModel",
                          "AutoModelForCausalLM": "modeling_ltgbert.LtgBertForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))


def test_export_never_passes_on_a_checkpoints_own_code(tmp_path):
    """A replaced modeling_ltgbert.py and an auto_map naming evil.py: the export holds only generated code, and
    loading it as the BabyLM pipeline does (trust_remote_code=True) runs none of the planted code."""
    from antlm_bench.models.backend import backend_of

    run, model = _run(tmp_path)
    marker = tmp_path / "planted-code-ran"
    for name in ("phase-1-MLM", "chck_1M"):
        _plant_code(run / "checkpoints" / name, marker)
    out = tmp_path / "laundry_check"
    export_babylm(run, out)
    generated, auto_map = backend_of(model.config).remote_code(model.config)
    for folder in (out, out / "chck_1M"):
        assert sorted(p.name for p in folder.glob("*.py")) == sorted(generated)
        assert all((folder / name).read_text() == text for name, text in generated.items())
        assert json.loads((folder / "config.json").read_text())["auto_map"] == auto_map
    loaded = AutoModelForMaskedLM.from_pretrained(out, trust_remote_code=True).eval()
    assert not marker.exists()
    ids = torch.tensor([[1, 5, 7, 9]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, model(ids).logits)


def test_export_refuses_foreign_auto_map_on_a_stock_model(tmp_path, llama_dir):
    import shutil

    source = tmp_path / "llama"
    shutil.copytree(llama_dir, source)
    (source / "evil.py").write_text("raise SystemExit('planted')\n")
    config = json.loads((source / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "evil.Evil"}
    (source / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["export", str(source), str(tmp_path / "out")])
    assert result.exit_code == 2 and "evil.py" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    del config["auto_map"]
    (source / "config.json").write_text(json.dumps(config))
    settings = json.loads((source / "tokenizer_config.json").read_text())
    settings["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    (source / "tokenizer_config.json").write_text(json.dumps(settings))
    with pytest.raises(UserError, match="tokenizer_config.json: auto_map .*evil.py"):
        export_babylm(source, tmp_path / "out")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith((".out", "out"))] == []


@pytest.mark.parametrize(("how", "says"), [("truncated", "truncated or corrupt"), ("nan", "NaN"),
                                           ("half-written", "lacks")])
def test_export_refuses_weights_eval_refuses(tmp_path, llama_dir, how, says):
    import shutil

    source = tmp_path / "m"
    shutil.copytree(llama_dir, source)
    damage_weights(source, how)
    result = CliRunner().invoke(app, ["export", str(source), str(tmp_path / "out")])
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no OUT, no staging left


# -- what --overwrite may replace: an earlier export, never the source ------------------------------------------------


def _tree(folder):
    return sorted((str(p.relative_to(folder)), p.lstat().st_size) for p in folder.rglob("*"))


def test_export_into_its_own_run_is_refused_and_the_run_is_kept(tmp_path):
    run, model = _run(tmp_path)
    write_checkpoint(run / ".resume" / "step-10", model, train_tokenizer(TEXT, vocab_size=300), _record(10))
    (run / "last").symlink_to(".resume/step-10")
    before = _tree(run)
    for source, out in [(run / "checkpoints" / "phase-1-MLM", run), (run, run / "checkpoints"),
                        (run, run / "exported"), (run / "checkpoints" / "phase-0-CLM", run / "checkpoints"),
                        (run, run / "last"), (run / "last", run), (run / "last", run / "last")]:
        result = CliRunner().invoke(app, ["export", str(source), str(out), "--overwrite"])
        assert result.exit_code == 2, (source, out, result.output)
        assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("error:"), result.output
        assert _tree(run) == before, (source, out)


def test_overwrite_replaces_only_an_earlier_export(tmp_path):
    run, _ = _run(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    result = CliRunner().invoke(app, ["export", str(run), str(mine), "--overwrite"])
    assert result.exit_code == 2 and "not an earlier antlm-bench export" in result.output
    assert (mine / "notes.txt").read_text() == "keep me"
    # without --overwrite the refusal does not suggest an option that would refuse too
    result = CliRunner().invoke(app, ["export", str(run), str(mine)])
    assert result.exit_code == 2 and "not an earlier antlm-bench export" in result.output
    assert "pass --overwrite" not in result.output
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "data.txt").write_text("precious")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    result = CliRunner().invoke(app, ["export", str(run), str(tmp_path / "link"), "--overwrite"])
    assert result.exit_code == 2 and "symbolic link" in result.output
    assert (tmp_path / "elsewhere" / "data.txt").read_text() == "precious" and (tmp_path / "link").is_symlink()
    out = tmp_path / "out"
    export_babylm(run / "checkpoints" / "phase-0-CLM", out)
    assert json.loads((out / "antlm_export.json").read_text())["source"].endswith("phase-0-CLM")
    export_babylm(run, out, overwrite=True)
    assert json.loads((out / "antlm_export.json").read_text())["source"].endswith("phase-1-MLM")
    old_mask = os.umask(0o022)
    try:  # every file as a new file under the usual umask: the weights too (a private temporary file left 0600)
        export_babylm(run, out, overwrite=True)
    finally:
        os.umask(old_mask)
    assert {oct(p.stat().st_mode & 0o777) for p in out.rglob("*") if p.is_file()} == {"0o644"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "link", "mine", "out", "run"]


def test_a_run_that_stopped_early_exports_its_resume_point_named_in_the_output(tmp_path):
    run, model = _run(tmp_path)
    (run / "run.json").write_text(json.dumps({"schedule": "1_CLM+1_MLM+1_CLM"}))  # phase-2 never saved
    write_checkpoint(run / ".resume" / "step-12", model, train_tokenizer(TEXT, vocab_size=300), _record(12))
    (run / "last").symlink_to(".resume/step-12")
    result = CliRunner().invoke(app, ["export", str(run), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert f"exported the resume point last of the run {run}, which did not finish (step-12) to" in result.output
    assert json.loads((tmp_path / "out" / "antlm_state.json").read_text())["step"] == 12


def test_an_export_killed_before_its_rename_leaves_the_earlier_export_whole(tmp_path):
    """Fault injection: killed (like kill -9) with the new export staged, OUT is still the earlier export, whole."""
    import os
    import subprocess
    import sys

    from antlm_bench.locking import FAULT_ENV, FAULT_EXIT_CODE, LOCK_FILE

    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    export_babylm(run / "checkpoints" / "phase-0-CLM", out)
    before = sorted((str(p.relative_to(out)), p.read_bytes()) for p in out.rglob("*") if p.is_file())
    done = subprocess.run([sys.executable, "-m", "antlm_bench", "export", str(run), str(out), "--overwrite"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, FAULT_ENV: "export.staged", "OMP_NUM_THREADS": "1"})
    assert done.returncode == FAULT_EXIT_CODE, done.stderr
    # OUT as it was, but for the lock file the killed export held (its flock died with it: the next export takes it)
    after = sorted((str(p.relative_to(out)), p.read_bytes()) for p in out.rglob("*") if p.is_file())
    assert [entry for entry in after if entry[0] != LOCK_FILE] == before
    assert list(tmp_path.glob(".out.tmp-*"))  # what the killed export left
    result = export_babylm(run, out, overwrite=True)  # and the next export goes through, clearing it
    assert json.loads((out / "antlm_export.json").read_text())["source"].endswith("phase-1-MLM")
    assert not list(tmp_path.glob(".out.tmp-*")) and any("stale temporar" in note for note in result.notes)


def _overwrite_weights(source, target) -> None:
    (target / "model.safetensors").write_bytes((source / "model.safetensors").read_bytes())


def test_export_records_every_revisions_weights_hash(tmp_path):
    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    export_babylm(run, out)
    manifest = json.loads((out / "antlm_export.json").read_text())
    revisions = {r["name"]: r for r in manifest["revisions"]}
    assert list(revisions) == ["main", "chck_1M", "chck_10M"]
    assert len({r["weights_sha256"] for r in revisions.values()}) == 3
    assert (revisions["chck_1M"]["step"], revisions["chck_1M"]["words"]) == (2, 1_000_000)


def test_export_refuses_two_revisions_with_the_same_weights(tmp_path):
    run, _ = _run(tmp_path)
    _overwrite_weights(run / "checkpoints" / "chck_1M", run / "checkpoints" / "chck_10M")
    with pytest.raises(UserError, match=r"chck_10M .* same weights as revision chck_1M"):
        export_babylm(run, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_revision_identical_to_the_final_model(tmp_path):
    run, _ = _run(tmp_path)
    _overwrite_weights(run / "checkpoints" / "phase-1-MLM", run / "checkpoints" / "chck_1M")
    result = CliRunner().invoke(app, ["export", str(run), "--format", "babylm", str(tmp_path / "out")])
    assert result.exit_code == 2 and "chck_1M" in result.output and "the final model main" in result.output
    assert not (tmp_path / "out").exists()


def test_export_refuses_words_checkpoints_out_of_order(tmp_path):
    run, model = _run(tmp_path)
    tokenizer = train_tokenizer(TEXT, vocab_size=300)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    write_checkpoint(run / "checkpoints" / "chck_10M", model, tokenizer, _record(1))  # 10M words at step 1 < 2
    with pytest.raises(UserError, match=r"chck_10M .* step 1, not after chck_1M .* step 2"):
        export_babylm(run, tmp_path / "out")


def test_export_says_which_names_the_babylm_pipeline_will_not_read(tmp_path):
    run, model = _run(tmp_path)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    write_checkpoint(run / "checkpoints" / "chck_500K", model, train_tokenizer(TEXT, vocab_size=300), _record(1))
    result = CliRunner().invoke(app, ["export", str(run), "--format", "babylm", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "note: chck_500K: not a whole number of millions" in result.output
    assert (tmp_path / "out" / "chck_500K" / "model.safetensors").is_file()


def test_an_earlier_checkpoint_exports_only_the_branches_saved_before_it(tmp_path):
    run, _ = _run(tmp_path)
    result = export_babylm(run / "checkpoints" / "phase-0-CLM", tmp_path / "out")  # step 5: chck_1M (2) only
    assert result.branches == ["chck_1M"] and "chck_10M: saved after phase-0-CLM (step 5); left out" in result.notes


# -- records that cannot lie: the export's weights are verified before scoring; --overwrite proves its own output ---


def _tamper(folder) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 0.5
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def test_the_export_record_is_typed_and_names_each_revisions_weights_digest(tmp_path):
    from antlm_bench.runs.export_record import read_export_record, verify_export
    from antlm_bench.runs.identity import weights_digest

    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    export_babylm(run, out)
    record = read_export_record(out)
    assert record.schema_version == 3 and [r.name for r in record.revisions] == ["main", "chck_1M", "chck_10M"]
    assert record.revision("chck_1M").weights_sha256 == weights_digest(out / "chck_1M")
    assert "verified" in verify_export(out / "chck_1M") and verify_export(run) is None
    # the copied record names the weights this folder holds, so eval's own check agrees with the export's
    assert json.loads((out / "antlm_state.json").read_text())["weights_digest"] == weights_digest(out)
    for edit, field in (({"revisions": "all"}, "revisions"), ({"schema_version": None}, "schema_version")):
        document = {**json.loads((out / "antlm_export.json").read_text()), **edit}
        (out / "antlm_export.json").write_text(json.dumps(document))
        with pytest.raises(UserError, match=rf"antlm_export.json: field {field}"):
            read_export_record(out)


def test_a_tampered_export_is_refused_before_scoring_and_a_skipped_check_is_said(tmp_path, real_data_dir):
    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    export_babylm(run, out)
    _tamper(out / "chck_1M")
    args = ["eval", "--model", str(out / "chck_1M"), "--tasks", "blimp", "--limit", "1", "--data-dir",
            str(real_data_dir), "--quiet"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "chck_1M: weights changed after the export" in result.output and "--skip-export-check" in result.output
    result = CliRunner().invoke(app, [*args, "--skip-export-check"])
    assert result.exit_code == 0, result.output
    assert "weights were NOT verified" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["eval", "--model", str(out), "--tasks", "blimp", "--limit", "1", "--data-dir",
                                      str(real_data_dir), "--quiet"])
    assert result.exit_code == 0 and "export revision main verified" in " ".join(result.output.split())


def test_overwrite_deletes_nothing_it_cannot_prove_it_wrote(tmp_path):
    """A run folder holding an (empty) antlm_export.json, an export with changed weights, an export with a folder
    beside its revisions: --overwrite refuses each in one line and deletes nothing."""
    import shutil

    run, _ = _run(tmp_path)
    other = tmp_path / "other-run"
    shutil.copytree(run, other)
    (other / "antlm_export.json").write_text("")
    before = _tree(other)
    result = CliRunner().invoke(app, ["export", str(run), str(other), "--overwrite"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "a training run folder" in result.output and _tree(other) == before
    (other / "run.json").unlink()
    shutil.rmtree(other / "checkpoints")
    result = CliRunner().invoke(app, ["export", str(run), str(other), "--overwrite"])
    assert result.exit_code == 2 and "antlm_export.json" in result.output and (other / "antlm_export.json").exists()
    out = tmp_path / "out"
    export_babylm(run, out)
    _tamper(out)
    with pytest.raises(UserError, match="weights changed after the export.*--overwrite replaces only"):
        export_babylm(run, out, overwrite=True)
    export_babylm(run, tmp_path / "out2")
    (tmp_path / "out2" / "mine").mkdir()
    with pytest.raises(UserError, match="out2/mine: a folder that the export's antlm_export.json does not name"):
        export_babylm(run, tmp_path / "out2", overwrite=True)
    assert (tmp_path / "out2" / "mine").is_dir()


def test_a_killed_exports_staging_folder_is_removed_by_the_next_export(tmp_path):
    import os

    run, _ = _run(tmp_path)
    dead = tmp_path / ".out.tmp-p999999999-abc"  # data.files.temporary_tag names the writer
    (dead / "model").mkdir(parents=True)
    live = tmp_path / f".out.tmp-p{os.getppid()}-xyz"  # a running process's: kept
    live.mkdir()
    result = CliRunner().invoke(app, ["export", str(run), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert not dead.exists() and live.is_dir()
    assert "stale temporar" in result.output and dead.name in "".join(result.output.split())


def test_an_export_is_verified_whole_config_tokenizer_and_every_file(tmp_path):
    """Not only the weights: an edited config.json or tokenizer.json, a file gone or a file added after the export
    is refused in one line naming it (what eval checks before scoring, and --overwrite before deleting)."""
    from antlm_bench.runs.export_record import verify_export

    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    export_babylm(run, out)
    assert "verified whole" in verify_export(out)

    def edited(path, change):
        before = path.read_bytes()
        change(path)
        with pytest.raises(UserError) as caught:
            verify_export(path.parent)
        path.write_bytes(before)
        return str(caught.value)

    config = out / "chck_1M" / "config.json"
    message = edited(config, lambda p: p.write_text(p.read_text().replace('"hidden_size": 32', '"hidden_size": 33')))
    assert "chck_1M/config.json: changed after the export" in message and "--skip-export-check" in message
    tokenizer = out / "tokenizer.json"
    message = edited(tokenizer, lambda p: p.write_text(p.read_text().replace('"cat"', '"dog"', 1)))
    assert "out/tokenizer.json: changed after the export" in message
    assert "verified whole" in verify_export(out)  # restored: whole again
    (out / "chck_10M" / "extra.py").write_text("print('not exported')\n")
    with pytest.raises(UserError, match="chck_10M/extra.py: not part of revision chck_10M"):
        verify_export(out / "chck_10M")
    (out / "chck_10M" / "extra.py").unlink()
    (out / "tokenizer_config.json").unlink()
    with pytest.raises(UserError, match="tokenizer_config.json: missing, though antlm_export.json records it"):
        verify_export(out)
    os.mkfifo(out / "tokenizer_config.json")  # a FIFO in its place: refused, not read (it would hang)
    with pytest.raises(UserError, match="tokenizer_config.json: not a regular file in an export revision"):
        verify_export(out)


def test_a_second_export_into_a_folder_being_exported_is_refused_and_changes_nothing(tmp_path):
    """Two exports into one OUT at once: the second is refused at once, naming the first one's pid (the folder's
    lock, as train and eval take it), instead of both saying "exported" and one being lost."""
    import fcntl

    from antlm_bench.locking import LOCK_FILE

    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a first export holds while it writes (another open file: no re-entry)
        os.write(fd, b"4242 export\n")
        result = CliRunner().invoke(app, ["export", str(run), str(out)])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        assert "pid 4242" in result.output and "give `export` another output folder" in result.output
        assert [p.name for p in out.iterdir()] == [LOCK_FILE] and not list(tmp_path.glob(".out.tmp-*"))
    finally:
        os.close(fd)
    export_babylm(run, out)  # the first gone, OUT (holding only the lock it left) is exported into
    assert (out / "antlm_export.json").is_file()
