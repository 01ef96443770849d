"""Regenerate examples/rules_bot.csv: a simple rule-based player as a policy table.

The player is ``env/opponents.rules_probs()``, nothing more: win if it can, else block,
else fork, else block a fork, else the centre, a corner, a side, each rule's cells equally
likely. Its rows at the 4,520 positions where somebody is to move are written as a table
of probabilities (docs/policy-tables.md); then score it exactly:

    python examples/make_rules_bot.py
    python -m ttt_research.evaluate examples/rules_bot.csv > examples/rules_bot.txt
"""

from pathlib import Path

from ttt_research.env.opponents import rules_probs
from ttt_research.evaluation.exact import decision_codes
from ttt_research.evaluation.policy_table import write_table

OUT = Path(__file__).with_name("rules_bot.csv")

if __name__ == "__main__":
    write_table(OUT, rules_probs()[decision_codes()])  # (4,520, 9) rows in decision_codes() order
    print(f"wrote {OUT}")
