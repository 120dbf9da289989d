"""Where the data lives and how its files are read.

Resolution order for the data folder: ``--data-dir``, then ``$ANTLM_BENCH_DATA``, then the user cache
(``~/.cache/antlm-bench/data``, filled by ``antlm-bench data fetch``). Readers understand the BabyLM layout:
``*.jsonl`` or ``*.jsonl.xz`` files, and password-protected zips read in memory (EWoK's terms forbid plain-text
copies, so nothing is ever unpacked to disk).
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import io
import json
import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from antlm_bench.errors import UserError

DATA_ENV_VAR = "ANTLM_BENCH_DATA"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "antlm-bench" / "data"


def _absolute(path: Path) -> Path:
    """``path`` with ``~`` expanded, made absolute against the working folder (a relative ``$ANTLM_BENCH_DATA``
    would otherwise mean another folder for every command run elsewhere)."""
    path = path.expanduser()
    return path if path.is_absolute() else Path.cwd() / path


def _relative_note(given: str | os.PathLike) -> str:
    return "" if Path(given).expanduser().is_absolute() else f", relative to the working folder {Path.cwd()}"


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """Return the data folder (absolute), or raise a UserError naming every place that was tried and how."""
    tried: list[str] = []
    if data_dir is not None:
        path = _absolute(Path(data_dir))
        if path.is_dir():
            return path
        raise UserError(f"--data-dir {path} is not a folder{_relative_note(data_dir)}; pass the folder that holds "
                        "blimp_filtered/ etc.")
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        path = _absolute(Path(env))
        if path.is_dir():
            return path
        what = "no such folder" if not path.exists() else "not a folder"
        tried.append(f"${DATA_ENV_VAR}={env} ({path}: {what}{_relative_note(env)})")
    cache = default_cache_dir()
    if cache.is_dir() and any(cache.iterdir()):
        return cache
    tried.append(f"{cache} ({'empty' if cache.is_dir() else 'no such folder'})")
    raise UserError(
        "no data folder found; tried " + ", ".join(tried)
        + f". Run `antlm-bench data fetch babylm` (fills {cache}), pass --data-dir DIR or set ${DATA_ENV_VAR}."
    )


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _lone_surrogate(record: Any) -> str | None:
    """The first string in ``record`` that UTF-8 cannot encode (a lone surrogate from a ``\\ud800`` escape)."""
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        return f"\\u{ord(err.object[err.start]):04x}"
    return None


def parse_jsonl_lines(lines: Iterable[str], source: str) -> Iterator[dict]:
    """Parse JSON lines; a malformed line raises a UserError with ``source:line``."""
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"{source}:{line_no}: not valid JSON ({err.msg}); fix or re-fetch the file") from None
        except RecursionError:
            raise UserError(f"{source}:{line_no}: JSON nested too deeply; fix or re-fetch the file") from None
        if not isinstance(record, dict):
            raise UserError(f"{source}:{line_no}: expected a JSON object, got {type(record).__name__}")
        # json accepts "\ud800" escapes, but such a string breaks tokenizers and Arrow far from here; a lone
        # surrogate can only come from an escape, so the (costly) check runs only on lines holding one
        if "\\u" in line:
            bad = _lone_surrogate(record)
            if bad is not None:
                raise UserError(f"{source}:{line_no}: a lone surrogate ({bad}) in a string is not text; "
                                "fix or re-fetch the file")
        yield record


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a ``.jsonl`` or ``.jsonl.xz`` file into a list of dicts."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        with _open_text(path) as handle:
            return list(parse_jsonl_lines(handle, str(path)))
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte {err.start} of a block: {err.reason}); "
                        "convert the file to UTF-8 or re-fetch it") from None
    except (lzma.LZMAError, EOFError) as err:
        raise UserError(f"{path}: cannot be read ({err}); the file is corrupt, re-fetch it") from None


def _zip_problem(zip_path: Path, err: BaseException, member: str | None = None) -> UserError:
    """One line for an unreadable zip or zip member (bad CRC, corrupt deflate stream, truncated file)."""
    where = f"{zip_path}!{member}" if member else str(zip_path)
    return UserError(f"{where}: not readable ({type(err).__name__}: {err}); the zip is damaged, fetch it again")


def read_zip_jsonl(zip_path: str | os.PathLike, member: str, password: str | None) -> list[dict]:
    """Read one JSONL member of a (possibly password-protected) zip, in memory only."""
    zip_path = Path(zip_path)
    if not zip_path.is_file():
        raise UserError(f"{zip_path}: file not found")
    try:
        with zipfile.ZipFile(zip_path) as archive:
            raw = archive.read(member, pwd=password.encode() if password else None)
    except KeyError:
        raise UserError(f"{zip_path}: has no member {member}") from None
    except RuntimeError as err:  # zipfile's way of saying "bad password"
        raise UserError(f"{zip_path}!{member}: {err}; check the password in the task spec") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as err:
        raise _zip_problem(zip_path, err, member) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{zip_path}!{member}: not UTF-8 text (byte {err.start}: {err.reason}); "
                        "the member is damaged, fetch the zip again") from None
    return list(parse_jsonl_lines(text.splitlines(), f"{zip_path}!{member}"))


def list_zip_members(zip_path: str | os.PathLike, folder: str, suffix: str = ".jsonl") -> list[str]:
    zip_path = Path(zip_path)
    try:
        with zipfile.ZipFile(zip_path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, EOFError) as err:
        raise _zip_problem(zip_path, err) from None
    return sorted(n for n in names if n.startswith(folder.rstrip("/") + "/") and n.endswith(suffix))


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_size), b""):
            digest.update(block)
    return digest.hexdigest()


def hash_files(paths: Iterable[str | os.PathLike]) -> str:
    """One sha256 over the names and contents of several files (order-independent)."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        digest.update(path.name.encode())
        digest.update(bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()


def _inside(folder: Path, name: str) -> Path | None:
    """``folder / name`` when it stays inside ``folder`` (symlinks resolved), else None."""
    if not name or PurePosixPath(name).is_absolute() or Path(name).is_absolute():
        return None
    base = folder.resolve()
    target = (base / name).resolve()
    return target if target == base or base in target.parents else None


def verify_manifest(data_dir: Path, manifest: Path | None = None) -> tuple[list[str], list[str]]:
    """Check files against a ``sha256sum`` manifest. Returns (ok, problems).

    Every path must stay inside the manifest's folder: an entry such as ``../../etc/hostname`` would otherwise
    hash (and vouch for) a file the data set does not own.
    """
    manifest = manifest or data_dir / "MANIFEST.sha256"
    if not manifest.is_file():
        raise UserError(f"{manifest}: no manifest; pass --manifest FILE")
    try:
        text = manifest.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{manifest}: not UTF-8 text (byte {err.start}); pass a sha256sum-style manifest") from None
    ok, problems = [], []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise UserError(f"{manifest}:{line_no}: expected '<sha256>  <path>'")
        expected, name = parts[0].lower(), parts[1].lstrip("*").strip()
        target = _inside(manifest.parent, name)
        if target is None:
            raise UserError(f"{manifest}:{line_no}: path {name!r} leaves {manifest.parent}; a manifest names "
                            "files inside its own folder, fix the manifest")
        if not target.is_file():
            problems.append(f"{name}: missing")
        elif sha256_file(target) != expected:
            problems.append(f"{name}: sha256 mismatch")
        else:
            ok.append(name)
    return ok, problems


def readable_file_mode() -> int:
    """0666 less the process umask: the mode ``open()`` would have given a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.chmod(tmp, readable_file_mode())  # mkstemp makes 0600; a result file should read like any other
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        if err.filename is None:  # a failed write() (disk full) names no file: name the one being written
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
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
                record_path.write_text(json.dumps({"url": url, **_validator(response.headers)}), encoding="utf-8")
            expected = response.length  # bytes promised by Content-Length (None: unknown)
            with open(part, "ab" if offset else "wb") as handle:
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


_NETWORK_ERRNOS = {errno.ECONNRESET, errno.ECONNREFUSED, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH,
                   errno.ENETUNREACH, errno.EPIPE}


def _missing_ancestors(path: Path) -> list[Path]:
    """The folders ``path.mkdir(parents=True)`` would create, deepest first."""
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    for folder in folders:  # deepest first
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError:  # not empty (a .part kept for the next try), or not ours to remove
            return


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
    created = _missing_ancestors(downloads)
    downloads.mkdir(parents=True, exist_ok=True)
    done, part, record_path = _cache_names(url, downloads)
    try:
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
    except BaseException:
        _remove_if_empty([downloads, *(c for c in created if c != downloads)])
        raise
    return dest_dir


def _archive_damaged(archive: Path, err: BaseException) -> UserError:
    return UserError(f"{archive}: damaged or truncated archive ({type(err).__name__}: {err or 'no detail'}); "
                     "it was removed from the cache, run the fetch again")


def _unpack(archive: Path, dest_dir: Path) -> None:
    staging = Path(tempfile.mkdtemp(dir=dest_dir.parent, prefix=".unpack."))
    created = _missing_ancestors(dest_dir)
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
        _remove_if_empty(created)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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
