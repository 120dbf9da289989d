"""Known data sources for ``antlm-bench data fetch NAME``: files at a fixed git commit of public repositories, each
checked against its recorded checksum before it is kept.

The registry (``sources.tsv`` beside this file) was made from ``shared/data/PROVENANCE.tsv``: for each file of
the BabyLM evaluation layout, the repository, commit and path it came from and the git blob SHA-1 of that file
(``sha1(b"blob <size>\\0" + bytes)``, what ``git hash-object`` prints). A file is downloaded into memory, its checksum
checked, and only then written (atomically) into the data folder; a source is complete when its every file is.
EWoK's members are never written as plain text (its terms of use): they are verified in memory and packed into
``ewok_filtered.zip`` with the ZipCrypto password ``ewok``, the layout the EWoK task reads.

Pretraining text: the ``pretrain`` source brings BabyLM-Tiny's ``train_600k`` files (and their dev files) whole; the
shared ``pretrain_sample`` folder holds 10k-word snippets cut from those same files, so a fetched corpus has another
data hash than the shared one. The Switchboard file (of ``train_10M``, ~10x larger than the others) is left out so
that it does not dominate the mixture.

Why these repositories: the official BabyLM evaluation data is published only on OSF (2024: osf.io/ad7qg, 2025:
osf.io/ryjfm), and the ``babylm`` organisation's pipeline repositories hold the code, not the data. The two GitHub
repositories here (``suchirsalhan/babylm-evaluation-2025``, ``moritzlad/BabyLM-Tiny``) vendor byte-identical
copies; a fixed commit and each file's git blob hash (checked against a third copy, see shared/data/README.md)
make what is kept the official bytes whoever serves them.

``$ANTLM_BENCH_SOURCES`` names a registry file of your own (same columns) to use instead of the shipped one.
``--mirror BASE`` fetches the same paths from another server (``BASE/<owner>/<repo>/<commit>/<path>``, the layout
of raw.githubusercontent.com); the checksums are the same, so a mirror cannot change what is kept.
"""

from __future__ import annotations

import csv
import hashlib
import http.client
import io
import os
import struct
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from antlm_bench.data import atomic_write_bytes, check_url, default_cache_dir, sha256_file
from antlm_bench.data.readers import read_text
from antlm_bench.errors import UserError
from antlm_bench.progress import line_printer

REGISTRY_FILE = Path(__file__).with_name("sources.tsv")
DEFAULT_BASE = "https://raw.githubusercontent.com"
ZIP_PASSWORDS = {"ewok_filtered.zip": b"ewok"}  # zips we assemble from verified members (never unpacked to disk)
GROUPS = {
    # the data of the task group babylm (the AntLM paper's four tasks)
    "babylm-eval": ["blimp", "blimp_supplement", "ewok", "glue"],
    # the data of the task group babylm-2025: every shipped task, and the official fast subsets (eval --fast)
    "babylm-2025": ["blimp", "blimp_supplement", "ewok", "glue", "entity_tracking", "wug_adj_nominalization",
                    "reading", "fast_eval"],
    # the quickstart's: everything any shipped task reads, and the pre-training text
    "babylm": ["blimp", "blimp_supplement", "ewok", "glue", "entity_tracking", "wug_adj_nominalization",
               "reading", "fast_eval", "pretrain"],
}
DESCRIPTIONS = {
    "blimp": "BLiMP, BabyLM-filtered (67 paradigms)",
    "blimp_supplement": "BLiMP supplement (5 files)",
    "ewok": "EWoK, BabyLM-filtered (11 domains; kept only inside the password zip ewok_filtered.zip)",
    "glue": "BabyLM 2025 (Super)GLUE subsets (BoolQ, MNLI, MRPC, MultiRC, QQP, RTE, WSC)",
    "pretrain": "pre-training text: BabyLM-Tiny train_600k files whole, with their dev files",
    "fast_eval": "BabyLM 2025 fast-eval subsets (BLiMP, supplement, EWoK zip as published)",
    "entity_tracking": "BabyLM 2025 entity tracking",
    "wug_adj_nominalization": "BabyLM 2025 wug adjective nominalization",
    "reading": "BabyLM 2025 reading times",
}


@dataclass(frozen=True)
class SourceFile:
    source: str
    dest: str  # path in the data folder; "archive.zip::member" for a member we pack into a password zip
    repo: str
    commit: str
    path: str
    checksum: str  # "git-blob-sha1:HEX" or "sha256:HEX"

    def url(self, base: str = DEFAULT_BASE) -> str:
        return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{self.path}"

    def matches(self, payload: bytes) -> bool:
        kind, _, expected = self.checksum.partition(":")
        return checksum_of(payload, kind) == expected.lower()


def git_blob_sha1(payload: bytes) -> str:
    """What ``git hash-object`` prints for a file with these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(payload) + payload, usedforsecurity=False).hexdigest()


def checksum_of(payload: bytes, kind: str) -> str:
    if kind == "git-blob-sha1":
        return git_blob_sha1(payload)
    if kind == "sha256":
        return hashlib.sha256(payload).hexdigest()
    raise UserError(f"{REGISTRY_FILE}: unknown checksum kind {kind!r}; use git-blob-sha1 or sha256")


def load_registry(path: Path | None = None) -> list[SourceFile]:
    """The registry: ``path``, else ``$ANTLM_BENCH_SOURCES`` (a file of your own in the same format), else the
    shipped one."""
    path = Path(path or os.environ.get("ANTLM_BENCH_SOURCES") or REGISTRY_FILE)
    if not path.is_file():
        raise UserError(f"{path}: no such registry file; unset $ANTLM_BENCH_SOURCES or point it at a file")
    text = read_text(path, "point $ANTLM_BENCH_SOURCES at a registry file (UTF-8, tab-separated)")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    files = []
    for number, row in enumerate(csv.DictReader(lines, delimiter="\t"), start=2):
        try:
            files.append(SourceFile(row["source"], row["dest"], row["repo"], row["commit"], row["path"],
                                    row["checksum"]))
        except (KeyError, TypeError):
            raise UserError(f"{path}: row {number} lacks a column; expected source, dest, repo, commit, path, "
                            "checksum") from None
        _check_dest(path, number, files[-1].dest)
    return files


def _check_dest(path: Path, number: int, dest: str) -> None:
    """A registry row writes only inside the data folder: ``dest`` (and a zip member after ``::``) is a relative
    path without ``..`` (a registry of one's own may come from anywhere)."""
    for part in dest.split("::", 1):
        pieces = part.replace("\\", "/").split("/")
        if not part or part.startswith("/") or ".." in pieces or "" in pieces or ":" in pieces[0]:
            raise UserError(f"{path}: row {number}: dest {dest!r} leaves the data folder (or is empty); give a "
                            "relative path inside it, without '..'")


def source_names(files: list[SourceFile] | None = None) -> list[str]:
    return list(dict.fromkeys(f.source for f in (files or load_registry())))


def resolve_names(names: list[str], files: list[SourceFile]) -> list[str]:
    """Source and group names -> source names (in order, once each); an unknown name lists the known ones."""
    known = source_names(files)
    chosen: list[str] = []
    for name in names:
        key = name.strip().lower()
        members = GROUPS.get(key, [key] if key in known else None)
        if members is None:
            raise UserError(f"data fetch {name!r}: unknown source; known: {', '.join([*GROUPS, *known])} "
                            "(see `antlm-bench data sources`)")
        chosen.extend(m for m in members if m not in chosen)
    return chosen


# -- ZipCrypto (PKWARE traditional encryption), to keep EWoK's members inside a password zip --------------------------

_CRC_TABLE = [0] * 256
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0xEDB88320 if _c & 1 else _c >> 1
    _CRC_TABLE[_i] = _c


class _ZipCryptoKeys:
    def __init__(self, password: bytes) -> None:
        self.k0, self.k1, self.k2 = 0x12345678, 0x23456789, 0x34567890
        for byte in password:
            self._update(byte)

    def _update(self, byte: int) -> None:
        self.k0 = (self.k0 >> 8) ^ _CRC_TABLE[(self.k0 ^ byte) & 0xFF]
        self.k1 = ((self.k1 + (self.k0 & 0xFF)) * 134775813 + 1) & 0xFFFFFFFF
        self.k2 = (self.k2 >> 8) ^ _CRC_TABLE[(self.k2 ^ (self.k1 >> 24)) & 0xFF]

    def encrypt(self, plain: bytes) -> bytes:
        out = bytearray(len(plain))
        for index, byte in enumerate(plain):
            temp = self.k2 | 2
            out[index] = byte ^ (((temp * (temp ^ 1)) >> 8) & 0xFF)
            self._update(byte)
        return bytes(out)


def password_zip(members: list[tuple[str, bytes]], password: bytes) -> bytes:
    """A zip of ``members`` (deflated, ZipCrypto-encrypted), readable by ``zipfile`` with ``pwd=password``, with a
    folder entry for each member's folder. Deterministic: the same members give the same bytes."""
    out, central = io.BytesIO(), []
    dos_time, dos_date = 0, (0 << 9) | (1 << 5) | 1  # 1980-01-01 00:00
    folders = sorted({name.rsplit("/", 1)[0] + "/" for name, _ in members if "/" in name})
    for name, content in [(folder, b"") for folder in folders] + list(members):
        raw_name = name.encode("utf-8")
        crc = zlib.crc32(content) & 0xFFFFFFFF
        if name.endswith("/"):
            body, method, flags, attributes = b"", 0, 0, (0o40755 << 16) | 0x10
        else:
            packer = zlib.compressobj(9, zlib.DEFLATED, -15)
            compressed = packer.compress(content) + packer.flush()
            header = hashlib.sha256(raw_name + content).digest()[:11] + bytes([crc >> 24])  # last byte: CRC check
            body = _ZipCryptoKeys(password).encrypt(header + compressed)
            method, flags, attributes = 8, 1, 0o100644 << 16
        offset = out.tell()
        out.write(struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, flags, method, dos_time, dos_date, crc, len(body),
                              len(content), len(raw_name), 0) + raw_name + body)
        central.append(struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, flags, method, dos_time, dos_date, crc,
                                   len(body), len(content), len(raw_name), 0, 0, 0, 0, attributes, offset) + raw_name)
    directory, start = b"".join(central), out.tell()
    out.write(directory + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(central), len(central), len(directory),
                                      start, 0))
    return out.getvalue()


# -- fetching ----------------------------------------------------------------------------------------------------------

def _get(url: str, timeout: float, attempts: int = 3) -> bytes:
    """The whole body of ``url``; a dropped connection is retried (these files are small), HTTP errors are not."""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                body = response.read()
                if response.length is not None and response.length != 0:
                    raise ConnectionError(f"connection closed with {response.length} bytes unread")
                return body
        except urllib.error.HTTPError as err:
            raise UserError(f"fetch {url}: HTTP {err.code} {err.reason}; check --mirror, or the network") from None
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError) as err:
            if attempt == attempts - 1:
                raise UserError(f"fetch {url}: {getattr(err, 'reason', err)}; run the same command again "
                                "(files already verified are kept)") from None
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


@dataclass
class FetchReport:
    dest: Path
    fetched: list[str]
    kept: list[str]  # already present and verified: not downloaded again


def _present(dest: Path, files: list[SourceFile], manifest: dict[str, str]) -> bool:
    """True when every file of ``files`` is in ``dest`` as a previous fetch wrote it (its recorded sha256)."""
    targets = {f.dest.split("::")[0] for f in files}
    return all(name in manifest and (dest / name).is_file() and sha256_file(dest / name) == manifest[name]
               for name in targets)


def _read_manifest(dest: Path) -> dict[str, str]:
    path = dest / "MANIFEST.sha256"
    if not path.is_file():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        if len(digest) == 64 and name:
            found[name] = digest
    return found


def _write_manifest(dest: Path, manifest: dict[str, str]) -> None:
    text = "".join(f"{digest}  {name}\n" for name, digest in sorted(manifest.items()))
    atomic_write_bytes(dest / "MANIFEST.sha256", text.encode("utf-8"))


def fetch_sources(names: list[str], dest: Path | None = None, mirror: str | None = None, timeout: float = 60.0,
                  progress: Callable[[str], None] | bool | None = True,
                  registry: list[SourceFile] | None = None) -> FetchReport:
    """Fetch the named sources (or groups) into ``dest`` (default: the data cache), verified file by file.

    A source whose files are already there, as a previous fetch recorded them in ``MANIFEST.sha256``, is kept.
    ``antlm-bench data verify`` checks the folder afterwards. ``progress``: a function given each line, True
    (stderr) or None (no lines)."""
    say = line_printer(progress)
    files = registry if registry is not None else load_registry()
    base = mirror or os.environ.get("ANTLM_BENCH_MIRROR") or DEFAULT_BASE
    check_url(base.rstrip("/") + "/x")
    chosen = resolve_names(names, files)
    dest = Path(dest).expanduser() if dest is not None else default_cache_dir()
    dest = dest if dest.is_absolute() else Path.cwd() / dest
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        return _fetch_into(dest, chosen, files, base, timeout, say)
    except BaseException:
        if created and not any(dest.iterdir()):
            dest.rmdir()
        raise


def _inside(dest: Path, name: str) -> None:
    """Refuse a write that a link inside ``dest`` would carry out of it (``dest/blimp -> /etc``)."""
    target = (dest / name).resolve()
    if target != dest.resolve() and dest.resolve() not in target.parents:
        raise UserError(f"{dest / name}: leads outside {dest} (through a symbolic link); nothing was written: "
                        "remove the link or fetch into another --dest")


def _fetch_into(dest: Path, chosen: list[str], files: list[SourceFile], base: str, timeout: float,
                say: Callable[[str], None]) -> FetchReport:
    manifest = _read_manifest(dest)
    report = FetchReport(dest, [], [])
    for name in chosen:
        members = [f for f in files if f.source == name]
        if _present(dest, members, manifest):
            say(f"{name}: {len(members)} files already here and verified")
            report.kept.append(name)
            continue
        clock, size = time.perf_counter(), 0
        say(f"{name}: fetching {len(members)} files from {base} ...")
        zips: dict[str, list[tuple[str, bytes]]] = {}
        for number, item in enumerate(members, start=1):
            url = item.url(base)
            payload = _get(url, timeout)
            if not item.matches(payload):
                kind, _, expected = item.checksum.partition(":")
                raise UserError(f"fetch {url}: {kind} {checksum_of(payload, kind)} != pinned {expected}; nothing "
                                f"was kept of this file (a changed or damaged file, or a wrong --mirror)")
            size += len(payload)
            archive, _, member = item.dest.partition("::")
            _inside(dest, archive)
            if member:
                zips.setdefault(archive, []).append((member, payload))
            else:
                atomic_write_bytes(dest / item.dest, payload)
                manifest[item.dest] = hashlib.sha256(payload).hexdigest()
            if number % 20 == 0 and number < len(members):
                say(f"{name}: {number} of {len(members)} files verified")
        for archive, content in zips.items():
            password = ZIP_PASSWORDS.get(archive)
            if password is None:
                raise UserError(f"{REGISTRY_FILE}: {archive}: no password known for a zip of members")
            packed = password_zip(sorted(content), password)
            atomic_write_bytes(dest / archive, packed)
            manifest[archive] = hashlib.sha256(packed).hexdigest()
        _write_manifest(dest, manifest)  # after each source: an interrupted fetch keeps what it verified
        say(f"{name}: {len(members)} files, {size / 1e6:.1f} MB, checksums ok ({time.perf_counter() - clock:.1f} s)")
        report.fetched.append(name)
    return report


__all__ = ["DEFAULT_BASE", "GROUPS", "FetchReport", "SourceFile", "fetch_sources", "git_blob_sha1", "load_registry",
           "password_zip", "resolve_names", "source_names"]
