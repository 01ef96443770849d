"""The policy as trained: each algorithm's acting policy scored exactly beside the greedy one
(eval.json's ``nashconv`` and ``as_trained``, the ``eval/trained_*`` metrics, the ONNX file's
``acting`` metadata), recomputed here from the run's own files."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from tests.helpers.configs import make_cfg
from ttt_research.contract import EXPLOIT_NAMES, exploit_metrics, greedy_nashconv
from ttt_research.env import game
from ttt_research.evaluation import exploit
from ttt_research.evaluation.exact import decision_codes
from ttt_research.evaluation.policy_file import load_policy
from ttt_research.train.run import train


def _views() -> torch.Tensor:
    return game.tables().view[decision_codes()].float()


def _last_row(path) -> dict:
    rows = [r for r in csv.DictReader(open(path, newline="")) if r.get("eval/trained_nashconv")]
    return rows[-1]


def test_reinforce_is_scored_at_its_final_temperature_from_every_file(tmp_path):
    report = train(make_cfg("seed=3"), tmp_path)
    block = report["as_trained"]
    # conf/algo/reinforce.yaml anneals the temperature to 0.5 over the budget: at the end, 0.5.
    assert block["temperature"] == 0.5 and block["epsilon"] == 0.0
    assert block["policy"] == "softmax at temperature 0.5"
    assert report["nashconv"] == greedy_nashconv(report)
    # The ONNX file's logits and its acting metadata give the same policy, the same numbers.
    policy, meta = load_policy(tmp_path / "policy.onnx")
    acting = exploit.Acting.from_meta(meta)
    assert acting == exploit.Acting(0.5, 0.0)
    assert exploit.Acting.from_meta(load_policy(tmp_path / "checkpoints" / "last.ckpt")[1]) == acting
    again = exploit.policy_report(acting.probs(policy(_views())))
    assert again["nashconv"] == pytest.approx(block["nashconv"], abs=1e-6)  # float32 ONNX vs torch
    assert again["as_o"]["best_response"] == pytest.approx(block["as_o"]["best_response"], abs=1e-6)
    # The last logged evaluation holds eval.json's figures, and the progress of a soft
    # policy is never better than its greedy one against a best response.
    row = _last_row(tmp_path / "metrics.csv")
    for name, value in exploit_metrics(report).items():
        assert float(row[name]) == value
    assert set(EXPLOIT_NAMES) <= set(row)
    assert 0.0 <= block["nashconv"] <= 2.0


@pytest.mark.slow  # four tiny runs, over 3 s on the 2-core host
@pytest.mark.parametrize("algo,temperature,epsilon", [
    ("ppo", 1.0, 0.0),          # samples its softmax
    ("qlearning", 0.0, 0.0),    # epsilon-greedy, annealed to epsilon_final = 0
    ("dqn", 0.0, 0.0),
    ("reinforce_faithful", 0.0, 0.0),  # the seed's greedy play
])
def test_each_algorithm_names_its_acting_policy(tmp_path, algo, temperature, epsilon):
    report = train(make_cfg(f"algo={algo}", "seed=1"), tmp_path)
    block = report["as_trained"]
    assert (block["temperature"], block["epsilon"]) == (temperature, epsilon)
    if temperature == 0.0 and epsilon == 0.0:  # greedy as trained: the same policy twice
        assert block["nashconv"] == report["nashconv"]
        for side in ("as_x", "as_o"):
            assert block[side]["vs_random"] == report[side]["vs_random"]


@pytest.mark.slow
def test_a_user_chosen_epsilon_costs_what_the_exact_tree_says(tmp_path):
    report = train(make_cfg("algo=qlearning", "seed=2"), tmp_path)
    policy, _ = load_policy(tmp_path / "policy.onnx")
    logits = policy(_views())
    greedy = exploit.nash_conv(exploit.logits_to_probs(logits))
    assert greedy == report["nashconv"]
    # Epsilon 1 is the random player whatever was learned (OpenSpiel's 1.919659391534391).
    # In between, NashConv is convex in epsilon? Not in general (the policy's probabilities
    # multiply along a line of play); it stays within [0, 2], and below the worse end here.
    ends = [exploit.nash_conv(exploit.logits_to_probs(logits, 0.0, e)) for e in (0.0, 1.0)]
    assert ends[0] == greedy and ends[1] == pytest.approx(1.919659391534391, abs=1e-12)
    half = exploit.nash_conv(exploit.logits_to_probs(logits, 0.0, 0.5))
    assert 0.0 <= half <= max(ends)


@pytest.mark.slow
def test_alphazero_scores_its_self_play_search_and_its_raw_network(tmp_path):
    report = train(make_cfg("algo=alphazero", "seed=1", "budget.games=100", "algo.games_per_update=50",
                            "eval_every=1"), tmp_path)
    assert report["as_trained"]["policy"] == "the raw network: softmax at temperature 1"
    search = report["search_as_trained"]
    assert "16 simulations" in search["policy"] and search["temperature"] == 2.0
    assert 0.0 <= search["nashconv"] <= 2.0


@pytest.mark.slow
def test_a_population_scores_every_member_as_its_single_run_does(tmp_path):
    report = train(make_cfg("seed=7", "population.size=2"), tmp_path / "pop")
    members = json.loads((tmp_path / "pop" / "population.json").read_text())["members"]
    single = train(make_cfg("seed=8"), tmp_path / "one")
    # A member's logits come from the stacked network's batched matmuls: the same greedy moves
    # as its run alone, softmax probabilities equal to float32 rounding (~1e-9 here).
    mine, alone = members[1]["eval"]["as_trained"], single["as_trained"]
    assert mine["policy"] == alone["policy"] and mine["temperature"] == alone["temperature"]
    for side in ("as_x", "as_o"):
        assert mine[side]["best_response"] == pytest.approx(alone[side]["best_response"], abs=1e-6)
    assert mine["nashconv"] == pytest.approx(alone["nashconv"], abs=1e-6)
    assert members[1]["eval"]["nashconv"] == single["nashconv"]
    assert "eval/trained_o_best_response" in (tmp_path / "pop" / "population.csv").read_text()
    assert report["as_trained"] == members[report["population"]["best_member"]]["eval"]["as_trained"]


def test_league_plays_the_final_policy_against_each_earlier_one_exactly(tmp_path):
    from ttt_research.env.solver import outcome_probs
    from ttt_research.train.league import league_rows

    train(make_cfg("seed=4", "eval_every=1", "league=true"), tmp_path)
    rows = list(csv.DictReader(open(tmp_path / "league.csv", newline="")))
    assert [int(r["games"]) for r in rows] == [512, 1024, 1536]  # 4 evaluations: 3 earlier selves
    # A row is the exact expectation: the same as the single-pair sum over the tree.
    g = torch.Generator().manual_seed(0)
    legal = game.tables().legal[decision_codes()]
    a, b = (torch.rand(4520, 9, generator=g, dtype=torch.float64) * legal for _ in range(2))
    a, b = a / a.sum(-1, keepdim=True), b / b.sum(-1, keepdim=True)
    (row,) = league_rows([(7, b)], a)
    full = torch.zeros(2, game.N_CODES, 9, dtype=torch.float64)
    full[0, decision_codes()], full[1, decision_codes()] = a, b
    ax = outcome_probs(full[0], full[1])[game.EMPTY_CODE]  # a as X, b as O
    bx = outcome_probs(full[1], full[0])[game.EMPTY_CODE]
    assert row["final_as_x_win"] == pytest.approx(float(ax[0]), abs=1e-12)
    assert row["final_as_o_loss"] == pytest.approx(float(bx[0]), abs=1e-12)
    assert row["final_score"] == pytest.approx(float(ax[0] - ax[1] + bx[1] - bx[0]) / 2, abs=1e-12)
    (as_o,) = league_rows([(7, b)], a, seat="o")  # a learner of O: judged as O only
    assert as_o["final_score"] == pytest.approx(float(bx[1] - bx[0]), abs=1e-12)


def test_league_is_refused_for_a_population_in_one_line():
    from ttt_research.errors import ConfigError
    from ttt_research.train.validate import validate

    with pytest.raises(ConfigError, match="league=true .* one agent only"):
        validate(make_cfg("league=true", "population.size=2"))
    with pytest.raises(ConfigError, match="league"):
        validate(make_cfg("league=3"))
