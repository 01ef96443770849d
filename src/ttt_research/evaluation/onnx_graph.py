"""The ONNX file of the project's own policy networks, written directly as protobuf bytes.

Why not ``torch.onnx.export``: a 1-game run spent about a second exporting its policy, most
of it importing the ``onnx`` package (``ml_dtypes`` alone ~0.7 s) and tracing the module,
for a graph of a dozen nodes whose every op is known in advance. Here the graph of an
``MLP`` or a ``QTable`` is spelled out node by node and encoded with the protobuf wire
format (a varint key per field, length-prefixed messages), which needs nothing but the
standard library and numpy; the file is then checked by onnxruntime against torch like any
other (``evaluation/onnx.parity``). A network of another class (an algorithm of the user's
own) still goes through torch's exporter.

The graphs, opset 17 (IR version 8), input ``board`` float32 (N, 9) in the mover's view:

* ``signed9``: the board as it is; ``planes18``: ``Greater``/``Less`` than 0, cast to float,
  each ``Unsqueeze``d to (N, 9, 1), ``Concat`` on the last axis and ``Reshape``d to (N, 18):
  ``[own_0, opp_0, own_1, ...]``, as ``models/encodings.planes18``.
* an MLP: ``Gemm`` (``transB=1``: x W^T + b) and ``Relu`` per hidden layer, a last ``Gemm``.
* a table: the view code ``MatMul(board, 3^i) + 9,841``, ``Round``, ``Clip`` into the
  table, ``Cast`` to int64, ``Gather`` of its row (``models/qtable.codes_of``).
* then the mask: ``Where(board == 0, values, -1e9)`` -> output ``logits`` (N, 9).

Field numbers are those of ``onnx.proto`` (ModelProto, GraphProto, NodeProto, TensorProto,
ValueInfoProto, AttributeProto); ``tests/evaluation/test_onnx_graph.py`` loads every file
with the ``onnx`` package's checker.
"""
from __future__ import annotations

import struct

import numpy as np
import torch

from ttt_research.models.nets import MASKED, MLP, linears
from ttt_research.models.qtable import EMPTY_VIEW_CODE, N_CODES, POW3, QTable

OPSET, IR_VERSION = 17, 8
FLOAT, INT64 = 1, 7  # TensorProto.DataType
ATTR_FLOAT, ATTR_INT = 1, 2  # AttributeProto.AttributeType


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 is its two's complement, ten bytes
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int(field: int, n: int) -> bytes:  # wire type 0
    return _varint(field << 3) + _varint(n)


def _bytes(field: int, data: bytes | str) -> bytes:  # wire type 2: a string, bytes or a message
    data = data.encode() if isinstance(data, str) else data
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _float(field: int, x: float) -> bytes:  # wire type 5
    return _varint(field << 3 | 5) + struct.pack("<f", x)


def tensor(name: str, array: np.ndarray) -> bytes:
    """A TensorProto: dims (1), data_type (2), name (8), raw_data (9, little-endian)."""
    kind = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}[array.dtype]
    dims = b"".join(_int(1, d) for d in array.shape)
    raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return dims + _int(2, kind) + _bytes(8, name) + _bytes(9, raw)


def node(op: str, inputs: list[str], outputs: list[str], **attrs: int | float) -> bytes:
    """A NodeProto: input (1), output (2), name (3), op_type (4), attribute (5)."""
    body = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    body += _bytes(3, outputs[0]) + _bytes(4, op)
    for key, value in attrs.items():  # AttributeProto: name (1), f (2), i (3), type (20)
        one = _float(2, value) + _int(20, ATTR_FLOAT) if isinstance(value, float) else \
            _int(3, value) + _int(20, ATTR_INT)
        body += _bytes(5, _bytes(1, key) + one)
    return body


def _value_info(name: str, cells: int) -> bytes:
    """ValueInfoProto of a float32 (N, cells) tensor: name (1), type (2) -> tensor_type (1) ->
    elem_type (1), shape (2) -> dim (1) -> dim_param (2) "N" | dim_value (1) cells."""
    shape = _bytes(1, _bytes(2, "N")) + _bytes(1, _int(1, cells))
    return _bytes(1, name) + _bytes(2, _bytes(1, _int(1, FLOAT) + _bytes(2, shape)))


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy()


def _mlp(net: MLP) -> tuple[list[bytes], list[bytes], str]:
    """The encoding and the layers of an MLP: (nodes, initializers, the raw values' name)."""
    nodes, inits = [], []
    x = "board"
    if net.encoding_name == "planes18":
        inits += [tensor("last_axis", np.array([2], np.int64)),  # two bits per cell of the board
                  tensor("flat18", np.array([-1, 2 * linears(net)[-1].out_features], np.int64))]
        for op, bit in (("Greater", "own"), ("Less", "opp")):
            nodes += [node(op, ["board", "zero"], [f"{bit}_bool"]),
                      node("Cast", [f"{bit}_bool"], [f"{bit}_float"], to=FLOAT),
                      node("Unsqueeze", [f"{bit}_float", "last_axis"], [bit])]
        nodes += [node("Concat", ["own", "opp"], ["planes"], axis=2),
                  node("Reshape", ["planes", "flat18"], ["planes18"])]
        x = "planes18"
    elif net.encoding_name != "signed9":
        raise ValueError(f"no ONNX graph for encoding {net.encoding_name!r}")
    layers = linears(net)
    for i, lin in enumerate(layers):
        inits += [tensor(f"w{i}", _array(lin.weight)), tensor(f"b{i}", _array(lin.bias))]
        out = f"gemm{i}"
        nodes.append(node("Gemm", [x, f"w{i}", f"b{i}"], [out], transB=1))
        if i < len(layers) - 1:
            nodes.append(node("Relu", [out], [f"relu{i}"]))
            out = f"relu{i}"
        x = out
    return nodes, inits, x


def _table(net: QTable) -> tuple[list[bytes], list[bytes], str]:
    """A table's row lookup by view code: (nodes, initializers, the raw values' name)."""
    inits = [tensor("pow3", np.array(POW3, np.float32)),
             tensor("empty_code", np.array(EMPTY_VIEW_CODE, np.float32)),
             tensor("code_max", np.array(N_CODES - 1, np.float32)), tensor("q", _array(net.q))]
    nodes = [node("MatMul", ["board", "pow3"], ["digits"]),
             node("Add", ["digits", "empty_code"], ["code_float"]),
             node("Round", ["code_float"], ["code_round"]),
             node("Clip", ["code_round", "zero", "code_max"], ["code_clip"]),
             node("Cast", ["code_clip"], ["code"], to=INT64),
             node("Gather", ["q", "code"], ["values"], axis=0)]
    return nodes, inits, "values"


def supported(net: torch.nn.Module) -> bool:
    """Whether ``net`` is one of the classes whose graph is written here (not a subclass:
    a subclass may compute something else)."""
    return type(net) in (MLP, QTable)


def model_bytes(net: torch.nn.Module, metadata: dict[str, str] | None = None) -> bytes:
    """The whole ModelProto of ``net`` (``supported``) with ``metadata`` as its
    metadata_props: ir_version (1), producer_name (2), graph (7), opset_import (8),
    metadata_props (14)."""
    nodes, inits, raw = _mlp(net) if isinstance(net, MLP) else _table(net)
    cells = linears(net)[-1].out_features if isinstance(net, MLP) else int(net.q.shape[1])
    # shared by both: 0 (the encoding's and the mask's comparisons, the table's clip) and the mask
    inits = [tensor("zero", np.zeros((), np.float32)), *inits, tensor("masked", np.array(MASKED, np.float32))]
    nodes += [node("Equal", ["board", "zero"], ["empty"]),
              node("Where", ["empty", raw, "masked"], ["logits"])]
    graph = (b"".join(_bytes(1, n) for n in nodes) + _bytes(2, "policy")
             + b"".join(_bytes(5, t) for t in inits)
             + _bytes(11, _value_info("board", cells)) + _bytes(12, _value_info("logits", cells)))
    props = b"".join(_bytes(14, _bytes(1, k) + _bytes(2, v)) for k, v in (metadata or {}).items())
    return (_int(1, IR_VERSION) + _bytes(2, "ttt_research") + _bytes(7, graph)
            + _bytes(8, _bytes(1, "") + _int(2, OPSET)) + props)
