"""Where the data lives and how its files are read.

Resolution order for the data folder: ``--data-dir``, then ``$ANTLM_BENCH_DATA``, then the user cache
(``~/.cache/antlm-bench/data``, filled by ``antlm-bench data fetch``). Readers understand the BabyLM layout:
``*.jsonl`` or ``*.jsonl.xz`` files, and password-protected zips read in memory (EWoK's terms forbid plain-text
copies, so nothing is ever unpacked to disk).
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import lzma
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from antlm_bench.errors import UserError

DATA_ENV_VAR = "ANTLM_BENCH_DATA"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "antlm-bench" / "data"


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """Return the data folder, or raise a UserError naming every place that was tried."""
    tried: list[str] = []
    if data_dir is not None:
        path = Path(data_dir).expanduser()
        if path.is_dir():
            return path
        raise UserError(f"--data-dir {path} is not a folder; pass the folder that holds blimp_filtered/ etc.")
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if path.is_dir():
            return path
        tried.append(f"${DATA_ENV_VAR}={path} (not a folder)")
    cache = default_cache_dir()
    if cache.is_dir() and any(cache.iterdir()):
        return cache
    tried.append(f"{cache} (empty)")
    raise UserError(
        "no data folder found; tried " + ", ".join(tried)
        + f". Pass --data-dir DIR, set ${DATA_ENV_VAR}, or run `antlm-bench data fetch --url URL`."
    )


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def parse_jsonl_lines(lines: Iterable[str], source: str) -> Iterator[dict]:
    """Parse JSON lines; a malformed line raises a UserError with ``source:line``."""
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"{source}:{line_no}: not valid JSON ({err.msg}); fix or re-fetch the file") from None
        if not isinstance(record, dict):
            raise UserError(f"{source}:{line_no}: expected a JSON object, got {type(record).__name__}")
        yield record


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a ``.jsonl`` or ``.jsonl.xz`` file into a list of dicts."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        with _open_text(path) as handle:
            return list(parse_jsonl_lines(handle, str(path)))
    except (lzma.LZMAError, EOFError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot be read ({err}); the file is corrupt, re-fetch it") from None


def read_zip_jsonl(zip_path: str | os.PathLike, member: str, password: str | None) -> list[dict]:
    """Read one JSONL member of a (possibly password-protected) zip, in memory only."""
    zip_path = Path(zip_path)
    try:
        with zipfile.ZipFile(zip_path) as archive:
            raw = archive.read(member, pwd=password.encode() if password else None)
    except KeyError:
        raise UserError(f"{zip_path}: has no member {member}") from None
    except RuntimeError as err:  # zipfile's way of saying "bad password"
        raise UserError(f"{zip_path}: {err}; check the password in the task spec") from None
    except zipfile.BadZipFile as err:
        raise UserError(f"{zip_path}: not a readable zip ({err}); re-fetch it") from None
    return list(parse_jsonl_lines(raw.decode("utf-8").splitlines(), f"{zip_path}!{member}"))


def list_zip_members(zip_path: str | os.PathLike, folder: str, suffix: str = ".jsonl") -> list[str]:
    with zipfile.ZipFile(zip_path) as archive:
        return sorted(n for n in archive.namelist() if n.startswith(folder.rstrip("/") + "/") and n.endswith(suffix))


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


def verify_manifest(data_dir: Path, manifest: Path | None = None) -> tuple[list[str], list[str]]:
    """Check files against a ``sha256sum`` manifest. Returns (ok, problems)."""
    manifest = manifest or data_dir / "MANIFEST.sha256"
    if not manifest.is_file():
        raise UserError(f"{manifest}: no manifest; pass --manifest FILE")
    ok, problems = [], []
    for line_no, line in enumerate(manifest.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise UserError(f"{manifest}:{line_no}: expected '<sha256>  <path>'")
        expected, name = parts[0], parts[1].lstrip("*").strip()
        target = manifest.parent / name
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
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fetch(url: str, sha256: str | None, dest_dir: Path | None = None, timeout: float = 60.0) -> Path:
    """Download an archive (resumably, via HTTP Range) into the cache, verify it, and unpack it atomically.

    The partial download lives in ``<dest>/.downloads/<name>.part`` so an interrupted fetch resumes where it
    stopped. The archive is unpacked into a temporary folder and moved into place only when complete.
    """
    dest_dir = dest_dir or default_cache_dir()
    downloads = dest_dir.parent / ".downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    name = Path(urllib.request.urlparse(url).path).name or "data.archive"
    part = downloads / (name + ".part")
    done = downloads / name
    if done.exists() and sha256 is not None and sha256_file(done) != sha256.lower():
        done.unlink()  # an older archive of the same name: not the one asked for
    if not done.exists():
        offset = part.stat().st_size if part.exists() else 0
        request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if offset and response.status != 206:  # server ignored Range: start over
                    offset = 0
                expected = response.length  # bytes promised by Content-Length (None: unknown)
                with open(part, "ab" if offset else "wb") as handle:
                    shutil.copyfileobj(response, handle, 1 << 20)
                received = part.stat().st_size - offset
                # http.client returns a short body without an error when the connection drops
                if expected is not None and received < expected:
                    raise ConnectionError(f"connection closed after {received} of {expected} bytes")
        except urllib.error.HTTPError as err:
            if err.code == 416 and part.exists():  # nothing left to fetch
                pass
            else:
                raise UserError(f"fetch {url}: HTTP {err.code}; check the URL") from None
        except (OSError, http.client.HTTPException) as err:  # URLError, timeouts, resets, short reads
            raise UserError(f"fetch {url}: {err}; run the same command again to resume") from None
        if sha256 is not None:
            actual = sha256_file(part)
            if actual != sha256.lower():
                part.unlink()
                raise UserError(f"fetch {url}: sha256 {actual} != expected {sha256}; the download was removed")
        os.replace(part, done)
    _unpack(done, dest_dir)
    return dest_dir


def _unpack(archive: Path, dest_dir: Path) -> None:
    staging = Path(tempfile.mkdtemp(dir=dest_dir.parent, prefix=".unpack."))
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                _check_members(archive, z.namelist())
                z.extractall(staging)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as t:
                _check_members(archive, t.getnames())
                t.extractall(staging, filter="data")
        else:
            raise UserError(f"{archive}: neither a zip nor a tar archive")
        # an archive with one top folder (data/...) unpacks to its contents
        entries = list(staging.iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else staging
        dest_dir.mkdir(parents=True, exist_ok=True)
        for entry in root.iterdir():
            target = dest_dir / entry.name
            if target.exists():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            os.replace(entry, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_members(archive: Path, names: list[str]) -> None:
    for name in names:
        if name.startswith("/") or ".." in Path(name).parts:
            raise UserError(f"{archive}: unsafe member path {name!r}; refusing to unpack")
