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
