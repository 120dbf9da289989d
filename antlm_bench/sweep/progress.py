"""The sweep's progress line: done / running / failed / waiting, and an ETA from the cells that ran.

On a terminal one line is redrawn in place; anywhere else (a CI log, a file, ``| grep``) a whole line is printed
each time a count changes, never a carriage return.
"""

from __future__ import annotations

import time
from typing import TextIO

from antlm_bench.progress import StatusLine, clock
from antlm_bench.sweep.record import DONE, FAILED, INTERRUPTED, REUSED, RUNNING, WAITING, SweepRecord


def eta_seconds(record: SweepRecord, slots: int) -> float | None:
    """Time left: the cells still to run (waiting ones whole, running ones less what they have done) at the mean
    wall time of the cells that ran to the end here, spread over ``slots`` parallel workers; None before one has."""
    ran = [s.seconds for s in record.states.values() if s.status == DONE and s.seconds is not None]
    if not ran:
        return None
    mean = sum(ran) / len(ran)
    now = time.monotonic()
    work = record.count(WAITING) * mean + sum(max(0.0, mean - (now - s.started)) for s in record.states.values()
                                              if s.status == RUNNING and s.started is not None)
    return work / max(1, slots)


class Progress:
    """Prints the line for a record; ``slots``: how many cells run at once (for the ETA)."""

    def __init__(self, record: SweepRecord, slots: int, stream: TextIO | None = None,
                 terminal: bool | None = None) -> None:
        self.record, self.slots = record, slots
        self.status = StatusLine(stream, terminal)

    def line(self) -> str:
        r = self.record
        total = len(r.states)
        done = r.count(DONE, REUSED)
        text = (f"sweep: {done}/{total} done ({r.count(REUSED)} reused), {r.count(RUNNING)} running, "
                f"{r.count(FAILED)} failed, {r.count(WAITING)} waiting")
        if r.count(INTERRUPTED):
            text += f", {r.count(INTERRUPTED)} interrupted"
        eta = eta_seconds(r, self.slots)
        if eta is not None and (r.count(WAITING) or r.count(RUNNING)):
            text += f", ETA {clock(eta)}"
        return text

    def show(self, force: bool = False) -> None:
        """Redraw (terminal) or print when the counts changed (elsewhere; the ETA alone changing prints nothing)."""
        text = self.line()
        self.status.show(text, key=text.split(", ETA")[0], force=force)

    def finish(self) -> None:
        self.status.finish(self.line())


__all__ = ["Progress", "eta_seconds"]
