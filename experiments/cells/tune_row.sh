#!/bin/bash
# Issue 60: one tuning row of a cell as one population of 16 seeds (times the settings varied), resumable.
#   bash experiments/cells/tune_row.sh CELL ROW FIRST_SEED OVERRIDES...
# e.g. bash experiments/cells/tune_row.sh reinforce_mlp25 I_r64 11340 algo.rollouts=64 \
#        budget.games=4000000 algo.lr=0.25 algo.lr_final=0.5
# Trains in runs/cells/CELL/tuning/ROW (niced, one thread) and copies its population.csv to
# experiments/cells/CELL/tuning/ROW.csv when it ends, with the wall seconds in ROW.txt. Run it
# again after a stop: a finished row is skipped, a started one resumes from its last checkpoint.
set -e
cd "$(dirname "$0")/../.."
CELL=$1 ROW=$2 SEED=$3
shift 3
ALGO=${CELL%_*} NET=${CELL##*_}
RUN=runs/cells/$CELL/tuning/$ROW
OUT=experiments/cells/$CELL/tuning/$ROW.csv
if [ -f "$OUT" ]; then echo "done already: $OUT"; exit 0; fi
RESUME=false
if [ -f "$RUN/checkpoints/last.ckpt" ]; then RESUME=true; fi
mkdir -p "$(dirname "$OUT")"
START=$(date +%s)
PYTHONPATH=$PWD/src nice -n 10 python -m ttt_research "algo=$ALGO" "net=$NET" "seed=$SEED" population.size=16 \
  threads=1 progress=lines "hydra.run.dir=$RUN" "resume=$RESUME" "$@"
cp "$RUN/population.csv" "$OUT"
echo "$ROW: $* seed=$SEED population.size=16; wall $(( $(date +%s) - START )) s (this leg; resume=$RESUME)," \
  "$(date -u +%FT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >> "experiments/cells/$CELL/tuning/$ROW.txt"
