"""Peak memory of `antlm-bench eval` (minimal pairs, clm and pll) in a plain shell: target under 2 GB, tiny model.

    antlm-bench train --preset tiny --schedule 1_CLM+1_MLM --max-words 20000 --output /tmp/tiny
    python benchmarks/eval_memory.py --model /tmp/tiny/last                       # BLiMP, clm and pll
    python benchmarks/eval_memory.py --model /tmp/tiny/last --tasks blimp,blimp_supplement --limit 100
    python benchmarks/eval_memory.py --model /tmp/tiny/last --env TOKENIZERS_PARALLELISM=true   # the old way

Each evaluation is a child process (``python -m antlm_bench eval --model M --tasks T --scoring S``) started with
this shell's environment as a user's would be: ``TOKENIZERS_PARALLELISM`` unset unless ``--env`` sets it. Its peak
resident set is the child's own ``ru_maxrss`` (``os.wait4``: that child alone, not the largest of all children).
A row fails the target when its peak is at or above ``--target-gb``; the exit status is 1 then.

Why: the Hugging Face tokenizers' Rust thread pool (on when TOKENIZERS_PARALLELISM is unset) made PLL evaluation
of a 0.23M-parameter model grow to 9.6 GB on BLiMP + supplement (735 MB with the variable set to false); the
scorer now encodes without it (``antlm_bench.scoring.encode``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def peak_rss(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(peak resident set in bytes, wall seconds, exit status) of one child process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        if child.returncode != 0:
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace")[-2000:])
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return usage.ru_maxrss * scale, wall, child.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A checkpoint folder (a run's last/ or phase folder).")
    parser.add_argument("--tasks", default="blimp", help="Minimal-pair tasks (default blimp; blimp,blimp_supplement "
                        "for the whole of both).")
    parser.add_argument("--methods", default="clm,pll", help="Scoring methods, comma-separated (default clm,pll).")
    parser.add_argument("--limit", type=int, default=None, help="Items per subtask (default: all).")
    parser.add_argument("--target-gb", type=float, default=2.0, help="Peak RSS target (default 2 GB).")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE set in the children (repeat).")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("TOKENIZERS_PARALLELISM", None)  # a plain shell's
    for pair in args.env:
        name, _, value = pair.partition("=")
        env[name] = value
    shown_env = ", ".join(args.env) or "TOKENIZERS_PARALLELISM unset"
    print(f"model {args.model}; tasks {args.tasks}; limit {args.limit or 'all items'}; {shown_env}; "
          f"OMP_NUM_THREADS={env.get('OMP_NUM_THREADS', 'unset')}")
    print(f"{'method':<8} {'peak RSS':>10} {'wall':>8}  target < {args.target_gb:g} GB")
    failed = False
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        argv = [sys.executable, "-m", "antlm_bench", "eval", "--model", args.model, "--tasks", args.tasks,
                "--scoring", method, "--no-progress"]
        if args.limit is not None:
            argv += ["--limit", str(args.limit)]
        peak, wall, code = peak_rss(argv, env)
        ok = code == 0 and peak < args.target_gb * 1e9
        failed |= not ok
        verdict = "ok" if ok else (f"FAILED (exit {code})" if code else "OVER TARGET")
        print(f"{method:<8} {peak / 1e6:>7.0f} MB {wall:>7.0f}s  {verdict}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
