"""The one clock of every record: UTC now, as a datetime and as the ISO 8601 text records write
(``2026-12-03T18:30:00+00:00``: seconds, the offset spelled out, so that any ISO parser reads it back)."""

from __future__ import annotations

import datetime as _dt


def utc_now() -> _dt.datetime:
    """Now, in UTC, timezone-aware."""
    return _dt.datetime.now(_dt.timezone.utc)


def utc_stamp() -> str:
    """Now as a record writes it: ISO 8601 to the second, in UTC."""
    return utc_now().isoformat(timespec="seconds")


__all__ = ["utc_now", "utc_stamp"]
