"""Populations' building blocks: N networks as one stacked module (``nets.MLPStack``) and
the exact evaluation of all N at once (``evaluate.evaluate_stack``), each checked against
the single-network code it must agree with member by member."""

import pytest
import torch

from ttt_research.env import game
from ttt_research.env.solver import solve
from ttt_research.evaluation import exact as ev
from ttt_research.models.nets import MLP, MLPStack

T = game.tables()
SHAPES = [((100,), "planes18", "default"), ((16, 8), "signed9", "uniform")]


def boards(n: int, b: int, seed: int = 0) -> torch.Tensor:
    """(n, b, 9) random mover's views (pieces anywhere: the nets don't care)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1, 2, (n, b, 9), generator=g).float()


@pytest.mark.parametrize("hidden,encoding,init", SHAPES)
def test_each_member_computes_what_its_own_mlp_computes(hidden, encoding, init):
    torch.manual_seed(3)
    members = [MLP(hidden, encoding, init) for _ in range(5)]
    stack = MLPStack.from_members(members)
    x = boards(5, 64)
    out, raw, trunk = stack(x), stack.raw_logits(x), stack.trunk(x)
    assert out.shape == raw.shape == (5, 64, 9) and trunk.shape == (5, 64, hidden[-1])
    for k, m in enumerate(members):
        torch.testing.assert_close(out[k], m(x[k]), rtol=0, atol=1e-6)
        torch.testing.assert_close(raw[k], m.raw_logits(x[k]), rtol=0, atol=1e-6)
        torch.testing.assert_close(trunk[k], m.trunk(x[k]), rtol=0, atol=1e-6)
    assert (out == -1e9).sum() == (x != 0).sum()  # occupied cells masked, as MLP does
    # A shared (B, 9) view is the same as that view repeated for every member.
    assert torch.equal(stack(x[0]), stack(x[0].expand(5, -1, -1)))


def test_a_member_does_not_depend_on_its_neighbours():
    torch.manual_seed(0)
    stack = MLPStack(4, (32,), "planes18")
    x = boards(4, 128)
    before = stack(x)
    with torch.no_grad():  # scramble members 0, 1 and 3 and their inputs
        for w in [*stack.weights, *stack.biases]:
            w[[0, 1, 3]] = torch.randn_like(w[[0, 1, 3]]) * 100
    y = x.clone()
    y[[0, 1, 3]] = boards(3, 128, seed=9)
    assert torch.equal(stack(y)[2], before[2])
    alone = MLPStack.from_members([stack.member(2)])
    assert torch.equal(alone(x[2:3])[0], before[2])


def test_a_fresh_stack_draws_each_members_init_as_mlp_would_in_member_order():
    torch.manual_seed(11)
    stack = MLPStack(3, (20,), "signed9", "uniform")
    after_stack = torch.rand(1)
    torch.manual_seed(11)
    mlps = [MLP((20,), "signed9", "uniform") for _ in range(3)]
    assert torch.equal(torch.rand(1), after_stack)  # same number of draws
    for k, m in enumerate(mlps):
        for p, q in zip(stack.member(k).parameters(), m.parameters(), strict=True):
            assert torch.equal(p, q)


def test_member_and_load_member_round_trip_without_touching_the_rng():
    torch.manual_seed(1)
    stack = MLPStack(3, (100,), "planes18")
    state = torch.get_rng_state()
    m1 = stack.member(1)
    assert torch.equal(torch.get_rng_state(), state)
    assert isinstance(m1, MLP) and m1.spec() == stack.spec()
    x = boards(1, 50)[0]
    assert torch.equal(m1(x), MLPStack.from_members([m1])(x)[0])
    other = MLP((100,), "planes18")
    stack.load_member(0, other)
    for p, q in zip(stack.member(0).parameters(), other.parameters(), strict=True):
        assert torch.equal(p, q)
    for p, q in zip(stack.member(1).parameters(), m1.parameters(), strict=True):
        assert torch.equal(p, q)  # the neighbour is untouched
    with pytest.raises(ValueError, match="cannot load"):
        stack.load_member(0, MLP((99,), "planes18"))
    with pytest.raises(ValueError, match="member 1 has shape"):
        MLPStack.from_members([MLP((4,)), MLP((5,))])


def test_gradients_of_a_per_member_loss_match_each_mlps_gradients():
    torch.manual_seed(5)
    members = [MLP((24, 12), "planes18") for _ in range(3)]
    stack = MLPStack.from_members(members)
    x = boards(3, 40)
    target = torch.randint(0, 9, (3, 40))
    # Summing the members' losses gives each member its own loss's gradient.
    logits = stack.raw_logits(x)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="sum").backward()
    for k, m in enumerate(members):
        torch.nn.functional.cross_entropy(m.raw_logits(x[k]), target[k], reduction="sum").backward()
        for i, lin in enumerate(l for l in m.body if isinstance(l, torch.nn.Linear)):
            torch.testing.assert_close(stack.weights[i].grad[k], lin.weight.grad, rtol=0, atol=1e-5)
            torch.testing.assert_close(stack.biases[i].grad[k], lin.bias.grad, rtol=0, atol=1e-5)


# --------------------------------------------------------------------------- evaluation


def preference_logits(pref: list[float]) -> torch.Tensor:
    """(M, 9) logits of a constant cell preference at the decision positions."""
    return torch.tensor(pref).expand(ev.decision_codes().numel(), 9).clone()


def minimax_logits() -> torch.Tensor:
    """(M, 9) logits whose greedy moves are the lowest minimax-optimal cells."""
    return solve().optimal[ev.decision_codes()].float()


def test_every_members_report_is_exactly_its_own_evaluate_policy():
    torch.manual_seed(7)
    stack = MLPStack(5, (100,), "planes18", "uniform")
    reports = ev.evaluate_stack(stack, chunk=2)  # forward 2 members at a time
    assert ev.evaluate_stack(lambda v: stack(v), 5) == reports  # a policy function, called once
    assert len(reports) == 5 and len({str(r) for r in reports}) > 1  # the members differ
    for k, r in enumerate(reports):
        assert r == ev.evaluate_policy(stack.member(k))
    # Special policies given as stacked logits: minimax-optimal, constant preferences, ties.
    logits = torch.stack([minimax_logits(), preference_logits([3, 1, 3, 1, 5, 1, 3, 1, 3]),
                          preference_logits([0, 1, 2, 3, 4, 5, 6, 7, 8]), preference_logits([0.0] * 9)])
    reports = ev.evaluate_stack(logits)
    for r, lg in zip(reports, logits, strict=True):
        single = ev.evaluate_policy(lambda v, lg=lg: lg)
        assert r == single
    assert reports[0]["optimal_move_rate"] == 1.0 and reports[0]["as_o"]["worst_case"] == "draw"
    assert reports[3]["as_x"]["worst_case"] == "loss"


def test_chunks_and_raw_illegal_agree_with_the_single_version():
    pref = torch.stack([preference_logits([float(c == k) for c in range(9)]) for k in range(9)])
    actions, raw_illegal = ev.greedy_actions_stack(pref)
    for k in range(9):
        a, r = ev.greedy_actions(lambda v, k=k: pref[k])
        assert torch.equal(actions[k], a) and torch.equal(raw_illegal[k], r)
    assert ev.evaluate_actions_stack(actions, chunk=2) == ev.evaluate_actions_stack(actions)
