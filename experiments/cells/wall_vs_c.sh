#!/bin/bash
# Issue 60: wall times on this host, back to back and niced alike (nice -n 15, one thread):
# antirez's C for its 2M games with NN_HIDDEN_SIZE 25 and 100 (built beside ours in $WORK from
# $ANTIREZ_SRC, the bench's seeded copy: baselines/antirez.py), then our single runs of
# algo=reinforce net=mlp25 / mlp100 with batches of 2,048 at 4M games (the mlp100 cell).
#   bash experiments/cells/wall_vs_c.sh > experiments/cells/wall_vs_c.txt 2>&1
set -e
cd "$(dirname "$0")/../.."
ANTIREZ_SRC=${ANTIREZ_SRC:-/work/shared/reference/antirez-ttt-rl/ttt.c}
WORK=${WORK:-$(mktemp -d)}
export PYTHONPATH=$PWD/src
for H in 25 100; do
  mkdir -p "$WORK/h$H"
  python -c "from pathlib import Path; from ttt_research.baselines import antirez
antirez.build_seeded(Path('$ANTIREZ_SRC'), Path('$WORK/h$H'), hidden=$H)"  # -DNN_HIDDEN_SIZE=$H
done
for S in 1 2; do
  for H in 25 100; do
    /usr/bin/time -f "C hidden $H seed $S: %e s" nice -n 15 "$WORK/h$H/ttt-seeded-h$H" 2000000 $S "$WORK/out$H-$S.bin" > /dev/null
  done
  for NET in mlp25 mlp100; do
    /usr/bin/time -f "ours $NET rollouts 8, 4M, seed $S: %e s" nice -n 15 python -m ttt_research algo=reinforce \
      net=$NET algo.rollouts=8 budget.games=4000000 seed=$S threads=1 progress=false \
      hydra.run.dir="$WORK/ours-$NET-$S" > /dev/null
    python -c "import json; d = json.load(open('$WORK/ours-$NET-$S/eval.json'))['as_o']
print('  as O: worst case', d['worst_case'], 'vs random', d['vs_random'])"
  done
done
