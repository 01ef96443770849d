"""``search/reached.reached_search`` (the network asked at the nodes a search reaches) on
another board: 3,4,3's searches equal the shared-subtrees search over the whole board's
tables, for two members' blocks (the same moves and visits; the values up to float
rounding); and a search asks the network once per simulation, plus once at the root."""

import pytest
import torch

from tests.helpers.tree_search import tree_search
from ttt_research.env.board import Game
from ttt_research.search.gumbel import gumbel_search
from ttt_research.search.reached import reached_search

G = Game(3, 4, 3)


@pytest.mark.parametrize("simulations,max_considered,noisy", [(2, 12, True), (16, 12, True), (16, 4, False)])
def test_3_4_3_searches_as_the_shared_subtrees_bit_for_bit(simulations, max_considered, noisy):
    t = G.tables()
    R, C = t.states, t.cells
    g = torch.Generator().manual_seed(simulations + max_considered)
    logits = torch.where(t.legal.repeat(2, 1), torch.randn(2 * R, C, generator=g) * 2, -1e9)
    value = torch.rand(2 * R, generator=g) * 2 - 1
    points = (t.reachable & ~t.done).nonzero().squeeze(1)
    roots = points[torch.randint(0, points.numel(), (300,), generator=g)]
    offset = torch.randint(0, 2, (300,), generator=g) * R
    noise = -torch.log(-torch.log(torch.rand(300, C, generator=g).clamp(1e-12, 1 - 1e-7))) if noisy else None
    kw = dict(gumbel=noise, offset=offset, max_considered=max_considered, game=G)
    a = tree_search(roots, logits, value, simulations, **kw)
    b = gumbel_search(roots, logits, value, simulations, **kw)
    for field in ("action", "visits", "depth"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    # The values: the same leaves summed in another order (path by path here, subtree by
    # subtree there), so equal up to float32 rounding.
    for field in ("q", "value", "policy"):
        torch.testing.assert_close(getattr(a, field), getattr(b, field), rtol=0, atol=1e-5)
    assert int(a.visits.sum()) == 300 * simulations


def test_the_network_is_asked_once_a_simulation_for_every_tree():
    t = G.tables()
    calls = []

    def evaluate(rows):
        calls.append(rows.numel())
        return torch.zeros(rows.numel(), t.cells), torch.zeros(rows.numel())

    roots = (t.reachable & ~t.done).nonzero().squeeze(1)[:50]
    s = reached_search(roots, evaluate, 8, game=G)
    assert calls == [50] * 9
    assert s.action.shape == (50,) and bool(t.legal[roots].gather(1, s.action[:, None]).all())
