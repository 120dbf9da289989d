"""``antlm_export.json``: what an export holds, typed (``ExportRecord``). ``export`` writes it (its one writer) in
the export's top folder; two readers go through :func:`read_export_record`: ``export --overwrite`` (it replaces
only a folder that proves to be its own earlier output) and ``eval`` (it verifies an export's weights before
scoring them, :func:`verify_export`).

Every revision records the weights digest of its folder's files (``runs.identity.weights_digest``) and the sha256
of every file of its folder (config.json, the tokenizer's files, the modeling code, the weights, antlm_state.json):
an export is verified whole (:func:`verify_revision`), and a revision with a file changed, missing or added after the
export is refused. Hidden entries (a name starting with ``.``: the folder's lock while ``export --overwrite`` holds
it) are no part of a revision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from antlm_bench.data.files import sha256_file
from antlm_bench.data.readers import read_json_model
from antlm_bench.errors import UserError
from antlm_bench.runs.identity import weights_digest

EXPORT_FILE = "antlm_export.json"
# 1 (no schema_version): digests over the loaded model's state dict, not verifiable here; 2: the weights only
EXPORT_SCHEMA_VERSION = 3
MAIN = "main"


class ExportRevision(BaseModel):
    """One revision: ``main`` (the final model, in the top folder) or a ``chck_<N>`` branch (a subfolder)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    source: str
    weights_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    # every file of the revision's folder (its name) -> its sha256: the export verified whole, not the weights only
    files: dict[str, Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]] = Field(min_length=1)
    step: int | None = Field(None, ge=0)
    words: int | None = Field(None, ge=0)


class ExportRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[3]
    format: Literal["babylm"]
    source: str
    branches: list[str]
    antlm_bench: str
    revisions: list[ExportRevision] = Field(min_length=1)

    def revision(self, name: str) -> ExportRevision | None:
        return next((r for r in self.revisions if r.name == name), None)

    def folder_of(self, top: Path, revision: ExportRevision) -> Path:
        return top if revision.name == MAIN else top / revision.name


SCORING_FIX = "export the model again (antlm-bench export), or pass --skip-export-check to score the files unverified"


def read_export_record(top: Path, fix: str = SCORING_FIX) -> ExportRecord:
    """The export record of the export folder ``top``; one line naming the file and the field otherwise."""
    path = top / EXPORT_FILE
    if path.is_symlink() or not path.is_file():
        raise UserError(f"{path}: missing or not a file; not an antlm-bench export record: {fix}")
    return read_json_model(path, ExportRecord, "not an antlm-bench export record of this version", fix)


def export_of(folder: Path) -> tuple[Path, str] | None:
    """(the export's top folder, the revision name) when ``folder`` is an export's main model or one of its branch
    folders; None for any other folder."""
    folder = Path(folder)
    if (folder / EXPORT_FILE).exists() or (folder / EXPORT_FILE).is_symlink():
        return folder, MAIN
    if (folder.parent / EXPORT_FILE).is_file() and folder.name.startswith("chck_"):
        return folder.parent, folder.name
    return None


def revision_files(folder: Path, branches: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """Every file of a revision's folder -> its sha256: what ``antlm_export.json`` records of it. ``branches``: the
    subfolders of the main revision that are revisions of their own; the export record and hidden entries are no
    part of a revision. Anything but a regular file there (a link, another folder) is refused in one line."""
    found: dict[str, str] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name == EXPORT_FILE or (entry.name in branches and entry.is_dir()
                                                                       and not entry.is_symlink()):
            continue
        if entry.is_symlink() or not entry.is_file():
            kind = "a symbolic link" if entry.is_symlink() else "a folder" if entry.is_dir() else "not a regular file"
            raise UserError(f"{entry}: {kind} in an export revision, which holds regular files only")
        found[entry.name] = sha256_file(entry)
    return found


def verify_revision(top: Path, record: ExportRecord, name: str, fix: str = SCORING_FIX) -> str:
    """The revision verified whole against the record: its weights digest, and every file of its folder as
    recorded (none changed, missing or added); one line naming the folder or the file when they differ. Returns
    the weights digest."""
    revision = record.revision(name)
    if revision is None:
        raise UserError(f"{top / EXPORT_FILE}: field revisions has no {name!r}; the export is incomplete: {fix}")
    folder = record.folder_of(top, revision)
    if not folder.is_dir() or folder.is_symlink():
        raise UserError(f"{folder}: missing, though {EXPORT_FILE} records revision {name}; the export is "
                        f"incomplete: {fix}")
    branches = {r.name for r in record.revisions if r.name != MAIN} if name == MAIN else set()
    try:
        files = revision_files(folder, branches)  # regular files only: a FIFO as weights would hang
    except UserError as err:
        raise UserError(f"{err}: {fix}") from None
    found = weights_digest(folder)  # before the files: its line says what changed in words
    if found != revision.weights_sha256:
        raise UserError(f"{folder}: weights changed after the export (sha256 {found[:12]}, {EXPORT_FILE} records "
                        f"{revision.weights_sha256[:12]} for revision {name}); {fix}")
    for file, digest in sorted(revision.files.items()):
        if file not in files:
            raise UserError(f"{folder / file}: missing, though {EXPORT_FILE} records it for revision {name}; the "
                            f"export is incomplete: {fix}")
        if files[file] != digest:
            raise UserError(f"{folder / file}: changed after the export (sha256 {files[file][:12]}, {EXPORT_FILE} "
                            f"records {digest[:12]} for revision {name}); {fix}")
    added = sorted(set(files) - set(revision.files))
    if added:
        raise UserError(f"{folder / added[0]}: not part of revision {name} as {EXPORT_FILE} records it (added after "
                        f"the export); {fix}")
    return found


def verify_export(folder: Path) -> str | None:
    """For a folder that is part of an export: its revision verified against ``antlm_export.json`` before it is
    scored (a line saying so, for the caller's notes); None for a folder that is no export."""
    found = export_of(folder)
    if found is None:
        return None
    top, name = found
    record = read_export_record(top)
    digest = verify_revision(top, record, name)
    return (f"export revision {name} verified whole against {top / EXPORT_FILE} (its files as exported; weights "
            f"sha256 {digest[:12]})")
