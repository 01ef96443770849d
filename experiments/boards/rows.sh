#!/usr/bin/env bash
# Issue 61's leaderboard per board: one population of 30 fresh seeds (6100-6129, never tuned
# on; the pilots used 6000-6029, named in README.md) per (board, algorithm) row, each algorithm's
# defaults with a budget sized for the board (4,4,3 and 4,4,4: sized to the 30-minute sitting,
# with the settings the board's memory asks for, README.md says which and why). Resumable: a row whose copy here has population.json is done and
# skipped; a row stopped midway continues from its last checkpoint (resume=true).
#
#   experiments/boards/rows.sh [ROW ...]        # default: every row below, in order
#
# Run folders go to runs/boards/ROW (ignored by git); population.json, population.csv and
# population_evals.csv are copied to experiments/boards/ROW when the row ends.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # this checkout's code, installed or not
declare -A ROWS=(
  [343_ppo]="algo=ppo net=mlp128 game=mnk343 budget.games=400000"
  [343_reinforce]="algo=reinforce game=mnk343 budget.games=1000000"
  [343_qlearning]="algo=qlearning game=mnk343 budget.games=1000000"
  [343_a2c]="algo=a2c game=mnk343 budget.games=200000"
  [343_dqn]="algo=dqn game=mnk343 budget.games=100000"
  [343_alphazero]="algo=alphazero game=mnk343 budget.games=2500"
  # 4,4,4 and 4,4,3: the final exact evaluation of 30 members took 22 min of 4,4,4's 30-minute
  # sitting (nice 19, load 4.5), so it is the only one (eval_every) and budgets fill what is left.
  # REINFORCE's batches of 2,048 (not 8,192): 30 members' reached positions of a batch of 8,192
  # held 11.5 GB and rising before its first update ended (README.md). PPO: 61 s an update of
  # 30 x 2,048 games, so 8 updates.
  [444_reinforce]="algo=reinforce game=mnk444 budget.games=786432 algo.games_per_update=4096 eval_every=1000 checkpoint_every=16"
  [444_ppo]="algo=ppo net=mlp128 game=mnk444 budget.games=16384 eval_every=1000 checkpoint_every=2"
  # Refused before training: 30 tables of 4,4,4 (or of 4,4,3) are far past the 2 GB a run's tables may hold.
  [444_qlearning]="algo=qlearning game=mnk444 budget.games=1000000"
  [443_qlearning]="algo=qlearning game=mnk443 budget.games=1000000"
  # 443_ppo: 82k games a seed (the first guess) trained 30 members at 16.7k games/s all
  # together (12:33, one other job on the host): 655,360 a seed fills ~20 of its 30 minutes.
  # The others not run yet (README.md, "What is left"): budgets guessed from the rows above
  # (4,4,4's evaluation leaves ~8 min of training; 4,4,3's ~0.4 of it, ~20 min); check the
  # first updates' pace in runs/boards/ROW/metrics.csv and resize before trusting them.
  # 444_a2c: 25,600 games a seed (the first guess) trained in ~2 min (14.6k games/s all
  # together, two other jobs on the host) and evaluated in ~7: 0/30, 88% optimal; 16x the games.
  [444_a2c]="algo=a2c game=mnk444 budget.games=409600 eval_every=100000 checkpoint_every=100"
  # 444_dqn: 10,240 games a seed (the first guess) trained 30 members in ~3 min (1.7k games/s all
  # together): 6x the games.
  [444_dqn]="algo=dqn game=mnk444 budget.games=61440 eval_every=1000 checkpoint_every=20"
  [443_reinforce]="algo=reinforce game=mnk443 budget.games=786432 algo.games_per_update=4096 eval_every=1000 checkpoint_every=16"
  [443_ppo]="algo=ppo net=mlp128 game=mnk443 budget.games=655360 eval_every=1000 checkpoint_every=32"
  # 443_a2c, 443_dqn: 4,4,4's budgets (the same 4x4 board and nets; the evaluation is cheaper).
  [443_a2c]="algo=a2c game=mnk443 budget.games=409600 eval_every=100000 checkpoint_every=100"
  [443_dqn]="algo=dqn game=mnk443 budget.games=61440 eval_every=1000 checkpoint_every=20"
  # AlphaZero on 4x4 (fifteenth sitting): self-play over the reached positions (algo.search=auto on
  # 4x4), 30 members x 50 games an update in ~3.2 s (one thread); no exact evaluation of the
  # search (test_simulations=0: two whole-tree searches a member, ~43 s and 8.5 GB each); the
  # network's final evaluation ~15 min for 30 (a 500-game pilot: 1,018 s, 7.5 GB). 8,000 games a seed
  # (3.2x the tic-tac-toe default: ~9 min of training).
  [444_alphazero]="algo=alphazero game=mnk444 budget.games=8000 algo.test_simulations=0 eval_every=100000 checkpoint_every=20"
  [443_alphazero]="algo=alphazero game=mnk443 budget.games=8000 algo.test_simulations=0 eval_every=100000 checkpoint_every=20"
)
ORDER=(343_ppo 343_reinforce 343_qlearning 343_alphazero 343_a2c 343_dqn
       444_reinforce 444_ppo 444_qlearning 443_qlearning 444_a2c 444_dqn 443_reinforce 443_ppo 443_a2c 443_dqn
       444_alphazero 443_alphazero)
for row in "${@:-${ORDER[@]}}"; do
  [[ -v ROWS[$row] ]] || { echo "error: no row $row (rows: ${ORDER[*]})" >&2; exit 2; }
  dir=runs/boards/$row out=experiments/boards/$row
  [[ -f $out/population.json || -f $out/refused.txt ]] && { echo "$row: done"; continue; }
  resume=()
  [[ -f $dir/checkpoints/last.ckpt ]] && resume=(resume=true)
  start=$(date +%s)
  # At most 30 minutes a sitting (SIGTERM: the run stops after its update, with a checkpoint);
  # the next call of this script resumes it.
  # shellcheck disable=SC2086  # the row's overrides are words
  mkdir -p runs/boards
  rc=0
  /usr/bin/time -f %M -o "$dir.peak_kb" timeout --signal=TERM "${ROW_SECONDS:-1800}" nice -n 19 \
    python -m ttt_research ${ROWS[$row]} population.size=30 seed=6100 threads=1 logger=csv \
    hydra.run.dir="$dir" "${resume[@]}" 2> >(tee "$dir.stderr" >&2) || rc=$?
  if (( rc == 2 )) && grep -q '^error: ' "$dir.stderr"; then  # refused before training: the row says why
    mkdir -p "$out"
    grep '^error: ' "$dir.stderr" | tail -1 > "$out/refused.txt"
    echo "$row: refused ($(cat "$out/refused.txt"))"
    continue
  elif (( rc != 0 )); then
    echo "$row: stopped before its end; run experiments/boards/rows.sh $row to continue it" >&2
    continue
  fi
  mkdir -p "$out"
  cp "$dir"/population.json "$dir"/population.csv "$dir"/population_evals.csv "$out"/
  peak=$(awk '{printf "%.1f", $1 / 1048576}' "$dir.peak_kb")  # GB: the row's process at its peak
  echo "$row: $(( $(date +%s) - start )) s wall, peak $peak GB ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))" >> experiments/boards/walls.txt
done
