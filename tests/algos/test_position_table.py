"""The position-table REINFORCE update is the per-move update, computed per position."""

from functools import partial

import pytest
import torch

from ttt_research.algos.reached import ReachedTable
from ttt_research.algos.reinforce import (
    Reinforce,
    antirez_loss,
    antirez_targets,
    learner_moves,
    position_targets,
    summed_loss,
)
from ttt_research.algos.reinforce_spec import SPEC
from ttt_research.env.game import view_code
from ttt_research.env.opponents import RandomOpponent, SelfPlay
from ttt_research.env.reward import Reward
from ttt_research.env.rollout import play_batch
from ttt_research.models.nets import MLP, MLPStack
from ttt_research.train.module import RLModule

ANTIREZ = Reward(win=1.0, tie=0.3, loss=-2.0, illegal=-2.0)


def module(seat="o", opponent=None, **kw):
    """The shell (a run: positions, schedules, streams) around a Reinforce; ``.algo`` is it."""
    torch.manual_seed(0)
    algo = Reinforce(net=MLP([25], "planes18"), **(SPEC.defaults() | {"position_table": True} | kw))
    m = RLModule(algo, opponent or RandomOpponent(), ANTIREZ, seat=seat, budget_games=100_000, seed=0)
    m.streams = torch.Generator().manual_seed(1)
    return m


def grads(m, loss):
    m.net.zero_grad()
    loss.backward()
    return [p.grad.clone() for p in m.net.parameters()]


def test_decision_positions_are_the_learners_own():
    for seat, n in (("o", 2097), ("x", 2423), ("both", 4520)):
        views, row_of = module(seat).positions()
        assert views.shape == (n, 9)
        # Every row maps back to itself, and no other view has a row.
        assert torch.equal(row_of[view_code(views)], torch.arange(n))
        assert int((row_of >= 0).sum()) == n
    # Self-play: the learner moves for both sides.
    assert module("x", SelfPlay()).positions()[0].shape[0] == 4520
    # A view with more own pieces than the opponent's is never a decision position.
    assert module("both").positions()[1][view_code(torch.tensor([1., 1, 0, 0, 0, 0, 0, 0, 0]))] == -1


def test_table_gradient_equals_the_per_move_gradient():
    m = module(temperature=1.0)
    views, row_of = m.positions()
    logits = m.algo.logits(views)
    act = partial(m.algo.act_from_table, table=logits.detach(), row_of=row_of, streams=m.streams)
    ep = play_batch(256, act, m.opponent, m.seat, "cpu", m.streams)
    view, legal, action, scaled, _ = learner_moves(ep, m.reward)
    targets = antirez_targets(action, legal, scaled)
    per_move = antirez_loss(m.algo.logits(view), targets, scaled.abs(), 256)  # (M, 9) logits
    by_position = antirez_loss(logits, targets, scaled.abs(), 256, rows=row_of[view_code(view)])
    # ... and the per-move loss is the sum of the moves' weighted cross-entropies.
    ce = -(targets * torch.log_softmax(m.algo.logits(view), -1)).sum(-1)
    assert torch.allclose(per_move, (scaled.abs() * ce).sum() / 256, rtol=1e-6)
    assert torch.allclose(per_move, by_position, rtol=1e-5)
    for a, b in zip(grads(m, per_move), grads(m, by_position), strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7)


def test_targets_summed_from_numbers_equal_the_per_move_rows_summed():
    m = module("both", temperature=1.0)  # both seats: X's last move is forced
    views, row_of = m.positions()
    table = m.algo.logits(views).detach()
    act = partial(m.algo.act_from_table, table=table, row_of=row_of, streams=m.streams)
    ep = play_batch(512, act, m.opponent, m.seat, "cpu", m.streams)
    view, legal, action, scaled, _ = learner_moves(ep, m.reward)
    rows = row_of[view_code(view)]
    # Won and lost games both, and forced moves (one legal cell: a loss teaches nothing there).
    assert (scaled > 0).any() and (scaled < 0).any() and (legal.sum(-1) == 1).any()
    expected = torch.zeros(views.shape[0], 9).index_add_(0, rows, antirez_targets(action, legal, scaled)
                                                           * scaled.abs()[:, None])
    got = position_targets(rows, action, scaled, views == 0)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6)
    # A population's rows: member k's moves in block k of the rows.
    twice = position_targets(torch.cat([rows, rows + views.shape[0]]), action.repeat(2), scaled.repeat(2),
                             (views == 0).repeat(2, 1))
    assert torch.allclose(twice, expected.repeat(2, 1), rtol=1e-5, atol=1e-6)
    # A non-finite reward reaches the targets (and the loss, where the guard stops the run).
    poisoned = scaled.clone()
    poisoned[0] = float("nan")
    assert position_targets(rows, action, poisoned, views == 0)[rows[0]].isnan().any()


def reached_loss(forward, views, row_of, ep_view, learner, rows, action, scaled, members, games):
    """The loss over the rows a ``ReachedTable`` computes, reading ``ep_view`` (T, [N,] B, 9)
    at the plies the ``learner`` (T, [N,] B) moved, as a batch does, and its rows per ply."""
    reached = ReachedTable(forward, views, row_of)
    widths = []
    for t in range(ep_view.shape[0]):
        if not learner[t].any():
            continue
        before = reached.width
        reached.read(ep_view[t].float())
        widths.append(reached.width - before)
    logits, at, owner = reached.gathered()
    targets = position_targets(reached.place_of(rows), action, scaled, at == 0)
    return summed_loss(logits, targets, games, members, owner if members > 1 else None), widths


def test_the_reached_rows_give_the_whole_tables_loss_and_gradient():
    """One pass per ply over the positions the games are at (``algos/reached.py``): the same
    loss and gradient as the pass over every position, for one agent and for a population
    (each member's rows through its own layers: its numbers are those it has alone)."""
    m = module(temperature=0.3)
    views, row_of = m.positions()
    P = views.shape[0]
    table = m.algo.logits(views).detach()
    act = partial(m.algo.act_from_table, table=table, row_of=row_of, streams=m.streams,
                  cdf=m.algo.table_cdf(table))
    ep = play_batch(300, act, m.opponent, m.seat, "cpu", m.streams)
    _, _, action, scaled, _ = learner_moves(ep, m.reward)
    rows = row_of[view_code(learner_moves(ep, m.reward)[0])]
    whole = summed_loss(m.algo.logits(views), position_targets(rows, action, scaled, views == 0), 300)
    part, widths = reached_loss(lambda v, _: m.algo.logits(v), views, row_of, ep.view, ep.learner, rows,
                                action, scaled, 1, 300)
    assert torch.allclose(whole, part, rtol=1e-6)
    single = grads(m, part)
    for a, b in zip(grads(m, whole), single, strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7)
    # O moves at plies 1, 3, 5, 7: 9 positions after X's first move, then at most what was reached.
    assert len(widths) == 4 and widths[0] == 9 and sum(widths) < P
    # A population of 3 whose member 1 is that network and plays those games: its gradient is the
    # single run's, bit for bit, whatever its neighbours reach.
    others = [MLP([25], "planes18") for _ in range(2)]
    stack = MLPStack.from_members([others[0], m.net, others[1]])
    eps = [play_batch(300, partial(m.algo.act_from_table, table=table, row_of=row_of, streams=m.streams),
                      m.opponent, m.seat, "cpu", m.streams) for _ in range(2)]
    eps.insert(1, ep)
    moves = [learner_moves(e, m.reward) for e in eps]
    rows = torch.cat([row_of[view_code(mv[0])] + k * P for k, mv in enumerate(moves)])
    action, scaled = torch.cat([mv[2] for mv in moves]), torch.cat([mv[3] for mv in moves])
    whole = summed_loss(stack(views).reshape(-1, 9),
                        position_targets(rows, action, scaled, (views == 0).repeat(3, 1)), 300, 3)
    part, _ = reached_loss(stack.by_member, views, row_of, torch.stack([e.view for e in eps], 1),
                           torch.stack([e.learner for e in eps], 1), rows, action, scaled, 3, 300)
    assert whole.shape == part.shape == (3,)
    assert torch.allclose(whole, part, rtol=1e-6)
    params = [*stack.weights, *stack.biases]
    g_whole = torch.autograd.grad(whole.sum(), params)
    g_part = torch.autograd.grad(part.sum(), params)
    for a, b in zip(g_whole, g_part, strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7)
    n = len(stack.weights)
    member_1 = [g[1] for pair in zip(g_part[:n], g_part[n:], strict=True) for g in pair]  # MLP's order
    assert all(torch.equal(a, b) for a, b in zip(member_1, single, strict=True))


def test_acting_from_the_table_equals_acting_with_the_network():
    m = module(temperature=0.0)  # greedy: the two must pick the very same cells
    views, row_of = m.positions()
    table = m.net(views).detach()
    with torch.no_grad():
        assert torch.equal(m.algo.act_from_table(views, views == 0, table, row_of, m.streams),
                           m.net(views).argmax(-1))


def test_schedules_follow_the_share_of_the_budget_played():
    m = module(temperature=1.0, temperature_final=0.1, lr=2.0, lr_final=0.2, momentum=0.9,
               epsilon=0.1, epsilon_final=0.0)
    m.budget_games = 10_000
    opt = torch.optim.SGD(m.net.parameters(), lr=m.algo.lr, momentum=m.algo.momentum)
    for played, lr, temperature, eps in ((0, 2.0, 1.0, 0.1), (5_000, 1.1, 0.55, 0.05),
                                         (10_000, 0.2, 0.1, 0.0), (20_000, 0.2, 0.1, 0.0)):
        m.games_played = played
        m.algo.anneal(m, opt)
        assert opt.param_groups[0]["lr"] == pytest.approx(lr)
        assert m.algo.temperature == pytest.approx(temperature)
        assert m.algo.epsilon == pytest.approx(eps) == m.algo.acting(m).epsilon
    # Games already played within the update count too (2,500 of them here).
    m.games_played = 2_500
    m.algo.anneal(m, opt, games_this_update=2_500)
    assert opt.param_groups[0]["lr"] == pytest.approx(1.1)


def test_epsilon_replaces_that_share_of_moves_by_uniform_legal_ones():
    views, _ = module().positions()
    board = views[100].expand(60_000, 9)  # one position, many games: (B, 9)
    legal = board == 0
    logits = torch.where(legal, 0.0, -1e9)
    logits[:, legal[0].nonzero()[0, 0]] = 50.0  # the softmax all but certain of one cell
    for eps in (0.0, 0.3, 1.0):
        m = module(temperature=1.0, epsilon=eps)
        moves = m.algo._draw(logits, m.streams)
        assert legal.gather(1, moves[:, None]).all()  # never an occupied cell
        counts = torch.bincount(moves, minlength=9).float() / moves.numel()
        cells = legal[0].nonzero().squeeze(1)
        top = cells[0]
        # the favourite: 1 - eps + eps / k; each other legal cell: eps / k
        k = cells.numel()
        assert counts[top] == pytest.approx(1 - eps + eps / k, abs=0.01)
        assert torch.allclose(counts[cells[1:]], torch.full((k - 1,), eps / k), atol=0.01)


def test_the_reached_table_reads_finished_games_and_members_that_reach_nothing():
    """A finished game has no row (it reads row 0, ignored); a member whose games are all over
    at a ply gets no row and no pass; a ply where every game is over computes nothing."""
    views, row_of = module().positions()  # O's 2,097 positions
    stack = MLPStack.from_members([MLP([25], "planes18") for _ in range(2)])
    o_to_move = views[5]  # one piece of X's: O to move
    won = torch.tensor([1., 1, 1, -1, -1, 0, 0, 0, 0])  # the mover's view of a finished game
    games = torch.stack([torch.stack([o_to_move, won, o_to_move]), torch.stack([won, won, won])])  # (2, 3, 9)
    reached = ReachedTable(stack.by_member, views, row_of)
    logits, boards, owner, rows = reached.read(games)
    assert logits.shape == (1, 9) and owner.tolist() == [0]  # member 0's one position, once
    assert torch.equal(boards[0], o_to_move) and rows.tolist() == [0, 0, 0, 0, 0, 0]
    assert torch.equal(logits, stack.member(0)(o_to_move[None]))
    assert reached.place_of(torch.tensor([5])).tolist() == [0]  # member 0's position 5: row 0
    over = reached.read(torch.stack([won.expand(3, 9), won.expand(3, 9)]))
    assert over[0].shape == (1, 9) and not over[0].requires_grad and reached.width == 1  # nothing kept
