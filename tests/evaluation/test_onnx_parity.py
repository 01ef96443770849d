"""The export's parity check (``onnx.parity``): torch and onnxruntime round a network's float32
sums in their own order, so where torch's best two empty cells are a near tie (``onnx.TIE`` of
the logits' scale) either may come first and the moves are not compared; anywhere else a model
file that plays another move is still refused, naming the first board.

The models are a preference over the cells, the same in torch (``Preference``) and in a hand-made
graph (``preference_model``: the same float32 operations), so each test sets exactly how far apart
the two sides' logits are."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.onnx_models import preference_model
from ttt_research.env.board import TIC_TAC_TOE
from ttt_research.evaluation import onnx
from ttt_research.evaluation.exact import decision_codes
from ttt_research.evaluation.onnx import ExportError, parity


class Preference(torch.nn.Module):
    """logits = preference - 1e9 * |board|: ``preference_model``'s graph in torch."""

    def __init__(self, preference):
        super().__init__()
        self.register_buffer("pref", torch.tensor(preference, dtype=torch.float32))

    def forward(self, view: torch.Tensor) -> torch.Tensor:
        return view.abs() * -1e9 + self.pref


DOWN = [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]  # prefers the lowest cell, one apart


def both_empty(a: int, b: int) -> int:
    """How many decision positions have cells ``a`` and ``b`` empty."""
    legal = TIC_TAC_TOE.tables().legal[decision_codes()]
    return int((legal[:, a] & legal[:, b]).sum())


def test_a_near_tie_may_break_either_way(tmp_path):
    # torch: cells 0 and 1 tie exactly (torch's argmax takes 0); the file: cell 1 ahead by 2^-20,
    # float32 noise at the logits' scale of 8 (TIE allows 8e-4): onnxruntime plays cell 1.
    tied = [8.0, 8.0, *DOWN[2:]]
    nudged = [8.0, 8.0 + 2**-20, *DOWN[2:]]
    figures = parity(Preference(tied), preference_model(nudged, tmp_path / "p.onnx"))
    assert figures["greedy_identical"] and figures["positions"] == 4520
    # Every position where both cells are empty is a near tie, each played otherwise by the file;
    # before, the export was refused (the moves differ there).
    assert figures["near_ties"] == figures["near_ties_differing"] == both_empty(0, 1) > 0
    assert figures["max_abs_diff"] == pytest.approx(2**-20)


def test_another_move_beyond_a_near_tie_is_refused(tmp_path):
    # Cells 0 and 1 swapped: 1.0 apart in torch, far beyond TIE; refused, naming the empty board.
    swapped = [7.0, 8.0, *DOWN[2:]]
    with pytest.raises(ExportError, match=r"differ from torch's at (\d+) of 4520 positions \(near ties "
                                          r"aside\), first at \.\.\./\.\.\./\.\.\. \(X to move\): torch "
                                          r"plays cell 1, onnxruntime 2") as e:
        parity(Preference(DOWN), preference_model(swapped, tmp_path / "p.onnx"))
    assert f"at {both_empty(0, 1)} of 4520" in str(e.value)


def test_the_tolerance_is_float32_noise_not_a_small_preference(tmp_path):
    # 1e-3 apart at a scale of 8 is above TIE * 8: a real preference, whose swap is refused.
    gap = 1e-3
    assert gap > onnx.TIE * 8
    close = [8.0, 8.0 - gap, *DOWN[2:]]
    swapped = [8.0 - gap, 8.0, *DOWN[2:]]
    with pytest.raises(ExportError, match="greedy moves differ"):
        parity(Preference(close), preference_model(swapped, tmp_path / "p.onnx"))
    # The same file, against torch's exact tie: a near tie, compared nowhere.
    assert parity(Preference([8.0, 8.0, *DOWN[2:]]), tmp_path / "p.onnx")["near_ties"] == both_empty(0, 1)


def test_near_ties_follow_the_logits_scale():
    legal = torch.ones(3, 3, dtype=torch.bool)
    logits = torch.tensor([[0.5, 0.5 - 5e-5, 0.0],       # scale 1 (the floor): 5e-5 <= 1e-4, a tie
                           [0.5, 0.5 - 5e-4, 0.0],       # 5e-4 > 1e-4: no tie
                           [100.0, 100.0 - 5e-3, 0.0]])  # scale 100: 5e-3 <= 1e-2, a tie
    assert onnx.near_tie(logits, legal).tolist() == [True, False, True]
    one = torch.tensor([[True, False, False]])  # one empty cell: never a tie
    assert onnx.near_tie(torch.tensor([[1.0, 1.0, 1.0]]), one).tolist() == [False]
