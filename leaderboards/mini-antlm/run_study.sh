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

python3 - "$RUNS" "$HERE/results" <<'PY'
import json, shutil, sys
from pathlib import Path
import pyarrow.compute as pc
import pyarrow.parquet as pq
runs, final = Path(sys.argv[1]), Path(sys.argv[2])
# written beside the old tables and swapped in at the end: a stopped export leaves the old tables in place
results = final.with_name(final.name + ".new")
shutil.rmtree(results, ignore_errors=True)
TEXT = ["context", "sentence_good", "sentence_bad"]  # evaluation data is never committed
# GLUE's per-example predictions: no statistic reads them (its F1 members have no per-item decomposition, so a
# GLUE cell's interval comes from the seeds), and they would be a third of the export
FLOATS = ["score_good", "score_bad", "value"]        # byte-stream split: about half the size, lossless
for arch in ("babyllama", "ltgbert"):
    sweep, out = runs / arch, results / arch
    (out / "sweep").mkdir(parents=True)
    record = json.loads((sweep / "sweep" / "sweep.json").read_text())
    for cell in record["cells"]:
        cell.pop("log", None)                         # the logs stay with the run folders
    (out / "sweep" / "sweep.json").write_text(json.dumps(record, indent=1) + "\n")
    shutil.copy(sweep / "sweep" / "decision.json", out / "sweep" / "decision.json")
    for cell in record["cells"]:
        run = sweep / cell["name"]
        store = out / run.name / "scores.parquet"
        for event in sorted(e for e in (run / "scores.parquet").iterdir() if e.is_dir() and e.name[0] not in "._"):
            (store / event.name).mkdir(parents=True)
            for name in ("part.parquet", "_event.json"):
                if (event / name).is_file():
                    shutil.copy(event / name, store / event.name / name)
            if (event / "_items.parquet").is_file():
                items = pq.read_table(event / "_items.parquet")
                items = items.filter(pc.not_equal(items["task"], "glue")).drop_columns(
                    [c for c in TEXT if c in items.column_names])
                if not items.num_rows:
                    continue
                floats = [c for c in FLOATS if c in items.column_names]
                pq.write_table(items, store / event.name / "_items.parquet", compression="zstd", compression_level=19,
                               use_dictionary=[c for c in items.column_names if c not in floats],
                               use_byte_stream_split=floats)
        meta = json.loads((run / "run.json").read_text())
        meta.get("config", {}).pop("output", None)
        (out / run.name / "run.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
old = final.with_name(final.name + ".old")
shutil.rmtree(old, ignore_errors=True)
if final.exists():
    final.rename(old)
results.rename(final)
shutil.rmtree(old, ignore_errors=True)
PY
antlm-bench leaderboard -d mini-antlm --family row -f markdown -o "$HERE/leaderboard.md" --plots "$HERE/plots"
antlm-bench leaderboard -d mini-antlm --family row -f html -o "$HERE/leaderboard.html"
antlm-bench leaderboard -d mini-antlm --family row -f parquet -o "$HERE/leaderboard.parquet"
for arch in babyllama ltgbert; do   # AntLM against its baseline: paired by seed and item, Holm over each row's tasks
  antlm-bench leaderboard -d "mini-antlm-$arch" --family row -f markdown -o "$HERE/leaderboard-$arch.md"
  antlm-bench leaderboard "$HERE/results/$arch" > "$HERE/decision-$arch.txt"   # the board, the decision under it
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
