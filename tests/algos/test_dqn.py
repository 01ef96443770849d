"""algo=dqn: the TD target, n-step returns, masked bootstrapping, the negamax sign and terminal
transitions on hand-built games; the replay ring; a tiny run, a population that is its seeds'
single runs, a resume that is the uninterrupted run, and the validation of its keys."""

import json

import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.resume import metric_rows, train_killed
from tests.helpers.updates import first_update, rates
from ttt_research.algos import dqn
from ttt_research.algos.dqn import DQN, Replay, huber, td_target
from ttt_research.algos.dqn_spec import SPEC
from ttt_research.env import game
from ttt_research.env.opponents import Opponent, SelfPlay
from ttt_research.env.reward import Reward
from ttt_research.env.rollout import play_batch
from ttt_research.env.streams import Streams
from ttt_research.env.transitions import transitions
from ttt_research.errors import ConfigError
from ttt_research.models.nets import MASKED, MLP, linears
from ttt_research.train.run import train
from ttt_research.train.validate import validate

CAUTIOUS = Reward(win=1.0, tie=0.3, loss=-5.0)
# X 0, O 3, X 1, O 4, X 2: X wins on the top row at ply 4.
#   X X X
#   O O .
#   . . .
SCRIPT = [0, 3, 1, 4, 2, 5, 6, 7, 8]


def ply_of(view):
    return (view != 0).sum(-1)


class Scripted(Opponent):
    """Plays SCRIPT's move for the ply on the board."""

    def act(self, code, generator=None):
        return torch.tensor(SCRIPT)[game.tables().ply[code]]


def scripted_game(seat, opponent=None):
    """The scripted game, learner at ``seat``, as (T, 1, 1) episodes of one member."""
    learner = lambda view, legal: torch.tensor(SCRIPT)[ply_of(view)]  # noqa: E731
    return play_batch(1, learner, opponent or Scripted(), seat, "cpu", Streams([0]))


def test_against_a_fixed_opponent_a_step_is_the_move_and_the_reply():
    ep = scripted_game("x")
    tr = transitions(ep, CAUTIOUS, self_play=False, gamma=1.0)
    assert tr["action"].tolist() == [0, 1, 2]  # plies 0, 2, 4
    assert tr["reward"].tolist() == [0.0, 0.0, 1.0]  # the win, at the last move
    assert tr["done"].tolist() == [False, False, True]
    assert tr["discount"].tolist() == [1.0, 1.0, 0.0]
    # s' of the first move: the learner's next decision, after O's reply on 3 (its own view)
    assert tr["next_view"][0].tolist() == [1, 0, 0, -1, 0, 0, 0, 0, 0]
    assert tr["next_view"][1].tolist() == [1, 1, 0, -1, -1, 0, 0, 0, 0]
    assert tr["next_view"][2].tolist() == [0] * 9  # terminal: never read


def test_a_lost_game_ends_at_the_learners_last_move_with_the_loss():
    tr = transitions(scripted_game("o"), CAUTIOUS, self_play=False, gamma=1.0)
    assert tr["action"].tolist() == [3, 4]  # plies 1, 3; X's move at ply 4 ends it
    assert tr["reward"].tolist() == [0.0, -5.0]
    assert tr["done"].tolist() == [False, True]
    assert tr["view"][0].tolist() == [-1, 0, 0, 0, 0, 0, 0, 0, 0]  # O's view of X on 0


def test_n_step_returns_discount_the_result_or_bootstrap_n_steps_on():
    tr = transitions(scripted_game("x"), CAUTIOUS, self_play=False, gamma=0.5, n_step=2)
    assert tr["reward"].tolist() == [0.0, 0.5, 1.0]  # ply 2: the win one step on, x 0.5
    assert tr["done"].tolist() == [False, True, True]
    assert tr["discount"].tolist() == [0.25, 0.0, 0.0]  # ply 0 bootstraps from ply 4, gamma^2
    assert tr["next_view"][0].tolist() == [1, 1, 0, -1, -1, 0, 0, 0, 0]


def test_self_play_is_negamax_one_ply_on_with_the_movers_own_result():
    zero_sum = Reward(win=1.0, tie=0.0, loss=-1.0)
    ep = scripted_game("x", SelfPlay())
    tr = transitions(ep, zero_sum, self_play=True, gamma=1.0)
    assert tr["action"].tolist() == [0, 3, 1, 4, 2]
    assert tr["reward"].tolist() == [0, 0, 0, 0, 1.0]  # X's winning move
    assert tr["discount"].tolist() == [-1.0, -1.0, -1.0, -1.0, 0.0]  # the opponent's value, negated
    assert tr["next_view"][0].tolist() == [-1, 0, 0, 0, 0, 0, 0, 0, 0]  # O's view, one ply on
    two = transitions(ep, zero_sum, self_play=True, gamma=0.9, n_step=2)
    assert two["reward"].tolist() == pytest.approx([0, 0, 0, 0.9 * -1.0, 1.0])  # O's ply 3 loses
    assert two["discount"].tolist() == pytest.approx([0.81, 0.81, 0.81, 0, 0])  # (-0.9)^2


def test_double_dqn_lets_the_online_net_pick_and_the_target_evaluate():
    online = torch.tensor([[1.0, 5.0, MASKED], [MASKED, 0.0, 2.0]])
    target = torch.tensor([[3.0, 2.0, MASKED], [MASKED, 7.0, -1.0]])
    r, d = torch.tensor([0.5, 0.0]), torch.tensor([1.0, -0.5])
    assert td_target(r, d, online, target).tolist() == [0.5 + 2.0, -0.5 * -1.0]
    assert td_target(r, d, None, target, double=False).tolist() == [0.5 + 3.0, -0.5 * 7.0]
    assert td_target(r, torch.zeros(2), online, target).tolist() == [0.5, 0.0]  # terminal


def test_huber_is_quadratic_up_to_delta_and_linear_beyond():
    q, target = torch.tensor([[0.0, 3.0]]), torch.tensor([[0.5, 0.0]])
    assert huber(q, target).tolist() == [(0.125 + 2.5) / 2]  # 0.5 * 0.5^2; 1 * (3 - 0.5)
    assert huber(q, target, delta=10.0).tolist() == [(0.125 + 4.5) / 2]  # both quadratic


def test_epsilon_anneals_over_its_share_of_the_budget_then_holds():
    def dqn(**schedule):
        return DQN(MLP([8]), **(SPEC.defaults() | schedule))

    at = [round(dqn(epsilon=0.5, epsilon_final=0.1, epsilon_fraction=0.5).scheduled_epsilon(p), 6)
          for p in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert at == [0.5, 0.3, 0.1, 0.1, 0.1]
    assert dqn(epsilon=0.5, epsilon_final=0.0, epsilon_fraction=1.0).scheduled_epsilon(0.25) == 0.375
    assert dqn(epsilon=0.2, epsilon_final=None).scheduled_epsilon(0.9) == 0.2  # constant


def test_an_occupied_cell_with_a_huge_value_is_never_bootstrapped_from():
    torch.manual_seed(0)
    net = MLP([8], "signed9")
    with torch.no_grad():
        net.body[-1].bias[4] = 1e6  # the raw value of the centre: huge
    nxt = torch.tensor([[0, 0, 0, 0, 1, 0, 0, 0, -1.0]])  # ... and the centre is taken
    q = net(nxt).detach()
    legal_best = net.raw_logits(nxt)[0, [0, 1, 2, 3, 5, 6, 7]].max()
    target = td_target(torch.zeros(1), torch.ones(1), q, q)
    assert float(target) == pytest.approx(float(legal_best.detach())) and float(target) < 1e3


def push(replay, member, labels):
    n = len(labels)
    replay.push({"member": torch.tensor(member), "view": torch.zeros(n, 9, dtype=torch.int8),
                 "action": torch.zeros(n, dtype=torch.long),
                 "reward": torch.tensor(labels, dtype=torch.float32),
                 "next_view": torch.zeros(n, 9, dtype=torch.int8), "discount": torch.ones(n),
                 "done": torch.zeros(n, dtype=torch.bool)})


def test_the_ring_wraps_around_and_each_member_samples_only_its_own():
    replay = Replay(2, capacity=4)
    push(replay, [0, 1, 0, 1, 1, 1, 1, 0, 1], [1, 11, 2, 12, 13, 14, 15, 3, 16])
    # member 0: 3 of 4 slots; member 1 wrote 6: its last 4 kept, the ring turned once
    assert replay.reward[0].tolist() == [1, 2, 3, 0] and replay.reward[1].tolist() == [15, 16, 13, 14]
    assert replay.size.tolist() == [3, 4] and replay.head.tolist() == [3, 2]
    push(replay, [0, 0], [4, 5])  # member 0 wraps: 5 overwrites 1
    assert replay.reward[0].tolist() == [5, 2, 3, 4] and replay.head.tolist() == [1, 2]
    drawn = replay.sample(50, Streams([3, 4]))["reward"]
    assert set(drawn[0].tolist()) <= {2, 3, 4, 5} and set(drawn[1].tolist()) <= {13, 14, 15, 16}
    alone = Replay(1, capacity=4)  # member 1 on its own, with its own stream: the same draws
    push(alone, [0] * 6, [11, 12, 13, 14, 15, 16])
    assert alone.sample(50, Streams([4]))["reward"][0].tolist() == drawn[1].tolist()


LEARNS = ["algo=dqn", "net=mlp25", "algo.warmup_games=512", "algo.gradient_steps=2",
          "algo.batch_size=64", "algo.target_every=3"]


def test_a_tiny_run_learns_and_reports(tmp_path):
    report = train(make_cfg(*LEARNS), tmp_path)
    assert report["decision_points"] > 0
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    head = rows[0].split(",")
    for name in ("train/td_error", "train/q_mean", "train/epsilon", "train/loss", "train/lr"):
        assert name in head
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert int(ckpt["state_dict"]["replay.games"]) == 2048
    assert int(ckpt["state_dict"]["replay.steps"]) == 4 * 2  # 2 steps in each of 4 updates


@pytest.mark.slow  # a few seconds on the 2-core host
def test_each_members_first_update_is_its_single_run():
    pop = first_update(*LEARNS, "population.size=2", "population.vary.algo.epsilon=[0.1,0.9]")
    assert pop.n == 4
    for k, (seed, eps) in enumerate([(0, 0.1), (1, 0.1), (0, 0.9), (1, 0.9)]):
        one = first_update(*LEARNS, f"seed={seed}", f"algo.epsilon={eps}")
        assert rates(pop.last_update, k) == rates(one.last_update), f"member {k}"
        for name in ("view", "reward", "next_view", "size"):  # its own replay
            assert torch.equal(getattr(pop.replay, name)[k], getattr(one.replay, name)[0]), name
        for net in ("net", "target_net"):
            mine = getattr(pop, net).member(k).state_dict()
            for name, value in getattr(one, net).state_dict().items():
                torch.testing.assert_close(mine[name], value, atol=2e-5, rtol=1e-4, msg=f"{k} {net} {name}")


@pytest.mark.slow  # a few seconds on the 2-core host
def test_a_killed_run_resumes_to_the_uninterrupted_one_replay_included(tmp_path, monkeypatch):
    overrides = [*LEARNS, "checkpoint_every=2"]
    whole = train(make_cfg(*overrides), tmp_path / "whole")
    train_killed(make_cfg(*overrides), tmp_path / "killed", monkeypatch)
    ckpt = torch.load(tmp_path / "killed" / "checkpoints" / "last.ckpt", weights_only=True)
    assert int(ckpt["state_dict"]["replay.size"][0]) > 0 and "target_net.body.0.weight" in ckpt["state_dict"]
    assert train(make_cfg(*overrides, "resume=true"), tmp_path / "killed") == whole
    assert json.loads((tmp_path / "killed" / "eval.json").read_text()) == whole
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "whole")


@pytest.mark.parametrize("override, needle", [
    ("algo.gamma=2", "algo.gamma must be a number in (0, 1]"),
    ("algo.capacity=100", "algo.batch_size must be at most algo.capacity (100)"),
    ("algo.capacity=0", "algo.capacity must be a positive integer"),
    ("algo.n_step=6", "algo.n_step must be an integer in [1, 5]"),
    ("algo.tau=1.5", "algo.tau must be null"),
    ("algo.epsilon=2", "algo.epsilon must be a probability in [0, 1]"),
    ("algo.warmup_games=-1", "algo.warmup_games must be an integer"),
    ("algo.double=maybe", "algo.double must be true or false"),
    ("algo.huber_delta=0", "algo.huber_delta must be a number in (0,"),
    ("algo.epsilon_fraction=0", "algo.epsilon_fraction must be a share of the budget in (0, 1]"),
    ("opponent=self", "reward must be a zero-sum table"),
])
def test_bad_values_are_refused_naming_the_key(override, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        validate(make_cfg("algo=dqn", override))
    validate(make_cfg("algo=dqn", "opponent=self", "reward=zero_sum"))  # negamax with a zero-sum table


def test_a_turned_board_carries_its_cells_and_moves_with_it():
    boards = torch.randint(-1, 2, (64, 9), generator=torch.Generator().manual_seed(3)).to(torch.int8)
    cells = torch.randint(0, 9, (64,), generator=torch.Generator().manual_seed(4))
    for k in range(8):
        ks = torch.full((64,), k)
        turned, moved = game.turned(boards, ks), game.turned_cell(cells, ks)
        assert torch.equal(turned.gather(-1, moved[:, None]), boards.gather(-1, cells[:, None]))
        assert sorted(turned[0].tolist()) == sorted(boards[0].tolist())  # a permutation of the cells
    assert torch.equal(game.turned(boards, torch.zeros(64, dtype=torch.long)), boards)  # k = 0: the identity
    # The four corners are one orbit, the centre its own: a corner move lands on every corner.
    corners = {int(game.turned_cell(torch.tensor(0), torch.tensor(k))) for k in range(8)}
    centre = {int(game.turned_cell(torch.tensor(4), torch.tensor(k))) for k in range(8)}
    assert corners == {0, 2, 6, 8} and centre == {4}


@pytest.mark.slow  # a few seconds on the 2-core host
def test_symmetries_turn_the_sampled_transitions(monkeypatch):
    seen = []
    real = dqn.turned_cell

    def spy(cell, k, sym):
        seen.append(k.clone())
        return real(cell, k, sym)

    monkeypatch.setattr(dqn, "turned_cell", spy)
    plain = first_update(*LEARNS)
    assert not seen  # off by default: nothing turned, nothing drawn
    turned = first_update(*LEARNS, "algo.symmetries=true")
    assert len(seen) == 2 and all(k.shape == (1, 64) for k in seen)  # 2 steps of 64 transitions
    assert len(set(torch.cat(seen).reshape(-1).tolist())) == 8  # every symmetry drawn
    assert rates(turned.last_update) == rates(plain.last_update)  # the same games: turning is learning's
    assert not torch.equal(linears(turned.net)[0].weight, linears(plain.net)[0].weight)
