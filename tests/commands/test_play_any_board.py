"""Terminal play on another board than tic-tac-toe (3,4,3: 3 rows of 4, three in a row wins),
moves fed through stdin: the board drawn with its cells numbered 1-12, bad input answered in one
line, k in a row detected from the game's lines; ``--game`` refuses a model of another board."""

import re
import subprocess
import sys

import pytest

from tests.commands.test_play import play_here
from tests.helpers.onnx_models import preference_model

pytest.importorskip("onnx")


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


@pytest.fixture(scope="module")
def highest(tmp_path_factory):
    """A 3,4,3 model (``game`` metadata "3,4,3") that plays the highest-numbered empty cell."""
    return preference_model(list(range(12)), tmp_path_factory.mktemp("m") / "highest343.onnx", game="3,4,3")


EMPTY_343 = """\
  . | . | . | .         1 |  2 |  3 |  4
  --+---+---+--        ---+----+----+---
  . | . | . | .         5 |  6 |  7 |  8
  --+---+---+--        ---+----+----+---
  . | . | . | .         9 | 10 | 11 | 12"""


def test_a_3_4_3_session_draws_12_numbered_cells_refuses_bad_moves_and_ends_on_three_in_a_row(
        highest, capsys, monkeypatch):
    moves = [
        # Game 1, person as O. The agent (X) opens in 12.
        "abc", "0", "13", "12",  # not a number, out of range twice, a taken cell
        "1", "2",  # X: 12, 11, 10: three in the bottom row
        "s",  # again, as X: 1, (agent 12), 2, (agent 11), 3 wins the top row
        "1", "2", "3",
        "n",
    ]
    code, out, err = play_here(capsys, monkeypatch, highest, "--seat", "o", stdin="\n".join(moves) + "\n")
    assert code == 0 and err == ""
    assert out.startswith("The 3,4,3 game: 3 rows of 4 cells; 3 in a row (across, down or diagonal) wins.")
    for message in ("your move (1-12, q to quit): 'abc' is not a cell number: type a number from 1 to 12",
                    "0 is out of range: cells are numbered 1 to 12",
                    "13 is out of range: cells are numbered 1 to 12",
                    "cell 12 is taken: choose an empty cell (1 2 3 4 5 6 7 8 9 10 11)"):
        assert message in out
    assert re.findall(r"agent \((.)\) plays (\d+)", out) == [
        ("X", "12"), ("X", "11"), ("X", "10"), ("O", "12"), ("O", "11")]
    # after X 12: the move probabilities, a softmax of 0..11 in a grid of 3 rows of 4
    assert ("      0.0%     0.0%     0.0%     0.0%\n      0.1%     0.2%     0.4%     1.2%\n"
            "      3.1%     8.6%    23.3%   [63.2%]") in out
    #   O | O | . | .
    #   . | . | . | .
    #   . | X | X | X    the agent's three in a row ends game 1
    rule = "  --+---+---+--        ---+----+----+---\n"
    assert ("  O | O | . | .           |    |  3 |  4\n" + rule + "  . | . | . | .         5 |  6 |  7 |  8\n"
            + rule + "  . | X | X | X         9 |    |    |\nThe agent wins.") in out
    assert "  X | X | X | .           |    |    |  4" in out
    assert out.index("The agent wins.") < out.index("You win!")
    assert EMPTY_343 in out and "you 1 - agent 1 - draws 0" in out


def test_a_model_of_another_board_than_game_is_one_line_and_exit_2(highest, capsys, monkeypatch):
    for extra in ([], ["--web", "--port", "0"]):
        code, out, err = play_here(capsys, monkeypatch, highest, "--game", "3,3,3", *extra, stdin="1\n")
        assert code == 2 and out == ""
        [line] = err.splitlines()
        assert line == (f"error: {highest}: a model of the 3,4,3 board, not of 3,3,3; "
                        "refused (give one of this board)")
    code, out, err = play_here(capsys, monkeypatch, highest, "--game", "3,4,3", stdin="q\n")
    assert code == 0 and err == "" and "your move (1-12, q to quit)" in out


@pytest.mark.parametrize("game,needle", [("3,4", "not three whole numbers"), ("5,5,5", "at most 16"),
                                         ("3,3,4", "no line of 4 fits")])
def test_a_bad_game_option_is_one_line_before_the_model_loads(highest, game, needle, capsys, monkeypatch):
    code, out, err = play_here(capsys, monkeypatch, highest, "--game", game, stdin="1\n")
    [line] = err.splitlines()
    assert code == 2 and out == "" and needle in line
    assert line.startswith(f"error: --game '{game}' names no board")


@pytest.mark.slow  # a fresh interpreter (~5 s on the busy 2-core host)
def test_a_piped_3_4_3_game_from_the_command_line(highest, tmp_path):
    """What a person at a pipe gets: the same session through ``python -m ttt_research.play``."""
    env = {"TTT_RESEARCH_CACHE": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "ttt_research.play", str(highest), "--seat", "x"],
                          input="6\n7\n8\n", capture_output=True, text=True, timeout=120, env=env)
    # X 6, O 12, X 7, O 11, X 8: three in the middle row
    assert done.returncode == 0 and done.stderr == ""
    assert "  . | X | X | X         5 |    |    |\n" in done.stdout and "You win!" in done.stdout
    assert done.stdout.rstrip().endswith("play again? [Y]es, [s]witch sides, [n]o:")
