"""algo=qlearning: its TD targets, masked max, negamax sign and duplicate handling by hand,
its transitions on a scripted game, a population that is its seeds' single runs, and a
killed run that resumes to the uninterrupted run's eval.json."""

import json

import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.resume import metric_rows, train_killed
from tests.helpers.updates import first_update
from ttt_research.algos.qlearning import averaged_step, masked_max, td_targets
from ttt_research.env import game
from ttt_research.env.opponents import Opponent, SelfPlay
from ttt_research.env.reward import Reward
from ttt_research.env.rollout import play_batch
from ttt_research.env.transitions import transitions
from ttt_research.errors import ConfigError
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.policy_file import load_checkpoint
from ttt_research.models.qtable import QTable
from ttt_research.train.run import train
from ttt_research.train.validate import validate

CAUTIOUS = Reward(1.0, 0.3, -5.0, -10.0)


class LowestCell(Opponent):
    """Plays the lowest empty cell: a scripted, draw-free opponent."""

    def act(self, code, generator=None):
        return game.at(game.tables().legal, code).float().argmax(-1)


def lowest_cell(view, legal):
    return legal.float().argmax(-1)


def test_td_target_is_the_reward_at_the_end_and_gamma_times_the_next_max_before():
    next_max = torch.tensor([0.7, float("-inf"), -2.0])
    has_next = torch.tensor([True, False, True])
    r = torch.tensor([0.0, -5.0, 0.0])
    assert td_targets(next_max, has_next, r, 1.0).tolist() == pytest.approx([0.7, -5.0, -2.0])
    assert td_targets(next_max, has_next, r, 0.9).tolist() == pytest.approx([0.63, -5.0, -1.8])
    # negamax: the next state is the opponent's, its best value is ours negated
    assert td_targets(next_max, has_next, r, 0.9, negamax=True).tolist() == pytest.approx([-0.63, -5.0, 1.8])


def test_the_masked_max_never_reads_an_occupied_cell():
    # X . .      O's view: -1 in cell 0, +1 in cell 4; cell 0 holds a huge (stale) value
    # . O .
    # . . .
    view = torch.zeros(1, 9)
    view[0, 0], view[0, 4] = -1, 1
    q = torch.full((1, 9), -1.0)
    q[0, 0], q[0, 4], q[0, 8] = 1e6, 1e6, 0.25
    assert masked_max(q, view).tolist() == [0.25]


def test_duplicates_in_a_batch_step_once_towards_their_mean_target():
    q = torch.zeros(20)
    q[7] = 2.0
    before = averaged_step(q, torch.tensor([5, 5, 7, 5]), torch.tensor([1.0, 3.0, 10.0, 2.0]), 0.5)
    assert before.tolist() == [0.0, 0.0, 2.0, 0.0]
    assert q[5] == 0.5 * 2.0  # mean of 1, 3, 2 is 2: one step of 0.5, not three
    assert q[7] == 2.0 + 0.5 * (10.0 - 2.0)
    assert q.sum() == q[5] + q[7]  # nothing else moved
    lr = torch.tensor([1.0, 1.0, 0.25])  # per-step rates (a population's members')
    averaged_step(q, torch.tensor([9, 9, 3]), torch.tensor([4.0, 6.0, 8.0]), lr)
    assert q[9] == 5.0 and q[3] == 2.0


def test_the_running_mean_steps_by_the_share_of_an_entrys_targets_down_to_lr():
    q, visits = torch.zeros(4), torch.zeros(4)
    averaged_step(q, torch.tensor([1, 1]), torch.tensor([2.0, 4.0]), 0.1, visits)
    assert q[1] == 3.0 and visits[1] == 2  # first targets: a whole step, to their mean
    averaged_step(q, torch.tensor([1]), torch.tensor([6.0]), 0.1, visits)
    assert q[1] == pytest.approx(4.0)  # 1 of 3 targets: (2 + 4 + 6) / 3
    visits[1] = 99  # 1 / 100 < lr: the floor
    averaged_step(q, torch.tensor([1]), torch.tensor([14.0]), 0.1, visits)
    assert q[1] == pytest.approx(5.0) and visits[1] == 100


def steps(tr: dict) -> tuple:
    """The transitions as the table reads them: s, a, s', has s' (not terminal), R, member."""
    return tr["view"], tr["action"], tr["next_view"], ~tr["done"], tr["reward"], tr["member"]


def test_transitions_of_a_scripted_game_as_o():
    """Both sides play the lowest empty cell: X 0, O 1, X 2, O 3, X 4, O 5, X 6 wins
    on the diagonal 2-4-6:
        X O X
        O X O
        X . .
    O's steps: its move and X's reply, s' two plies on; the last one terminal, a loss."""
    ep = play_batch(1, lowest_cell, LowestCell(), "o")
    s, a, s_next, has_next, r, member = steps(transitions(ep, CAUTIOUS, self_play=False, gamma=1.0))
    assert a.tolist() == [1, 3, 5]
    assert has_next.tolist() == [True, True, False]
    assert r.tolist() == [0.0, 0.0, -5.0]  # the result, at the last move only
    assert s[0].tolist() == [-1, 0, 0, 0, 0, 0, 0, 0, 0]  # O's view after X's 0
    assert torch.equal(s_next[0], s[1]) and torch.equal(s_next[1], s[2])
    assert member.tolist() == [0, 0, 0]
    target = td_targets(masked_max(QTable()(s_next), s_next), has_next, r, 1.0)  # a fresh table: 0
    assert target.tolist() == [0.0, 0.0, -5.0]


def test_self_play_bootstraps_from_the_next_ply_negated():
    ep = play_batch(1, lowest_cell, SelfPlay(), "x")
    s, a, s_next, has_next, r, _ = steps(transitions(ep, CAUTIOUS, self_play=True, gamma=1.0))
    assert a.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert has_next.tolist() == [True] * 6 + [False]
    assert r[-1] == 1.0  # X's winning move, from X's side
    table = QTable()
    with torch.no_grad():  # X, to move at ply 6, values its winning cell 6 at 0.8
        table.q[game.view_code(s[6:7]), 6] = 0.8
    target = td_targets(masked_max(table(s_next), s_next), has_next, r, 1.0, negamax=True)
    assert target[5] == pytest.approx(-0.8)  # O's move 5 let X win: worth -0.8 to O
    assert target[6] == 1.0


def test_a_tiny_run_trains_and_its_checkpoint_evaluates_as_its_eval_json(tmp_path):
    report = train(make_cfg("algo=qlearning"), tmp_path)
    net, meta = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert isinstance(net, QTable) and meta["algo"] == "qlearning"
    mine = {k: report[k] for k in ("as_x", "as_o", "optimal_move_rate", "decision_points")}
    assert mine == {k: ev.evaluate_policy(net)[k] for k in mine}
    assert float(net.q.abs().sum()) > 0  # it learned something
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert {"train/td_error", "train/q_mean", "train/epsilon"} <= set(rows[0].split(","))


def test_each_member_of_a_population_is_its_seeds_single_run():
    """Same games and the same table, bit for bit; a member with epsilon 0 draws nothing."""
    pop = first_update("algo=qlearning", "population.size=2", "population.vary.algo.epsilon=[0,0.3]")
    singles = [("0", "0"), ("1", "0"), ("0", "0.3"), ("1", "0.3")]
    for k, (seed, eps) in enumerate(singles):
        one = first_update("algo=qlearning", f"seed={seed}", f"algo.epsilon={eps}")
        assert torch.equal(pop.net.member(k).q, one.net.q), f"member {k}"
    assert not torch.equal(pop.net.q[2], pop.net.q[3])  # seeds differ: games differ


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_uninterrupted_runs_eval_json(tmp_path, monkeypatch):
    small = ["algo=qlearning", "budget.games=2560", "algo.games_per_update=256", "eval_every=3",
             "checkpoint_every=5"]
    whole = train(make_cfg(*small), tmp_path / "whole")
    train_killed(make_cfg(*small), tmp_path / "killed", monkeypatch)
    assert train(make_cfg(*small, "resume=true"), tmp_path / "killed") == whole
    assert json.loads((tmp_path / "killed" / "eval.json").read_text()) == whole
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "whole")


@pytest.mark.parametrize("overrides, message", [
    (["algo=qlearning", "net=mlp100"], "algo=qlearning learns a table of action values: use net=qtable"),
    (["algo=ppo", "net=qtable"], "net must be an MLP"),
    (["algo=qlearning", "algo.lr=1.5"], "algo.lr must be a step size in"),
    (["algo=qlearning", "algo.gamma=2"], "algo.gamma must be a number in"),
    (["algo=qlearning", "algo.epsilon_final=2"], "algo.epsilon_final must be a probability"),
])
def test_bad_table_settings_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(make_cfg(*overrides))
