"""The learner's moves of a batch of episodes as the steps of an MDP, for value learning.

Against a fixed opponent the game is an MDP from the learner's view: its step is its move
*plus the opponent's reply*, so the next state is its next decision position, two plies on,
and the only reward is the game's result (``reward.of``) at its last move. In self-play the
learner moves at every ply and a step is one ply (negamax): the next state is the other
side's view, and its value counts negated. ``algos/qlearning.py`` (one step) and
``algos/dqn.py`` (one or n steps) learn from these.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ttt_research.env import game
from ttt_research.env.reward import Reward
from ttt_research.env.rollout import Episodes


def transitions(ep: Episodes, reward: Reward, self_play: bool, gamma: float, n_step: int = 1) -> dict:
    """The learner's moves of (T, N, B) episodes (or one stream's (T, B)) as n-step
    transitions, member by member.

    Returns a dict of flat (M,) tensors in grid order (ply, member, game): ``member``,
    ``view`` (M, cells) int8, ``action``, ``reward`` (R, float), ``next_view`` (M, cells) int8 (the
    bootstrap position: the view n of the learner's steps on; zeros when ``done``),
    ``discount`` (0 when done, else gamma^n against a fixed opponent, (-gamma)^n in
    self-play), ``done`` (bool: the game ends within the n steps).

    A chain is the sequence of decisions one value is learned along: the learner's moves in
    a game (2 plies apart) against a fixed opponent, every ply in self-play. If it ends
    within n steps, at its j-th decision from here, R = gamma^j times the reward of the
    game's result for the side that moves here; otherwise R = 0 (no reward before the end)
    and the target bootstraps from the position n steps on.
    """
    if ep.learner.dim() == 2:  # one stream's (T, B) games: a single member
        per_ply = ("view", "legal", "action", "active", "learner")  # (T, B, ...) -> (T, 1, B, ...)
        per_game = ("seat", "outcome", "forfeit", "plies")  # (B,) -> (1, B)
        ep = replace(ep, **{k: getattr(ep, k).unsqueeze(1) for k in per_ply},
                     **{k: getattr(ep, k).unsqueeze(0) for k in per_game})
    T, N, B = ep.learner.shape
    dev = ep.learner.device
    step = 1 if self_play else 2  # plies from one decision of a chain to its next
    pad = n_step * step
    learner = torch.cat([ep.learner, ep.learner.new_zeros(pad, N, B)])  # (T + pad, N, B)
    view = torch.cat([ep.view, ep.view.new_zeros(pad, N, B, ep.view.shape[-1])])  # (T + pad, N, B, cells)
    last = learner[:T] & ~learner[step:T + step]  # (T, N, B) no decision of its chain follows
    if self_play:  # the result for the side to move at each ply (the learner sits at X)
        side = torch.where(torch.arange(T, device=dev) % 2 == 0, game.X, game.O).view(T, 1, 1)
        result = (ep.outcome * ep.seat)[None] * side
    else:  # the learner's result, at each of its moves
        result = ep.outcome[None].expand(T, N, B)
    result = result.to(torch.int8)
    mine = reward.of(result, ep.forfeit[None] & (result < 0))  # (T, N, B)
    R = torch.zeros(T, N, B, device=dev)
    done = torch.zeros(T, N, B, dtype=torch.bool, device=dev)
    for j in range(n_step):  # the chain ends at its j-th decision from here
        ends = shift(last, j * step) & ~done
        R = torch.where(ends, gamma ** j * mine, R)
        done |= ends
    sign = -1.0 if self_play else 1.0  # negamax: the opponent's value, negated
    discount = torch.where(done, 0.0, (sign * gamma) ** n_step)
    nxt = torch.where(done[..., None], 0, view[pad:pad + T])  # (T, N, B, cells)
    mask = ep.learner
    member = torch.arange(N, device=dev).view(1, N, 1).expand(T, N, B)
    return {"member": member[mask], "view": ep.view[mask], "action": ep.action[mask],
            "reward": R[mask], "next_view": nxt.to(torch.int8)[mask],
            "discount": discount[mask], "done": done[mask]}


def shift(x: torch.Tensor, k: int) -> torch.Tensor:
    """(T, ...) -> (T, ...) with row t holding row t + k (zeros past the end)."""
    if k == 0:
        return x
    return torch.cat([x[k:], x.new_zeros(k, *x.shape[1:])])
