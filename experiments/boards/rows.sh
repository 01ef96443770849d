#!/usr/bin/env bash
# Issue 61's leaderboard per board: one population of 30 fresh seeds (6100-6129, never tuned
# on; the pilot used 6000-6003) per (board, algorithm) row, each algorithm's defaults with a
# budget sized for the board. Resumable: a row whose copy here has population.json is done and
# skipped; a row stopped midway continues from its last checkpoint (resume=true).
#
#   experiments/boards/rows.sh [ROW ...]        # default: every row below, in order
#
# Run folders go to runs/boards/ROW (ignored by git); population.json, population.csv and
# population_evals.csv are copied to experiments/boards/ROW when the row ends.
set -euo pipefail
cd "$(dirname "$0")/../.."
declare -A ROWS=(
  [343_ppo]="algo=ppo net=mlp128 game=mnk343 budget.games=400000"
  [343_reinforce]="algo=reinforce game=mnk343 budget.games=1000000"
  [343_qlearning]="algo=qlearning game=mnk343 budget.games=1000000"
  [343_a2c]="algo=a2c game=mnk343 budget.games=200000"
  [343_dqn]="algo=dqn game=mnk343 budget.games=100000"
  [343_alphazero]="algo=alphazero game=mnk343 budget.games=2500"
)
ORDER=(343_ppo 343_reinforce 343_qlearning 343_alphazero 343_a2c 343_dqn)
for row in "${@:-${ORDER[@]}}"; do
  [[ -v ROWS[$row] ]] || { echo "error: no row $row (rows: ${ORDER[*]})" >&2; exit 2; }
  dir=runs/boards/$row out=experiments/boards/$row
  [[ -f $out/population.json ]] && { echo "$row: done"; continue; }
  resume=()
  [[ -f $dir/checkpoints/last.ckpt ]] && resume=(resume=true)
  start=$(date +%s)
  # At most 30 minutes a sitting (SIGTERM: the run stops after its update, with a checkpoint);
  # the next call of this script resumes it.
  # shellcheck disable=SC2086  # the row's overrides are words
  if ! timeout --signal=TERM "${ROW_SECONDS:-1800}" nice -n 19 python -m ttt_research ${ROWS[$row]} \
      population.size=30 seed=6100 threads=1 logger=csv hydra.run.dir="$dir" "${resume[@]}"; then
    echo "$row: stopped before its end; run experiments/boards/rows.sh $row to continue it" >&2
    continue
  fi
  mkdir -p "$out"
  cp "$dir"/population.json "$dir"/population.csv "$dir"/population_evals.csv "$out"/
  echo "$row: $(( $(date +%s) - start )) s wall ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))" >> experiments/boards/walls.txt
done
