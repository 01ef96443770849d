"""PPO's terms, each on numbers worked out by hand, and its opponents made of policies."""

import math
from functools import partial

import pytest
import torch

from ttt_research.algos.ppo import (
    PPO,
    explained_variance,
    gae,
    log_softmax9,
    masked_entropy,
    normalise,
    policy_loss,
    take_rows,
    value_loss,
)
from ttt_research.algos.ppo_spec import SPEC
from ttt_research.env import game
from ttt_research.env.opponents import Curriculum, MixedOpponent, PoolOpponent, RandomOpponent, SelfPlay
from ttt_research.env.reward import Reward
from ttt_research.env.rollout import play_batch
from ttt_research.env.streams import Streams
from ttt_research.models.nets import MASKED, MLP, MLPStack


def test_gae_over_one_sides_moves_by_hand():
    # O moves at plies 1 and 3 of one game and wins after its second move.
    #   ply 3 (last): delta = 1 - 0.2 = 0.8, A = 0.8
    #   ply 1: delta = 0 + 0.9 * 0.2 - 0.5 = -0.32, A = -0.32 + 0.9 * 0.5 * 0.8 = 0.04
    mask = torch.tensor([[False], [True], [False], [True]])
    last = torch.tensor([[False], [False], [False], [True]])
    reward = torch.tensor([[0.0], [0.0], [0.0], [1.0]])
    value = torch.tensor([[9.0], [0.5], [9.0], [0.2]])  # 9s sit on the other side's plies
    adv, ret = gae(reward, value, mask, last, gamma=0.9, lam=0.5)
    assert adv[:, 0].tolist() == pytest.approx([0.0, 0.04, 0.0, 0.8])
    assert ret[:, 0].tolist() == pytest.approx([0.0, 0.54, 0.0, 1.0])


def test_gae_cuts_at_the_last_move_of_each_game():
    # Two games side by side; the first ends after one move with -2, the second after two.
    mask = torch.tensor([[True, True], [True, True]])
    last = torch.tensor([[True, False], [False, True]])
    mask[1, 0] = False
    reward = torch.tensor([[-2.0, 0.0], [0.0, 1.0]])
    value = torch.tensor([[0.0, 0.1], [0.0, 0.3]])
    adv, _ = gae(reward, value, mask, last, gamma=1.0, lam=1.0)
    assert adv[0, 0].item() == pytest.approx(-2.0)  # nothing after its last move leaks in
    assert adv[0, 1].item() == pytest.approx(1.0 - 0.1)  # Monte Carlo return minus V


def test_clipped_surrogate_by_hand():
    # ratio 1.5 with A = +2: min(3, 2.4) -> loss -2.4; ratio 0.5 with A = -1: max clips at 0.8.
    logp = torch.log(torch.tensor([0.6, 0.2]))
    logp_old = torch.log(torch.tensor([0.4, 0.4]))
    adv = torch.tensor([2.0, -1.0])
    assert policy_loss(logp, logp_old, adv, clip=0.2).item() == pytest.approx((-2.4 + 0.8) / 2)


def test_value_loss_entropy_and_diagnostics_by_hand():
    assert value_loss(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0])).item() == pytest.approx(1.25)
    logits = torch.tensor([[0.0, 0.0] + [MASKED] * 7])
    legal = torch.tensor([[True, True] + [False] * 7])
    assert masked_entropy(logits, legal).item() == pytest.approx(math.log(2))
    ret = torch.tensor([1.0, 2.0, 3.0])
    assert explained_variance(ret.clone(), ret).item() == pytest.approx(1.0)
    assert explained_variance(torch.full((3,), 2.0), ret).item() == pytest.approx(0.0)
    z = normalise(torch.tensor([1.0, 2.0, 3.0, 6.0]))
    assert z.mean().item() == pytest.approx(0.0, abs=1e-6) and z.std().item() == pytest.approx(1.0)


def _greedy_net(seed=0):
    torch.manual_seed(seed)
    return MLP([16], "signed9")


def test_log_softmax_over_a_middle_axis_is_torchs_over_the_last():
    """log_softmax9 computes over a middle axis (torch's kernel for a last axis of 9 is slow):
    the same log-probabilities and gradients up to float rounding, masked cells included."""
    logits = torch.randn(3, 50, 9, generator=torch.Generator().manual_seed(0))
    occupied = torch.rand(3, 50, 9, generator=torch.Generator().manual_seed(1)) < 0.4
    logits = logits.masked_fill(occupied, MASKED)
    weight = torch.randn(3, 50, 9)
    mine, theirs = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    a, b = log_softmax9(mine), torch.log_softmax(theirs, -1)
    assert a.shape == b.shape == (3, 50, 9)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    (a.where(a > -1e8, 0.0) * weight).sum().backward()
    (b.where(b > -1e8, 0.0) * weight).sum().backward()
    torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(log_softmax9(logits[0]), torch.log_softmax(logits[0], -1), rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool])
def test_take_rows_copies_each_members_rows(dtype):
    """take_rows (rows copied whole) picks what a gather along the moves' axis picks."""
    g = torch.Generator().manual_seed(2)
    x = torch.randint(-1, 2, (4, 30, 9), generator=g).to(dtype)
    index = torch.randint(0, 30, (4, 7), generator=g)
    assert torch.equal(take_rows(x, index), x.gather(1, index[..., None].expand(-1, -1, 9)))
    assert torch.equal(take_rows(x[..., 0], index), x[..., 0].gather(1, index))  # (N, M) values
    assert take_rows(x, index[:, :0]).shape == (4, 0, 9)  # a member's empty minibatch


@pytest.mark.parametrize("options", [{}, {"masking": False}], ids=["masked", "unmasked"])
def test_trajectories_read_the_batchs_networks_once_per_position(options):
    """A population of 3 (padded moves): trajectories' logp_old and value_old, computed once per
    distinct position, are the networks' on every move, and GAE's advantages and returns are
    those of the critic run on every move."""
    torch.manual_seed(0)
    m = PPO(net=MLPStack(3, [16], "signed9"), value_net=MLPStack(3, [16], "signed9", outputs=1),
            **(SPEC.defaults() | options))
    streams = Streams([1, 2, 3])
    ep = play_batch(64, partial(m.act, streams=streams), RandomOpponent(), "both", "cpu", streams)
    reward = Reward(1.0, 0.3, -5.0, -5.0)
    mv = m.trajectories(ep, reward)
    assert mv.valid is not None and not bool(mv.valid.all())  # members made different numbers of moves
    ok = mv.valid
    with torch.no_grad():
        view = mv.view.float()
        logits = m.net(view) if m.masking else m.net.raw_logits(view)
        logp = torch.log_softmax(logits, -1).gather(2, mv.action[..., None]).squeeze(2)
        value = m.value(view)
    torch.testing.assert_close(mv.logp_old[ok], logp[ok], rtol=0, atol=1e-5)
    torch.testing.assert_close(mv.value_old[ok], value[ok], rtol=0, atol=1e-6)
    # GAE from the critic on every move: the same advantages and returns
    T, N, B = ep.learner.shape
    grid = torch.zeros(N, T * B).scatter_(1, mv.take, value.masked_fill(~ok, 0)).view(N, T, B).transpose(0, 1)
    side = torch.where(torch.arange(T) % 2 == 0, game.X, game.O).view(T, 1, 1).expand(T, N, B)
    adv = torch.zeros(T, N, B)
    for s in (game.X, game.O):
        mask = ep.learner & (side == s)
        later = mask.flip(0).long().cumsum(0).flip(0) - mask.long()
        last = mask & (later == 0)
        result = (ep.outcome * ep.seat * s).to(torch.int8)
        at_last = torch.where(last, reward.of(result, ep.forfeit & (result < 0))[None], 0.0)
        a, _ = gae(*(x.reshape(T, N * B) for x in (at_last, grid, mask, last)), m.gamma, m.gae_lambda)
        adv = adv + a.view(T, N, B)
    torch.testing.assert_close(mv.adv[ok], mv.gather(adv)[ok], rtol=0, atol=1e-5)
    torch.testing.assert_close(mv.ret[ok], (mv.gather(adv) + value)[ok], rtol=0, atol=1e-5)


def test_self_play_lets_the_learner_move_for_both_sides():
    net = _greedy_net()
    gen = torch.Generator().manual_seed(0)
    ep = play_batch(64, lambda v, legal: net(v).argmax(-1), SelfPlay(), "both", "cpu", gen)
    assert torch.equal(ep.learner, ep.active)  # every move of every game is the learner's
    assert (ep.seat == game.X).all()


def test_pool_snapshots_every_k_updates_and_keeps_the_latest():
    pool = PoolOpponent(every=3, size=2)
    nets = [_greedy_net(i) for i in range(7)]
    for update, net in enumerate(nets):
        pool.on_update(net, update / 7, update)
    # Snapshots at updates 0, 3, 6; only the last two kept.
    assert [s.name for s in pool.snapshots] == ["snapshot@3", "snapshot@6"]
    w = pool.snapshots[-1].net.body[0].weight
    assert torch.equal(w, nets[6].body[0].weight) and not w.requires_grad
    codes = torch.zeros(500, dtype=torch.long)
    gen = torch.Generator().manual_seed(1)
    pool.reset(torch.ones(500, dtype=torch.bool), gen)
    moves = pool.act(codes, gen)
    assert game.tables().legal[codes, moves].all()
    assert set(pool.choice.tolist()) == {0, 1}


def test_curriculum_moves_through_its_stages():
    a, b = RandomOpponent(), MixedOpponent(0.5, "minimax")
    cur = Curriculum([{"until": 0.5, "opponent": a}, {"until": 1.0, "opponent": b}])
    net = _greedy_net()
    cur.on_update(net, 0.2, 0)
    assert cur.current is a
    cur.on_update(net, 0.5, 1)
    assert cur.current is b


@pytest.mark.parametrize("options", [{}, {"shared_trunk": True}, {"masking": False}],
                         ids=["separate-value-net", "shared-trunk", "unmasked"])
def test_heads_once_per_position_equal_the_networks_on_every_move(options):
    """PPO._heads runs the networks once per distinct position and gathers per move: the
    same log-probabilities, values and entropy, and the same gradients, as running them on
    every move (all the moves of 512 games, and a minibatch of them)."""
    torch.manual_seed(0)
    m = PPO(net=MLP([16], "signed9"), **(SPEC.defaults() | options))
    streams = Streams([1])  # one member: the moves come as (1, M) rows
    ep = play_batch(512, partial(m.act, streams=streams), RandomOpponent(), "both", "cpu", streams)
    mv = m.trajectories(ep, Reward(1.0, 0.3, -5.0, -5.0))
    assert mv.valid is None  # one member: no padding
    view, legal, action = mv.view[0].float(), mv.legal[0], mv.action[0]
    legal = legal if m.masking else torch.ones_like(legal)
    code = game.view_code(view)
    assert torch.unique(code).numel() < 0.6 * code.numel()  # positions repeat (1,930 moves, 1,042 boards)
    w_logp, w_value = torch.randn(code.numel()), torch.randn(code.numel())  # (M,) per-move weights

    def every_move(idx):
        logits = m.logits(view[idx])
        logp = torch.log_softmax(logits, -1).gather(1, action[idx, None]).squeeze(1)
        return logp, m.value(view[idx]), masked_entropy(logits, legal[idx])

    def grads(heads, idx):
        logp, v, ent = heads
        m.zero_grad()
        ((logp * w_logp[idx]).sum() + (v * w_value[idx]).sum() + 3.0 * ent).backward()
        return [p.grad.clone() for p in m.parameters()]

    everything = torch.arange(code.numel())
    minibatch = torch.randperm(code.numel(), generator=torch.Generator().manual_seed(2))[:300]
    def once_per_position(idx):  # the member axis in, the one member's numbers out
        logp, v, ent = m._heads(view[idx][None], code[idx][None], action[idx][None], legal[idx][None])
        return logp[0], v[0], ent[0]

    for idx in (everything, minibatch):
        once = once_per_position(idx)
        each = every_move(idx)
        for a, b in zip(once, each, strict=True):
            assert a.shape == b.shape
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
        for a, b in zip(grads(once_per_position(idx), idx),
                        grads(every_move(idx), idx), strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)
