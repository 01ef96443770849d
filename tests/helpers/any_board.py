"""The command's whole pipeline on 3,4,3 (3 rows, 4 columns, 3 in a line), shared by the tests
that take each algorithm to another board (issue 61): train, kill after the first checkpoint,
resume, evaluate exactly, export."""

from __future__ import annotations

import json

import pytest

from tests.helpers.configs import make_cfg
from tests.helpers.resume import metric_rows, train_killed
from ttt_research.train.run import train

BOARD = ["game=mnk343"]
DECISION_POINTS_343 = 79_563  # FACTS.md: 3,4,3's positions with someone to move


def command_checks(tmp_path, monkeypatch, *overrides: str, checkpoint_every: int = 2) -> dict:
    """``python -m ttt_research game=mnk343 OVERRIDES``, whole and killed after its first
    checkpoint then resumed: the same eval.json and metrics; its exact evaluation over the
    board's decision points and a policy.onnx of the board, ``[N, 12]`` with its game.
    Returns eval.json."""
    overrides = (*BOARD, *overrides, f"checkpoint_every={checkpoint_every}")
    whole = train(make_cfg(*overrides), tmp_path / "whole")
    train_killed(make_cfg(*overrides), tmp_path / "killed", monkeypatch)
    resumed = train(make_cfg(*overrides, "resume=true"), tmp_path / "killed")
    assert resumed == whole
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "whole")
    # X wins 3,4,3: the perfect player as X beats any O
    assert whole["as_o"]["vs_perfect"] == {"win": 0.0, "loss": 1.0, "tie": 0.0}
    assert 0 < whole["decision_points"] < DECISION_POINTS_343 and 0 <= whole["optimal_move_rate_all"] <= 1
    assert json.loads((tmp_path / "whole" / "eval.json").read_text()) == whole
    onnx = pytest.importorskip("onnx")
    model = onnx.load(tmp_path / "whole" / "policy.onnx")
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:] == [12]
    assert {p.key: p.value for p in model.metadata_props}.get("game") == "3,4,3"
    return whole
