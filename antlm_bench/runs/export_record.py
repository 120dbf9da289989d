"""``antlm_export.json``: what an export holds, typed (``ExportRecord``). ``export`` writes it (its one writer) in
the export's top folder; two readers go through :func:`read_export_record`: ``export --overwrite`` (it replaces
only a folder that proves to be its own earlier output) and ``eval`` (it verifies an export's weights before
scoring them, :func:`verify_export`).

Every revision records the weights digest of its folder's files (``runs.identity.weights_digest``); a revision
whose files no longer give it was changed after the export, and is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from antlm_bench.data.readers import read_json_model
from antlm_bench.errors import UserError
from antlm_bench.runs.identity import weights_digest

EXPORT_FILE = "antlm_export.json"
EXPORT_SCHEMA_VERSION = 2  # 1 (no schema_version): digests over the loaded model's state dict, not verifiable here
MAIN = "main"


class ExportRevision(BaseModel):
    """One revision: ``main`` (the final model, in the top folder) or a ``chck_<N>`` branch (a subfolder)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    source: str
    weights_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    step: int | None = None
    words: int | None = None


class ExportRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[2]
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


def verify_revision(top: Path, record: ExportRecord, name: str, fix: str = SCORING_FIX) -> str:
    """The revision's weights digest, checked against the record; one line naming the folder when they differ."""
    revision = record.revision(name)
    if revision is None:
        raise UserError(f"{top / EXPORT_FILE}: field revisions has no {name!r}; the export is incomplete: {fix}")
    folder = record.folder_of(top, revision)
    if not folder.is_dir():
        raise UserError(f"{folder}: missing, though {EXPORT_FILE} records revision {name}; the export is "
                        f"incomplete: {fix}")
    found = weights_digest(folder)
    if found != revision.weights_sha256:
        raise UserError(f"{folder}: weights changed after the export (sha256 {found[:12]}, {EXPORT_FILE} records "
                        f"{revision.weights_sha256[:12]} for revision {name}); {fix}")
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
    return f"export revision {name} verified against {top / EXPORT_FILE} (weights sha256 {digest[:12]})"
