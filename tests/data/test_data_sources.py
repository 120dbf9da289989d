"""``antlm-bench data fetch NAME``: the registry of pinned files, fetched from a loopback mirror that serves the
shared data's bytes under the upstream paths (127.0.0.1 only, in a thread, stopping itself). EWoK's members are
only ever held in memory here and on the fetched side kept inside a password zip."""

from __future__ import annotations

import csv
import zipfile

import pytest
from loopback_http import Server, upstream_files
from typer.testing import CliRunner

from antlm_bench import data
from antlm_bench.cli import app
from antlm_bench.data.sources import (
    fetch_sources,
    git_blob_sha1,
    load_registry,
    password_zip,
    resolve_names,
)
from antlm_bench.errors import UserError


@pytest.fixture(scope="module")
def mirror_files(real_data_dir):
    return upstream_files(real_data_dir)


def test_registry_covers_provenance_with_matching_checksums(real_data_dir, mirror_files):
    rows = list(csv.DictReader((real_data_dir / "PROVENANCE.tsv").open(encoding="utf-8"), delimiter="\t"))
    registry = {(f.repo, f.commit, f.path): f for f in load_registry()}
    for row in rows:
        if row["file"].startswith("pretrain_sample/") and "switchboard" in row["source_path"]:
            continue  # left out on purpose (see data_sources.py)
        item = registry[(row["source_repo"], row["source_commit"], row["source_path"])]
        assert item.checksum == "git-blob-sha1:" + row["source_git_blob_sha1"]
    served = [f for f in load_registry() if not f.dest.startswith("pretrain_sample/")]
    assert len(served) == len(mirror_files)
    for item in served:  # every rebuilt upstream file hashes to its pinned blob
        assert item.matches(mirror_files[f"/{item.repo}/{item.commit}/{item.path}"]), item.dest
    assert {f.source for f in load_registry()} >= {"blimp", "blimp_supplement", "ewok", "glue", "pretrain"}


def test_fetch_from_a_loopback_mirror_then_evaluate(real_data_dir, mirror_files, tmp_path, llama_dir):
    dest = tmp_path / "data"
    with Server(b"", name="unused", paths=mirror_files, lifetime_s=240) as server:
        result = CliRunner().invoke(app, ["data", "fetch", "babylm-eval", "--mirror", server.base,
                                          "--dest", str(dest)])
        assert result.exit_code == 0, result.output
        assert "fetched: blimp, blimp_supplement, ewok, glue" in result.output
        assert len(server.paths) == 67 + 5 + 11 + 12 and all(p.startswith("/suchirsalhan/") or
                                                             p.startswith("/moritzlad/") for p in server.paths)
        # a second fetch finds everything verified and downloads nothing
        again = CliRunner().invoke(app, ["data", "fetch", "blimp", "ewok", "--mirror", server.base,
                                         "--dest", str(dest)])
        assert again.exit_code == 0 and "already there: blimp, ewok" in again.output
        assert len(server.paths) == 95
    ok, problems = data.verify_manifest(dest)
    assert problems == [] and len(ok) == 67 + 5 + 1 + 12
    assert len(list((dest / "blimp_filtered").glob("*.jsonl"))) == 67
    assert not (dest / "ewok_filtered").exists()  # no plain-text EWoK anywhere
    with zipfile.ZipFile(dest / "ewok_filtered.zip") as ewok:
        members = [i for i in ewok.infolist() if not i.is_dir()]
        assert len(members) == 11 and all(i.flag_bits & 1 for i in members)  # every member encrypted
        with zipfile.ZipFile(real_data_dir / "ewok_filtered.zip") as shared:
            for info in members:
                assert ewok.read(info.filename, pwd=b"ewok") == shared.read(info.filename, pwd=b"ewok")
        with pytest.raises(RuntimeError):
            ewok.read(members[0].filename)  # no password, no text
    from antlm_bench.evaluate import evaluate

    out = evaluate(str(llama_dir), "blimp,blimp_supplement,ewok", limit=2, data_dir=dest, progress=False)
    tasks = {row["task"] for row in out.scores.to_pylist() if row["subtask"] == ""}
    assert tasks == {"blimp", "blimp_supplement", "ewok"}
    assert out.run["data"]["blimp"]["sha256"]


def test_a_changed_file_on_the_mirror_is_refused_and_not_kept(mirror_files, tmp_path):
    files = dict(mirror_files)
    victim = next(f for f in load_registry() if f.source == "blimp_supplement")
    key = f"/{victim.repo}/{victim.commit}/{victim.path}"
    files[key] = files[key].replace(b"the", b"teh", 1)
    with Server(b"", name="unused", paths=files) as server:
        with pytest.raises(UserError, match=r"git-blob-sha1 [0-9a-f]{40} != pinned [0-9a-f]{40}") as err:
            fetch_sources(["blimp_supplement"], tmp_path / "d", server.base, progress=None)
    assert key in str(err.value)
    assert not (tmp_path / "d" / victim.dest).exists()


def test_missing_file_and_unknown_names_are_one_line(tmp_path):
    with Server(b"", name="unused", paths={}) as server:
        result = CliRunner().invoke(app, ["data", "fetch", "glue", "--mirror", server.base, "--dest",
                                          str(tmp_path / "d")])
    assert result.exit_code == 2 and "HTTP 404" in result.output
    assert [line for line in result.output.splitlines() if line.startswith("error:")] == [
        result.output.strip().splitlines()[-1]]
    assert not (tmp_path / "d").exists()  # a failed first fetch leaves no empty folder behind
    result = CliRunner().invoke(app, ["data", "fetch", "blimpp"])
    assert result.exit_code == 2 and "unknown source" in result.output and "babylm-eval" in result.output
    result = CliRunner().invoke(app, ["data", "fetch"])
    assert result.exit_code == 2 and "data fetch babylm" in result.output
    with pytest.raises(UserError, match="not an http"):
        fetch_sources(["blimp"], tmp_path / "d", "ftp://example.org", progress=None)
    assert resolve_names(["babylm-eval", "blimp"], load_registry()) == ["blimp", "blimp_supplement", "ewok", "glue"]


def test_password_zip_round_trip_and_blob_hash(tmp_path):
    assert git_blob_sha1(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git hash-object /dev/null
    assert git_blob_sha1(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    members = [("d/a.jsonl", b'{"x": 1}\n' * 100), ("d/b.jsonl", b"")]
    payload = password_zip(members, b"pw")
    assert payload == password_zip(members, b"pw")  # deterministic
    (tmp_path / "z.zip").write_bytes(payload)
    with zipfile.ZipFile(tmp_path / "z.zip") as archive:
        assert archive.testzip is not None
        assert archive.read("d/a.jsonl", pwd=b"pw") == members[0][1]
        assert archive.read("d/b.jsonl", pwd=b"pw") == b""
        with pytest.raises(RuntimeError):
            archive.read("d/a.jsonl", pwd=b"wrong")


def test_sources_command_lists_groups_and_pins():
    result = CliRunner().invoke(app, ["data", "sources"])
    assert result.exit_code == 0
    assert "babylm-eval" in result.output and "suchirsalhan/babylm-evaluation-2025@bb41f0f0" in result.output
