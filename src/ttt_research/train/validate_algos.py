"""Validation of the keys one algorithm has and the others do not (``train/validate.py``
calls these by the config's ``algo._target_``); the same rules and one-line errors."""

from __future__ import annotations

from omegaconf import DictConfig

from ttt_research.contract import GAMES_MAX, GAMES_WHY, VALUE_MAX
from ttt_research.errors import bounded, is_int, need, positive_int, value_of


def zero_sum(cfg: DictConfig, why: str) -> None:
    """The reward table must be zero-sum (win = -loss, tie = 0)."""
    win, tie, loss = (value_of(cfg, f"reward.{k}") for k in ("win", "tie", "loss"))
    need(tie == 0 and win == -loss, "reward", f"a zero-sum table {why} (win = -loss, tie = 0; "
         "e.g. reward=zero_sum)", {"win": win, "tie": tie, "loss": loss})


def validate_dqn(cfg: DictConfig) -> None:
    """``algo=dqn``'s own keys (algos/dqn.py)."""
    for key in ("algo.capacity", "algo.batch_size", "algo.gradient_steps", "algo.target_every"):
        positive_int(cfg, key, GAMES_MAX, GAMES_WHY)
    capacity, batch = value_of(cfg, "algo.capacity"), value_of(cfg, "algo.batch_size")
    need(batch <= capacity, "algo.batch_size", f"at most algo.capacity ({capacity:,}): a "
         "minibatch is drawn from one member's replay", batch)
    v = value_of(cfg, "algo.warmup_games")
    need(is_int(v) and 0 <= v <= GAMES_MAX, "algo.warmup_games", f"an integer in [0, {GAMES_MAX:,}]", v)
    v = value_of(cfg, "algo.n_step")
    need(is_int(v) and 1 <= v <= 5, "algo.n_step",
         "an integer in [1, 5] (learner steps; a game has at most 5)", v)
    v = value_of(cfg, "algo.tau")
    need(v is None or bounded(v, 0.0, 1.0, low_open=True), "algo.tau",
         "null (hard target updates) or a number in (0, 1] (Polyak averaging)", v)
    v = value_of(cfg, "algo.double")
    need(isinstance(v, bool), "algo.double", "true or false", v)
    v = value_of(cfg, "algo.huber_delta")
    need(bounded(v, 0.0, VALUE_MAX, low_open=True), "algo.huber_delta", f"a number in (0, {VALUE_MAX:g}]", v)
    v = value_of(cfg, "algo.epsilon_final")
    need(v is None or bounded(v, 0.0, 1.0), "algo.epsilon_final",
         "a probability in [0, 1], or null (constant)", v)
    v = value_of(cfg, "algo.epsilon_fraction")
    need(bounded(v, 0.0, 1.0, low_open=True), "algo.epsilon_fraction",
         "a share of the budget in (0, 1] (epsilon anneals over it, then holds)", v)
    if str(value_of(cfg, "opponent._target_") or "").endswith(".SelfPlay"):
        zero_sum(cfg, "with algo=dqn opponent=self (its negamax targets negate the opponent's value)")


def validate_alphazero(cfg: DictConfig) -> None:
    """``algo=alphazero``'s own keys (algos/alphazero.py)."""
    for key in ("algo.capacity", "algo.batch_size", "algo.gradient_steps"):
        positive_int(cfg, key, GAMES_MAX, GAMES_WHY)
    for key in ("algo.simulations", "algo.test_simulations"):
        v = value_of(cfg, key)
        need(is_int(v) and 1 <= v <= 1024, key, "an integer in [1, 1024] (simulations per searched move)", v)
    v = value_of(cfg, "algo.max_considered")
    need(is_int(v) and 1 <= v <= 9, "algo.max_considered", "an integer in [1, 9] (moves at the root)", v)
    for key in ("algo.temperature", "algo.temperature_final", "algo.value_coef", "algo.weight_decay"):
        v = value_of(cfg, key)
        need((v is None and key == "algo.temperature_final") or bounded(v, 0.0, VALUE_MAX), key,
             f"a number in [0, {VALUE_MAX:g}]", v)
    v = value_of(cfg, "algo.value_mix")
    need(bounded(v, 0.0, 1.0), "algo.value_mix", "a share in [0, 1] (of the value target)", v)
    v = value_of(cfg, "algo.symmetries")
    need(isinstance(v, bool), "algo.symmetries", "true or false", v)
    zero_sum(cfg, "with algo=alphazero (its values are game results, +1 / 0 / -1)")
    win = value_of(cfg, "reward.win")
    need(win == 1, "reward.win", "1 with algo=alphazero (its value head is a tanh: results in [-1, 1])", win)
