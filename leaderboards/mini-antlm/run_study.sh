#!/usr/bin/env bash
# The mini-antlm study with `antlm-bench sweep --until-decided` (issue #23): for each architecture (tiny preset,
# the BabyLM pre-training sample), the AntLM schedule against the CLM-only baseline of the same total epochs, seeds
# added one a round (the same seed labels on both sides: paired) until the comparison is decided on every task
# (Lai's anytime-valid confidence sequence, docs/statistics.md) or MAX_SEEDS seeds a side; tasks BLiMP, BLiMP
# supplement, EWoK (accuracy and margin), the held-out pre-training loss, and GLUE by a frozen-feature probe.
# Then each sweep is exported into leaderboards/mini-antlm/results/<arch>/: every run's results store (the items
# without any sentence text: the data stays in the data folder) and run.json, and the sweep's record and decision
# (sweep/); the pages are rendered.
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
# this checkout's code runs (and its commit is what the rows record), wherever antlm-bench was installed from
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
RUNS=${RUNS:-runs/mini-antlm}          # run folders with checkpoints (not committed)
HERE=leaderboards/mini-antlm
MAX_SEEDS=${MAX_SEEDS:-10}
JOBS=${JOBS:-2}                         # cells at once; each uses one thread
TASKS=blimp,blimp_supplement,ewok,heldout,glue
export OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false

start=$(date +%s)
antlm-bench sweep --model antlm-babyllama --schedule "4_CLM+16_MLM+4_CLM,24_CLM" --preset tiny --tasks "$TASKS" \
  --run-option probe=true --until-decided --baseline 24_CLM --seeds 1-3 --max-seeds "$MAX_SEEDS" --jobs "$JOBS" --output "$RUNS/babyllama"
antlm-bench sweep --model antlm-ltgbert --schedule "2_CLM+20_MLM+2_CLM,24_CLM" --preset tiny --tasks "$TASKS" \
  --run-option probe=true --until-decided --baseline 24_CLM --seeds 1-3 --max-seeds "$MAX_SEEDS" --jobs "$JOBS" --output "$RUNS/ltgbert"
end=$(date +%s)

# each run's tables without evaluation text, then each sweep's record and decision (leaderboards/export_runs.py)
python3 leaderboards/export_runs.py "$HERE/results" "$RUNS"/babyllama/*-seed* "$RUNS"/ltgbert/*-seed* \
  "$RUNS"/babyllama/sweep "$RUNS"/ltgbert/sweep
antlm-bench leaderboard -d mini-antlm --family row -f markdown -o "$HERE/leaderboard.md" --plots "$HERE/plots"
antlm-bench leaderboard -d mini-antlm --family row -f html -o "$HERE/leaderboard.html"
antlm-bench leaderboard -d mini-antlm --family row -f parquet -o "$HERE/leaderboard.parquet"
for arch in babyllama ltgbert; do   # AntLM against its baseline: paired by seed and item, Holm over each row's tasks
  antlm-bench leaderboard -d "mini-antlm-$arch" --family row -f markdown -o "$HERE/leaderboard-$arch.md"
  # the board, the decision under it (the terminal's text, written atomically: a failed run of the tool leaves
  # the committed decision as it was)
  antlm-bench leaderboard "$HERE/results/$arch" -o "$HERE/decision-$arch.txt"
done
echo "this invocation: $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s for both sweeps (finished cells reused)"
python3 - "$HERE/results" <<'PY'   # what the sweeps that ran the cells took, from their records
import json, sys
from datetime import datetime
from pathlib import Path
def at(text): return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
for arch in ("babyllama", "ltgbert"):
    record = json.loads((Path(sys.argv[1]) / arch / "sweep" / "sweep.json").read_text())
    spans = [s for s in [*record.get("history", []), record] if s["counts"]["done"]]
    wall = sum((at(s["updated_at"]) - at(s["started_at"])).total_seconds() for s in spans)
    cells = [c["seconds"] for c in record["cells"] if c["seconds"] is not None]
    print(f"{arch}: {len(record['cells'])} cells; wall time of the sweep(s) that ran them {wall / 60:.1f} min; "
          f"cell wall times summed {sum(cells) / 60:.1f} min, median {sorted(cells)[len(cells) // 2]:.0f} s")
PY
