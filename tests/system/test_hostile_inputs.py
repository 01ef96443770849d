"""Hostile inputs: the engine driven by arbitrary moves keeps its documented rules, and the
command lines given truncated, foreign or booby-trapped files answer with one line and
exit code 2 (no traceback, nothing written, nothing run)."""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from tests.helpers import reference as ref
from ttt_research import evaluate as evaluate_cli
from ttt_research import export, play
from ttt_research.env import game
from ttt_research.env.opponents import RandomOpponent
from ttt_research.env.rollout import play_batch
from ttt_research.evaluation import onnx
from ttt_research.models.nets import MLP

T = game.tables()
REACHABLE = T.reachable.nonzero().squeeze(1)  # (5478,) codes
ANY_INT = st.one_of(st.integers(-3, 12), st.integers(-(2**63), 2**63 - 1))


def expected_step(b, action):
    """The edge rules of docs/design.md on one board: (board after, ended, winner, illegal)."""
    if ref.done(b):  # a finished board changes nothing and reports no new ending
        return b, False, 0, False
    if action not in ref.legal(b):  # occupied or outside 0..8: forfeit, board unchanged
        return b, True, -ref.mover(b), True
    after = ref.play(b, action)
    return after, ref.done(after), ref.winner(after) if ref.done(after) else 0, False


# ----------------------------------------------------------------------------- the engine


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, REACHABLE.numel() - 1), ANY_INT), min_size=1, max_size=64))
def test_step_from_any_position_with_any_move_follows_the_edge_rules(cases):
    """One batched step over arbitrary (reachable position, move) pairs, finished boards,
    occupied cells and int64 extremes included, against the one-board reference."""
    codes = REACHABLE[torch.tensor([i for i, _ in cases])]
    actions = torch.tensor([a for _, a in cases], dtype=torch.int64)
    s = game.step(codes, actions)
    for k, (code, action) in enumerate(zip(codes.tolist(), actions.tolist(), strict=True)):
        b = tuple(T.board[code].tolist())
        after, ended, winner, illegal = expected_step(b, action)
        assert int(s.code[k]) == ref.code(after)
        assert (bool(s.ended[k]), int(s.winner[k]), bool(s.illegal[k])) == (ended, winner, illegal)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(ANY_INT, min_size=1, max_size=20), min_size=1, max_size=16),
       st.sampled_from([torch.int64, torch.int32]))
def test_games_with_auto_reset_survive_any_move_stream(streams, dtype):
    """B games, each fed its own arbitrary moves (shorter streams padded with a legal
    move): every step matches the reference, finished or forfeited games restart on the
    empty board, and the batch never holds a finished board."""
    if dtype == torch.int32:
        streams = [[max(-(2**31), min(2**31 - 1, a)) for a in s] for s in streams]
    g = game.Games(len(streams))
    boards = [ref.EMPTY_BOARD] * len(streams)
    for t in range(max(len(s) for s in streams)):
        moves = [s[t] if t < len(s) else ref.legal(b)[0] for s, b in zip(streams, boards, strict=True)]
        s = g.step(torch.tensor(moves, dtype=dtype))
        for k, (b, m) in enumerate(zip(boards, moves, strict=True)):
            after, ended, winner, illegal = expected_step(b, m)
            assert (bool(s.ended[k]), int(s.winner[k]), bool(s.illegal[k])) == (ended, winner, illegal)
            boards[k] = ref.EMPTY_BOARD if ended else after  # Games restarts finished games
            assert int(g.code[k]) == ref.code(boards[k])
        assert not T.done[g.code].any() and T.reachable[g.code].all()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.lists(st.integers(-5, 14), min_size=9, max_size=9))
def test_rollouts_with_a_learner_that_plays_garbage_follow_the_rules(seed, table):
    """An unmasked learner that answers with arbitrary cells (occupied, negative, past 8):
    every recorded game replays on the reference to the recorded outcome, and a forfeit
    is always the learner's loss."""
    def learner(view, legal):  # (B, 9) -> (B,): a fixed, position-dependent garbage move
        return torch.tensor(table)[(view.abs().sum(-1).long() + view[:, 4].long()) % 9]

    gen = torch.Generator().manual_seed(seed)
    ep = play_batch(64, learner, RandomOpponent(), "both", "cpu", gen)
    assert (ep.outcome[ep.forfeit] == -1).all()
    for k in range(ep.batch):
        b, forfeit = ref.EMPTY_BOARD, False
        for t in range(9):
            if not bool(ep.active[t, k]):
                break
            after, ended, winner, illegal = expected_step(b, int(ep.action[t, k]))
            forfeit, b = illegal, after
            if ended:
                break
        assert ref.done(b) or forfeit  # every game ended within 9 plies
        result = -ref.mover(b) if forfeit else ref.winner(b)  # from X's side
        assert int(ep.outcome[k]) == result * int(ep.seat[k])
        assert bool(ep.forfeit[k]) == (forfeit and ref.mover(b) == int(ep.seat[k]))


# ----------------------------------------------------------------------------- files


class Payload:
    """A pickle that would create a file if it were ever unpickled with code allowed."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def nan_onnx(path):
    """A contract-shaped model whose logits are NaN."""
    nan = numpy_helper.from_array(np.asarray(np.nan, dtype=np.float32), "nan")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["board", "nan"], ["logits"])], "nan",
        [helper.make_tensor_value_info("board", TensorProto.FLOAT, ["N", 9])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 9])], initializer=[nan])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A good checkpoint and ONNX file, and the hostile ones made from them."""
    d = tmp_path_factory.mktemp("hostile")
    torch.manual_seed(0)
    net = MLP([16], "signed9")
    ckpt = {"net_spec": net.spec(), "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}}
    torch.save(ckpt, d / "good.ckpt")
    onnx.export(net, d / "good.onnx")
    good_ckpt, good_onnx = (d / "good.ckpt").read_bytes(), (d / "good.onnx").read_bytes()
    (d / "truncated.ckpt").write_bytes(good_ckpt[: len(good_ckpt) // 2])
    (d / "head.ckpt").write_bytes(good_ckpt[:10])
    (d / "empty.ckpt").write_bytes(b"")
    (d / "json.ckpt").write_text(json.dumps({"state_dict": {}, "net_spec": {}}))
    (d / "truncated.onnx").write_bytes(good_onnx[: len(good_onnx) // 2])
    (d / "empty.onnx").write_bytes(b"")
    (d / "image.onnx").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    (d / "pickle.ckpt").write_bytes(pickle.dumps(Payload(d / "PWNED-raw")))
    torch.save({"x": Payload(d / "PWNED-zip")}, d / "code.ckpt")
    torch.save({"net_spec": {"hidden": [100], "encoding": "signed9"}, "state_dict": ckpt["state_dict"]},
               d / "mismatched.ckpt")
    torch.save({**ckpt, "state_dict": {k: v * float("nan") for k, v in ckpt["state_dict"].items()}},
               d / "nan.ckpt")
    nan_onnx(d / "nan.onnx")
    return d


CKPT_CASES = [
    ("truncated.ckpt", "not a readable checkpoint (empty, truncated or not a PyTorch file)"),
    ("head.ckpt", "not a readable checkpoint (empty, truncated or not a PyTorch file)"),
    ("empty.ckpt", "not a readable checkpoint (empty, truncated or not a PyTorch file)"),
    ("json.ckpt", "not a readable checkpoint (not a PyTorch checkpoint)"),
    ("pickle.ckpt", "not a readable checkpoint (not a PyTorch checkpoint)"),
    ("code.ckpt", "not a readable checkpoint (it asks to load the Python object posix.system; refused"),
    ("mismatched.ckpt", "checkpoint weights do not fit its network"),
    ("nan.ckpt", "checkpoint weights are not all finite"),
]
ONNX_CASES = [
    ("truncated.onnx", "not a valid ONNX model"),
    ("empty.onnx", "not a valid ONNX model"),
    ("image.onnx", "not a valid ONNX model"),
    ("nan.onnx", "the policy has no legal greedy move at 4520 of 4520 positions where it moves, "
                 "first at .../.../... (X to move): its logits are NaN"),
]
CLIS = {"evaluate": evaluate_cli.main, "export": export.main, "play": play.main}


@pytest.mark.parametrize("cli,name,needle", [
    *[("evaluate", n, m) for n, m in CKPT_CASES + ONNX_CASES],
    *[("play", n, m) for n, m in CKPT_CASES + ONNX_CASES],
    *[("export", n, m) for n, m in CKPT_CASES],
    ("export", "good.onnx", "an ONNX model already; export takes a checkpoint (.ckpt"),
])
def test_bad_files_get_one_line_and_exit_2(files, capsys, monkeypatch, cli, name, needle):
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # play must not wait for a person
    out = files / "out.onnx"
    argv = [str(files / name), *(["-o", str(out)] if cli == "export" else [])]
    assert CLIS[cli](argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {files / name}: {needle}"), captured.err
    assert captured.out == ""
    assert not out.exists()
    assert not list(files.glob("PWNED*"))  # the booby-trapped pickles never ran


@pytest.mark.parametrize("cli", sorted(CLIS))
@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_the_command_lines_answer_a_truncated_checkpoint_in_one_line(files, cli):
    """The same, as a user runs it: a separate process, exit code 2, one line, no traceback."""
    out = subprocess.run([sys.executable, "-m", f"ttt_research.{cli}", str(files / "truncated.ckpt")],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [f"error: {files / 'truncated.ckpt'}: not a readable checkpoint "
                                       "(empty, truncated or not a PyTorch file)"]


def test_the_good_files_pass(files, capsys):
    """The hostile cases fail because of what was done to the files, not the files' kind."""
    for name in ("good.ckpt", "good.onnx"):
        assert evaluate_cli.main([str(files / name), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["decision_points"] > 0
