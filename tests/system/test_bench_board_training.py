"""The bench per board (``bench/board_training.py``): each (board, algorithm) trains its whole
budget in a fresh process and its trained agent is evaluated exactly, on another board too."""

from ttt_research.bench import board_training


def test_each_board_trains_its_budget_and_is_evaluated(monkeypatch):
    monkeypatch.setitem(board_training.BOARDS, True, ("3,4,3",))
    monkeypatch.setitem(board_training.BUDGETS, "3,4,3", {"reinforce": 4096, "ppo": 1024})
    said = []
    res = board_training.bench_board_training(quick=True, repeats=1, threads=1, log=said.append)
    assert set(res) == {"3,4,3"} and set(res["3,4,3"]) == {"reinforce", "ppo"}
    rf, ppo = res["3,4,3"]["reinforce"], res["3,4,3"]["ppo"]
    assert rf["games"] >= 4096 and ppo["games"] >= 1024  # the whole budget (whole updates), on 12 cells
    assert ppo["steps_per_s"] > ppo["games_per_s"] > 0  # a game has more than one learner move
    assert rf["eval_s"] > 0 and rf["peak_gb"] > 0
    assert len(said) == 2 and said[0].startswith("3,4,3 reinforce: ")
    line, = board_training.board_training_lines(res)
    assert line.startswith("board 3,4,3 training") and "REINFORCE" in line and "PPO" in line
