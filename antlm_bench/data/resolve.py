"""Where the data folder is: ``--data-dir``, then ``$ANTLM_BENCH_DATA``, then the user cache
(``~/.cache/antlm-bench/data``, filled by ``antlm-bench data fetch``); and checking its files against a manifest.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from antlm_bench.data.files import sha256_file
from antlm_bench.data.readers import read_text
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
    text = read_text(manifest, "pass a sha256sum-style manifest (UTF-8 text)")
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
