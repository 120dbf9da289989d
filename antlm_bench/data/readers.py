"""Readers for the BabyLM layout: ``*.jsonl`` or ``*.jsonl.xz`` files, and password-protected zips read in memory
(EWoK's terms forbid plain-text copies, so nothing is ever unpacked to disk).
"""

from __future__ import annotations

import io
import json
import lzma
import os
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from antlm_bench.data.files import read_regular_file
from antlm_bench.errors import UserError, one_line, validation_line

ModelT = TypeVar("ModelT")  # a pydantic model class (read_json_model)


def open_text(path: Path) -> io.TextIOBase:
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


def data_files(folder: Path, pattern: str) -> list[Path]:
    """The files of ``folder`` matching ``pattern``, sorted; anything else under a data file's name (a folder, a
    dangling link, a FIFO) is one line naming it, before anything is read or hashed."""
    found = sorted(folder.glob(pattern))
    for path in found:
        if not path.is_file():
            kind = "a folder" if path.is_dir() else "a dangling link" if path.is_symlink() else "not a regular file"
            raise UserError(f"{path}: {kind} where a data file belongs; remove it and re-fetch the data "
                            "(`antlm-bench data fetch`)")
    return found


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a ``.jsonl`` or ``.jsonl.xz`` file into a list of dicts."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        with open_text(path) as handle:
            return list(parse_jsonl_lines(handle, str(path)))
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte {err.start} of a block: {err.reason}); "
                        "convert the file to UTF-8 or re-fetch it") from None
    except (lzma.LZMAError, EOFError) as err:
        raise UserError(f"{path}: cannot be read ({err}); the file is corrupt, re-fetch it") from None


def _zip_problem(zip_path: Path, err: BaseException, member: str | None = None) -> UserError:
    """One line for an unreadable zip or zip member (bad CRC, corrupt deflate stream, truncated file)."""
    where = f"{zip_path}!{member}" if member else str(zip_path)
    return UserError(f"{where}: not readable ({one_line(err, typed=True)}); the zip is damaged, fetch it again")


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


def read_text(path: Path, fix: str, *, follow_links: bool = True) -> str:
    """A configuration file's text (a sweep file, a recipe, task or leaderboard YAML, a manifest): read only when it
    is a regular file of bounded size (a FIFO would wait forever, ``/dev/zero`` never ends) and UTF-8 text; one
    UserError line naming the file and what to do (``fix``) otherwise. A file the user names may be a link to
    one (``follow_links``)."""
    raw = read_regular_file(path, follow_links=follow_links, fix=fix)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason}); {fix}") from None


def read_json(path: Path, what: str, fix: str, *, follow_links: bool = False) -> Any:
    """A JSON file's value; a file that does not parse is one UserError line naming the file (and line), what it
    is (``what``, e.g. "corrupt config") and what to do (``fix``). Read only when it is a regular file of bounded
    size (``data.files.read_regular_file``), and through a symbolic link only with ``follow_links`` (a model
    folder in the Hugging Face cache is links; a record in a folder of ours never is)."""
    raw = read_regular_file(path, follow_links=follow_links, fix=fix)
    try:
        return json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}: {what} ({err.msg}); {fix}") from None
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: {what} (not UTF-8 at byte {err.start}); {fix}") from None
    except RecursionError:
        raise UserError(f"{path}: {what} (JSON nested too deeply); {fix}") from None


def read_json_model(path: Path, model: type[ModelT], what: str, fix: str, *, follow_links: bool = False) -> ModelT:
    """A JSON record file read through its pydantic ``model`` (the one way every record is read), strictly: a file
    that does not parse, is no regular file (a FIFO, a device, a link planted at its name), or has a field that is
    missing, of the wrong type (no string for a number, no number for a string) or out of range, is one UserError
    line naming the file and the field (``what`` says what the file should be, ``fix`` what to do)."""
    from pydantic import ValidationError

    document = read_json(path, what, fix, follow_links=follow_links)
    try:
        return model.model_validate_json(json.dumps(document), strict=True)  # type: ignore[attr-defined]
    except ValidationError as err:
        raise UserError(f"{path}: {validation_line(err)}; {what}: {fix}") from None


def broken_json_message(path: Path) -> str | None:
    """One line naming the first JSON file of a model folder that does not parse (config.json, the tokenizer's
    files), or None when they all parse."""
    for name in ("config.json", "tokenizer_config.json", "tokenizer.json", "special_tokens_map.json"):
        file = Path(path) / name
        if not file.is_file():
            continue
        try:
            json.loads(file.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            return f"{file}: not UTF-8 text; re-save it (e.g. with save_pretrained)"
        except json.JSONDecodeError as err:
            return (f"{file}:{err.lineno}:{err.colno}: not valid JSON ({err.msg}); fix the file or re-save the "
                    "model with save_pretrained")
    return None
