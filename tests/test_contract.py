"""The metric contract (``contract.py``) against real exact evaluations, and the rule that
no other module keeps its own copy of the names."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ttt_research import contract
from ttt_research.contract import (
    EVAL_NAMES,
    REPORT_KEY,
    SEAT_PIECE,
    TRAINING_SEATS,
    eval_metrics,
    learner_loss,
    unbeatable,
)
from ttt_research.env import game
from ttt_research.env.solver import best_response, random_probs, solve
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.objectives import objective

SRC = Path(__file__).parents[1] / "src" / "ttt_research"
T = game.tables()
SOL = solve()


def lowest_optimal() -> torch.Tensor:
    return SOL.optimal.to(torch.int8).argmax(-1)


def preference(order: list[int]) -> torch.Tensor:
    """(N,) the empty cell with the highest ``order`` value (ties: lowest cell)."""
    score = torch.where(T.legal, torch.tensor(order, dtype=torch.float64), -torch.inf)
    return score.argmax(-1)


def best_unbeatable(reward_as_o=(1.0, 0.0, -1.0), safe_o=True) -> torch.Tensor:
    """X: the best unbeatable player vs random; O: reward-optimal vs random, unbeatable if
    ``safe_o``, else free to risk a loss (zero-sum O loses 0.74% and is beatable)."""
    acts = lowest_optimal().clone()
    a, _ = best_response(random_probs(), game.X, (1.0, 0.0, -1.0), allowed=SOL.optimal)
    b, _ = best_response(random_probs(), game.O, reward_as_o, allowed=SOL.optimal if safe_o else None)
    acts[T.mover == game.X] = a[T.mover == game.X]
    acts[T.mover == game.O] = b[T.mover == game.O]
    return acts


def mixed(x_actions: torch.Tensor, o_actions: torch.Tensor) -> torch.Tensor:
    """X's moves from one table, O's from another."""
    return torch.where(T.mover == game.X, x_actions, o_actions)


POLICIES = {
    "minimax": lowest_optimal,
    "best unbeatable": best_unbeatable,
    "zero-sum O": lambda: best_unbeatable(safe_o=False),
    "highest cell": lambda: preference([8, 7, 6, 5, 4, 3, 2, 1, 0]),
    "centre, corners, sides": lambda: preference([3, 1, 3, 1, 5, 1, 3, 1, 3]),
    "safe X, highest-cell O": lambda: mixed(lowest_optimal(), preference([8, 7, 6, 5, 4, 3, 2, 1, 0])),
    "highest-cell X, safe O": lambda: mixed(preference([8, 7, 6, 5, 4, 3, 2, 1, 0]), lowest_optimal()),
}


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return {name: ev.evaluate_actions(make()) for name, make in POLICIES.items()}


def test_the_metrics_of_the_best_unbeatable_player_are_the_reference_figures(reports):
    m = eval_metrics(reports["best unbeatable"])
    assert sorted(m) == sorted(EVAL_NAMES) and len(EVAL_NAMES) == 11
    assert all(type(v) is float for v in m.values())
    # docs/facts.md: the best unbeatable record vs random, X 0.9948 / 0.0052, O 0.9164 / 0.0836.
    assert m["eval/x_random_win"] == pytest.approx(0.9948, abs=5e-5)
    assert m["eval/x_random_tie"] == pytest.approx(0.0052, abs=5e-5)
    assert m["eval/o_random_win"] == pytest.approx(0.9164, abs=5e-5)
    assert m["eval/o_random_tie"] == pytest.approx(0.0836, abs=5e-5)
    for name in ("eval/x_random_loss", "eval/o_random_loss", "eval/x_perfect_loss", "eval/o_perfect_loss",
                 "eval/x_worst_case", "eval/o_worst_case"):
        assert m[name] == 0.0, name
    assert m["eval/optimal_move_rate"] == 1.0  # it only ever plays minimax-optimal moves


def test_a_beatable_seat_reads_as_minus_one_and_its_loss_rate(reports):
    m = eval_metrics(reports["zero-sum O"])
    # docs/facts.md (zero-sum reward as O): win 0.9323, loss 0.0074 vs random, beatable.
    assert m["eval/o_random_win"] == pytest.approx(0.9323, abs=5e-5)
    assert m["eval/o_random_loss"] == pytest.approx(0.0074, abs=5e-5)
    assert m["eval/o_worst_case"] == -1.0 and m["eval/x_worst_case"] == 0.0
    assert learner_loss(reports["zero-sum O"], "both") == m["eval/o_random_loss"]
    assert learner_loss(reports["zero-sum O"], "x") == 0.0


def test_the_report_has_one_block_per_evaluated_seat_under_its_contract_key(reports):
    for report in reports.values():
        assert set(report) == {*REPORT_KEY.values(), "optimal_move_rate", "decision_points",
                               contract.OPTIMAL_ALL}
    assert SEAT_PIECE == {"x": game.X, "o": game.O}
    assert set(contract.SEAT_KEYS) == set(TRAINING_SEATS) == set(contract.JUDGED_SEATS)


@pytest.mark.parametrize("seat", TRAINING_SEATS)
def test_unbeatable_is_exactly_losing_no_game_to_the_random_player(reports, seat):
    verdicts = {}
    for name, report in reports.items():
        verdicts[name] = unbeatable(report, seat)
        assert verdicts[name] == (learner_loss(report, seat) == 0.0), name
        # The sweep objective's score says the same: below 0 exactly when beatable.
        assert (objective(report, seat) >= 0) == verdicts[name], name
    assert set(verdicts.values()) == {True, False}  # the policies cover both answers


def test_unbeatable_is_judged_on_the_trained_seats_only(reports):
    r = reports["safe X, highest-cell O"]
    assert unbeatable(r, "x") and not unbeatable(r, "o") and not unbeatable(r, "both")
    r = reports["highest-cell X, safe O"]
    assert not unbeatable(r, "x") and unbeatable(r, "o") and not unbeatable(r, "both")


def test_the_contract_needs_only_the_standard_library():
    code = ("import sys, ttt_research.contract, ttt_research.evaluation.objectives; "
            "print(sorted(m for m in ('torch', 'numpy', 'lightning') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


# Module-level definitions of the contract's names, or literal copies of its maps.
DEFINITION = re.compile(
    r"^\s*(SEATS|TRAINING_SEATS|EVAL_SEATS|SEAT_PIECE|JUDGED_SEATS|REPORT_KEY|SEAT_KEYS|WORST_NAME"
    r"|WORST_VALUE|EVAL_NAMES|OUTCOMES)\s*(:[^=]*)?=[^=]", re.M)
COPIES = {
    "a seat-to-report-key map": re.compile(r"""["']as_[xo]["']|f["']as_\{"""),
    "a worst-case map": re.compile(r"""["']draw["']\s*:\s*0\.0|0\s*:\s*["']draw["']"""),
    "a seat-to-piece map": re.compile(r"""["'][xo]["']\s*:\s*game\.[XO]\b"""),
    "an unbeatable check": re.compile(r"""\[["']worst_case["']\]\s*[!=]=\s*["']loss["']"""
                                      r"""|\[["']vs_random["']\]\[["']loss["']\]\s*==\s*0"""),
}


def test_no_module_but_the_contract_defines_its_names_or_copies_its_maps():
    files = sorted(p for p in SRC.rglob("*.py") if p.name != "contract.py")
    assert len(files) > 20
    found = []
    for path in files:
        text = path.read_text()
        found += [f"{path.name}: defines {m.group(1)}" for m in DEFINITION.finditer(text)]
        found += [f"{path.name}: {what}" for what, rx in COPIES.items() if rx.search(text)]
    assert found == []


def test_the_check_itself_finds_a_copy():
    assert DEFINITION.search('WORST_VALUE = {"win": 1.0}\n')
    assert DEFINITION.search("SEATS: tuple = ('x', 'o')\n")
    assert not DEFINITION.search("GYM_SEATS = (*TRAINING_SEATS, 'alternate')\n")
    assert COPIES["a seat-to-report-key map"].search('seats = {"x": ["as_x"]}')
    assert COPIES["an unbeatable check"].search('r["as_x"]["vs_random"]["loss"] == 0 and ...')
    assert COPIES["a seat-to-piece map"].search('SEATS = {"x": game.X, "o": game.O}')
    assert COPIES["a worst-case map"].search('WORST = {1: "win", 0: "draw", -1: "loss"}')
    assert COPIES["a worst-case map"].search('{"win": 1.0, "draw": 0.0, "loss": -1.0}')
    assert not COPIES["a worst-case map"].search('tally = {"win": 0, "loss": 0, "draw": 0}')
