"""Time and peak memory of the results layer against the floor of reading its tables once (issue #54).

    python benchmarks/leaderboard.py                       # the committed study: 40 and 80 runs, then 400 and 1,600
    python benchmarks/leaderboard.py --sizes 400           # synthetic stores of these sizes only
    python benchmarks/leaderboard.py --sizes ""            # the committed study alone

Every row is one child process (``python -m antlm_bench ...`` or a plain pyarrow reader), its wall time and peak
resident set from ``os.wait4`` (that child alone), one command at a time: run it on a quiet machine.

- **read-once floor**: a plain pyarrow reader of every Parquet file of the runs (each event's ``part.parquet`` and
  ``_items.parquet``), each read once, nothing computed: what any command over those runs must at least pay.
- **board (40 runs)**: ``antlm-bench leaderboard -d cpu-study-ltgbert``, the LTG-BERT arm of the reference study
  with its sweep decision, which the command verifies by recomputing the decision's comparisons from the tables.
- **check (40 runs)**: ``antlm-bench check --results R --baseline R`` on the same runs.
- **board (80 runs)**: ``antlm-bench leaderboard leaderboards/cpu-study/results``, both arms and both decisions.
- **board (N runs, synthetic)**: the 80 committed runs copied until there are N, each copy relabelled (its own run
  id in every row, its events' digests recorded anew), so that every copy is a run of its own; the board groups
  them by recipe, preset and schedule as always, so its rows pool N/16 seeds. These show how the cost grows with
  the runs (the per-run seconds should stay flat).

Targets (issue #54): the 40-run board and check within 4x their read-once floor (aim 2x); the 80-run board within
2.2x the 40-run one and under 1 GB; time linear in the runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "leaderboards" / "cpu-study" / "results"

_FLOOR = """
import sys
from pathlib import Path
import pyarrow.parquet as pq
rows = 0
files = sorted(p for root in sys.argv[1:] for p in Path(root).rglob("*.parquet") if p.is_file()
               and p.parent.parent.name == "scores.parquet")
for path in files:
    rows += pq.read_table(path).num_rows
print(f"{len(files)} files, {rows} rows")
"""


@dataclass
class Measured:
    what: str
    runs: int
    seconds: float
    peak_bytes: int
    note: str = ""


def _child(argv: list[str], cwd: Path) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes, last line of output) of one child process; a failure stops the benchmark."""
    with tempfile.TemporaryFile(mode="w+") as log:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        log.seek(0)
        output = log.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(argv)} failed ({code}):\n{output[-3000:]}")
    lines = [line for line in output.splitlines() if line.strip()]
    return seconds, usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024), lines[-1] if lines else ""


def floor(roots: list[Path], runs: int, label: str) -> Measured:
    seconds, peak, line = _child([sys.executable, "-c", _FLOOR, *map(str, roots)], ROOT)
    return Measured(f"read-once floor ({label})", runs, seconds, peak, line)


def command(what: str, args: list[str], runs: int) -> Measured:
    seconds, peak, _ = _child([sys.executable, "-m", "antlm_bench", *args], ROOT)
    return Measured(what, runs, seconds, peak)


def synthetic(study: Path, runs: int, dest: Path) -> Path:
    """``runs`` runs made of relabelled copies of the study's runs, under ``dest``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from antlm_bench.results.store.write import record_data_digests

    originals = sorted(p.parent for p in study.rglob("run.json") if (p.parent / "scores.parquet").is_dir())
    made = 0
    copy = 0
    while made < runs:
        for original in originals:
            if made == runs:
                break
            target = dest / f"copy{copy}" / original.name
            shutil.copytree(original, target)
            run_id_of = f"{original.name}-copy{copy}"
            for part in target.glob("scores.parquet/*/*.parquet"):
                table = pq.read_table(part)
                index = table.schema.get_field_index("run_id")
                table = table.set_column(index, "run_id", pa.array([run_id_of] * table.num_rows, pa.string()))
                pq.write_table(table, part)
            for record_file in target.glob("scores.parquet/*/_event.json"):
                record_data_digests(record_file.parent)
            made += 1
        copy += 1
    return dest


def _table(rows: list[Measured], floors: dict[int, float]) -> str:
    lines = ["| what | runs | wall s | x read-once floor | s per run | peak RSS |", "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        ratio = "" if row.what.startswith("read-once") or row.runs not in floors else \
            f"{row.seconds / floors[row.runs]:.1f}x"
        lines.append(f"| {row.what} | {row.runs} | {row.seconds:.1f} | {ratio} | {row.seconds / row.runs:.2f} | "
                     f"{row.peak_bytes / 2**30:.2f} GB |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="400,1600", help="synthetic store sizes (runs), comma-separated")
    parser.add_argument("--keep", type=Path, default=None, help="build the synthetic stores here and keep them")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    ltgbert = STUDY / "ltgbert"
    rows: list[Measured] = []
    floors: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "board.txt"
        for measured in (floor([ltgbert], 40, "40 runs"),
                         command("board (40 runs, with its sweep decision)",
                                 ["leaderboard", "-d", "cpu-study-ltgbert", "-o", str(out)], 40),
                         command("check (40 runs against themselves)",
                                 ["check", "--results", str(ltgbert), "--baseline", str(ltgbert)], 40),
                         floor([STUDY], 80, "80 runs"),
                         command("board (80 runs, both arms and decisions)",
                                 ["leaderboard", str(STUDY), "-o", str(out)], 80)):
            rows.append(measured)
            if measured.what.startswith("read-once"):
                floors[measured.runs] = measured.seconds
            print(_table([measured], floors).splitlines()[-1], flush=True)
        for size in sizes:
            base = args.keep or Path(scratch)
            store = base / f"synthetic-{size}"
            if not store.is_dir():
                started = time.perf_counter()
                synthetic(STUDY, size, store)
                print(f"(made {size} relabelled runs in {time.perf_counter() - started:.0f} s)", flush=True)
            for measured in (floor([store], size, f"{size} runs"),
                             command(f"board ({size} runs, synthetic)", ["leaderboard", str(store), "-o", str(out)],
                                     size)):
                rows.append(measured)
                if measured.what.startswith("read-once"):
                    floors[measured.runs] = measured.seconds
                print(_table([measured], floors).splitlines()[-1], flush=True)
            if args.keep is None:
                shutil.rmtree(store)
    print()
    print(f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs ({', '.join(os.uname()[0:1] + os.uname()[4:5])}), "
          f"Python {sys.version.split()[0]}")
    print(_table(rows, floors))
    by = {r.what.split(" (")[0] + f"@{r.runs}": r for r in rows}
    board40, check40, board80 = by.get("board@40"), by.get("check@40"), by.get("board@80")
    verdicts = []
    if board40 and check40:
        for row in (board40, check40):
            ratio = row.seconds / floors[40]
            verdicts.append(f"{row.what}: {ratio:.1f}x its floor (target <= 4x, aim 2x): "
                            f"{'met' if ratio <= 4 else 'NOT met'}")
    if board40 and board80:
        growth = board80.seconds / board40.seconds
        verdicts.append(f"80-run board: {growth:.2f}x the 40-run one (target <= 2.2x): "
                        f"{'met' if growth <= 2.2 else 'NOT met'}; peak {board80.peak_bytes / 2**30:.2f} GB "
                        f"(target < 1 GB): {'met' if board80.peak_bytes < 2**30 else 'NOT met'}")
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
