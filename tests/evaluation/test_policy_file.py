"""A policy file is scored as the player it is (evaluation/policy_file.py, issue 58 item 2):
a model whose greedy moves depend on the batch it runs in (4,520 boards when scored, one when
played) is refused; batched kernels' rounding on a near-tie is not taken for that."""

import json

import pytest
import torch

from tests.helpers.onnx_models import batch_switch_model, preference_model
from ttt_research.evaluation.policy_file import SAMPLE, PolicyFileError, _greedy_differs, load_onnx

HIGHEST = list(range(9))
LOWEST = HIGHEST[::-1]


def test_a_model_that_plays_another_policy_alone_is_refused(tmp_path):
    # Before: evaluate scored the highest-cell policy, play and the page played the lowest.
    path = batch_switch_model(tmp_path / "switch.onnx", HIGHEST, LOWEST, {"eval": json.dumps({"x": 1})})
    with pytest.raises(PolicyFileError) as e:
        load_onnx(path)
    assert str(e.value) == (
        f"{path}: the model plays differently by batch: at .../.../... (X to move) it picks cell 0 alone "
        f"and cell 8 in a batch of all 4,520 positions (97 of {SAMPLE} boards checked differ); refused, "
        "its scores would describe another policy than the one that plays")


def test_a_model_that_switches_on_one_board_outside_the_sample_is_refused_where_it_plays(tmp_path):
    """Found by review: the sample is fixed, so a model that plays another move alone on one
    board outside it was scored as one policy and played as another. Where a model plays a
    board at a time (``play``, the page) every position goes alone."""
    from ttt_research.env import game
    from ttt_research.evaluation.exact import decision_codes

    rows = torch.linspace(0, decision_codes().numel() - 1, SAMPLE).round().long().tolist()
    hidden = next(i for i in range(decision_codes().numel()) if i not in rows)
    view = game.tables().view[decision_codes()[hidden]].float().tolist()
    path = batch_switch_model(tmp_path / "one_board.onnx", HIGHEST, LOWEST, only=view)
    load_onnx(path)  # scored: the sample cannot tell
    with pytest.raises(PolicyFileError) as e:
        load_onnx(path, played=True)
    assert " alone and cell " in str(e.value) and "(1 of 4,520 boards checked differ)" in str(e.value)


def test_the_same_policy_alone_and_in_a_batch_loads(tmp_path):
    same = batch_switch_model(tmp_path / "same.onnx", HIGHEST, HIGHEST)
    assert load_onnx(same)[0](torch.zeros(1, 9)).argmax() == 8
    load_onnx(preference_model([0.0] * 9, tmp_path / "ties.onnx"))  # all tied: the lowest cell both ways


def test_a_near_tie_is_not_a_different_move_but_a_clear_gap_or_nan_is():
    legal = torch.ones(3, 9, dtype=torch.bool)
    whole = torch.zeros(3, 9)
    whole[:, 4] = 1.0
    got = whole.clone()
    whole[0, 5], got[0, 5] = 1.0 - 1e-7, 1.0 + 1e-7  # rounding: cell 5 by a hair alone, 4 in the batch
    got[1, 5] = 2.0  # another move, clearly
    got[2, 5] = float("nan")
    assert _greedy_differs(got, whole, legal).tolist() == [False, True, True]
    legal[1, 5] = False  # an occupied cell's logit is not a move
    assert _greedy_differs(got, whole, legal).tolist() == [False, False, True]
