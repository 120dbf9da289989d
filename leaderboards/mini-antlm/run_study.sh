#!/usr/bin/env bash
# The mini-antlm study with `antlm-bench sweep --until-decided` (issue #23): for each architecture (tiny preset,
# the BabyLM pre-training sample), the AntLM schedule against the CLM-only baseline of the same total epochs, seeds
# added one a round (the same seed labels on both sides: paired) until the comparison is decided on every task
# (Lai's anytime-valid confidence sequence, docs/statistics.md) or MAX_SEEDS seeds a side; tasks BLiMP, BLiMP
# supplement, EWoK (accuracy and margin) and the held-out pre-training loss. Then the tables are exported into
# leaderboards/mini-antlm/results/ (each run's results store, the items without any sentence text: the data stays
# in the data folder), with each sweep's decision, and the pages are rendered.
#
#   ANTLM_BENCH_DATA=../shared/data bash leaderboards/mini-antlm/run_study.sh
#
# Schedules (epochs over the preset's corpus: BabyLlama tiny 120k words, LTG-BERT tiny 40k words):
#   antlm-babyllama: 4_CLM+16_MLM+4_CLM (the paper's BabyLlama schedule) against 24_CLM
#   antlm-ltgbert:   2_CLM+20_MLM+2_CLM (the recipe's default 6_CLM+60_MLM+6_CLM scaled to 24 epochs; the paper's
#                    text does not state LTG-BERT's schedule) against 24_CLM
# A sweep that is stopped resumes where it was (finished cells are reused, unfinished ones resumed).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-runs/mini-antlm}          # run folders with checkpoints (not committed)
HERE=leaderboards/mini-antlm
MAX_SEEDS=${MAX_SEEDS:-12}
JOBS=${JOBS:-2}                         # cells at once; each uses one thread
TASKS=blimp,blimp_supplement,ewok,heldout
export OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false

start=$(date +%s)
antlm-bench sweep --model antlm-babyllama --schedule "4_CLM+16_MLM+4_CLM,24_CLM" --preset tiny --tasks "$TASKS" \
  --until-decided --baseline 24_CLM --seeds 1-3 --max-seeds "$MAX_SEEDS" --jobs "$JOBS" --output "$RUNS/babyllama"
antlm-bench sweep --model antlm-ltgbert --schedule "2_CLM+20_MLM+2_CLM,24_CLM" --preset tiny --tasks "$TASKS" \
  --until-decided --baseline 24_CLM --seeds 1-3 --max-seeds "$MAX_SEEDS" --jobs "$JOBS" --output "$RUNS/ltgbert"
end=$(date +%s)

python3 - "$RUNS" "$HERE/results" <<'PY'
import json, shutil, sys
from pathlib import Path
import pyarrow.parquet as pq
runs, results = Path(sys.argv[1]), Path(sys.argv[2])
if results.exists():
    shutil.rmtree(results)
# evaluation data is never committed: the items' text columns are dropped from every event of a run's store
DROP = ["context", "sentence_good", "sentence_bad"]
for sweep in sorted(p for p in runs.iterdir() if (p / "sweep").is_dir()):
    shutil.copytree(sweep / "sweep", results / f"sweep-{sweep.name}", ignore=shutil.ignore_patterns("logs", "slurm"))
    for run in sorted(p for p in sweep.iterdir() if (p / "scores.parquet").is_dir()):
        store = results / run.name / "scores.parquet"
        for event in sorted(e for e in (run / "scores.parquet").iterdir() if e.is_dir() and e.name[0] not in "._"):
            (store / event.name).mkdir(parents=True)
            for name in ("part.parquet", "_event.json"):
                if (event / name).is_file():
                    shutil.copy(event / name, store / event.name / name)
            if (event / "_items.parquet").is_file():
                items = pq.read_table(event / "_items.parquet")
                pq.write_table(items.drop_columns([c for c in DROP if c in items.column_names]),
                               store / event.name / "_items.parquet", compression="zstd")
        record = json.loads((run / "run.json").read_text())
        record.get("config", {}).pop("output", None)
        (results / run.name / "run.json").write_text(json.dumps(record, indent=1, sort_keys=True))
PY
antlm-bench leaderboard -d mini-antlm --family row -f markdown -o "$HERE/leaderboard.md" --plots "$HERE/plots"
antlm-bench leaderboard -d mini-antlm --family row -f html -o "$HERE/leaderboard.html"
antlm-bench leaderboard -d mini-antlm --family row -f parquet -o "$HERE/leaderboard.parquet"
for arch in babyllama ltgbert; do   # AntLM against its baseline: paired by seed and item, Holm over each row's tasks
  antlm-bench leaderboard -d "mini-antlm-$arch" --family row -f markdown -o "$HERE/leaderboard-$arch.md"
  antlm-bench leaderboard "$RUNS/$arch" > "$HERE/decision-$arch.txt"   # the sweep's decision under the table
done
echo "study wall time: $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s (training + evaluation, $JOBS cells at once)"
