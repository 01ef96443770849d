"""Checkpoints and tournaments on another board (3,4,3): ``evaluate`` and ``export`` read a
``.ckpt``'s board (its ``game``, else its run's saved config) and rebuild the network with the
board's cells; ``tournament`` plays an exact round robin on the participants' one board. A
checkpoint of one board asked for another, one whose network does not fit its board, files of
two boards in one tournament, a policy table off tic-tac-toe: one line, exit 2. ``play`` plays
a checkpoint on its own board."""

import io
import json

import pytest
import torch

from tests.helpers.command import one_error_line
from ttt_research import evaluate as evaluate_cli
from ttt_research import export as export_cli
from ttt_research import play as play_cli
from ttt_research import tournament as tournament_cli
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.evaluation import crossplay, exact, policy_file
from ttt_research.models.nets import MLP

G = Game(3, 4, 3)
pytest.importorskip("onnx")


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


def checkpoint(path, cells: int = G.cells, game: str | None = "3,4,3", weights_cells: int | None = None):
    """A checkpoint as training writes one (``net_spec``, ``net.*`` weights, ``game`` off
    tic-tac-toe); ``weights_cells``: weights of another board than the spec says."""
    torch.manual_seed(0)
    net = MLP(hidden=[16], encoding="planes18", cells=weights_cells or cells)
    spec = {**net.spec(), **({"cells": cells} if cells != TIC_TAC_TOE.cells else {})}
    ckpt = {"net_spec": spec, "algo": "ppo", "games_played": 64, "hyper_parameters": {"seed": 0},
            "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()},
            **({"game": game} if game else {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    return net.eval()


def test_a_3_4_3_checkpoint_is_evaluated_and_exported_on_its_board(tmp_path, capsys):
    path = tmp_path / "last.ckpt"
    net = checkpoint(path)
    loaded, meta = policy_file.load_checkpoint(path)
    assert meta["game"] == "3,4,3" and loaded.cells == G.cells
    want = exact.evaluate_policy(net, game=G)
    assert want["decision_points"] > 0
    assert evaluate_cli.main([str(path), "--json", "--lines", "0"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {k: printed[k] for k in want} == want  # the network's own greedy moves: the same figures
    out = tmp_path / "x.onnx"
    assert export_cli.main([str(path), "-o", str(out)]) == 0
    assert "parity on 79563 positions" in capsys.readouterr().out
    policy, onnx_meta = policy_file.load_policy(out)
    assert onnx_meta["game"] == "3,4,3" and json.loads(onnx_meta["eval"]) == json.loads(json.dumps(want))
    views = G.tables().view[exact.decision_codes(G)].float()
    with torch.no_grad():
        assert torch.equal(policy(views).argmax(-1), net(views).argmax(-1))


def test_a_checkpoint_without_its_game_reads_its_runs_config(tmp_path, capsys):
    run = tmp_path / "run"
    checkpoint(run / "checkpoints" / "last.ckpt", game=None)
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.yaml").write_text("game:\n  name: mnk\n  m: 3\n  'n': 4\n  k: 3\n")
    _, meta = policy_file.load_checkpoint(run / "checkpoints" / "last.ckpt")
    assert meta["game"] == "3,4,3"


@pytest.mark.parametrize(("make", "needle"), [
    (dict(game=None), "a checkpoint of a 12-cell network that names no board"),
    (dict(game="3,3,3"), "net_spec says a network of 12 cells, its board 3,3,3 has 9"),
    (dict(weights_cells=9), "checkpoint weights do not fit its network"),
    (dict(game="9,9,3"), "names no board"),
])
def test_a_checkpoint_that_does_not_fit_its_board_is_one_line_exit_2(tmp_path, capsys, make, needle):
    path = tmp_path / "last.ckpt"
    checkpoint(path, **make)
    out = tmp_path / "o.onnx"
    for main, args in ((evaluate_cli.main, [str(path)]), (export_cli.main, [str(path), "-o", str(out)])):
        assert main(args) == 2
        assert needle in one_error_line(capsys.readouterr().err)
    assert not out.exists()


def test_a_checkpoint_asked_for_another_board_and_a_table_of_it_are_refused(tmp_path, capsys):
    path = tmp_path / "last.ckpt"
    checkpoint(path)
    with pytest.raises(policy_file.PolicyFileError, match="a checkpoint of the 3,4,3 board, not of 3,3,3"):
        policy_file.load_checkpoint(path, TIC_TAC_TOE)
    assert export_cli.main([str(path), "--table", str(tmp_path / "t.csv")]) == 2
    assert "policy tables hold tic-tac-toe's positions only" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "t.csv").exists()


def test_a_3_4_3_tournament_is_exact(tmp_path, capsys):
    path = tmp_path / "a.ckpt"
    checkpoint(path)
    assert tournament_cli.main([str(path), "random", "perfect", "best-response", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["game"] == "3,4,3"
    names = [p["name"] for p in out["participants"]]
    results = torch.tensor(out["results"], dtype=torch.float64)
    random, perfect, responder = (names.index(n) for n in ("random", "perfect", "best-response"))
    facts = G.positions().facts["random_vs_random"]  # .5871 / .0303 / .3826 (issue 59's table)
    got = results[random, random].tolist()
    assert got == pytest.approx([facts["x_wins"], facts["o_wins"], facts["draw"]], abs=1e-12)
    assert results[perfect, :, 0].tolist() == pytest.approx([1.0] * len(names), abs=1e-12)  # X wins 3,4,3
    assert results[responder, responder].tolist() == [1.0, 0.0, 0.0]  # the game's value, not a tie
    assert out["worst_case"]["perfect"]["nashconv"] == pytest.approx(0.0, abs=1e-12)


def test_a_tournament_of_two_boards_or_too_big_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    ours, tic = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    checkpoint(ours)
    checkpoint(tic, cells=TIC_TAC_TOE.cells, game=None)
    table = tmp_path / "t.csv"
    table.write_text("board,move\n")
    two = "a policy of the 3,3,3 board, but the tournament plays 3,4,3"
    for args, needle in (([str(ours), str(tic)], two),
                         ([str(ours), "random", "--game", "3,3,3"], "tournament plays 3,3,3 (--game)"),
                         (["random", str(table), "--game", "3,4,3"], "a policy of the 3,3,3 board"),
                         (["random", "perfect", "--game", "4,5,3"], "names no board")):
        assert tournament_cli.main(args) == 2, args
        assert needle in one_error_line(capsys.readouterr().err), args
    monkeypatch.setattr(crossplay, "MAX_BYTES", 10**6)
    assert tournament_cli.main(["random", "perfect", "--game", "3,4,3"]) == 2
    said = one_error_line(capsys.readouterr().err)
    assert "cross-play of 2 policies on the 3,4,3 board (111,973 positions x 12 cells)" in said


def test_cross_play_costs_what_it_says():
    assert crossplay.cost(111_973, 79_563, 12, 2) < 10**8  # 3,4,3: about 93 MB for two policies
    assert crossplay.cost(9_722_011, 9_062_619, 16, 2) > crossplay.MAX_BYTES  # 4,4,4 (issue 59's counts)


def test_play_plays_a_3_4_3_checkpoint_on_its_board_and_refuses_it_for_another(tmp_path, capsys, monkeypatch):
    path = tmp_path / "last.ckpt"
    net = checkpoint(path)
    first = int(exact.greedy_actions(net, game=G)[0][0])  # the network's greedy move on the empty board
    monkeypatch.setattr("sys.stdin", io.StringIO("q\n"))
    assert play_cli.main([str(path), "--seat", "o"]) == 0
    out = capsys.readouterr().out
    assert f"agent (X) plays {first + 1}; its move probabilities:" in out
    assert "your move (1-12, q to quit)" in out
    for extra in ([], ["--web", "--port", "0"]):
        assert play_cli.main([str(path), "--game", "3,3,3", *extra]) == 2
        said = one_error_line(capsys.readouterr().err)
        assert "a checkpoint of the 3,4,3 board, not of 3,3,3; refused" in said
