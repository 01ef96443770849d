"""``algo.symmetries`` of ``algo=reinforce``: every update also learns each position turned by the
board's symmetries (8 on a square, 4 on a rectangle), its targets turned alike, each turn weighing
1/S. Its update's gradient is the gradient of the loss written out over the explicitly turned
copies, with the position table and without, alone and in a population, on 3x3 and on 3,4,3."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.updates import first_update
from ttt_research.algos import reinforce
from ttt_research.algos.reinforce import Reinforce, antirez_loss, antirez_targets, summed_loss
from ttt_research.env.board import TIC_TAC_TOE, Game, symmetries, turned, turned_cell
from ttt_research.models.nets import MASKED, MLPStack
from ttt_research.train.run import build

pytestmark = pytest.mark.usefixtures("own_positions_cache")  # 3,4,3's positions: not the user's cache

BOARDS = {"3x3": [], "3,4,3": ["game=mnk343"]}


def by_hand(monkeypatch, *overrides: str):
    """The module of ``overrides`` after one update of 512 games whose steps are not taken:
    ``Reinforce._step`` records each loss's gradient instead, so every batch's gradient is taken
    at the initial weights, which the module still holds. Returns it and the gradients."""
    grads = []

    def record(self, run, opt, loss):
        grads.append(torch.autograd.grad(loss, list(self.net.parameters())))

    monkeypatch.setattr(Reinforce, "_step", record)
    return first_update("algo=reinforce", "seat=o", *overrides), grads


def logits_of(net, views: torch.Tensor, owner: torch.Tensor, members: int) -> torch.Tensor:
    """(R, cells) logits of rows in any order of members, each through its member's layers."""
    if members == 1:
        return net(views)
    order = owner.argsort(stable=True)
    mine = net.by_member(views[order], torch.bincount(owner, minlength=members).tolist())
    return torch.empty_like(mine).index_put((order,), mine)


def close(a, b):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("size", [1, 2])
def test_the_table_update_is_the_gradient_of_the_explicitly_turned_copies(monkeypatch, board, size):
    seen = []
    real = Reinforce._turned_positions

    def spy(self, boards, weighted, owner, members):
        out = real(self, boards, weighted, owner, members)
        seen.append((boards, weighted, owner, members, out[0].shape[0]))
        return out

    monkeypatch.setattr(Reinforce, "_turned_positions", spy)
    module, grads = by_hand(monkeypatch, *BOARDS[board], f"population.size={size}", "algo.symmetries=true")
    algo, g, params = module.algo, module.game, list(module.net.parameters())
    sym = symmetries(g, torch.device("cpu"))
    S = sym.shape[0]
    assert S == (8 if g == TIC_TAC_TOE else 4)
    games = algo.games_per_update // algo.rollouts
    assert len(seen) == len(grads) == algo.rollouts
    for (boards, weighted, owner, members, distinct), got in zip(seen, grads, strict=True):
        assert members == size and sorted(set(owner.tolist())) == list(range(size))
        assert boards.shape[0] < distinct < boards.shape[0] * S  # turns summed into shared rows
        loss = 0.0
        for k in range(S):  # the loss over the reached rows turned by symmetry k, 1 / S of a game's
            v = turned(boards, torch.full(owner.shape, k), sym)
            t = turned(weighted, torch.full(owner.shape, k), sym)
            loss = loss + summed_loss(logits_of(module.net, v, owner, size), t, games * S, size, owner).sum()
        close(got, torch.autograd.grad(loss, params))


@pytest.mark.parametrize("board", BOARDS)
def test_the_per_move_update_is_the_gradient_of_the_explicitly_turned_copies(monkeypatch, board):
    moves = []
    real = reinforce.learner_moves
    monkeypatch.setattr(reinforce, "learner_moves", lambda *a: moves.append(out := real(*a)) or out)
    module, grads = by_hand(monkeypatch, *BOARDS[board], "algo.position_table=false", "algo.symmetries=true")
    params = list(module.net.parameters())
    sym = symmetries(module.game, torch.device("cpu"))
    assert len(moves) == len(grads) == module.algo.rollouts  # one SGD step per batch (minibatches=1)
    games = module.algo.games_per_update // module.algo.rollouts
    for (view, legal, action, scaled, _), got in zip(moves, grads, strict=True):
        targets = antirez_targets(action, legal, scaled)
        loss = 0.0
        for k in range(sym.shape[0]):
            ks = torch.full(action.shape, k)
            loss = loss + antirez_loss(module.net(turned(view, ks, sym)), turned(targets, ks, sym),
                                       scaled.abs(), games * sym.shape[0])
        close(got, torch.autograd.grad(loss, params))


def test_off_nothing_is_turned(monkeypatch):
    """The default: no turned rows (every 3x3 default run stays what it was: the snapshot)."""
    monkeypatch.setattr(reinforce, "every_turn", lambda *a: pytest.fail("turned with symmetries off"))
    module, grads = by_hand(monkeypatch)
    assert len(grads) == module.algo.rollouts


@pytest.mark.parametrize("table", [True, False])
def test_symmetries_until_turns_the_early_batches_only(monkeypatch, table):
    """``symmetries_until=0.5``: the batches that start before half the budget learn the turned
    positions, the later ones their own alone; 8 batches of 256 games, 4 of each."""
    turning, turns = [], []
    anneal, every_turn = Reinforce.anneal, reinforce.every_turn

    def spy_anneal(self, *a, **k):
        anneal(self, *a, **k)
        turning.append(self.turning)

    monkeypatch.setattr(Reinforce, "anneal", spy_anneal)
    monkeypatch.setattr(reinforce, "every_turn", lambda *a: (turns.append(len(turning)), every_turn(*a))[1])
    first_update("algo=reinforce", "seat=o", "algo.symmetries=true", "algo.symmetries_until=0.5",
                 "algo.rollouts=2", "algo.minibatches=2", f"algo.position_table={str(table).lower()}",
                 games=2048)
    assert turning == [True] * 4 + [False] * 4
    # Each turned batch turns its positions and targets (per minibatch without the table).
    assert turns == [k for k in range(1, 5) for _ in range(2 if table else 4)]


def test_a_won_move_is_learned_on_every_turn_of_its_position():
    """O wins with the corner 0 where X holds the top edge (cell 1): each of the edge position's 4
    turns (its stabiliser, the left-right mirror, maps it onto itself) learns the turned corner,
    and the mirror's corner beside it; X in the centre is one position whatever the turn, and the
    corner's weight spreads over the 4 corners, twice each. Nothing lands on an occupied cell."""
    module = build(make_cfg("algo=reinforce", "seat=o", "algo.symmetries=true"))
    sym = symmetries(TIC_TAC_TOE, torch.device("cpu"))
    edge = torch.tensor([[0., -1, 0, 0, 0, 0, 0, 0, 0]])
    centre = torch.tensor([[0., 0, 0, 0, -1, 0, 0, 0, 0]])
    corner = torch.zeros(1, 9).index_fill_(1, torch.tensor([0]), 1.0)  # weight 1 on cell 0
    zero = torch.zeros(1, dtype=torch.long)
    _, summed, who = module.algo._turned_positions(edge, corner, zero, 1)
    assert summed.shape == (4, 9) and who.tolist() == [0] * 4 and summed.sum() == 8  # S turns of weight 1
    code = TIC_TAC_TOE.view_code
    views = torch.stack([turned(edge[0], torch.tensor(k), sym) for k in range(8)])
    order = torch.unique(code(views))  # the rows: one per distinct turn, by view code
    assert order.numel() == 4
    for k in range(8):
        row = summed[(order == code(views[k])).nonzero().item()]
        assert row[turned_cell(torch.tensor(0), torch.tensor(k), sym)] == 1
        assert row.sum() == 2 and row[views[k] != 0].abs().sum() == 0
    _, summed, _ = module.algo._turned_positions(centre, corner, zero, 1)
    assert summed.tolist() == [[2., 0, 2, 0, 0, 0, 2, 0, 2]]


def test_a_rectangle_turns_four_ways_and_its_turns_stay_legal():
    """3,4,3: 4 symmetries (a quarter turn would swap rows and columns). Random positions'
    targets on their empty cells stay on the empty cells of every turn, their weight kept."""
    g = Game(3, 4, 3)
    module = build(make_cfg("algo=reinforce", "game=mnk343", "algo.symmetries=true", "population.size=2"))
    gen = torch.Generator().manual_seed(0)
    boards = torch.randint(-1, 2, (40, g.cells), generator=gen).float()
    weighted = torch.rand(40, g.cells, generator=gen) * (boards == 0)
    owner = torch.arange(40) % 2
    logits, summed, who = module.algo._turned_positions(boards, weighted, owner, 2)
    assert symmetries(g, torch.device("cpu")).shape == (4, 12)
    assert torch.allclose(summed.sum(), weighted.sum() * 4)
    assert torch.equal(who, who.sort().values)  # member by member, as ``by_member`` reads them
    assert isinstance(module.net, MLPStack) and logits.shape == summed.shape and logits.requires_grad
    occupied = logits.detach() < MASKED / 2  # the network masks them: no target may sit there
    assert occupied.any() and (summed[occupied] == 0).all()
