"""The batched Gumbel search on hand-built cases: a mate in one with 2 simulations, the
sequential-halving schedule, its phases and the visits they leave, the completed-Q target
on a known node, illegal moves never expanded, a population's blocks searched as their
single runs; and against the literal tree search (tests/helpers/tree_search.py) on random
networks, bit for bit."""

import math

import pytest
import torch

from tests.helpers.tree_search import tree_search
from ttt_research.env import game, solver
from ttt_research.env.board import Game
from ttt_research.search.gumbel import (
    C_SCALE,
    C_VISIT,
    Nodes,
    best_of,
    completed_q,
    gumbel_search,
    halving_phases,
    halving_schedule,
    subtrees,
    visits_needed,
)

T = game.tables()
R = game.N_CODES


def code_of(moves):
    code = torch.zeros(1, dtype=torch.long)
    for m in moves:
        code = game.step(code, torch.tensor([m])).code
    return code


def flat_tables(logit=0.0, value=0.0):
    """Every position: the same logit on each legal cell (masked elsewhere) and one value."""
    logits = torch.where(T.legal, logit, -1e9).float()
    return logits, torch.full((R,), value)


def test_the_schedule_halves_the_considered_moves_round_by_round():
    # 9 moves, 16 simulations: ceil(log2 9) = 4 rounds. Round 1: 9 moves once each; round 2:
    # the best 4 once more; round 3: the best 2, twice each (16 // (4 * 2) = 2), cut at 16.
    assert halving_schedule(16)[9].tolist() == [0] * 9 + [1] * 4 + [2, 2, 3]
    assert halving_schedule(4)[9].tolist() == [0, 0, 0, 0]  # fewer simulations than moves
    assert halving_schedule(5)[1].tolist() == [0, 1, 2, 3, 4]  # one move: all its own
    assert halving_schedule(8)[2].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_the_visits_follow_the_schedule_in_the_order_of_the_prior():
    logits, value = flat_tables()
    logits[0] = torch.tensor([9, 8, 7, 6, 5, 4, 3, 2, 1], dtype=torch.float)  # the empty board
    s = gumbel_search(torch.zeros(1, dtype=torch.long), logits, value, 16)
    # Every child is worth 0, so the scores keep the prior's order: 9 moves once, the best
    # 4 again, the best 2 again, the best one again.
    assert s.visits[0].tolist() == [4, 3, 2, 2, 1, 1, 1, 1, 1]
    assert s.action.tolist() == [0]
    assert int(s.visits.sum()) == 16


def test_a_mate_in_one_is_found_with_two_simulations_against_the_prior():
    # X: 0, 1; O: 3, 4. X to move wins at 2; the prior prefers 5 (O's own threat).
    root = code_of([0, 3, 1, 4])
    logits, value = flat_tables(-5.0)
    logits[root, 5], logits[root, 2] = 1.0, 0.5
    s = gumbel_search(root, logits, value, 2)
    assert s.visits[0, [2, 5]].tolist() == [1, 1]  # the two best of the prior, once each
    assert s.q[0, 2] == 1.0 and s.q[0, 5] == 0.0  # the win is exact; 5's child is worth 0
    assert s.action.tolist() == [2]
    assert s.policy[0].argmax() == 2 and s.policy[0, 2] > 0.9
    # The prior alone (one simulation) would play its favourite.
    assert gumbel_search(root, logits, value, 1).action.tolist() == [5]


def test_the_completed_q_target_on_a_known_node():
    visits = torch.tensor([[2.0, 0, 1, 0, 0, 0, 0, 0, 0]])
    value_sum = torch.tensor([[1.0, 0, -1, 0, 0, 0, 0, 0, 0]])  # q: 0.5 and -1
    legal = torch.tensor([[True, True, True, True, False, False, False, False, False]])
    logits = torch.tensor([[0.0, 0.0, math.log(2.0), 0.0, 5.0, 5.0, 5.0, 5.0, 5.0]])
    raw = torch.tensor([0.2])
    node = Nodes.of(logits.t(), legal.t(), raw)  # cells first: (9, B)
    q, sigma, mixed = completed_q(node, visits.t(), value_sum.t(), rescale=False)
    q, sigma = q.t(), sigma.t()
    # prior over the legal cells: 0.2, 0.2, 0.4, 0.2. Visited: cells 0 (q 0.5) and 2 (q -1):
    # weighted mean q = (0.2 * 0.5 + 0.4 * -1) / 0.6 = -0.5; mixed = (0.2 + 3 * -0.5) / 4.
    assert mixed.item() == pytest.approx((0.2 - 1.5) / 4)
    assert q[0, :4].tolist() == pytest.approx([0.5, mixed.item(), -1.0, mixed.item()])
    assert sigma[0, :4].tolist() == pytest.approx([(C_VISIT + 2) * C_SCALE * v for v in q[0, :4].tolist()])
    scaled = completed_q(node, visits.t(), value_sum.t())[1].t()  # rescaled to [0, 1]
    m = (mixed.item() + 1) / 1.5  # q's from -1 (cell 2) to 0.5 (cell 0)
    assert scaled[0, :4].tolist() == pytest.approx([(C_VISIT + 2) * C_SCALE * v for v in [1.0, m, 0.0, m]])


def test_illegal_moves_are_never_expanded_whatever_their_prior():
    root = code_of([0, 1, 2, 3, 5, 4, 6])  # O to move, cells 7 and 8 empty
    logits = torch.zeros(R, 9)
    logits[:, :7] = 50.0  # the table is *not* masked: occupied cells look best
    value = torch.zeros(R)
    s = gumbel_search(root, logits, value, 32)
    assert s.visits[0, :7].sum() == 0 and s.visits[0, 7:].sum() == 32
    assert s.action.item() in (7, 8) and s.policy[0, :7].sum() == 0
    assert s.depth.item() == 2  # two plies to the end of the game, never further


def test_with_exact_values_and_a_visit_per_move_the_search_plays_optimally_everywhere():
    # Values from minimax (the mover's), a flat prior, as many simulations as moves: each
    # move is tried once, its q is exact, and the chosen move keeps the minimax value.
    sol = solver.solve()
    value = (sol.value * T.mover).float()  # (R,) the mover's result under perfect play
    logits, _ = flat_tables()
    points = T.reachable & ~T.done
    for ply in range(9):
        roots = (points & (T.ply == ply)).nonzero().squeeze(1)
        s = gumbel_search(roots, logits, value, 9 - ply)
        assert bool(sol.optimal[roots, s.action].all()), f"ply {ply}"
        assert torch.equal(s.visits.sum(-1), torch.full((roots.numel(),), 9.0 - ply))


def test_population_blocks_search_as_their_single_runs():
    a_logits, a_value = flat_tables()
    b_logits, b_value = flat_tables()
    a_logits[0] = torch.arange(9, dtype=torch.float)  # prefers cell 8
    b_logits[0] = -torch.arange(9, dtype=torch.float)  # prefers cell 0
    logits, value = torch.cat([a_logits, b_logits]), torch.cat([a_value, b_value])
    roots = torch.zeros(2, dtype=torch.long)
    g = -torch.log(-torch.log(torch.rand(2, 9, generator=torch.Generator().manual_seed(0))))
    both = gumbel_search(roots, logits, value, 6, gumbel=g, offset=torch.tensor([0, R]))
    one = gumbel_search(roots[:1], a_logits, a_value, 6, gumbel=g[:1])
    two = gumbel_search(roots[1:], b_logits, b_value, 6, gumbel=g[1:])
    assert torch.equal(both.visits, torch.cat([one.visits, two.visits]))
    assert torch.equal(both.action, torch.cat([one.action, two.action]))
    assert torch.allclose(both.policy, torch.cat([one.policy, two.policy]))


def test_a_finished_root_or_no_simulation_is_refused():
    logits, value = flat_tables()
    with pytest.raises(ValueError, match="unfinished"):
        gumbel_search(code_of([0, 3, 1, 4, 2]), logits, value, 4)
    with pytest.raises(ValueError, match="at least one simulation"):
        gumbel_search(torch.zeros(1, dtype=torch.long), logits, value, 0)


def test_the_phases_read_the_schedule_as_sequential_halving():
    keep, visits = halving_phases(16)
    # 9 moves: all once, the best 4 once more, the best 2 once more, the best one once more.
    assert keep[9].tolist() == [9, 4, 2, 1] and visits[9].tolist() == [1, 1, 1, 1]
    # 3 moves: all twice (16 // (2 rounds * 3)), then the best 2 five times each.
    assert keep[3].tolist()[:2] == [3, 2] and visits[3].tolist()[:2] == [2, 5]
    assert keep[1].tolist()[0] == 1 and visits[1].tolist()[0] == 16  # one move: every visit
    for m in range(1, 10):  # every phase table spends exactly the simulations
        assert int((keep[m] * visits[m]).sum()) == 16
    keep4, visits4 = halving_phases(4)
    # fewer simulations than moves: the top 4 once each
    assert keep4[9].tolist()[0] == 4 and visits4[9].tolist()[0] == 1


def test_best_of_keeps_the_best_due_cells_ties_to_the_lower_cell():
    score = torch.tensor([[3.0, 1.0, 3.0, 5.0, 2.0, 3.0, 0.0, 9.0, 3.0]]).t()  # (9, 1)
    due = torch.ones(9, 1, dtype=torch.bool)
    due[7] = False  # the best score is not due
    assert best_of(score, due, torch.tensor([1]))[:, 0].nonzero().squeeze(1).tolist() == [3]
    assert best_of(score, due, torch.tensor([3]))[:, 0].nonzero().squeeze(1).tolist() == [0, 2, 3]
    assert best_of(score, due, torch.tensor([9]))[:, 0].sum() == 8  # no more than are due


@pytest.mark.parametrize("board", [(3, 3, 3), (3, 4, 3), (4, 4, 4)])
def test_best_of_ranks_as_the_count_of_better_cells(board):
    # rank(a) = #{b < a: s_b >= s_a} + #{b > a: s_b > s_a}: the definition, cell by cell, on
    # scores with many ties (a few values) and cells not due
    cells = Game(*board).cells
    g = torch.Generator().manual_seed(cells)
    score = torch.randint(0, 4, (cells, 500), generator=g).float()
    due = torch.rand(cells, 500, generator=g) < 0.7
    keep = torch.randint(0, cells + 1, (500,), generator=g)
    s = score.masked_fill(~due, -1e9)
    before = (s[None, :, :] >= s[:, None, :]) & (torch.arange(cells)[None, :, None] < torch.arange(cells)[:, None, None])
    after = (s[None, :, :] > s[:, None, :]) & (torch.arange(cells)[None, :, None] > torch.arange(cells)[:, None, None])
    rank = before.sum(1) + after.sum(1)  # (cells, 500)
    assert torch.equal(best_of(score, due, keep), (due & (rank < keep)).float())


@pytest.mark.parametrize("simulations,max_considered,noisy,rescale", [
    (1, 9, False, True), (2, 9, True, True), (4, 9, True, True), (7, 4, False, True),
    (16, 9, True, True), (16, 3, True, False), (32, 9, False, True)])
def test_the_shared_subtrees_search_as_the_literal_trees_bit_for_bit(simulations, max_considered, noisy,
                                                                     rescale):
    # Random networks, two members; 400 random decision positions each searched by B
    # literal trees (one depth a step) and by the shared subtrees: the same numbers.
    g = torch.Generator().manual_seed(simulations * 10 + max_considered)
    logits = torch.where(T.legal.repeat(2, 1), torch.randn(2 * R, 9, generator=g) * 2, -1e9)
    value = torch.rand(2 * R, generator=g) * 2 - 1
    points = (T.reachable & ~T.done).nonzero().squeeze(1)
    roots = points[torch.randint(0, points.numel(), (400,), generator=g)]
    offset = torch.randint(0, 2, (400,), generator=g) * R
    noise = -torch.log(-torch.log(torch.rand(400, 9, generator=g).clamp(1e-12, 1 - 1e-7))) if noisy else None
    kw = dict(gumbel=noise, offset=offset, max_considered=max_considered, rescale=rescale)
    a = tree_search(roots, logits, value, simulations, **kw)
    b = gumbel_search(roots, logits, value, simulations, **kw)
    for field in ("action", "visits", "q", "value", "depth", "policy"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    # Subtrees played further serve fewer simulations unchanged.
    deeper = subtrees(logits, value, simulations + 3, rescale, max_considered)
    c = gumbel_search(roots, None, None, simulations, tree=deeper, **kw)
    assert torch.equal(c.visits, b.visits) and torch.equal(c.action, b.action)


def test_subtrees_are_played_as_deep_as_a_search_can_reach_and_no_deeper():
    # 16 simulations over 9 moves: the top move's phases give it 1 + 1 + 1 + 1 visits; over 2
    # moves 8 each; that is the most any move of any root gets, so positions are played to 8.
    assert visits_needed(16) == 8 and visits_needed(4) == 2 and visits_needed(2) == 1
    assert visits_needed(16, 1) == 16  # one move considered: every visit goes to it
    logits, value = flat_tables()
    tree = subtrees(logits, value, 16)
    assert tree.visits == 8
    assert tree.leaf[9:, :tree.block].abs().sum() == 0  # unfinished positions: never a 9th visit
    with pytest.raises(ValueError, match="cannot serve"):
        gumbel_search(torch.zeros(1, dtype=torch.long), None, None, 32, tree=tree)
    with pytest.raises(ValueError, match="cannot serve"):
        gumbel_search(torch.zeros(1, dtype=torch.long), None, None, 16, max_considered=1, tree=tree)
