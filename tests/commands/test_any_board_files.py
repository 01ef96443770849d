"""The ONNX contract on another board (3,4,3): input ``board`` [N, 12], output ``logits``
[N, 12], metadata ``game`` = "3,4,3"; ``evaluate`` prints a file's exact figures, and a model
of one board given for another, or whose width does not fit its ``game``, is one line, exit 2."""

import json
import re

import pytest
import torch

from ttt_research import evaluate as evaluate_cli
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.evaluation import exact, onnx, policy_file

G = Game(3, 4, 3)
onnx_lib = pytest.importorskip("onnx")


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


class Masked(torch.nn.Module):
    """A small network of ``cells`` cells whose logits are masked as the contract says."""

    def __init__(self, cells: int, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.body = torch.nn.Sequential(torch.nn.Linear(cells, 16), torch.nn.ReLU(),
                                        torch.nn.Linear(16, cells))

    def forward(self, view):
        return torch.where(view == 0, self.body(view), torch.full_like(view, -1e9))


def write(path, cells: int, game: Game, metadata: dict | None = None):
    net = Masked(cells)
    parity = onnx.export(net, path, metadata or {"algo": "test"}, game=game)
    return net, parity


def test_a_3_4_3_model_is_written_with_its_game_and_evaluated_exactly(tmp_path, capsys):
    path = tmp_path / "policy.onnx"
    net, parity = write(path, G.cells, G)
    assert parity["positions"] == 79_563 and parity["greedy_identical"]
    policy, meta = policy_file.load_policy(path)
    assert meta["game"] == "3,4,3" and policy_file.game_of(path, meta) == G
    assert evaluate_cli.main([str(path), "--json", "--lines", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    want = exact.evaluate_policy(net, game=G)
    assert {k: printed[k] for k in want} == want  # the greedy moves are the network's: the same figures
    assert len(printed["policy"]["worst_lines"]["x"][0]["board"]) == 12
    assert evaluate_cli.main([str(path)]) == 0  # the text report too
    assert "optimal moves" in capsys.readouterr().out


def test_a_tic_tac_toe_export_has_no_game_key():
    assert onnx.game_metadata(TIC_TAC_TOE) == {}  # 3x3 files keep their bytes (the snapshot's sha256)
    assert onnx.game_metadata(G) == {"game": "3,4,3"}


def test_a_model_for_another_board_is_one_line(tmp_path, capsys):
    path = tmp_path / "policy.onnx"
    write(path, G.cells, G)
    with pytest.raises(policy_file.PolicyFileError, match=r"a model of the 3,4,3 board, not of 3,3,3"):
        policy_file.load_policy(path, game=TIC_TAC_TOE)


@pytest.mark.parametrize("said,needle", [
    ("3,3,3", r"model input 'board' is tensor\(float\) \[.*, 12\]; the contract wants float32 \[N, 9\]"),
    ("4,4,4", r"the contract wants float32 \[N, 16\] for its game 4,4,4"),
    ("9,9,9", r"'game' metadata '9,9,9' names no board \(m=9 n=9: a board of 81 cells"),
    ("three", r"'game' metadata 'three' names no board"),
])
def test_a_width_that_does_not_fit_its_game_is_one_line_exit_2(tmp_path, capsys, said, needle):
    good = tmp_path / "good.onnx"
    write(good, G.cells, G)
    model = onnx_lib.load(str(good))
    for prop in model.metadata_props:
        if prop.key == "game":
            prop.value = said
    bad = tmp_path / "bad.onnx"
    onnx_lib.save(model, str(bad))
    assert evaluate_cli.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert re.search(needle, err), err
