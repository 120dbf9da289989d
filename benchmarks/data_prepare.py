"""Time and peak memory of `antlm-bench data prepare` on a 1.64M- and a 9.8M-word corpus, with a 100M projection.

    python benchmarks/data_prepare.py                          # 1.64M and 9.8M words, this checkout
    python benchmarks/data_prepare.py --rev fdfef81            # and the same corpora with an older commit
    python benchmarks/data_prepare.py --copies 1 --source DATA/pretrain_sample     # a quick smoke run

The 1.64M-word corpus is ``DATA/pretrain_1600k`` (its ``*.train`` files); the 9.8M-word one (the BabyLM
strict-small track's size) is built in a temporary folder from it: each line written six times, each copy under
its own suffix word (`` #1`` .. `` #6``) so that de-duplication keeps all six. Each row is one child process,
``python -m antlm_bench data prepare --corpus C --cache-dir EMPTY --recipe R --preset P`` (a fresh cache: the
tokenizer is trained and the corpus packed, nothing reused); its wall time, CPU time and peak resident set come
from ``os.wait4`` (that child alone); ``read/BPE/pack`` are the seconds of its three steps as it printed them
(reading and cleaning, training the tokenizer, tokenizing and packing). ``cores`` is CPU time over wall time: how many cores the run kept busy on
average (of the ``sched_getaffinity`` cores it may use). ``bytes/token`` is the peak resident set over the packed
tokens (the packed arrays themselves are 5 bytes a token: int32 ids, bool word starts).

The 100M-word row is a projection, not a measurement: time and peak memory extrapolated linearly in words through
the two measured rows. The target (issue #54): peak under 1 GB whatever the corpus size (``--target-gb``); the exit
status is 1 when a measured row of this checkout reaches it. With ``--rev``, that commit's code (``git archive``
into a temporary folder) runs the same corpora first, for comparison; it is not held to the target.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PROJECTED_WORDS = 100_000_000


@dataclass
class Row:
    code: str
    corpus: str
    words: int
    tokens: int
    wall_s: float
    cpu_s: float
    peak_bytes: int
    stages: str = ""  # seconds reading, training the tokenizer and packing, as data prepare printed them
    hashes: str = ""  # the tokenizer and data sha256 prefixes data prepare printed
    cache: Path | None = None


def build_copies(source: Path, target: Path, copies: int) -> Path:
    """``source``'s ``*.train`` files with each line written ``copies`` times, each copy under its own suffix."""
    for path in sorted(source.rglob("*.train")):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(path, encoding="utf-8") as lines, open(out, "w", encoding="utf-8") as copy:
            for line in lines:
                line = line.rstrip("\n")
                if line.strip():
                    copy.writelines(f"{line} #{k}\n" for k in range(1, copies + 1))
    return target


def checkout(rev: str, folder: Path) -> Path:
    """The package as commit ``rev`` had it, unpacked into ``folder`` (``git archive``)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def prepare(code_root: Path, corpus: Path, cache: Path, recipe: str, preset: str, label: str, name: str) -> Row:
    """One ``data prepare`` child: its wall time, CPU time, peak RSS, and the words and tokens it reports."""
    env = {**os.environ, "PYTHONPATH": str(code_root), "COLUMNS": "200"}
    env.pop("TOKENIZERS_PARALLELISM", None)  # as a plain shell has it
    argv = [sys.executable, "-m", "antlm_bench", "data", "prepare", "--recipe", recipe, "--preset", preset,
            "--corpus", str(corpus), "--cache-dir", str(cache)]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=code_root)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        log.seek(0)
        output = log.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.stderr.write(output[-3000:])
        raise SystemExit(f"{label}: data prepare on {corpus} failed (exit {os.waitstatus_to_exitcode(status)})")
    words = re.search(r"corpus: read .*?, ([\d,]+) words", output)
    tokens = re.search(r"packed: [\d,]+ sequences x \d+ = ([\d,]+) tokens", output)
    if words is None or tokens is None:
        sys.stderr.write(output[-3000:])
        raise SystemExit(f"{label}: no word or token count in data prepare's output")
    hashes = re.search(r"tokenizer: .*sha256 (\w+)\s.*data sha256 (\w+)", output, re.S)
    stages = [re.search(pattern, output) for pattern in (r"corpus: read .*\(([\d.]+) s\)",
                                                         r"tokenizer: trained.*\(([\d.]+) s\)",
                                                         r"packing: [\d,]+ sequences.*\(([\d.]+) s\)")]
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return Row(label, name, int(words.group(1).replace(",", "")), int(tokens.group(1).replace(",", "")), wall,
               usage.ru_utime + usage.ru_stime, usage.ru_maxrss * scale,
               "/".join(f"{float(m.group(1)):.0f}" if m else "?" for m in stages),
               " ".join(hashes.groups()) if hashes else "", cache)


def packed_arrays(cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """The packed arrays a run left in its cache: a ``<key>.npz`` (before #54) or a ``<key>/`` folder of ``.npy``."""
    for path in (cache / "packed").glob("*.npz"):
        with np.load(path) as stored:
            return stored["input_ids"], stored["word_starts"]
    folder = next(p for p in (cache / "packed").iterdir() if p.is_dir() and not p.name.startswith("."))
    return (np.load(folder / "input_ids.npy", mmap_mode="r"), np.load(folder / "word_starts.npy", mmap_mode="r"))


def same_output(old: Row, new: Row) -> str:
    """Whether two rows packed the same corpus into the same arrays, under the same data and tokenizer hashes."""
    old_ids, old_starts = packed_arrays(old.cache)
    new_ids, new_starts = packed_arrays(new.cache)
    same = (old.hashes == new.hashes and np.array_equal(old_ids, new_ids)
            and np.array_equal(old_starts, new_starts))
    return (f"{new.corpus}: {'the same' if same else 'NOT the same'} packed arrays ({new_ids.shape[0]:,} x "
            f"{new_ids.shape[1]}), tokenizer and data sha256 ({new.hashes or 'not printed'} vs "
            f"{old.hashes or 'not printed'})")


def show(row: Row, projected: bool = False) -> str:
    cores = "" if projected else f"{row.cpu_s / row.wall_s:5.2f}"
    return (f"| {row.code:<13} | {row.corpus:<30} | {row.words / 1e6:8.2f}M | {row.tokens / 1e6:8.2f}M | "
            f"{row.wall_s:8.1f} | {row.stages:>13} | {cores:>5} | {row.peak_bytes / 2**20:9,.0f} | "
            f"{row.peak_bytes / row.tokens:7.1f} |")


def project(small: Row, large: Row) -> Row:
    """The 100M-word row, linear in words through two measured rows (a projection, not a measurement)."""
    slope = (PROJECTED_WORDS - large.words) / (large.words - small.words)
    return Row(large.code, "100M words (projection)", PROJECTED_WORDS,
               round(large.tokens + (large.tokens - small.tokens) * slope),
               large.wall_s + (large.wall_s - small.wall_s) * slope, 0.0,
               round(large.peak_bytes + (large.peak_bytes - small.peak_bytes) * slope))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data = Path(os.environ.get("ANTLM_BENCH_DATA", "~/.cache/antlm-bench/data")).expanduser()
    parser.add_argument("--source", type=Path, default=data / "pretrain_1600k",
                        help="Corpus folder the rows are built from (default DATA/pretrain_1600k).")
    parser.add_argument("--copies", default="1,6", help="Rows: the source with each line written N times, "
                        "comma-separated (default 1,6: 1.64M and 9.8M words).")
    parser.add_argument("--recipe", default="antlm-babyllama", help="Recipe (default antlm-babyllama).")
    parser.add_argument("--preset", default="paper", help="Preset: its vocabulary and sequence length, and no "
                        "word cap (default paper: 16,000 tokens, 128).")
    parser.add_argument("--rev", default=None, help="Also run this commit's code on the same corpora (git archive).")
    parser.add_argument("--target-gb", type=float, default=1.0, help="Peak RSS target (default 1 GB).")
    args = parser.parse_args()
    copies = sorted({int(n) for n in args.copies.split(",")})
    source = args.source.expanduser()
    if not source.is_dir():
        raise SystemExit(f"{source}: not a corpus folder; pass --source or set ANTLM_BENCH_DATA")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"data prepare --recipe {args.recipe} --preset {args.preset}; corpus {source} x {args.copies}; "
          f"{cores} cores this process may use; load average {os.getloadavg()[0]:.1f} at the start")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="antlm-bench-prepare-") as scratch:
        work = Path(scratch)
        corpora = {n: source if n == 1 else build_copies(source, work / f"corpus_x{n}", n) for n in copies}
        codes = [("this checkout", ROOT)]
        if args.rev:
            codes.insert(0, (args.rev[:12], checkout(args.rev, Path(tempfile.mkdtemp(dir=work, prefix="rev-")))))
        for label, code_root in codes:
            for n, corpus in corpora.items():
                cache = Path(tempfile.mkdtemp(dir=work, prefix="cache-"))
                name = source.name if n == 1 else f"{source.name} x{n} (suffixed)"
                rows.append(prepare(code_root, corpus, cache, args.recipe, args.preset, label, name))
                print(f"  {label}: {name}: {rows[-1].wall_s:.1f} s, peak {rows[-1].peak_bytes / 2**20:,.0f} MB",
                      flush=True)
        # the older commit's rows come first, one per corpus, then this checkout's in the same order
        compared = [same_output(old, new) for old, new in zip(rows, rows[len(corpora):])] if args.rev else []
    print()
    print("| code          | corpus                         |    words |   tokens |   wall s | read/BPE/pack | cores |"
          "   peak MB | B/token |")
    print("|---------------|--------------------------------|----------|----------|----------|---------------|-------|"
          "-----------|---------|")
    for label, _ in codes:
        measured = [row for row in rows if row.code == label]
        for row in measured:
            print(show(row))
        if len(measured) >= 2 and measured[-1].words > measured[0].words:
            print(show(project(measured[0], measured[-1]), projected=True))
    if compared:
        print("\nOutput, this checkout against " + args.rev + ":\n" + "\n".join(compared))
    if len(corpora) >= 2:
        print("\nThe 100M rows are projections (linear in words through the smallest and largest measured rows), "
              "not measurements; from corpora of a few million words or less they overstate the memory, whose "
              "fixed-size buffers (a read block, a batch of lines) are still filling up there.")
    over = [row for row in rows if row.code == "this checkout" and row.peak_bytes >= args.target_gb * 2**30]
    for row in over:
        print(f"FAIL: {row.corpus}: peak {row.peak_bytes / 2**30:.2f} GB, target under {args.target_gb} GB")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
