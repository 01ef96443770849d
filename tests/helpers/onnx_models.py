"""Hand-built ONNX policies for tests, made with onnx.helper (independent of our exporter)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def preference_model(preference, path, in_width=9, in_name="board", occupied=-1e9):
    """logits = preference + occupied * |board|: plays the most preferred empty cell (with
    ``occupied=+1e9``, a broken model that prefers taken cells; a preference of -inf or NaN
    gives those logits everywhere)."""
    pref = numpy_helper.from_array(np.asarray(preference, dtype=np.float32), "pref")
    big = numpy_helper.from_array(np.asarray(occupied, dtype=np.float32), "big")
    nodes = [
        helper.make_node("Abs", [in_name], ["occupied"]),
        helper.make_node("Mul", ["occupied", "big"], ["penalty"]),
        helper.make_node("Add", ["penalty", "pref"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "preference",
        [helper.make_tensor_value_info(in_name, TensorProto.FLOAT, ["N", in_width])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", in_width])],
        initializer=[pref, big],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def looping_model(path, trips=2**62, nested=False):
    """logits = board, passed through a ``Loop`` of ``trips`` turns (2^62: it never returns),
    or (``nested``) through an ``If`` whose branch holds that Loop: a valid ONNX model that
    hangs whoever runs it (issue 42 item 7)."""
    def value(name, elem, shape):
        return helper.make_tensor_value_info(name, elem, shape)

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"])],
        "body", [value("i", TensorProto.INT64, []), value("cond_in", TensorProto.BOOL, []),
                 value("v_in", TensorProto.FLOAT, ["N", 9])],
        [value("cond_out", TensorProto.BOOL, []), value("v_out", TensorProto.FLOAT, ["N", 9])])
    loop = helper.make_node("Loop", ["M", "T", "board"], ["logits"], body=body)
    if nested:
        branch = helper.make_graph([loop], "branch", [], [value("logits", TensorProto.FLOAT, ["N", 9])])
        loop = helper.make_node("If", ["T"], ["logits"], then_branch=branch, else_branch=branch)
    inits = [numpy_helper.from_array(np.asarray(trips, dtype=np.int64), "M"),
             numpy_helper.from_array(np.asarray(True), "T")]
    graph = helper.make_graph([loop], "loop", [value("board", TensorProto.FLOAT, ["N", 9])],
                              [value("logits", TensorProto.FLOAT, ["N", 9])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
