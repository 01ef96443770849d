"""The gymnasium adapter (``env/gymnasium.py``): the env checker, masks and observations from the
engine tables, exact rates, seeded resets and refusals. The SB3 comparison that uses it:
tests/baselines/test_sb3.py."""

import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from ttt_research.env import game  # noqa: E402
from ttt_research.env.gymnasium import ENV_ID, TicTacToeEnv  # noqa: E402

T = game.tables()


def play_random(env, episodes, rng):
    """Random masked moves for ``episodes`` episodes; yields every (obs, info, reward, done)."""
    for _ in range(episodes):
        obs, info = env.reset()
        yield obs, info, 0.0, False
        done = False
        while not done:
            action = rng.choice(np.flatnonzero(env.action_masks()))
            obs, reward, done, truncated, info = env.step(action)
            assert not truncated
            yield obs, info, reward, done


@pytest.mark.parametrize("seat", ["x", "o", "both", "alternate"])
@pytest.mark.parametrize("opponent", ["random", "minimax", "rules", "mixed"])
def test_env_passes_gymnasiums_env_checker(seat, opponent):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the checker warns about what it dislikes
        # Made through the registry so the env has a spec and the checker tries render modes too.
        env = gymnasium.make(ENV_ID, opponent=opponent, seat=seat, render_mode="ansi").unwrapped
        check_env(env, skip_render_check=False)


def test_registered_id_makes_the_env():
    env = gymnasium.make(ENV_ID, opponent="minimax", seat="o")
    obs, info = env.reset(seed=0)
    assert info["seat"] == "o" and (obs == -1).sum() == 1 and env.unwrapped.action_masks().sum() == 8


def test_masks_and_observations_come_from_the_engine_tables():
    env, rng = TicTacToeEnv("mixed", "both"), np.random.default_rng(0)
    env.reset(seed=0)
    for obs, info, _, done in play_random(env, 300, rng):
        code = int(env.code)
        assert obs.dtype == np.float32 and obs.shape == (9,)
        assert np.array_equal(info["action_mask"], env.action_masks())
        if not done:  # the learner is to move: its view and the legal cells
            assert np.array_equal(obs, T.view[code].numpy())
            assert np.array_equal(env.action_masks(), T.legal[code].numpy())
            assert np.array_equal(env.action_masks(), obs == 0)
        else:  # a finished board has no legal move
            assert not env.action_masks().any()


@pytest.mark.parametrize("seat", ["x", "o"])
def test_minimax_opponent_never_loses_to_random_masked_play(seat):
    env, rng = TicTacToeEnv("minimax", seat), np.random.default_rng(1)
    env.reset(seed=1)
    outcomes = [info["outcome"] for _, info, _, done in play_random(env, 400, rng) if done]
    assert len(outcomes) == 400 and max(outcomes) <= 0  # the learner never wins
    assert min(outcomes) == -1  # and random play does get punished


@pytest.mark.parametrize("seat, win, loss", [("x", 737 / 1260, 121 / 420), ("o", 121 / 420, 737 / 1260)])
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_random_learner_vs_random_matches_the_exact_rates_from_each_seat(seat, win, loss):
    # Exact: random vs random, X wins 737/1260, O wins 121/420. 2,000 games: sd < 0.011.
    env, rng = TicTacToeEnv("random", seat), np.random.default_rng(2)
    env.reset(seed=2)
    outcomes = np.array([i["outcome"] for _, i, _, d in play_random(env, 2000, rng) if d])
    assert abs((outcomes == 1).mean() - win) < 0.045
    assert abs((outcomes == -1).mean() - loss) < 0.045


def test_seats_x_o_alternate_and_both():
    x_obs, info = TicTacToeEnv("random", "x").reset(seed=0)
    assert info["seat"] == "x" and not x_obs.any()  # X opens on the empty board
    o_obs, info = TicTacToeEnv("random", "o").reset(seed=0)
    assert info["seat"] == "o" and (o_obs == -1).sum() == 1 and (o_obs == 1).sum() == 0
    alt = TicTacToeEnv("random", "alternate")
    assert [alt.reset(seed=0 if i == 0 else None)[1]["seat"] for i in range(4)] == ["x", "o", "x", "o"]
    both = TicTacToeEnv("random", "both")
    seats = [both.reset(seed=3 if i == 0 else None)[1]["seat"] for i in range(200)]
    assert 60 < seats.count("x") < 140
    again = TicTacToeEnv("random", "both")
    assert [again.reset(seed=3 if i == 0 else None)[1]["seat"] for i in range(200)] == seats


def test_seeded_reset_replays_the_opponents_moves():
    def trace(seed):
        env, rng = TicTacToeEnv("mixed", "both", p_perfect=0.5), np.random.default_rng(7)
        env.reset(seed=seed)
        return [obs.tolist() for obs, *_ in play_random(env, 30, rng)]

    assert trace(5) == trace(5)
    assert trace(5) != trace(6)


def test_occupied_cell_forfeits_with_the_illegal_reward():
    env = TicTacToeEnv("random", "x")
    env.reset(seed=0)
    obs, reward, done, _, info = env.step(4)  # X takes the centre, the opponent answers
    assert not done and obs[4] == 1 and (obs == -1).sum() == 1
    theirs = int(np.flatnonzero(obs == -1)[0])
    board_before = obs.copy()
    obs, reward, done, truncated, info = env.step(theirs)  # the opponent's cell: a forfeit
    assert done and not truncated and reward == -10.0
    assert info["illegal"] and info["outcome"] == -1
    assert np.array_equal(obs, board_before)  # the engine's rule: the board is unchanged


def test_reward_table_tie_and_loss_vs_minimax():
    env = TicTacToeEnv("minimax", "x", reward={"win": 1.0, "tie": 0.25, "loss": -3.0, "illegal": -7.0})
    env.reset(seed=4)
    got = {(i["outcome"], r) for _, i, r, d in play_random(env, 300, np.random.default_rng(4)) if d}
    assert got == {(0, 0.25), (-1, -3.0)}


def test_bad_arguments_raise_one_clear_error():
    with pytest.raises(ValueError, match="seat"):
        TicTacToeEnv("random", "middle")
    with pytest.raises(ValueError, match="unknown opponent"):
        TicTacToeEnv("grandmaster")
    with pytest.raises(ValueError, match="self"):
        TicTacToeEnv("self")
