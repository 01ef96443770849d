"""Hand-built ONNX policies for tests, made with onnx.helper (independent of our exporter)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def preference_model(preference, path, in_width=9, in_name="board", occupied=-1e9, game=None):
    """logits = preference + occupied * |board|: plays the most preferred empty cell (with
    ``occupied=+1e9``, a broken model that prefers taken cells; a preference of -inf or NaN
    gives those logits everywhere). ``game``: its board, "m,n,k", as ``game`` metadata (the
    width is then the board's cells, ``len(preference)``)."""
    if game is not None:
        in_width = len(preference)
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
    if game is not None:
        prop = model.metadata_props.add()
        prop.key, prop.value = "game", game
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


def _policy_model(path, nodes, inits, metadata=None):
    """A model of ``nodes`` from ``board`` (N, 9) to ``logits`` (N, 9), checked and saved."""
    graph = helper.make_graph(
        nodes, "policy", [helper.make_tensor_value_info("board", TensorProto.FLOAT, ["N", 9])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 9])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for key, value in (metadata or {}).items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _preference_nodes(preference, out, prefix):
    """Nodes giving ``out`` = preference - 1e9 * |board| (the most preferred empty cell)."""
    inits = [numpy_helper.from_array(np.asarray(preference, dtype=np.float32), f"{prefix}_pref"),
             numpy_helper.from_array(np.asarray(-1e9, dtype=np.float32), f"{prefix}_big")]
    nodes = [helper.make_node("Abs", ["board"], [f"{prefix}_occ"]),
             helper.make_node("Mul", [f"{prefix}_occ", f"{prefix}_big"], [f"{prefix}_pen"]),
             helper.make_node("Add", [f"{prefix}_pen", f"{prefix}_pref"], [out])]
    return nodes, inits


def batch_switch_model(path, batched, alone, metadata=None, only=None):
    """A model that plays preference ``batched`` on a batch of many boards and ``alone`` on a
    batch of one, built from Shape, Gather, Equal and Where (issue 58 item 2): scored as one
    policy (``evaluate`` runs 4,520 boards at once), played as another (a board at a time).
    ``only``: a view (9 numbers), the one board where it switches, alone; elsewhere ``batched``."""
    many, many_inits = _preference_nodes(batched, "many", "b")
    one, one_inits = _preference_nodes(alone, "one", "a")
    inits = [*many_inits, *one_inits, numpy_helper.from_array(np.asarray(0, np.int64), "axis0"),
             numpy_helper.from_array(np.asarray(1, np.int64), "single")]
    nodes = [*many, *one, helper.make_node("Shape", ["board"], ["shape"]),
             helper.make_node("Gather", ["shape", "axis0"], ["n"], axis=0),
             helper.make_node("Equal", ["n", "single"], ["is_one" if only is None else "n_is_one"])]
    if only is not None:  # alone and on that board: every cell equal, (N, 1)
        inits.append(numpy_helper.from_array(np.asarray([only], np.float32), "only"))
        nodes += [helper.make_node("Equal", ["board", "only"], ["same"]),
                  helper.make_node("Cast", ["same"], ["same_f"], to=TensorProto.FLOAT),
                  helper.make_node("ReduceMin", ["same_f"], ["all_f"], axes=[1], keepdims=1),
                  helper.make_node("Cast", ["all_f"], ["all_same"], to=TensorProto.BOOL),
                  helper.make_node("And", ["all_same", "n_is_one"], ["is_one"])]
    nodes.append(helper.make_node("Where", ["is_one", "one", "many"], ["logits"]))
    return _policy_model(path, nodes, inits, metadata)


def allocating_model(path, nbytes, op="ConstantOfShape", computed=True, doubled=False):
    """The highest-empty-cell policy plus 0 x the sum of a float32 tensor of ``nbytes`` made by
    ``op`` (ConstantOfShape, Expand, Tile or Range), its size computed from the board at run
    time (``computed``) or a constant: a small file that asks for ``nbytes`` when it runs
    (``doubled``: and as much again, the tensor added to itself)."""
    n = nbytes // 4
    nodes, inits = _preference_nodes(list(range(9)), "pref", "p")
    inits += [numpy_helper.from_array(np.asarray(0, np.float32), "zero"),
              numpy_helper.from_array(np.asarray([1.0], np.float32), "one")]
    if computed:  # n + 0 * sum|board|: nothing to fold before it runs
        inits.append(numpy_helper.from_array(np.asarray([n], np.int64), "n_const"))
        nodes += [helper.make_node("ReduceSum", ["board"], ["bsum"], keepdims=0),
                  helper.make_node("Mul", ["bsum", "zero"], ["bzero"]),
                  helper.make_node("Cast", ["bzero"], ["bint"], to=TensorProto.INT64),
                  helper.make_node("Add", ["bint", "n_const"], ["n"])]
    else:
        inits.append(numpy_helper.from_array(np.asarray([n], np.int64), "n"))
    if op == "ConstantOfShape":
        nodes.append(helper.make_node("ConstantOfShape", ["n"], ["big"],
                                      value=numpy_helper.from_array(np.asarray([1.0], np.float32))))
    elif op in ("Expand", "Tile"):
        nodes.append(helper.make_node(op, ["one", "n"], ["big"]))
    elif op == "Range":
        nodes += [helper.make_node("Cast", ["n"], ["n_float"], to=TensorProto.FLOAT),
                  helper.make_node("Squeeze", ["n_float"], ["limit"]),
                  helper.make_node("Range", ["start", "limit", "one_scalar"], ["big"])]
        inits += [numpy_helper.from_array(np.asarray(0.0, np.float32), "start"),
                  numpy_helper.from_array(np.asarray(1.0, np.float32), "one_scalar")]
    if doubled:
        nodes.append(helper.make_node("Add", ["big", "big"], ["twice"]))
    nodes += [helper.make_node("ReduceSum", ["twice" if doubled else "big"], ["total"], keepdims=0),
              helper.make_node("Mul", ["total", "zero"], ["nothing"]),
              helper.make_node("Add", ["pref", "nothing"], ["logits"])]
    return _policy_model(path, nodes, inits)


def sparse_model(path, elements):
    """The highest-empty-cell policy plus 0 x the sum of a sparse constant of ``elements``
    floats with one value set: a file of a few hundred bytes that onnxruntime makes dense
    (``elements`` x 4 bytes) when it loads it."""
    nodes, inits = _preference_nodes(list(range(9)), "pref", "p")
    values = numpy_helper.from_array(np.asarray([1.0], np.float32), "values")
    where = numpy_helper.from_array(np.asarray([0], np.int64), "where")
    nodes += [helper.make_node("Constant", [], ["big"],
                               sparse_value=helper.make_sparse_tensor(values, where, [elements])),
              helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
              helper.make_node("Mul", ["total", "zero"], ["nothing"]),
              helper.make_node("Add", ["pref", "nothing"], ["logits"])]
    inits.append(numpy_helper.from_array(np.asarray(0, np.float32), "zero"))
    return _policy_model(path, nodes, inits)
