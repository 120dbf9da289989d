"""Shared by the data tests: hand-made tar and zip archives, including the hostile kinds a fetch must refuse."""

from __future__ import annotations

import io
import tarfile
import zipfile


def make_tar(members: list[tuple[str, str, object]], mode: str = "w:gz") -> bytes:
    """Hand-made tar: (name, kind, payload) with kind file (bytes), dir, sym / hard (link target), chr, fifo."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                assert isinstance(payload, bytes)
                info.size = len(payload)
                archive.addfile(info, io.BytesIO(payload))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                info.linkname = str(payload)
            if kind == "dir":
                info.mode = 0o755
            archive.addfile(info)
    return buffer.getvalue()


def make_zip(members: list[tuple[str, bytes, int | None]]) -> bytes:
    """Hand-made zip: (name, payload, unix mode or None)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, payload, mode in members:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode is not None:
                info.external_attr = mode << 16
            archive.writestr(info, payload)
    return buffer.getvalue()


def zeros_zip(total: int, members: int = 1) -> bytes:
    """A zip bomb: ``total`` bytes of zeros in ``members`` members, deflated (~1000x), written in chunks."""
    buffer = io.BytesIO()
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/README.md", b"hi\n")
        for number in range(members):
            with archive.open(f"data/zeros-{number}.bin", "w", force_zip64=True) as member:
                for _ in range(total // members // len(chunk)):
                    member.write(chunk)
    return buffer.getvalue()
