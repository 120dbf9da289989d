"""Parity of bfloat16 scoring with float32 on the real tasks: how many minimal pairs flip, how far accuracy moves.

    python benchmarks/bf16_parity.py --model RUN_OR_CHECKPOINT [--model ...] --tasks blimp,blimp_supplement,ewok \
        [--limit 50] [--scoring auto] [--emulated]

Each model is scored twice through ``evaluate`` (the code ``antlm-bench eval`` runs), weights in float32 and in
bfloat16 (``eval --dtype bfloat16``), every item logged. Per task the table gives the pairs scored, the pairs whose
outcome (win / tie / loss) differs between the two, the accuracy of each (unweighted mean over subtasks, as the
task score) and their difference in points, and the largest change of a pair's margin in nats.

``--emulated`` allows bfloat16 on a CPU without native bf16 (torch then emulates it, far slower): the rounding of
weights and activations to bfloat16 is the same arithmetic on every CPU, so the flips it counts are the format's,
but the summation order of the matmul kernels differs from a native bf16 CPU's; the table says which CPU ran it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path

from antlm_bench.evaluate import evaluate
from antlm_bench.models import precision as precision_module
from antlm_bench.scoring import model as scoring_model


def _score(model: Path, tasks: str, dtype: str, limit: int | None, scoring: str, data_dir: Path | None):
    start = time.process_time()
    out = evaluate(model, tasks=tasks, dtype=dtype, limit=limit, scoring=scoring, log_samples=True,
                   progress=False, data_dir=data_dir)
    return out, time.process_time() - start


def _by_item(out) -> dict[tuple[str, str, str], dict]:
    return {(r["task"], r["subtask"], r["item_id"]): r for r in out.items.to_pylist()
            if r["score_good"] is not None and r["score_bad"] is not None}


def compare(model: Path, tasks: str, limit: int | None, scoring: str, data_dir: Path | None) -> list[str]:
    fp32, fp32_cpu = _score(model, tasks, "float32", limit, scoring, data_dir)
    bf16, bf16_cpu = _score(model, tasks, "bfloat16", limit, scoring, data_dir)
    a, b = _by_item(fp32), _by_item(bf16)
    per_task: dict[str, dict] = defaultdict(lambda: {"n": 0, "flips": 0, "max_margin": 0.0,
                                                     "fp32": defaultdict(list), "bf16": defaultdict(list)})
    for key, row in a.items():
        other = b[key]
        task = per_task[key[0]]
        task["n"] += 1
        task["flips"] += row["correct"] != other["correct"]
        margin_a = row["score_good"] - row["score_bad"]
        margin_b = other["score_good"] - other["score_bad"]
        task["max_margin"] = max(task["max_margin"], abs(margin_a - margin_b))
        task["fp32"][key[1]].append(row["correct"])
        task["bf16"][key[1]].append(other["correct"])
    lines = [f"model `{model}`, scoring {fp32.method}, limit {limit or 'none'}; scoring CPU seconds: float32 "
             f"{fp32_cpu:.0f}, bfloat16 {bf16_cpu:.0f}", "",
             "| task | pairs | flipped | flipped % | float32 % | bfloat16 % | difference (points) | max margin change "
             "(nats) |", "|---|---|---|---|---|---|---|---|"]
    for name, task in per_task.items():
        acc32 = 100 * statistics.fmean(statistics.fmean(v) for v in task["fp32"].values())
        acc16 = 100 * statistics.fmean(statistics.fmean(v) for v in task["bf16"].values())
        lines.append(f"| {name} | {task['n']} | {task['flips']} | {100 * task['flips'] / task['n']:.2f} | "
                     f"{acc32:.2f} | {acc16:.2f} | {acc16 - acc32:+.2f} | {task['max_margin']:.3f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, action="append", required=True)
    parser.add_argument("--tasks", default="blimp,blimp_supplement,ewok")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--scoring", default="auto")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--emulated", action="store_true",
                        help="allow bfloat16 on a CPU without native bf16 (slow; the table says so)")
    args = parser.parse_args()
    native = precision_module.cpu_bf16_instructions()
    if not native:
        if not args.emulated:
            raise SystemExit("this CPU has no native bf16; pass --emulated to measure the parity anyway (slowly)")
        scoring_model.cpu_bf16_instructions = lambda: ("emulated",)  # lift eval's refusal, for this measurement
    emulated = "none (torch emulates bf16: the parity of the format, not of a native kernel)"
    print(f"CPU bf16: {', '.join(native) if native else emulated}")
    for model in args.model:
        print("\n".join(compare(model, args.tasks, args.limit, args.scoring, args.data_dir)))
        print()


if __name__ == "__main__":
    main()
