"""Terminal play driven through a pipe (bad input, full games, end of input, Ctrl-C), bad
model files, and the export that play and the browser game run: parity and exact
evaluation identical to the checkpoint's."""

import io
import re
import signal
import subprocess
import sys

import pytest
import torch

from tests.helpers.onnx_models import preference_model
from tests.helpers.trained import tiny_run
from ttt_research.env import game
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.onnx import ExportError, parity
from ttt_research.evaluation.policy_file import load_checkpoint, load_policy
from ttt_research.export import main as export_main
from ttt_research.play import decide
from ttt_research.play import main as play_main

# logits = cell index: the agent plays the highest-numbered empty cell. Its move
# probabilities are a softmax of 0..8 over the empty cells, e.g. e^8 / sum(e^0..e^8) =
# 0.632 for cell 9 on the empty board.
HIGHEST_FIRST = list(range(9))
EMPTY_BOARD_GRID = """\
      0.0%     0.1%     0.2%
      0.4%     1.2%     3.1%
      8.6%    23.3%   [63.2%]"""


def play(*args, stdin="", timeout=60):
    """The command in a subprocess: what a person at a terminal (or a pipe) gets."""
    return subprocess.run([sys.executable, "-m", "ttt_research.play", *map(str, args)],
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def play_here(capsys, monkeypatch, *args, stdin=""):
    """The same command in this process (no interpreter start-up): (exit code, out, err)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = play_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny trained run: (run folder, its eval.json report)."""
    run_dir = tmp_path_factory.mktemp("run")
    return run_dir, tiny_run(run_dir, "seed=5")


@pytest.fixture
def highest(tmp_path):
    return preference_model(HIGHEST_FIRST, tmp_path / "highest.onnx")


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_piped_session_handles_bad_input_plays_full_games_and_ends_at_eof(highest):
    moves = [
        # Game 1, person as O. The agent (X) opens in 9.
        "abc", "0", "10", "9", "", "5",  # four bad inputs, then the centre
        "1",  # X: 9, 8 -> the agent completes 7-8-9 next
        "s",  # play again, switching sides
        # Game 2, person as X: 1, (agent 9), 2, (agent 8), 3 wins the top row.
        "1", "2", "3",
        "y",  # game 3, again as X: the person plays 5, the agent 9, then the input ends
        "5",
    ]
    out = play(highest, "--seat", "o", stdin="\n".join(moves) + "\n")
    assert out.returncode == 0 and out.stderr == ""
    text = out.stdout
    assert EMPTY_BOARD_GRID in text
    for message in ("'abc' is not a cell number", "0 is out of range", "10 is out of range",
                    "cell 9 is taken: choose an empty cell (1 2 3 4 5 6 7 8)",
                    "'' is not a cell number"):
        assert message in text
    # The agent's moves, in order: 9 8 7 as X, then 9 8 as O, then 9 in game 3.
    assert re.findall(r"agent \((.)\) plays (\d)", text) == [
        ("X", "9"), ("X", "8"), ("X", "7"), ("O", "9"), ("O", "8"), ("O", "9")]
    # After O 5 and X 8 the empty cells are 1 2 3 4 6 7; occupied cells show '-'.
    assert "  . | O | .        4 |   | 6" in text
    assert text.index("The agent wins.") < text.index("You win!")
    assert "you 1 - agent 1 - draws 0" in text
    assert text.count("You are") == 3 and "You are X, the agent is O" in text


def test_the_board_shows_the_numbers_of_the_empty_cells(highest, capsys, monkeypatch):
    code, out, _ = play_here(capsys, monkeypatch, highest, "--seat", "x", stdin="5\n")
    # Person X in the centre, agent O in 9: the numbers beside the board skip both.
    assert "  . | X | .        4 |   | 6\n  --+---+--        --+---+--\n  . | . | O        7 | 8" in out
    assert code == 0


def test_a_drawn_game_and_quitting_with_n(tmp_path, capsys, monkeypatch):
    # Centre first, then corners, then edges, ties to the lowest cell.
    centre = preference_model([2, 1, 2, 1, 9, 1, 2, 1, 2], tmp_path / "centre.onnx")
    code, stdout, err = play_here(capsys, monkeypatch, centre, "--seat", "o", stdin="1\n7\n2\n6\nn\n")
    assert code == 0 and err == ""
    # X 5, O 1, X 3 (the lowest free corner), O 7 (blocks 3-5-7), X 9, O 2, X 4, O 6, X 8:
    #   O | O | X
    #   X | X | O
    #   O | X | X
    assert re.findall(r"agent \(X\) plays (\d)", stdout) == ["5", "3", "9", "4", "8"]
    lines = stdout.splitlines()
    end = lines.index("Draw.")
    assert [line[:11] for line in lines[end - 5:end:2]] == ["  O | O | X", "  X | X | O", "  O | X | X"]
    assert "you 0 - agent 0 - draws 1" in stdout
    assert stdout.rstrip().endswith("play again? [Y]es, [s]witch sides, [n]o:")


def test_end_of_input_at_the_first_prompt_exits_0(highest, capsys, monkeypatch):
    code, out, err = play_here(capsys, monkeypatch, highest, stdin="")
    assert code == 0 and err == ""
    assert out.rstrip().endswith("your move (1-9, q to quit):")


def test_q_quits_with_exit_0(highest, capsys, monkeypatch):
    code, out, err = play_here(capsys, monkeypatch, highest, stdin="q\n5\n")
    assert code == 0 and err == "" and out.count("your move") == 1


def test_ctrl_c_exits_0_without_a_traceback(highest):
    proc = subprocess.Popen([sys.executable, "-m", "ttt_research.play", str(highest)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = b""
    while not seen.endswith(b"q to quit): "):
        byte = proc.stdout.read(1)
        assert byte, "play ended before its first prompt"
        seen += byte
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and b"Traceback" not in err


@pytest.mark.parametrize("make,needle", [
    (lambda d, run: d / "missing.onnx", "no such file"),
    (lambda d, run: (d / "cut.onnx").write_bytes((run / "policy.onnx").read_bytes()[:300])
     and d / "cut.onnx", "not a valid ONNX model"),
    (lambda d, run: (d / "cut.ckpt").write_bytes((run / "checkpoints/last.ckpt").read_bytes()[:2000])
     and d / "cut.ckpt", "not a readable checkpoint"),
    (lambda d, run: torch.save({"weights": torch.zeros(3)}, d / "other.ckpt") or d / "other.ckpt",
     "not a ttt_research checkpoint"),
    (lambda d, run: preference_model([0] * 10, d / "wide.onnx", in_width=10), "float32 [N, 9]"),
    (lambda d, run: (d / "notes.txt").write_text("hello") and d / "notes.txt", "unknown policy file type"),
])
def test_bad_model_files_get_one_line_on_stderr_and_exit_2(tmp_path, run, make, needle, capsys, monkeypatch):
    code, out, err = play_here(capsys, monkeypatch, make(tmp_path, run[0]), stdin="5\n")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


def test_a_bad_model_file_from_the_command_line_has_no_traceback(tmp_path):
    (tmp_path / "cut.onnx").write_bytes(b"\x08\x07garbage")
    out = play(tmp_path / "cut.onnx", stdin="5\n")
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "not a valid ONNX model" in out.stderr


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_the_agent_plays_the_evaluated_greedy_move_everywhere(run):
    """Checkpoint or ONNX, play's move at each of the 4,520 positions is the move the exact
    evaluation scored."""
    run_dir, _ = run
    codes = ev.decision_codes().tolist()
    for file in ("checkpoints/last.ckpt", "policy.onnx"):
        policy, _ = load_policy(run_dir / file)
        table, _ = ev.greedy_actions(policy)
        moves = [decide(policy, c) for c in codes]
        assert [m for m, _ in moves] == table[codes].tolist()
        probs = torch.stack([p for _, p in moves])  # (4520, 9)
        assert torch.allclose(probs.sum(-1), torch.ones(len(codes), dtype=torch.float64))
        assert (probs[~game.tables().legal[codes]] == 0).all()


# --------------------------------------------------------------------------- export


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_export_cli_reports_parity_and_keeps_the_exact_evaluation(run, tmp_path):
    run_dir, report = run
    out = subprocess.run([sys.executable, "-m", "ttt_research.export",
                          str(run_dir / "checkpoints" / "last.ckpt"), "-o", str(tmp_path / "p.onnx")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = re.search(r"parity on (\d+) positions, max \|diff\| (\S+), greedy moves identical", out.stdout)
    assert found and found[1] == "4520" and float(found[2]) < 1e-4
    exported, meta = load_policy(tmp_path / "p.onnx")
    checkpoint, _ = load_policy(run_dir / "checkpoints" / "last.ckpt")
    greedy = ev.evaluate_policy(exported)
    assert greedy == ev.evaluate_policy(checkpoint) == {k: report[k] for k in greedy}
    assert meta["seed"] == "5" and meta["games_trained"] == "2048"


def test_parity_fails_when_the_onnx_file_plays_other_moves(run, tmp_path):
    net, _ = load_checkpoint(run[0] / "checkpoints" / "last.ckpt")
    other = preference_model(HIGHEST_FIRST, tmp_path / "other.onnx")
    assert parity(net, run[0] / "policy.onnx")["greedy_identical"]
    with pytest.raises(ExportError, match="greedy moves differ"):
        parity(net, other)


def test_export_cli_refuses_a_bad_checkpoint_with_one_line(tmp_path, capsys):
    (tmp_path / "junk.ckpt").write_bytes(b"junk")
    assert export_main([str(tmp_path / "junk.ckpt")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not a readable checkpoint" in err
