"""``antlm-bench data fetch``: download an archive (resumable, validated) and unpack it safely into the cache."""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import lzma
import os
import posixpath
import shutil
import stat
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from antlm_bench.data.files import (
    atomic_write_bytes,
    missing_folders,
    not_regular,
    open_append,
    remove_empty_folders,
    remove_stale,
    removed_note,
    sha256_file,
    temporary_tag,
)
from antlm_bench.data.resolve import default_cache_dir
from antlm_bench.errors import UserError, one_line
from antlm_bench.locking import folder_lock

# -- fetch ------------------------------------------------------------------------------------------------------------
#
# Cache layout, next to the data folder: ``.downloads/<key>-<name>`` is a finished archive and ``...part`` an
# unfinished one, with ``...part.json`` recording the URL and the server's validator (ETag / Last-Modified) of the
# response that started it. The key is a hash of the URL, so another URL with the same file name (``v2/data.tar.gz``
# after ``v1/data.tar.gz``) never reuses or resumes the other's bytes. A ``.part`` resumes only with a recorded
# validator, sent as If-Range: a server whose file changed answers 200 with the whole new file, and we start over.


def check_url(url: str) -> None:
    """Refuse anything but an ``http(s)://host/...`` URL before any folder is made or request sent."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a port out of range or not a number)
    except ValueError as err:
        raise UserError(f"--url {url!r}: not a valid URL ({err}); pass e.g. https://host/path/data.tar.gz") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--url {url!r}: not an http(s) URL; pass e.g. https://host/path/data.tar.gz")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise UserError(f"--url {url!r}: spaces or control characters in the URL; percent-encode them")


def _cache_names(url: str, downloads: Path) -> tuple[Path, Path, Path]:
    """(finished archive, partial download, its record) for one URL."""
    name = Path(urllib.parse.urlsplit(url).path).name or "data.archive"
    # keep the file name readable, but key by the whole URL: same name, other URL -> other file
    stem = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:16] + "-" + name[-100:]
    done = downloads / stem
    return done, downloads / (stem + ".part"), downloads / (stem + ".part.json")


def _validator(headers: Any) -> dict[str, str]:
    """The headers that identify this version of the file, usable in If-Range (a weak ETag is not, RFC 9110)."""
    found = {}
    etag = headers.get("ETag")
    if etag and not etag.startswith("W/"):
        found["etag"] = etag
    if headers.get("Last-Modified"):
        found["last_modified"] = headers["Last-Modified"]
    return found


def _read_record(record_path: Path) -> dict[str, Any]:
    from antlm_bench.data.readers import read_json

    try:  # a damaged record only costs the resume: the download starts over
        record = read_json(record_path, "damaged download record", "it is written anew")
    except UserError:
        return {}
    return record if isinstance(record, dict) else {}


def _content_range_start(value: str | None) -> int | None:
    """``bytes 100-199/200`` -> 100; None when absent or not understood."""
    if not value or not value.startswith("bytes "):
        return None
    first = value[6:].split("-", 1)[0].strip()
    return int(first) if first.isdigit() else None


def _download(url: str, part: Path, record_path: Path, timeout: float) -> None:
    """Bring ``part`` to the whole file: resume it when the server says it is the same file, else start over."""
    offset = part.stat().st_size if part.exists() else 0
    record = _read_record(record_path) if offset else {}
    validator = record.get("etag") or record.get("last_modified")
    if offset and (record.get("url") != url or not validator):
        offset = 0  # begun for another URL, or with nothing to prove the server's file is unchanged
    headers = {"Range": f"bytes={offset}-", "If-Range": validator} if offset else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
            if offset and (response.status != 206
                           or _content_range_start(response.headers.get("Content-Range")) != offset):
                offset = 0  # a 200 to If-Range: the file changed (or Range is not supported); start over
            if not offset:
                atomic_write_bytes(record_path, json.dumps({"url": url, **_validator(response.headers)}).encode())
            expected = response.length  # bytes promised by Content-Length (None: unknown)
            with open_append(part) as handle:  # never through a link or into a FIFO planted at its name
                if not offset:
                    handle.truncate(0)  # starting over
                shutil.copyfileobj(response, handle, 1 << 20)
            received = part.stat().st_size - offset
            # http.client returns a short body without an error when the connection drops
            if expected is not None and received < expected:
                raise ConnectionError(f"connection closed after {received} of {expected} bytes")
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:
            # the range starts at or past the end: only a .part as long as the whole file may be kept
            total = (err.headers.get("Content-Range") or "").rpartition("/")[2]
            if total.isdigit() and int(total) == offset:
                return
            part.unlink(missing_ok=True)
            record_path.unlink(missing_ok=True)
            raise UserError(f"fetch {url}: the server refused to resume (HTTP 416); the partial download was "
                            "removed, run the same command again") from None
        raise UserError(f"fetch {url}: HTTP {err.code} {err.reason}; check the URL") from None
    except UnicodeError as err:  # an international host name that IDNA cannot encode
        raise UserError(f"fetch {url}: bad host name ({err}); check the URL") from None
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as err:
        raise UserError(f"fetch {url}: {err}; run the same command again to resume") from None
    except OSError as err:
        if err.errno is None or err.errno in _NETWORK_ERRNOS:  # socket errors; disk errors propagate
            raise UserError(f"fetch {url}: {err}; run the same command again to resume") from None
        if err.filename is None:  # a failed write() names no file: name the one being written
            raise OSError(err.errno, err.strerror, str(part)) from err
        raise


PART_KEPT_S = 7 * 24 * 3600  # how long a partial download of another URL waits for its resume

_NETWORK_ERRNOS = {errno.ECONNRESET, errno.ECONNREFUSED, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH,
                   errno.ENETUNREACH, errno.EPIPE}


def fetch(url: str, sha256: str | None, dest_dir: Path | None = None, timeout: float = 60.0) -> Path:
    """Download an archive (resumably, via HTTP Range + If-Range) into the cache, verify it, unpack it atomically.

    See the cache layout above. The archive is unpacked into a staging folder beside ``dest_dir`` and moved into
    place only when every member passed the checks of :func:`_check_tar` / :func:`_check_zip`. A command that
    fails leaves no folder it created empty; a dropped connection keeps the ``.part`` for the next try.
    """
    check_url(url)
    if sha256 is not None:
        sha256 = sha256.lower()
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise UserError(f"--sha256 {sha256!r}: must be 64 hex characters")
    dest_dir = Path(dest_dir or default_cache_dir())
    downloads = dest_dir.parent / ".downloads"
    created = missing_folders(downloads)
    downloads.mkdir(parents=True, exist_ok=True)
    done, part, record_path = _cache_names(url, downloads)
    try:
        # one fetch at a time per download cache: a second one into it (the same URL would share the .part) is
        # refused at once with the first one's pid, never interleaved with it
        with folder_lock(downloads, "data fetch"):
            _fetch_locked(url, sha256, dest_dir, timeout, done, part, record_path)
    except BaseException:
        remove_empty_folders([downloads, *(c for c in created if c != downloads)])
        raise
    return dest_dir


def _fetch_locked(url: str, sha256: str | None, dest_dir: Path, timeout: float, done: Path, part: Path,
                  record_path: Path) -> None:
    tidied = remove_stale(dest_dir.parent, ".unpack.*")  # staging folders of a killed fetch
    # a partial download is kept to resume from; one nobody came back to for a week (another URL) is removed
    for pattern in ("*.part", "*.part.json"):
        tidied += remove_stale(part.parent, pattern, max_age_s=PART_KEPT_S, keep=(part, record_path), by_pid=False)
    if tidied:
        print(f"note: {removed_note(tidied)}", file=sys.stderr)
    for own in (part, record_path, done):  # the cache's own files: a link or a FIFO there was planted
        kind = not_regular(own)
        if kind is not None:
            raise UserError(f"{own}: {kind} in the download cache, where antlm-bench keeps its own files; it was "
                            "left as it is: remove it and run the same command again")
    if done.exists() and sha256 is not None and sha256_file(done) != sha256:
        done.unlink()  # an older archive from this URL: not the one asked for
    if not done.exists():
        _download(url, part, record_path, timeout)
        if sha256 is not None:
            actual = sha256_file(part)
            if actual != sha256:
                part.unlink()
                record_path.unlink(missing_ok=True)
                raise UserError(f"fetch {url}: sha256 {actual} != expected {sha256}; the download was removed")
        os.replace(part, done)
        record_path.unlink(missing_ok=True)
    try:
        _unpack(done, dest_dir)
    except UserError:
        done.unlink(missing_ok=True)  # refused or damaged: never reuse it
        raise


def _archive_damaged(archive: Path, err: BaseException) -> UserError:
    return UserError(f"{archive}: damaged or truncated archive ({one_line(err, typed=True)}); "
                     "it was removed from the cache, run the fetch again")


def _unpack(archive: Path, dest_dir: Path) -> None:
    staging = Path(tempfile.mkdtemp(dir=dest_dir.parent, prefix=f".unpack.{temporary_tag()}."))
    created = missing_folders(dest_dir)
    try:
        try:
            if zipfile.is_zipfile(archive):
                with zipfile.ZipFile(archive) as z:
                    _check_zip(archive, z)
                    z.extractall(staging)
            elif tarfile.is_tarfile(archive):
                with tarfile.open(archive) as t:
                    _check_tar(archive, t.getmembers())  # reads the whole archive: truncation shows here
                    t.extractall(staging, filter="data")  # a second guard; _check_tar has refused what it refuses
            else:
                raise UserError(f"{archive}: neither a zip nor a tar archive; check the URL")
        except (tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, NotImplementedError) as err:
            raise _archive_damaged(archive, err) from None
        except OSError as err:
            if err.errno is not None:
                raise  # disk full, permission denied: the environment, not the archive
            raise _archive_damaged(archive, err) from None  # gzip.BadGzipFile and kin carry no errno
        # an archive with one top folder (data/...) unpacks to its contents; a top-level symlink is no folder
        entries = list(staging.iterdir())
        single = len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink()
        root = entries[0] if single else staging
        _check_links_resolve_inside(archive, root)
        dest_dir.mkdir(parents=True, exist_ok=True)
        for entry in root.iterdir():
            target = dest_dir / entry.name
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.exists():
                shutil.rmtree(target)
            os.replace(entry, target)
    except BaseException:
        remove_empty_folders(created)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# what an archive may unpack to: data archives compress a few times (text ~4x under gzip, ~10x under xz), a zip
# bomb thousands of times; the cap bounds a large archive that is honest about its ratio
MAX_UNPACKED_BYTES = 20 * 1024**3
MAX_RATIO = 100
_RATIO_FLOOR = 64 * 1024**2  # below this, a high ratio (a file of zeros, a tiny README) harms no disk


def _check_size(archive: Path, unpacked: int) -> None:
    """Refuse before writing anything an archive whose members add up to more than the caps (the sizes are the
    ones extraction writes: tar members hold their sizes, and zipfile reads no more than a member declares)."""
    packed = max(archive.stat().st_size, 1)
    if unpacked > MAX_UNPACKED_BYTES:
        raise UserError(f"{archive}: would unpack to {unpacked / 1e9:.1f} GB, more than the "
                        f"{MAX_UNPACKED_BYTES / 1e9:.0f} GB limit; refusing to unpack (nothing was written)")
    if unpacked > _RATIO_FLOOR and unpacked > MAX_RATIO * packed:
        raise UserError(f"{archive}: would unpack {packed / 1e6:.1f} MB into {unpacked / 1e6:.0f} MB "
                        f"({unpacked / packed:.0f}x, more than {MAX_RATIO}x: a zip bomb?); refusing to unpack "
                        "(nothing was written)")


def _refuse(archive: Path, name: str, why: str) -> UserError:
    return UserError(f"{archive}: member {name!r} {why}; refusing to unpack (nothing was written)")


def _top_folder(names: list[str], folders: set[str]) -> str:
    """The one top folder that unpacking strips (``data/`` of ``data/a``, ``data/b``), or "" when there is none."""
    tops = {PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts}
    if len(tops) != 1:
        return ""
    top = tops.pop()
    deeper = any(len(PurePosixPath(n).parts) > 1 for n in names)
    return top if deeper or top in folders else ""


def _check_name(archive: Path, name: str) -> None:
    path = PurePosixPath(name.replace("\\", "/"))
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or ".." in path.parts:
        raise _refuse(archive, name, "is absolute or leaves the target folder")
    if "\x00" in name:
        raise _refuse(archive, name, "has a NUL byte in its name")


def _check_link(archive: Path, name: str, target: str, relative_to_member: bool, root: str) -> None:
    """A link must point inside the folder it unpacks into: ``root`` once the top folder is stripped."""
    if not target or target.startswith(("/", "\\")) or (len(target) > 1 and target[1] == ":"):
        raise _refuse(archive, name, f"is a link to an absolute path {target!r}")
    base = posixpath.dirname(name) if relative_to_member else ""
    resolved = posixpath.normpath(posixpath.join(base, target))
    inside = resolved == root or resolved.startswith(root + "/") if root else not (
        resolved == ".." or resolved.startswith("../"))
    if not inside:
        raise _refuse(archive, name, f"is a link to {target!r}, outside the folder it unpacks into")


def _check_tar(archive: Path, members: list[tarfile.TarInfo]) -> None:
    names = [m.name for m in members]
    root = _top_folder(names, {m.name.rstrip("/") for m in members if m.isdir()})
    regular = {m.name for m in members if m.isfile()}
    for member in members:
        _check_name(archive, member.name)
        if member.isdev():  # character or block device, or fifo
            raise _refuse(archive, member.name, "is a device or fifo")
        if member.issym():
            _check_link(archive, member.name, member.linkname, True, root)
        elif member.islnk():
            _check_link(archive, member.name, member.linkname, False, root)
            if member.linkname not in regular:
                raise _refuse(archive, member.name, f"is a hard link to {member.linkname!r}, no file of the archive")
        elif not (member.isfile() or member.isdir()):
            raise _refuse(archive, member.name, "is neither a file, a folder nor a link")
    _check_size(archive, sum(member.size for member in members if member.isfile()))


def _check_zip(archive: Path, z: zipfile.ZipFile) -> None:
    infos = z.infolist()
    names = [i.filename for i in infos]
    root = _top_folder(names, {i.filename.rstrip("/") for i in infos if i.is_dir()})
    for info in infos:
        _check_name(archive, info.filename)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            target = z.read(info).decode("utf-8", "replace")
            _check_link(archive, info.filename, target, True, root)
            # zipfile would write the link as a small file holding its target: wrong data, so say so
            raise _refuse(archive, info.filename, "is a symlink; zip links are not unpacked, use a tar archive")
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            raise _refuse(archive, info.filename, "is a device or fifo")
    _check_size(archive, sum(info.file_size for info in infos))


def _check_links_resolve_inside(archive: Path, root: Path) -> None:
    """After extraction, resolve every symlink on disk: chains of links can leave a folder that no single link
    leaves by its text (``d/s -> .`` then ``e -> d/s/../..``)."""
    base = root.resolve()
    for folder, dirs, files in os.walk(root):
        for entry in (*dirs, *files):
            path = Path(folder) / entry
            if path.is_symlink():
                real = path.resolve()
                if real != base and base not in real.parents:
                    raise _refuse(archive, str(path.relative_to(root)),
                                  f"is a link that resolves to {real}, outside the folder it unpacks into")
