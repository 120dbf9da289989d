#!/usr/bin/env bash
# The cpu presets over 3 seeds (issue #31): each backbone's plain baseline recipe (babyllama-clm-only: CLM only,
# 2 epochs; ltgbert-mlm-only: MLM only, 2 epochs) and LTG-BERT under the AntLM schedule (antlm-ltgbert: 2_CLM+2_MLM+2_CLM, the paper's
# causal-ends shape in 6 epochs; 1_CLM+2_MLM+1_CLM scored 53.7% and a higher held-out loss) at preset cpu on pretrain_1600k (1.64M words of BabyLM text), trained and scored by
# `antlm-bench run` exactly as a user runs it: full filtered BLiMP (all 67 paradigms, every item), the BLiMP
# supplement, EWoK and the held-out loss on the corpus's dev split, each run scored by its last phase's objective
# (clm after CLM, pll after MLM).
# Each run's results store is exported into results/<recipe>/ (leaderboards/export_runs.py: items without any
# sentence text, the data stays in the data folder) with its run.json; the board is rendered from there.
#
#   ANTLM_BENCH_DATA=../shared/data bash leaderboards/cpu-presets/run.sh            # both backbones, one after the other
#   RECIPES=ltgbert-mlm-only SEEDS=2-3 bash leaderboards/cpu-presets/run.sh                  # a part of it (the rest resumes)
#
# The committed BabyLlama runs were trained when babyllama-clm-only was named babyllama (renamed in issue #55, the
# same file): their rows keep the name they were trained under, and a rerun here trains new runs named
# babyllama-clm-only beside them rather than resuming them.
#
# A stopped run resumes where it was (`run` reuses finished training and evaluations).
set -euo pipefail
cd "$(dirname "$0")/../.."
# this checkout's code runs (and its commit is what the rows record), wherever antlm-bench was installed from
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
DATA=${ANTLM_BENCH_DATA:-../shared/data}
RUNS=${RUNS:-runs/cpu-presets}          # run folders with checkpoints (not committed)
HERE=leaderboards/cpu-presets
SEEDS=${SEEDS:-1-3}
RECIPES=${RECIPES:-"babyllama-clm-only antlm-ltgbert"}  # ltgbert-mlm-only (MLM only, pll: 18 CPU-min of scoring) when named
TASKS=${TASKS:-blimp,blimp_supplement,ewok,heldout}
# the evaluations read their task data from the same folder as the corpus
export OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false ANTLM_BENCH_DATA="$DATA"

for recipe in $RECIPES; do
  case $recipe in
    babyllama-clm-only) schedule=2_CLM ;;
    antlm-ltgbert) schedule=2_CLM+2_MLM+2_CLM ;;
    ltgbert-mlm-only) schedule=2_MLM ;;
    *) echo "unknown recipe $recipe" >&2; exit 2 ;;
  esac
  /usr/bin/time -v antlm-bench run --model "$recipe" --preset cpu --schedule "$schedule" --corpus "$DATA/pretrain_1600k" \
    --seeds "$SEEDS" --tasks "$TASKS" --eval-every none --threads 1 --quiet --output "$RUNS/$recipe" \
    2> >(tee -a "$RUNS-$recipe.time.log" >&2)
done

# every run's tables without evaluation text, each run swapped in whole (leaderboards/export_runs.py)
python3 leaderboards/export_runs.py "$HERE/results" "$RUNS"/*/*
antlm-bench leaderboard "$HERE/results" --by recipe,preset,schedule -f markdown -o "$HERE/leaderboard.md"
# BLiMP paradigm by paradigm, beside the tiny presets of the mini study (leaderboards/mini-antlm): which
# paradigms the cpu presets learn and which stay where tiny left them
antlm-bench leaderboard "$HERE/results" leaderboards/mini-antlm/results --by recipe,preset,schedule --subtasks blimp \
  -f markdown -o "$HERE/paradigms.md"
