"""algo=reinforce_faithful: antirez's loop, one game and one SGD step per move, in its NumPy
form (algos/faithful.py) and its torch form (the module's fallback for other settings);
both checked against each other and against autograd, and the run repeats itself."""

import numpy as np
import pytest
import torch

from ttt_research.algos import reinforce_faithful as faithful
from ttt_research.algos.reinforce import antirez_loss, antirez_targets
from ttt_research.algos.reinforce_faithful import ReinforceFaithful
from ttt_research.env import game
from ttt_research.env.opponents import Opponent, RandomOpponent
from ttt_research.env.reward import Reward
from ttt_research.env.streams import Streams
from ttt_research.evaluation import exact as ev
from ttt_research.models.nets import MLP
from ttt_research.train.confdir import compose
from ttt_research.train.module import RLModule
from ttt_research.train.run import build, train

ANTIREZ = Reward(1.0, 0.3, -2.0, -2.0)


def make_cfg(*overrides):
    return compose(["eval_every=2", "progress=false", *overrides])


class NumpyRandomX(Opponent):
    """The random X of algos/faithful.py, drawing from the same kind of NumPy stream, so the
    torch loop can be made to meet the very games the NumPy loop plays."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.rules = faithful.RuleLists()

    def act(self, code, generator=None):
        cells = []
        for c in code.tolist():  # a finished game's board draws nothing (the NumPy loop stops)
            legal = self.rules.legal[c]
            cells.append(0 if self.rules.done[c] else legal[int(self.rng.integers(len(legal)))])
        return torch.tensor(cells)


def faithful_module(opponent, games=12, seed=0):
    torch.manual_seed(seed)
    algo = ReinforceFaithful(net=MLP([6], "planes18", init="uniform"), games_per_update=games, lr=0.1)
    m = RLModule(algo, opponent, ANTIREZ, seat="o", budget_games=games, seed=seed)
    m.streams = Streams([seed])  # the module's random streams (one member)
    sgd = torch.optim.SGD(m.net.parameters(), lr=algo.lr)
    m.optimizers = lambda: sgd  # steps like Lightning's wrapper of it, without a Trainer
    m.manual_backward = lambda loss: loss.backward()
    return m


def test_the_configs_choose_the_numpy_loop_only_where_it_applies():
    def numpy_loop(module):
        return module.algo.numpy_loop(module)

    assert numpy_loop(build(make_cfg("algo=reinforce_faithful")))
    assert numpy_loop(build(make_cfg("experiment=antirez_repro")))
    for other in ("net=mlp128", "opponent=minimax", "seat=both"):
        assert not numpy_loop(build(make_cfg("algo=reinforce_faithful", other)))


def test_torch_loop_and_numpy_loop_make_the_same_weights_from_the_same_games():
    """The module's torch loop (run because its opponent is not RandomOpponent) against its
    NumPy loop, from the same weights, over the same 12 games: the same weights after."""
    fast = faithful_module(RandomOpponent())
    assert fast.algo.numpy_loop(fast)
    # The NumPy loop seeds its X from the module's generator; give the torch loop's X that seed.
    np_seed = int(torch.randint(2**62, (1,), generator=torch.Generator().manual_seed(0)))
    slow = faithful_module(NumpyRandomX(np.random.default_rng(np_seed)))
    assert not slow.algo.numpy_loop(slow)
    before = {k: v.clone() for k, v in fast.net.state_dict().items()}
    assert all(torch.equal(before[k], v) for k, v in slow.net.state_dict().items())

    a, b = fast.algo.update(fast), slow.algo.update(slow)
    assert a.games == b.games == 12
    assert {k: float(v) for k, v in a.rates.items()} == {k: float(v) for k, v in b.rates.items()}
    assert float(a.terms["loss"]) == pytest.approx(float(b.terms["loss"]), rel=1e-5)
    for (k, v), w in zip(fast.net.state_dict().items(), slow.net.state_dict().values(), strict=True):
        assert not torch.equal(v, before[k]), k  # both learned ...
        assert torch.allclose(v, w, atol=1e-5), k  # ... the same


def test_numpy_step_equals_autograd_steps_on_the_same_game():
    """One game through algos/faithful.py moves the weights exactly as per-move SGD steps on
    ``antirez_loss`` with autograd do on the same game (same moves replayed)."""
    torch.manual_seed(0)
    net = MLP([5], "planes18", init="uniform")
    twin = MLP([5], "planes18")
    twin.load_state_dict(net.state_dict())
    stats = faithful.train_games(net, 1, ANTIREZ, 0.1, game.O, np.random.default_rng(3))
    # Replay: the same rng gives the same random X moves; the twin's greedy O moves are the
    # same because the twin's weights equal the fast net's before the game.
    rng = np.random.default_rng(3)
    rules = faithful.RuleLists()
    code, mover, moves = 0, game.X, []
    while not rules.done[code]:
        legal = rules.legal[code]
        if mover == game.O:
            z = twin.raw_logits(game.tables().view[code][None].float())[0].detach()
            cell = max(legal, key=lambda c: (float(z[c]), -c))
        else:
            cell = legal[int(rng.integers(len(legal)))]
        moves.append((code, cell, mover))
        code = rules.next[code][cell]
        mover = -mover
    outcome = rules.winner[code] * game.O
    base = {1: 1.0, 0: 0.3, -1: -2.0}[outcome]
    sgd = torch.optim.SGD(twin.parameters(), lr=0.1)
    for ply, (state, cell, who) in enumerate(moves):
        if who != game.O:
            continue
        scaled = torch.tensor([base * (0.5 + 0.5 * ply / len(moves))])
        legal = game.tables().legal[state][None]
        target = antirez_targets(torch.tensor([cell]), legal, scaled)
        loss = antirez_loss(twin.raw_logits(game.tables().view[state][None].float()), target,
                            scaled.abs(), 1.0)
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    assert stats["win"] + stats["loss"] + stats["tie"] == 1
    for (k, v), (_, w) in zip(net.state_dict().items(), twin.state_dict().items(), strict=True):
        assert torch.allclose(v, w, atol=1e-5), k


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_the_seed_reproduced_learns_and_repeats_itself(tmp_path):
    """The seed's loop (NumPy, one SGD step per move): it learns, and a seed fixes the run."""
    over = ["experiment=antirez_repro", "budget.games=6000", "algo.games_per_update=2000"]
    untrained = ev.evaluate_policy(build(make_cfg(*over)).policy_logits)
    a = train(make_cfg(*over), tmp_path / "a")
    b = train(make_cfg(*over), tmp_path / "b")
    assert a == b
    assert a["as_o"]["vs_random"]["loss"] < untrained["as_o"]["vs_random"]["loss"] - 0.05


def test_the_torch_loop_trains_through_lightning(tmp_path):
    """Two hidden layers: the torch loop, stepping through Lightning's optimizer wrapper,
    one SGD step per learner move (20 games as O: 2 to 5 moves each)."""
    cfg = make_cfg("algo=reinforce_faithful", "net=mlp128", "budget.games=20",
                   "algo.games_per_update=10", "seed=1")
    before = build(cfg).net.state_dict()
    train(cfg, tmp_path)
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["games_played"] == 20 and ckpt["algo"] == "reinforce_faithful"
    steps = ckpt["loops"]["fit_loop"]["epoch_loop.manual_optimization.optim_step_progress"]
    assert 40 <= steps["total"]["completed"] <= 100
    assert not torch.equal(ckpt["state_dict"]["net.body.0.weight"], before["body.0.weight"])
