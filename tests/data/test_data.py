"""Data folder resolution, readers, hashes, manifests, and ``data fetch`` against a loopback HTTP server of our own."""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from loopback_http import Server

from antlm_bench import data
from antlm_bench.errors import UserError

# -- resolution -------------------------------------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def test_explicit_folder_wins_then_env_then_cache(clean_env, monkeypatch):
    explicit, env = clean_env / "explicit", clean_env / "env"
    explicit.mkdir()
    env.mkdir()
    monkeypatch.setenv(data.DATA_ENV_VAR, str(env))
    assert data.resolve_data_dir(explicit) == explicit
    assert data.resolve_data_dir() == env
    monkeypatch.delenv(data.DATA_ENV_VAR)
    cache = data.default_cache_dir()
    cache.mkdir(parents=True)
    (cache / "blimp_filtered").mkdir()
    assert data.resolve_data_dir() == cache


def test_no_data_names_every_place_tried_and_what_to_do(clean_env, monkeypatch):
    monkeypatch.setenv(data.DATA_ENV_VAR, str(clean_env / "missing"))
    with pytest.raises(UserError) as err:
        data.resolve_data_dir()
    message = str(err.value)
    assert str(clean_env / "missing") in message and str(data.default_cache_dir()) in message
    assert "--data-dir" in message and "data fetch" in message
    with pytest.raises(UserError, match="not a folder"):
        data.resolve_data_dir(clean_env / "nope")


# -- readers ----------------------------------------------------------------------------------------------------------


def test_jsonl_and_xz_read_alike_and_blank_lines_are_skipped(tmp_path):
    text = '{"a": 1}\n\n{"a": 2}\n'
    (tmp_path / "x.jsonl").write_text(text)
    with lzma.open(tmp_path / "x.jsonl.xz", "wt") as handle:
        handle.write(text)
    assert data.read_jsonl(tmp_path / "x.jsonl") == data.read_jsonl(tmp_path / "x.jsonl.xz") == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(("line", "message"), [('{"a": ', "not valid JSON"), ("[1, 2]", "expected a JSON object")])
def test_bad_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n\n' + line + "\n")
    with pytest.raises(UserError, match=rf"{path}:3: {message}"):
        data.read_jsonl(path)


def test_corrupt_or_missing_files_are_user_errors(tmp_path):
    (tmp_path / "c.jsonl.xz").write_bytes(b"not xz at all")
    with pytest.raises(UserError, match="corrupt"):
        data.read_jsonl(tmp_path / "c.jsonl.xz")
    with pytest.raises(UserError, match="not found"):
        data.read_jsonl(tmp_path / "none.jsonl")


def test_zip_members_are_read_in_memory(tmp_path):
    path = tmp_path / "z.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("set/one.jsonl", '{"k": 1}\n')
        archive.writestr("set/two.jsonl", '{"k": 2}\n{"k": \n')
        archive.writestr("other/three.jsonl", "{}\n")
    assert data.list_zip_members(path, "set") == ["set/one.jsonl", "set/two.jsonl"]
    assert data.read_zip_jsonl(path, "set/one.jsonl", None) == [{"k": 1}]
    with pytest.raises(UserError, match=r"z\.zip!set/two\.jsonl:2"):
        data.read_zip_jsonl(path, "set/two.jsonl", None)
    with pytest.raises(UserError, match="no member"):
        data.read_zip_jsonl(path, "set/none.jsonl", None)
    before = sorted(p.name for p in tmp_path.iterdir())
    data.read_zip_jsonl(path, "set/one.jsonl", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing unpacked


def test_wrong_password_is_a_user_error(real_data_dir):
    zip_path = real_data_dir / "ewok_filtered.zip"
    member = data.list_zip_members(zip_path, "ewok_filtered")[0]
    with pytest.raises(UserError, match="password"):
        data.read_zip_jsonl(zip_path, member, "not-the-password")


# -- hashes and manifests ---------------------------------------------------------------------------------------------


def test_hash_files_is_order_independent_and_sees_names_and_contents(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one")
    b.write_text("two")
    assert data.hash_files([a, b]) == data.hash_files([b, a])
    before = data.hash_files([a, b])
    b.write_text("TWO")
    assert data.hash_files([a, b]) != before
    c = tmp_path / "c.txt"
    c.write_text("TWO")
    assert data.hash_files([a, c]) != data.hash_files([a, b])  # same bytes, other name
    assert data.sha256_file(a) == hashlib.sha256(b"one").hexdigest()


def test_manifest_reports_ok_missing_and_mismatch(tmp_path):
    (tmp_path / "good.txt").write_text("good")
    (tmp_path / "changed.txt").write_text("changed")
    digest = hashlib.sha256
    (tmp_path / "MANIFEST.sha256").write_text(
        f"{digest(b'good').hexdigest()}  good.txt\n"
        f"{digest(b'original').hexdigest()}  changed.txt\n"
        f"{digest(b'x').hexdigest()}  gone.txt\n"
    )
    ok, problems = data.verify_manifest(tmp_path)
    assert ok == ["good.txt"] and sorted(problems) == ["changed.txt: sha256 mismatch", "gone.txt: missing"]
    (tmp_path / "MANIFEST.sha256").write_text("short  good.txt\n")
    with pytest.raises(UserError, match=r"MANIFEST\.sha256:1"):
        data.verify_manifest(tmp_path)


def test_real_manifest_verifies(real_data_dir):
    ok, problems = data.verify_manifest(real_data_dir)
    assert problems == [] and len(ok) >= 97


def test_atomic_write_leaves_no_temp_on_failure(tmp_path, monkeypatch):
    data.atomic_write_bytes(tmp_path / "f.bin", b"first")

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        data.atomic_write_bytes(tmp_path / "f.bin", b"second")
    assert (tmp_path / "f.bin").read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


# -- fetch ------------------------------------------------------------------------------------------------------------


def _tar_gz(files: dict[str, bytes], top: str = "data") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, payload in files.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


FILES = {"blimp_filtered/a.jsonl": b'{"sentence_good": "x"}\n' * 2000, "README.md": b"hello\n"}


def _sha(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_fetch_unpacks_the_single_top_folder_and_verifies(tmp_path):
    payload = _tar_gz(FILES)
    with Server(payload) as server:
        dest = data.fetch(server.url, _sha(payload), tmp_path / "data", timeout=10)
    assert _tree(dest) == FILES


def test_interrupted_fetch_resumes_where_it_stopped(tmp_path):
    payload = _tar_gz(FILES)
    cut = len(payload) // 2
    with Server(payload, cut_first_after=cut) as server:
        with pytest.raises(UserError, match="again to resume"):
            data.fetch(server.url, _sha(payload), tmp_path / "data", timeout=10)
        [part] = (tmp_path / ".downloads").glob("*-data.tar.gz.part")
        assert part.stat().st_size == cut and not (tmp_path / "data").exists()
        dest = data.fetch(server.url, _sha(payload), tmp_path / "data", timeout=10)
        assert server.requests == [None, f"bytes={cut}-"]  # the second request asked only for the rest
        assert server.if_ranges == [None, Server.etag(payload)]  # ... of the same file
    assert _tree(dest) == FILES and not part.exists()


def test_server_that_ignores_range_restarts_the_download(tmp_path):
    payload = _tar_gz(FILES)
    with Server(payload, cut_first_after=100, honour_range=False) as server:
        with pytest.raises(UserError):
            data.fetch(server.url, _sha(payload), tmp_path / "data", timeout=10)
        dest = data.fetch(server.url, _sha(payload), tmp_path / "data", timeout=10)
    assert _tree(dest) == FILES


def test_sha_mismatch_removes_the_download_and_unpacks_nothing(tmp_path):
    payload = _tar_gz(FILES)
    with Server(payload) as server, pytest.raises(UserError, match="sha256"):
        data.fetch(server.url, "0" * 64, tmp_path / "data", timeout=10)
    assert not (tmp_path / "data").exists()
    assert not (tmp_path / ".downloads").exists()  # nothing kept, and no empty cache folder either


def test_finished_download_is_reused_only_when_its_hash_matches(tmp_path):
    old, new = _tar_gz({"v.txt": b"old"}), _tar_gz({"v.txt": b"new"})
    with Server(old) as server:
        data.fetch(server.url, _sha(old), tmp_path / "data", timeout=10)
        data.fetch(server.url, _sha(old), tmp_path / "data", timeout=10)
        assert len(server.requests) == 1  # the verified archive was not downloaded twice
    with Server(new) as server:  # same file name, new contents: the stale archive must not be reused
        dest = data.fetch(server.url, _sha(new), tmp_path / "data", timeout=10)
    assert (dest / "v.txt").read_bytes() == b"new"


def test_unpack_is_all_or_nothing(tmp_path):
    dest = tmp_path / "data"
    dest.mkdir()
    (dest / "keep.txt").write_text("previous")
    evil = _tar_gz({"ok.txt": b"fine", "../escape.txt": b"bad"}, top="")
    with Server(evil) as server, pytest.raises(UserError, match="leaves the target folder"):
        data.fetch(server.url, _sha(evil), dest, timeout=10)
    assert _tree(dest) == {"keep.txt": b"previous"} and not (tmp_path / "escape.txt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".unpack")]  # no staging left behind
    junk = b"neither zip nor tar"
    with Server(junk, name="junk.bin") as server, pytest.raises(UserError, match="neither a zip nor a tar"):
        data.fetch(server.url, _sha(junk), dest, timeout=10)
    assert _tree(dest) == {"keep.txt": b"previous"}


def test_zip_archives_unpack_too(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, payload in FILES.items():
            archive.writestr(f"data/{name}", payload)
    payload = buffer.getvalue()
    with Server(payload, name="data.zip") as server:
        dest = data.fetch(server.url, None, tmp_path / "data", timeout=10)
    assert _tree(dest) == FILES


def test_http_errors_and_unreachable_hosts_are_user_errors(tmp_path):
    with Server(b"x") as server, pytest.raises(UserError, match="HTTP 404"):
        data.fetch(server.url.replace("data.tar.gz", "other.tar.gz"), None, tmp_path / "data", timeout=10)
    with pytest.raises(UserError, match="resume"):
        data.fetch("http://127.0.0.1:9/data.tar.gz", None, tmp_path / "d2", timeout=2)


def test_cli_fetch_reports_the_folder(tmp_path, monkeypatch, capsys):
    import sys

    from antlm_bench.cli import main

    payload = _tar_gz(FILES)
    with Server(payload) as server:
        monkeypatch.setattr(sys, "argv", ["antlm-bench", "data", "fetch", "--url", server.url, "--sha256",
                                          _sha(payload), "--dest", str(tmp_path / "data")])
        try:
            main()
        except SystemExit as exit_:
            assert not exit_.code
    assert "data ready" in capsys.readouterr().out
    assert json.loads((tmp_path / "data" / "blimp_filtered" / "a.jsonl").read_text().splitlines()[0]) == {
        "sentence_good": "x"}


# -- one line for damaged data ----------------------------------------------------------------------------------------


def test_lone_surrogate_is_named_with_its_line(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"a": "fine \\u00e9 \\ud83d\\ude00"}\n{"a": "x\\ud800y"}\n')
    with pytest.raises(UserError, match=r"s\.jsonl:2: a lone surrogate \(\\ud800\)"):
        data.read_jsonl(path)
    path.write_text('{"a": "fine \\u00e9 \\ud83d\\ude00"}\n')  # a proper pair is text
    assert data.read_jsonl(path) == [{"a": "fine \u00e9 \U0001f600"}]


def test_not_utf8_jsonl_names_the_file(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(UserError, match=r"n\.jsonl: not UTF-8"):
        data.read_jsonl(path)


def _zip_with(member: bytes, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        archive.writestr("set/a.jsonl", member)
    return buffer.getvalue()


def test_damaged_zip_members_name_the_member(tmp_path):
    path = tmp_path / "z.zip"
    path.write_bytes(_zip_with(b'{"k": "\xff"}\n'))
    with pytest.raises(UserError, match=r"z\.zip!set/a\.jsonl: not UTF-8"):
        data.read_zip_jsonl(path, "set/a.jsonl", None)
    raw = bytearray(_zip_with(b'{"k": 1}\n' * 50, zipfile.ZIP_STORED))
    raw[raw.index(b'{"k": 1}') + 2] ^= 0x01  # a flipped byte: bad CRC
    path.write_bytes(bytes(raw))
    with pytest.raises(UserError, match=r"z\.zip!set/a\.jsonl: not readable \(BadZipFile"):
        data.read_zip_jsonl(path, "set/a.jsonl", None)
    raw = bytearray(_zip_with(b'{"k": 1}\n' * 500))
    start = raw.index(b"set/a.jsonl") + len("set/a.jsonl")
    raw[start + 2: start + 20] = b"\xff" * 18  # a corrupt deflate stream
    path.write_bytes(bytes(raw))
    with pytest.raises(UserError, match=r"z\.zip!set/a\.jsonl: not readable"):
        data.read_zip_jsonl(path, "set/a.jsonl", None)
    path.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(UserError, match=r"z\.zip: not readable"):
        data.list_zip_members(path, "set")


# -- the CLI's one error line -----------------------------------------------------------------------------------------


def test_environment_errors_become_one_line_naming_the_path():
    import errno

    from antlm_bench.cli.app import environment_failure

    found = environment_failure(OSError(errno.ENOSPC, "No space left on device", "/data/out/scores.parquet"))
    assert found is not None and found.exit_code == 4
    assert str(found).startswith("/data/out/scores.parquet: no space left on device;")
    try:  # the OSError as a library wraps it
        try:
            raise PermissionError(errno.EACCES, "Permission denied", "/locked")
        except OSError as inner:
            raise RuntimeError("saving failed") from inner
    except RuntimeError as outer:
        wrapped = environment_failure(outer)
    assert wrapped is not None and "/locked: permission denied" in str(wrapped)
    text_only = environment_failure(RuntimeError("safetensors: No space left on device (os error 28)"))
    assert text_only is not None and "no space left" in str(text_only)
    assert environment_failure(FileNotFoundError(errno.ENOENT, "No such file", "/x")) is None
    assert environment_failure(ValueError("a bug")) is None


@pytest.mark.parametrize("name", ["[/bold]", "[red]x[/red]", "a\\", "[link=file:///etc]x[/link]", ":thumbs_up:"])
def test_error_line_prints_markup_and_emoji_codes_as_text(tmp_path, name):
    from typer.testing import CliRunner

    from antlm_bench.cli import app

    result = CliRunner().invoke(app, ["data", "verify", "--data-dir", str(tmp_path / name)])
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: --data-dir {tmp_path / name} is not a folder; pass the folder that "
                                     "holds blimp_filtered/ etc.")


def test_unexpected_errors_keep_their_traceback(monkeypatch):
    """A bug is not dressed up as a user error: CliRunner sees the exception itself."""
    from typer.testing import CliRunner

    from antlm_bench.cli import app

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(data, "resolve_data_dir", broken)
    result = CliRunner().invoke(app, ["data", "where"])
    assert isinstance(result.exception, ZeroDivisionError)


def test_missing_cache_is_not_called_empty_and_relative_env_is_resolved(clean_env, monkeypatch):
    with pytest.raises(UserError) as err:
        data.resolve_data_dir()
    assert f"{data.default_cache_dir()} (no such folder)" in str(err.value) and "(empty)" not in str(err.value)
    data.default_cache_dir().mkdir(parents=True)
    with pytest.raises(UserError, match=r"\(empty\)"):
        data.resolve_data_dir()
    (clean_env / "work" / "mydata").mkdir(parents=True)
    monkeypatch.chdir(clean_env / "work")
    monkeypatch.setenv(data.DATA_ENV_VAR, "mydata")
    resolved = data.resolve_data_dir()
    assert resolved.is_absolute() and resolved == clean_env / "work" / "mydata"
    monkeypatch.setenv(data.DATA_ENV_VAR, "../shared/data")
    with pytest.raises(UserError) as err:
        data.resolve_data_dir()
    message = str(err.value)
    assert f"relative to the working folder {clean_env / 'work'}" in message and "no such folder" in message
    assert "data fetch babylm`" in message
