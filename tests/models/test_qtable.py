"""models/qtable.py: the table's view code is game.view_code on every decision position, its
masked values follow the policy contract, its ONNX graph agrees with torch, a stack's member
k is the table k, and a checkpoint of one comes back through policy_file and the
evaluate command."""

import json

import pytest
import torch

from ttt_research.env import game
from ttt_research.evaluate import main as evaluate_main
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation.onnx import export
from ttt_research.evaluation.policy_file import PolicyFileError, load_checkpoint, load_onnx
from ttt_research.models.nets import MASKED
from ttt_research.models.qtable import N_CODES, QTable, QTableStack, codes_of
from ttt_research.models.stacks import blank_like, stack_of


def decision_views():
    return game.tables().view[ev.decision_codes()].float()  # (4520, 9)


def distinct_table(seed=0) -> QTable:
    """A table whose every value differs (no ties), so that greedy moves say where it read."""
    table = QTable()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        table.q.copy_(torch.randn(N_CODES, 9, generator=g))
        table.visits.copy_(torch.randint(0, 50, (N_CODES, 9), generator=g).float())
    return table


def test_the_code_is_game_view_code_on_all_4520_decision_positions():
    views = decision_views()
    assert views.shape[0] == 4520
    assert torch.equal(codes_of(views), game.view_code(views))
    # the empty board is the middle code: every digit "empty" (1)
    assert int(codes_of(torch.zeros(1, 9))[0]) == (3**9 - 1) // 2


def test_occupied_cells_are_masked_and_the_rest_read_the_views_row():
    table = distinct_table()
    # X in the centre, O to move:
    #   . . .
    #   . X .      the mover's (O's) view: -1 in cell 4
    #   . . .
    view = torch.zeros(1, 9)
    view[0, 4] = -1
    out = table(view)
    code = int(game.view_code(view)[0])
    assert out[0, 4] == MASKED
    keep = [c for c in range(9) if c != 4]
    assert torch.equal(out[0, keep], table.q[code, keep])


def test_onnx_graph_plays_as_the_table_on_every_position(tmp_path):
    table = distinct_table(1)
    parity = export(table, tmp_path / "policy.onnx", {"algo": "qlearning"})
    assert parity["greedy_identical"] and parity["positions"] == 4520
    assert parity["max_abs_diff"] == 0.0  # a gather: the same floats
    logits, meta = load_onnx(tmp_path / "policy.onnx")
    views = decision_views()
    assert torch.equal(logits(views), table(views))
    assert meta["algo"] == "qlearning"


def test_a_stacks_member_k_is_table_k_for_per_member_and_shared_views():
    tables = [distinct_table(s) for s in (2, 3, 4)]
    stack = stack_of(tables)
    assert isinstance(stack, QTableStack) and stack.n == 3
    views = decision_views()[:50]
    shared = stack(views)  # (3, 50, 9)
    own = stack(torch.stack([views.flip(0), views, views]))
    for k, t in enumerate(tables):
        assert torch.equal(shared[k], t(views))
        assert torch.equal(stack.member(k).q, t.q) and torch.equal(stack.member(k).visits, t.visits)
    assert torch.equal(own[0], tables[0](views.flip(0)))
    assert torch.equal(stack(views, slice(1, 3)), shared[1:])
    blank = blank_like(stack, 5)
    assert isinstance(blank, QTableStack) and blank.q.shape == (5, N_CODES, 9)
    blank.load_member(4, tables[2])
    assert torch.equal(blank.member(4).q, tables[2].q)
    reports = ev.evaluate_stack(stack)  # the exact evaluator reads a table stack as an MLPStack
    assert reports[1] == ev.evaluate_policy(tables[1])


def checkpoint_of(table: QTable, path, **extra):
    state = {f"net.{k}": v for k, v in table.state_dict().items()}
    torch.save({"net_spec": table.spec(), "state_dict": state,
                "algo": "qlearning", "games_played": 7, "hyper_parameters": {"seed": 3}, **extra}, path)
    return path


def test_a_table_checkpoint_loads_through_policy_file_and_the_evaluate_command(tmp_path, capsys):
    table = distinct_table(5)
    path = checkpoint_of(table, tmp_path / "last.ckpt")
    net, meta = load_checkpoint(path)
    assert isinstance(net, QTable) and torch.equal(net.q, table.q) and torch.equal(net.visits, table.visits)
    assert json.loads(meta["net"]) == {"table": "q", "init": 0.0} and meta["algo"] == "qlearning"
    assert evaluate_main([str(path), "--json"]) == 0  # python -m ttt_research.evaluate PATH --json
    assert json.loads(capsys.readouterr().out)["as_x"] == ev.evaluate_policy(table)["as_x"]


VISITS = torch.zeros(N_CODES, 9)


@pytest.mark.parametrize("bad, message", [
    ({"net.q": torch.zeros(10, 9), "net.visits": VISITS}, r"q is \[10, 9\]"),
    ({"net.q": torch.full((N_CODES, 9), float("nan")), "net.visits": VISITS}, "not all finite"),
    ({"net.q": torch.zeros(N_CODES, 9)}, "missing or unexpected: visits"),
])
def test_a_bad_table_checkpoint_is_refused_in_one_line(tmp_path, bad, message):
    path = tmp_path / "bad.ckpt"
    torch.save({"net_spec": {"table": "q", "init": 0.0}, "state_dict": bad}, path)
    with pytest.raises(PolicyFileError, match=message):
        load_checkpoint(path)
    torch.save({"net_spec": {"table": "v9", "init": 0.0}, "state_dict": bad}, path)
    with pytest.raises(PolicyFileError, match="not a table this version reads"):
        load_checkpoint(path)
