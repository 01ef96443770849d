"""``python -m ttt_research``: until training lands, prints the exact evaluation of the
built-in policies (the solver's perfect player and the best unbeatable player against a
random opponent) and the rule-based opponent's exact record against minimax."""

from __future__ import annotations

import torch

from . import game
from .evaluate import evaluate_actions, format_table, random_probs
from .opponents import rules_record
from .solver import best_response, solve


def main() -> None:
    sol = solve()
    minimax = sol.optimal.to(torch.int8).argmax(-1)  # lowest optimal cell
    print("Perfect player (lowest minimax-optimal cell), exact:")
    print(format_table(evaluate_actions(minimax)), "\n")

    # The best unbeatable player: among optimal moves, the one that wins most vs random.
    best = minimax.clone()
    for seat in (game.X, game.O):
        actions, _ = best_response(random_probs(), seat, (1.0, 0.0, -1.0), allowed=sol.optimal)
        mine = game.tables().mover == seat
        best[mine] = actions[mine]
    print("Best unbeatable player against a random opponent, exact:")
    print(format_table(evaluate_actions(best)), "\n")

    record = rules_record()
    print("Rule-based player (the PPO seed's sparring partner) vs minimax, exact:")
    for seat, r in record.items():
        print(f"  {seat}: win {r['win']:.4f}  loss {r['loss']:.4f}  tie {r['tie']:.4f}")


if __name__ == "__main__":
    main()
