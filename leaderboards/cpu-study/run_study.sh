#!/usr/bin/env bash
# The AntLM question in the learning regime (issue #33): does the AntLM schedule beat CLM alone of the same total
# epochs, on models that learn (the cpu presets: BabyLlama 56.9%, LTG-BERT 57.6% full BLiMP), with controls and a
# rule planned to decide (`antlm-bench plan`, leaderboards/cpu-study/README.md)?
#
#   babyllama: 0.5_CLM+1_MLM+0.5_CLM (AntLM's causal ends around a masked middle, in the preset's 2 epochs) against
#              2_CLM; positive control 0.5_CLM (the baseline at a quarter of its epochs)
#   ltgbert:   2_CLM+2_MLM+2_CLM (the preset's chosen AntLM schedule) against 6_CLM; positive control 1.5_CLM
# Both: the negative control (the baseline again under the label negative-control: other seeds, a true gap of
# zero); primary endpoints BLiMP, BLiMP supplement and EWoK accuracy (the paper's zero-shot metrics; GLUE is left
# out for CPU time), equivalence margins +-1 point (BLiMP, EWoK) and +-3 (the supplement, whose seed SD is 2.3);
# the held-out loss is a secondary column (and forced for the positive control); first look at 5 seeds (no interval
# of a 3-comparison family is bounded before), at most 10; every run scored by clm (each schedule ends in CLM);
# every run in bf16 autocast (PRECISION, stated rather than probed: docs/precision.md); a resume point every 10
# minutes (a 40-minute cell killed hard, by a lost machine rather than a signal, loses at most that).
#
#   ANTLM_BENCH_DATA=../shared/data bash leaderboards/cpu-study/run_study.sh                # BabyLlama
#   ARCHS="babyllama ltgbert" JOBS=2 bash leaderboards/cpu-study/run_study.sh              # both (LTG: 46 CPU-min a cell)
#   EXPORT_ONLY=1 RUNS=... bash leaderboards/cpu-study/run_study.sh                       # export a running study so far
#
# It takes many CPU-hours: stop it at any time (Ctrl-C, or SIGTERM) and run the same command again; finished cells
# are reused, unfinished ones resume, and the decision is anytime-valid at whatever round it stands. Each run
# invocation ends by exporting what is finished (tables, the sweep's record and its decision) into results/ and
# rendering the boards, so the committed study is the study so far. On another machine or a fresh clone, where
# RUNS holds nothing yet, it first restores the committed results into RUNS (export_runs.py --restore: finished
# runs without checkpoints, their evaluations verified on reuse), so the sweep goes on from the committed seeds
# instead of training them again.
set -uo pipefail
cd "$(dirname "$0")/../.."
# this checkout's code runs (and its commit is what the rows record), wherever antlm-bench was installed from
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
DATA=${ANTLM_BENCH_DATA:-../shared/data}
RUNS=${RUNS:-runs/cpu-study}            # run folders with checkpoints (not committed)
HERE=leaderboards/cpu-study
ARCHS=${ARCHS:-babyllama}
JOBS=${JOBS:-2}                         # cells at once; each uses one thread
MAX_SEEDS=${MAX_SEEDS:-10}
# stated, not left to `auto`'s probe: every arm one precision (fp32 on a CPU without native bf16: then say so)
PRECISION=${PRECISION:-bf16}
export OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false ANTLM_BENCH_DATA="$DATA"
common=(--preset cpu --tasks blimp,blimp_supplement,ewok,heldout --run-option "corpus=$DATA/pretrain_1600k"
        --run-option eval-every=none --run-option "precision=$PRECISION" --run-option save-every-minutes=10 --threads 1 --until-decided --seeds 1-5 --max-seeds "$MAX_SEEDS"
        --primary blimp,blimp_supplement,ewok --margin blimp=1 --margin ewok=1 --margin blimp_supplement=3
        --negative-control --jobs "$JOBS")

status=0
# EXPORT_ONLY=1: no sweep, only the export and boards of what is finished (a study still running, committed so far)
[ -n "${EXPORT_ONLY:-}" ] && ARCHS=""
for arch in $ARCHS; do
  # the committed study so far, where RUNS lacks it (a run folder already there is never replaced)
  [ -d "$HERE/results/$arch" ] && { python3 leaderboards/export_runs.py --restore "$HERE/results/$arch" "$RUNS/$arch" \
                                      > /dev/null || exit 2; }
  case $arch in
    babyllama) antlm-bench sweep --model antlm-babyllama --schedule "0.5_CLM+1_MLM+0.5_CLM,2_CLM" --baseline 2_CLM \
                 --positive-control 0.5_CLM "${common[@]}" --output "$RUNS/babyllama" || status=$? ;;
    ltgbert) antlm-bench sweep --model antlm-ltgbert --schedule "2_CLM+2_MLM+2_CLM,6_CLM" --baseline 6_CLM \
               --positive-control 1.5_CLM "${common[@]}" --output "$RUNS/ltgbert" || status=$? ;;
    *) echo "unknown architecture $arch (babyllama, ltgbert)" >&2; exit 2 ;;
  esac
  [ "$status" -ge 128 ] && break   # stopped by a signal: export what is finished, then stop
done

# what is finished (export_runs.py --finished: cells recorded done or reused, of the seeds the sweep's last look
# read, so that a board shows the seeds its decision rests on): each run's tables without evaluation text, then
# each sweep's record and decision
for arch in babyllama ltgbert; do
  [ -f "$RUNS/$arch/sweep/sweep.json" ] || continue
  finished_list=$(python3 leaderboards/export_runs.py --finished "$RUNS/$arch") || { status=2; continue; }
  mapfile -t finished <<< "$finished_list"
  [ -z "${finished[0]:-}" ] && finished=()
  [ ${#finished[@]} -gt 0 ] && python3 leaderboards/export_runs.py "$HERE/results" "${finished[@]}"
  python3 leaderboards/export_runs.py "$HERE/results" "$RUNS/$arch/sweep"
done
for arch in babyllama ltgbert; do
  [ -d "$HERE/results/$arch" ] || continue
  # the study's shipped definition (leaderboards/cpu-study-<arch>.yaml: its tasks, the macro of its primary
  # endpoints, the baseline as reference), so `antlm-bench leaderboard -d cpu-study-<arch>` shows this same board
  antlm-bench leaderboard -d "leaderboards/cpu-study-$arch.yaml" -f markdown -o "$HERE/leaderboard-$arch.md"
  # the board, the decision under it (the terminal's text, written atomically: a failed run of the tool leaves
  # the committed decision as it was)
  antlm-bench leaderboard -d "leaderboards/cpu-study-$arch.yaml" -o "$HERE/decision-$arch.txt" || status=1
done
exit "$status"
