"""The SB3 comparison (``baselines/sb3.py``) on the gymnasium adapter: its command line without
the extra or with a bad budget, a tiny MaskablePPO run's report, and the policy wrapper's mask."""

import pytest
import torch

pytest.importorskip("gymnasium")  # the adapter SB3 trains on

from ttt_research.env import game  # noqa: E402
from ttt_research.env.gymnasium import TicTacToeEnv  # noqa: E402

T = game.tables()


def test_compare_cli_without_the_extra_says_so_in_one_line(monkeypatch, capsys):
    from ttt_research.baselines import sb3 as compare_sb3

    monkeypatch.setitem(__import__("sys").modules, "sb3_contrib", None)  # import fails
    assert compare_sb3.main(["--steps", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "compare" in err and err.startswith("error:")


def test_compare_cli_rejects_a_bad_budget(capsys):
    from ttt_research.baselines import sb3 as compare_sb3

    assert compare_sb3.main(["--steps", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--steps" in err


def test_tiny_sb3_run_reports_every_key_and_a_real_evaluation():
    pytest.importorskip("sb3_contrib")
    from ttt_research.baselines.sb3 import run_sb3

    r = run_sb3(200, seed=0, threads=1, eval_every=128, n_envs=2, n_steps=64, batch_size=64)
    for key in ("steps", "steps_per_s", "time_to_unbeatable_s", "steps_to_unbeatable", "train_s",
                "eval_s", "evals", "final", "unbeatable", "versions"):
        assert key in r
    assert r["steps"] == 256  # whole rollouts of 2 envs x 64 steps
    assert r["steps_per_s"] > 0 and [e["steps"] for e in r["evals"]] == [128, 256]
    for seat in ("as_x", "as_o"):
        wlt = r["final"][seat]["vs_random"]
        assert abs(wlt["win"] + wlt["loss"] + wlt["tie"] - 1) < 1e-9
    assert r["unbeatable"] == (r["final"]["as_o"]["vs_random"]["loss"] == 0
                               and r["final"]["as_x"]["vs_random"]["loss"] == 0)


def test_sb3_policy_wrapper_masks_occupied_cells():
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO

    from ttt_research.baselines.sb3 import sb3_policy_fn

    model = MaskablePPO("MlpPolicy", TicTacToeEnv("random", "both"), seed=0, device="cpu")
    boards = T.view[torch.tensor([game.EMPTY_CODE, int(T.next2d[0, 4])])].float()  # (2, 9)
    logits = sb3_policy_fn(model.policy)(boards)
    assert logits.shape == (2, 9)
    # Row 0: the empty board, nothing masked. Row 1: X took the centre, so cell 4 is masked.
    assert (logits[0] > -1e8).all() and ((logits[1] < -1e8) == (boards[1] != 0)).all()
