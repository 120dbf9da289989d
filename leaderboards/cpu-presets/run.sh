#!/usr/bin/env bash
# The cpu presets over 3 seeds (issue #31): each backbone's plain baseline recipe (babyllama: CLM only, 2 epochs;
# ltgbert: MLM only, 2 epochs) and LTG-BERT under the AntLM schedule (antlm-ltgbert: 1_CLM+2_MLM+1_CLM, the paper's
# causal-ends shape in 4 epochs) at preset cpu on pretrain_1600k (1.64M words of BabyLM text), trained and scored by
# `antlm-bench run` exactly as a user runs it: full filtered BLiMP (all 67 paradigms, every item), the BLiMP
# supplement, EWoK and the held-out loss on the corpus's dev split, each run scored by its last phase's objective
# (clm after CLM, pll after MLM).
# Each run's results store is exported into results/<recipe>/ (items without any sentence text: the data stays in
# the data folder) with its run.json; the board is rendered from there.
#
#   ANTLM_BENCH_DATA=../shared/data bash leaderboards/cpu-presets/run.sh            # both backbones, one after the other
#   RECIPES=ltgbert SEEDS=2-3 bash leaderboards/cpu-presets/run.sh                  # a part of it (the rest resumes)
#
# A stopped run resumes where it was (`run` reuses finished training and evaluations).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${ANTLM_BENCH_DATA:-../shared/data}
RUNS=${RUNS:-runs/cpu-presets}          # run folders with checkpoints (not committed)
HERE=leaderboards/cpu-presets
SEEDS=${SEEDS:-1-3}
RECIPES=${RECIPES:-"babyllama antlm-ltgbert ltgbert"}
TASKS=${TASKS:-blimp,blimp_supplement,ewok,heldout}
export OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false

for recipe in $RECIPES; do
  case $recipe in
    babyllama) schedule=2_CLM ;;
    antlm-ltgbert) schedule=1_CLM+2_MLM+1_CLM ;;
    ltgbert) schedule=2_MLM ;;
    *) echo "unknown recipe $recipe" >&2; exit 2 ;;
  esac
  /usr/bin/time -v antlm-bench run --model "$recipe" --preset cpu --schedule "$schedule" --corpus "$DATA/pretrain_1600k" \
    --seeds "$SEEDS" --tasks "$TASKS" --eval-every none --threads 1 --quiet --output "$RUNS/$recipe" \
    2> >(tee -a "$RUNS-$recipe.time.log" >&2)
done

python3 - "$RUNS" "$HERE/results" <<'PY'
import json, shutil, sys
from pathlib import Path
import pyarrow.compute as pc
import pyarrow.parquet as pq
runs, final = Path(sys.argv[1]), Path(sys.argv[2])
# written beside the tables, then each run swapped in whole: a stopped export leaves every run's old or new tables,
# and runs exported before whose run folders are gone here (another machine, another sitting) stay as they are
results = final.with_name(final.name + ".new")
shutil.rmtree(results, ignore_errors=True)
TEXT = ["context", "sentence_good", "sentence_bad"]  # evaluation data is never committed
FLOATS = ["score_good", "score_bad", "value"]
for run in sorted(p for p in runs.glob("*/*") if (p / "run.json").is_file() and (p / "scores.parquet").is_dir()):
    out = results / run.parent.name / run.name
    for event in sorted(e for e in (run / "scores.parquet").iterdir() if e.is_dir() and e.name[0] not in "._"):
        (out / "scores.parquet" / event.name).mkdir(parents=True)
        for name in ("part.parquet", "_event.json"):
            if (event / name).is_file():
                shutil.copy(event / name, out / "scores.parquet" / event.name / name)
        if (event / "_items.parquet").is_file():
            items = pq.read_table(event / "_items.parquet")
            items = items.drop_columns([c for c in TEXT if c in items.column_names])
            floats = [c for c in FLOATS if c in items.column_names]
            pq.write_table(items, out / "scores.parquet" / event.name / "_items.parquet", compression="zstd",
                           compression_level=19, use_dictionary=[c for c in items.column_names if c not in floats],
                           use_byte_stream_split=floats)
    meta = json.loads((run / "run.json").read_text())
    meta.get("config", {}).pop("output", None)
    (out / "run.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
for fresh in sorted(results.glob("*/*")):
    target = final / fresh.relative_to(results)
    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    fresh.rename(target)
    shutil.rmtree(old, ignore_errors=True)
shutil.rmtree(results, ignore_errors=True)
PY
antlm-bench leaderboard "$HERE/results" --by recipe,preset,schedule -f markdown -o "$HERE/leaderboard.md"
