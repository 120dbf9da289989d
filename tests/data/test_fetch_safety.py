"""Safe fetch: the download cache is keyed by URL, a ``.part`` resumes only for the same URL and an unchanged file
(If-Range), archives cannot write or point outside the folder they unpack into, and MANIFEST paths stay inside
their folder. Every server here is a loopback one of our own (tests/loopback_http.py) that stops itself."""

from __future__ import annotations

import hashlib
import io
import stat
import zipfile
from pathlib import Path

import pytest
from archive_support import make_tar, make_zip, zeros_zip
from loopback_http import Server

from antlm_bench import data
from antlm_bench.errors import UserError


def _sha(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# incompressible bytes, so a download cut after a few KiB really is cut halfway
NOISE = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(2000))
GOOD = [("data/blimp_filtered/a.jsonl", "file", b'{"sentence_good": "x"}\n' * 500), ("data/README.md", "file", b"hi\n"),
        ("data/noise.bin", "file", NOISE)]


# -- the cache is keyed by URL; resume needs the same URL and the same file ------------------------------------------


def test_other_url_with_the_same_file_name_is_downloaded_not_reused(tmp_path):
    v1, v2 = make_tar([("data/v.txt", "file", b"one")]), make_tar([("data/v.txt", "file", b"two")])
    with Server(v1, paths={"/v2/data.tar.gz": v2}) as server:
        dest = data.fetch(server.base + "/data.tar.gz", None, tmp_path / "data", timeout=10)
        assert (dest / "v.txt").read_bytes() == b"one"
        dest = data.fetch(server.base + "/v2/data.tar.gz", None, tmp_path / "data", timeout=10)
        assert (dest / "v.txt").read_bytes() == b"two"
        assert server.paths == ["/data.tar.gz", "/v2/data.tar.gz"]
        data.fetch(server.base + "/v2/data.tar.gz", None, tmp_path / "data", timeout=10)
        assert len(server.paths) == 2  # the same URL again: its verified-by-URL archive is reused


def test_dropped_download_is_not_resumed_by_another_url(tmp_path):
    v1 = make_tar(GOOD)
    v2 = make_tar([("data/v.txt", "file", b"two" * 1000)])
    with Server(v1, cut_first_after=len(v1) // 2, paths={"/v2/data.tar.gz": v2}) as server:
        with pytest.raises(UserError, match="again to resume"):
            data.fetch(server.url, None, tmp_path / "data", timeout=10)
        dest = data.fetch(server.base + "/v2/data.tar.gz", _sha(v2), tmp_path / "data", timeout=10)
        assert server.requests == [None, None]  # v2 started from byte 0, not from v1's half
    assert _tree(dest) == {"v.txt": b"two" * 1000}


def test_resume_after_the_file_changed_starts_over(tmp_path):
    old, new = make_tar(GOOD), make_tar([*GOOD, ("data/extra.txt", "file", b"new" * 300)])
    with Server(old, cut_first_after=len(old) // 2) as server:
        with pytest.raises(UserError):
            data.fetch(server.url, None, tmp_path / "data", timeout=10)
        server.set_payload(new)
        dest = data.fetch(server.url, None, tmp_path / "data", timeout=10)
        # the resume asked "only if still the old file"; the server said no with the whole new file
        assert server.requests[1] == f"bytes={len(old) // 2}-" and server.if_ranges[1] == Server.etag(old)
    assert _tree(dest)["extra.txt"] == b"new" * 300  # a spliced archive would not unpack, or would lack it


def test_no_validator_no_resume(tmp_path):
    payload = make_tar(GOOD)
    with Server(payload, cut_first_after=1000, validators=False) as server:
        with pytest.raises(UserError):
            data.fetch(server.url, None, tmp_path / "data", timeout=10)
        dest = data.fetch(server.url, None, tmp_path / "data", timeout=10)
        assert server.requests == [None, None]  # nothing proves the server's file is the one begun: start over
    assert _tree(dest) == {n.removeprefix("data/"): p for n, _, p in GOOD}


def test_last_modified_is_the_validator_when_there_is_no_strong_etag(tmp_path, monkeypatch):
    payload = make_tar(GOOD)
    with Server(payload, cut_first_after=1000) as server:
        with pytest.raises(UserError):
            data.fetch(server.url, None, tmp_path / "data", timeout=10)
        [record] = (tmp_path / ".downloads").glob("*.part.json")
        text = record.read_text().replace(Server.etag(payload), "W/" + Server.etag(payload))
        record.write_text(text.replace('"etag"', '"weak"'))  # as if the server had sent only a weak ETag
        data.fetch(server.url, None, tmp_path / "data", timeout=10)
        assert server.if_ranges[1] is not None and server.if_ranges[1].endswith("GMT")


# -- bad URLs ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["notaurl", "ftp://127.0.0.1/x.tar.gz", "http://", "http://127.0.0.1:99999/x",
                                 "file:///etc/hostname", "http://127.0.0.1/a b.tar.gz", "http://[::1/x"])
def test_bad_urls_are_refused_before_anything_is_made(tmp_path, url):
    with pytest.raises(UserError, match="--url"):
        data.fetch(url, None, tmp_path / "deep" / "data", timeout=2)
    assert list(tmp_path.iterdir()) == []


def test_unreachable_host_leaves_no_cache_folder(tmp_path):
    with pytest.raises(UserError, match="resume"):
        data.fetch("http://127.0.0.1:9/data.tar.gz", None, tmp_path / "deep" / "data", timeout=2)
    assert list(tmp_path.iterdir()) == []


# -- archive members --------------------------------------------------------------------------------------------------


BAD_TARS = {
    "absolute": ([*GOOD, ("/tmp/abs.txt", "file", b"x")], "absolute or leaves"),
    "dotdot": ([*GOOD, ("data/../../up.txt", "file", b"x")], "absolute or leaves"),
    "symlink up out of the stripped top folder": ([*GOOD, ("data/up", "sym", "..")], "outside the folder"),
    "symlink far up": ([*GOOD, ("data/x/far", "sym", "../../../etc")], "outside the folder"),
    "absolute symlink": ([*GOOD, ("data/etc", "sym", "/etc")], "absolute path"),
    "hardlink outside": ([*GOOD, ("data/h", "hard", "../etc/passwd")], "outside the folder"),
    "hardlink absolute": ([*GOOD, ("data/h", "hard", "/etc/passwd")], "absolute path"),
    "hardlink to no member": ([*GOOD, ("data/h", "hard", "data/none.txt")], "no file of the archive"),
    "character device": ([*GOOD, ("data/zero", "chr", None)], "device or fifo"),
    "fifo": ([*GOOD, ("data/pipe", "fifo", None)], "device or fifo"),
    "symlink chain that leaves": ([*GOOD, ("data/d", "dir", None), ("data/d/s", "sym", "."),
                                   ("data/e", "sym", "d/s/../..")], "outside the folder"),
}


@pytest.mark.parametrize("case", sorted(BAD_TARS))
def test_unsafe_tar_members_are_refused_and_nothing_changes(tmp_path, case):
    members, message = BAD_TARS[case]
    dest = tmp_path / "data"
    dest.mkdir()
    (dest / "keep.txt").write_text("previous")
    payload = make_tar(members)
    with Server(payload) as server, pytest.raises(UserError, match=message):
        data.fetch(server.url, None, dest, timeout=10)
    assert _tree(dest) == {"keep.txt": b"previous"} and not [p for p in dest.iterdir() if p.is_symlink()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no staging, no refused archive kept


def test_links_inside_the_folder_unpack(tmp_path):
    payload = make_tar([*GOOD, ("data/alias", "sym", "blimp_filtered"), ("data/copy.md", "hard", "data/README.md"),
                    ("data/blimp_filtered/self", "sym", "../README.md")])
    with Server(payload) as server:
        dest = data.fetch(server.url, _sha(payload), tmp_path / "data", timeout=10)
    assert (dest / "alias" / "a.jsonl").read_bytes() == GOOD[0][2]
    assert (dest / "copy.md").read_bytes() == (dest / "blimp_filtered" / "self").read_bytes() == b"hi\n"


BAD_ZIPS = {
    "absolute": ([("data/a.txt", b"x", None), ("/etc/abs.txt", b"x", None)], "absolute or leaves"),
    "dotdot": ([("data/a.txt", b"x", None), ("data/../../up.txt", b"x", None)], "absolute or leaves"),
    "symlink out": ([("data/a.txt", b"x", None), ("data/up", b"..", stat.S_IFLNK | 0o777)], "outside the folder"),
    "symlink in": ([("data/a.txt", b"x", None), ("data/b", b"a.txt", stat.S_IFLNK | 0o777)], "zip links"),
    "fifo": ([("data/a.txt", b"x", None), ("data/p", b"", stat.S_IFIFO | 0o644)], "device or fifo"),
}


@pytest.mark.parametrize("case", sorted(BAD_ZIPS))
def test_unsafe_zip_members_are_refused(tmp_path, case):
    members, message = BAD_ZIPS[case]
    payload = make_zip(members)
    with Server(payload, name="data.zip") as server, pytest.raises(UserError, match=message):
        data.fetch(server.url, None, tmp_path / "data", timeout=10)
    assert list(tmp_path.iterdir()) == []


def _damaged(kind: str) -> tuple[bytes, str]:
    if kind == "truncated tar.gz":
        payload = make_tar(GOOD)
        return payload[: len(payload) * 2 // 3], "data.tar.gz"
    if kind == "truncated plain tar":
        payload = make_tar(GOOD, mode="w")
        return payload[:1500], "data.tar"
    if kind == "not gzip":
        return b"\x1f\x8b" + b"\x00" * 600, "data.tar.gz"
    payload = bytearray(make_zip([("data/a.jsonl", b'{"a": 1}\n' * 400, None)]))
    start = payload.index(b"data/a.jsonl") + len("data/a.jsonl")  # the compressed bytes follow the local header name
    if kind == "zip bad CRC":
        with zipfile.ZipFile(io.BytesIO(bytes(payload))) as z:
            info = z.getinfo("data/a.jsonl")
        # a stored copy with one byte changed: inflates fine, CRC wrong
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
            z.writestr("data/a.jsonl", b'{"a": 1}\n' * 400)
        raw = bytearray(buffer.getvalue())
        raw[raw.index(b'{"a": 1}') + 3] ^= 0x01
        del info
        return bytes(raw), "data.zip"
    payload[start + 5: start + 25] = b"\xff" * 20  # corrupt deflate stream
    return bytes(payload), "data.zip"


@pytest.mark.parametrize("kind", ["truncated tar.gz", "truncated plain tar", "not gzip", "zip bad CRC",
                                  "zip corrupt deflate"])
def test_damaged_archives_are_one_line_and_leave_nothing(tmp_path, kind):
    payload, name = _damaged(kind)
    with Server(payload, name=name) as server:
        with pytest.raises(UserError, match="damaged|truncated|neither a zip nor a tar") as err:
            data.fetch(server.url, None, tmp_path / "data", timeout=10)
        assert "\n" not in str(err.value)
        assert list(tmp_path.iterdir()) == []  # the damaged archive is not cached: the next fetch downloads again
        with pytest.raises(UserError):
            data.fetch(server.url, None, tmp_path / "data", timeout=10)
        assert len(server.requests) == 2


# -- manifests --------------------------------------------------------------------------------------------------------


def _manifest(folder: Path, lines: list[str]) -> None:
    (folder / "MANIFEST.sha256").write_text("".join(line + "\n" for line in lines))


@pytest.mark.parametrize("name", ["../../../../etc/hostname", "/etc/hostname", "sub/../../outside.txt", "link/x"])
def test_manifest_paths_stay_inside_their_folder(tmp_path, name):
    folder = tmp_path / "set"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("secret")
    (folder / "link").symlink_to(tmp_path)
    (tmp_path / "x").write_text("x")
    ok_line = f"{_sha(b'in')}  sub/in.txt"
    (folder / "sub" / "in.txt").write_text("in")
    _manifest(folder, [ok_line, f"{_sha(b'secret')}  {name}"])
    with pytest.raises(UserError, match=r"MANIFEST\.sha256:2: path .* leaves"):
        data.verify_manifest(folder)
    _manifest(folder, [ok_line])
    assert data.verify_manifest(folder) == (["sub/in.txt"], [])


def test_manifest_not_utf8_is_one_line(tmp_path):
    (tmp_path / "MANIFEST.sha256").write_bytes(b"\xff\xfe junk\n")
    with pytest.raises(UserError, match="not UTF-8"):
        data.verify_manifest(tmp_path)


# -- size caps: a zip bomb is refused before anything is written -------------------------------------------------------


def _zeros_tar(total: int) -> bytes:
    import tarfile

    class Zeros(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, view):  # type: ignore[override]
            view[:] = bytes(len(view))
            return len(view)

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        info = tarfile.TarInfo("data/zeros.bin")
        info.size = total
        archive.addfile(info, io.BufferedReader(Zeros()))
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_a_zip_bomb_is_refused_by_its_ratio_and_nothing_is_written(tmp_path, kind):
    payload = zeros_zip(96 << 20, members=2) if kind == "zip" else _zeros_tar(96 << 20)
    assert len(payload) < (96 << 20) // 100  # really a bomb: more than 100x
    dest = tmp_path / "data"
    with Server(payload, name=f"bomb.{kind}") as server, pytest.raises(UserError) as caught:
        data.fetch(server.url, None, dest, timeout=30)
    message = str(caught.value)
    assert "zip bomb" in message and "nothing was written" in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []  # no staging, no folder, no archive kept


def test_an_honest_archive_over_the_size_cap_is_refused(tmp_path, monkeypatch):
    import importlib

    fetch_module = importlib.import_module("antlm_bench.data.fetch")  # the package re-exports its function fetch

    monkeypatch.setattr(fetch_module, "MAX_UNPACKED_BYTES", 20_000)
    payload = make_tar(GOOD)  # ~80 kB unpacked, mostly incompressible
    with Server(payload) as server, pytest.raises(UserError, match="more than the .* limit"):
        data.fetch(server.url, None, tmp_path / "data", timeout=10)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(fetch_module, "MAX_UNPACKED_BYTES", 200_000)
    with Server(payload) as server:
        assert _tree(data.fetch(server.url, None, tmp_path / "data", timeout=10))["noise.bin"] == NOISE


# -- a source registry of one's own writes only inside --dest ----------------------------------------------------------


@pytest.mark.parametrize("dest", ["../outside.txt", "/tmp/abs.txt", "a/../../b.txt", "ewok.zip::../m.jsonl", "",
                                  "a//b.txt"])
def test_a_registry_dest_outside_the_data_folder_is_refused(tmp_path, monkeypatch, dest):
    from antlm_bench.data.sources import fetch_sources, load_registry

    registry = tmp_path / "mine.tsv"
    registry.write_text("source\tdest\trepo\tcommit\tpath\tchecksum\n"
                        f"mine\t{dest}\towner/repo\tabc\tx.txt\tsha256:{_sha(b'x')}\n")
    monkeypatch.setenv("ANTLM_BENCH_SOURCES", str(registry))
    with pytest.raises(UserError, match=r"mine.tsv: row 2: dest .* leaves the data folder"):
        load_registry()
    with Server(b"x", name="x.txt") as server, pytest.raises(UserError, match="leaves the data folder"):
        fetch_sources(["mine"], tmp_path / "d", server.base, progress=None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.tsv"]


def test_a_registry_dest_through_a_link_in_the_data_folder_is_refused(tmp_path, monkeypatch):
    from antlm_bench.data.sources import fetch_sources

    (tmp_path / "d").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "d" / "sub").symlink_to(tmp_path / "elsewhere")
    registry = tmp_path / "mine.tsv"
    registry.write_text("source\tdest\trepo\tcommit\tpath\tchecksum\n"
                        f"mine\tsub/x.txt\towner/repo\tabc\tx.txt\tsha256:{_sha(b'x')}\n")
    monkeypatch.setenv("ANTLM_BENCH_SOURCES", str(registry))
    with Server(b"", name="unused", paths={"/owner/repo/abc/x.txt": b"x"}) as server, pytest.raises(
            UserError, match="outside .*through a symbolic link"):
        fetch_sources(["mine"], tmp_path / "d", server.base, progress=None)
    assert list((tmp_path / "elsewhere").iterdir()) == []
