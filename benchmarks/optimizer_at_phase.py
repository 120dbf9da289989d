"""AdamW at a phase boundary: keep the moments (one optimizer for the run) or reset them (a fresh optimizer per
phase). The LR schedule restarts at every phase either way.

    OMP_NUM_THREADS=1 python benchmarks/optimizer_at_phase.py --seeds 1,2,3 --output /tmp/oap

For each policy, two copies of the antlm-babyllama recipe (``optimizer_at_phase: keep`` / ``reset``, nothing
else changed) run ``antlm-bench run --preset tiny --tasks blimp --seeds ...`` (the default schedule
4_CLM+16_MLM+4_CLM). The table gives, per policy: the loss and gradient norm (before clipping) of the first step
after each switch (mean over seeds, from metrics.jsonl), and the final BLiMP accuracy (all items) per seed with
the mean. Results are recorded in benchmarks/optimizer_at_phase.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _recipes(folder: Path, base: str) -> dict[str, str]:
    """Two copies of recipe ``base`` that differ only in optimizer_at_phase; {policy: recipe name}."""
    document = yaml.safe_load((ROOT / "trainers" / f"{base}.yaml").read_text(encoding="utf-8"))
    names = {}
    for policy in ("keep", "reset"):
        name = f"{base}-opt-{policy}"
        (folder / f"{name}.yaml").write_text(yaml.safe_dump({**document, "name": name,
                                                              "optimizer_at_phase": policy}), encoding="utf-8")
        names[policy] = name
    return names


def _switches(run: Path) -> list[dict[str, float]]:
    """(loss, grad norm) of the first step of every phase after the first."""
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    out = []
    for i, (before, after) in enumerate(zip(metrics, metrics[1:])):
        if after["phase_index"] != before["phase_index"]:
            # the first step's loss and gradient come before any update, so they are the same under both
            # policies; the policy shows in the steps after it: the second step and the mean of the first 20
            window = metrics[i + 1:i + 21]
            out.append({"phase": after["phase_index"], "objective": after["objective"], "loss": after["loss"],
                        "grad_norm": after["grad_norm"], "loss_before": before["loss"],
                        "loss_second": metrics[i + 2]["loss"],
                        "loss_first20": sum(m["loss"] for m in window) / len(window)})
    return out


def _blimp(run: Path) -> float:
    from antlm_bench.results.store import read_scores

    rows = [r for r in read_scores([run]).to_pylist()
            if r["task"] == "blimp" and r["subtask"] == "" and r["metric"] == "accuracy"]
    return max(rows, key=lambda r: r["n"])["value"]  # the final evaluation (all items), not a phase's quick look


def summarise(output: Path, seeds: str, names: dict[str, str], minutes: dict[str, float]) -> dict[str, object]:
    report: dict[str, object] = {}
    for policy, name in names.items():
        runs = sorted((output / policy).glob(f"{name}-tiny-*-seed*"))
        per_seed = {run.name.rsplit("seed", 1)[1]: {"switches": _switches(run), "blimp": _blimp(run)} for run in runs}
        report[policy] = {"runs": per_seed, "minutes": minutes.get(policy)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--base", default="antlm-babyllama")
    parser.add_argument("--output", type=Path, default=Path(tempfile.gettempdir()) / "optimizer-at-phase")
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    include = args.output / "recipes"
    (include / "trainers").mkdir(parents=True, exist_ok=True)  # a trainers/ subfolder: not read as tasks
    names = _recipes(include / "trainers", args.base)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    minutes: dict[str, float] = {}
    for policy, name in names.items():
        start = time.perf_counter()
        # re-running reuses finished runs (antlm-bench run does), so an interrupted measurement continues
        command = [sys.executable, "-m", "antlm_bench", "run", "--model", name, "--preset", "tiny", "--seeds",
                   args.seeds, "--tasks", "blimp", "--output", str(args.output / policy), "--include-path",
                   str(include), "--device", "cpu", "--quiet"]
        print(" ".join(command), flush=True)
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        minutes[policy] = round((time.perf_counter() - start) / 60, 1)
    report = summarise(args.output, args.seeds, names, minutes)
    (args.output / "report.json").write_text(json.dumps(report, indent=1))
    print("\n| policy | switch | first-step loss (seeds) | grad norm (seeds) | loss the step before | second-step loss "
          "| mean loss, first 20 steps |")
    print("|---|---|---|---|---|---|---|")
    for policy, data in report.items():
        runs = data["runs"]  # type: ignore[index]
        n_switch = len(next(iter(runs.values()))["switches"])
        for k in range(n_switch):
            cells = [r["switches"][k] for r in runs.values()]
            label = f"phase {cells[0]['phase']} ({cells[0]['objective']})"
            print(f"| {policy} | {label} | {statistics.mean(c['loss'] for c in cells):.2f} "
                  f"({', '.join(format(c['loss'], '.2f') for c in cells)}) | "
                  f"{statistics.mean(c['grad_norm'] for c in cells):.1f} "
                  f"({', '.join(format(c['grad_norm'], '.1f') for c in cells)}) | "
                  f"{statistics.mean(c['loss_before'] for c in cells):.2f} | "
                  f"{statistics.mean(c['loss_second'] for c in cells):.2f} | "
                  f"{statistics.mean(c['loss_first20'] for c in cells):.2f} |")
    print("\n| policy | BLiMP per seed | mean | minutes |")
    print("|---|---|---|---|")
    for policy, data in report.items():
        runs = data["runs"]  # type: ignore[index]
        values = [r["blimp"] for r in runs.values()]
        print(f"| {policy} | {', '.join(f'{s}: {100 * v:.1f}' for s, v in zip(runs, values))} | "
              f"{100 * statistics.mean(values):.1f} | {data['minutes']} |")  # type: ignore[index]


if __name__ == "__main__":
    main()
