"""What an ONNX file asks onnxruntime to do, read from its bytes before onnxruntime sees it.

A policy may use any operator of the standard set (``torch.onnx.export``'s ``ConstantOfShape``
and ``Expand``, an SB3 actor's ``Tanh``, ``Softmax``, ``Conv``, ``LayerNormalization``, ...), but
not control flow: a ``Loop`` with a trip count of 2^62 makes every command that runs the model
(``evaluate``, ``play``, ``tournament``, ``export --table``) never return, and nothing in
onnxruntime bounds it. So ``refused_operator`` names the first node that is control flow
(``CONTROL_FLOW``, or any node that holds a subgraph) or comes from a domain other than the
standard one (somebody's custom op, whose code we cannot know). Nodes are collected everywhere a
graph can hide one: the main graph, subgraphs held in attributes, model-local functions.

What a model may allocate is bounded at run time (``onnx_session``), but two things allocate
before it runs, outside that bound, and are read here (``tensors``): a sparse tensor, which
onnxruntime makes dense when it loads the model (100 bytes of file can declare gigabytes), and a
tensor whose data lies in another file (external data). Dense tensors are in the file itself
(onnxruntime checks that their data fits their shape).

The file is read with the protobuf wire format (field numbers of ``onnx.proto``), standard
library only: importing the ``onnx`` package costs about a second (``onnx_graph`` says why),
and the walk uses a work list, not recursion, so no nesting depth can overflow the stack.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

# Standard operators that run a subgraph: a Loop or Scan any number of turns, an If or a
# SequenceMap whichever branch or body they carry.
CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})
DOMAINS = ("", "ai.onnx")  # the standard operator set; any other domain is somebody's custom op

# onnx.proto field numbers: ModelProto.graph and .functions, GraphProto.node, .initializer and
# .sparse_initializer, NodeProto.op_type, .attribute and .domain, AttributeProto.t, .g,
# .tensors, .graphs, .sparse_tensor and .sparse_tensors, FunctionProto.node, TensorProto.dims,
# .data_type, .name, .external_data and .data_location, SparseTensorProto.values and .dims.
MODEL_GRAPH, MODEL_FUNCTIONS = 7, 25
GRAPH_NODE, GRAPH_INITIALIZER, GRAPH_SPARSE = 1, 5, 15
NODE_OP_TYPE, NODE_ATTRIBUTE, NODE_DOMAIN = 4, 5, 7
ATTRIBUTE_TENSOR, ATTRIBUTE_GRAPH, ATTRIBUTE_TENSORS, ATTRIBUTE_GRAPHS = 5, 6, 10, 11
ATTRIBUTE_SPARSE, ATTRIBUTE_SPARSES = 22, 23
FUNCTION_NODE = 7
TENSOR_DIMS, TENSOR_TYPE, TENSOR_NAME, TENSOR_EXTERNAL, TENSOR_LOCATION = 1, 2, 8, 13, 14
SPARSE_VALUES, SPARSE_DIMS = 1, 3
EXTERNAL = 1  # TensorProto.DataLocation
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5  # wire types (3 and 4, groups, are not in ONNX)
# Bytes per element of TensorProto.DataType (8, strings, and any unknown type: 8, an upper bound
# for the types that have one).
ELEMENT_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8,
                 15: 16, 16: 2, 17: 1, 18: 1, 19: 1, 20: 1, 21: 1, 22: 1, 23: 1, 25: 1, 26: 1}


class NotProtobuf(ValueError):
    """Bytes that are no protobuf message: the caller says the file is no ONNX model."""


@dataclass(frozen=True)
class Tensor:
    """A constant tensor of the model: an initializer or a node's attribute."""

    name: str
    nbytes: int  # declared by its shape and type (for a sparse one: once made dense)
    sparse: bool
    external: bool  # its data lies in another file


def _varint(data: memoryview, i: int) -> tuple[int, int]:
    """The varint at ``data[i]`` and the index after it."""
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise NotProtobuf("a varint runs past the end")
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if byte < 0x80:
            return value, i


def _fields(data: memoryview) -> list[tuple[int, int | memoryview]]:
    """(field number, value) of each field of the message ``data``, in file order: an int for
    a varint, the bytes of a length-delimited field; fixed-width fields are skipped."""
    found, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == VARINT:
            value, i = _varint(data, i)
            found.append((field, value))
        elif wire in (FIXED64, FIXED32):
            i += 8 if wire == FIXED64 else 4
        elif wire == LENGTH:
            size, i = _varint(data, i)
            found.append((field, data[i:i + size]))
            i += size
        else:
            raise NotProtobuf(f"wire type {wire} of field {field}")
        if i > len(data):
            raise NotProtobuf(f"field {field} runs past the end")
    return found


def _messages(data: memoryview, wanted: dict[int, str]) -> list[tuple[str, memoryview]]:
    """(name, bytes) of each length-delimited field of ``data`` whose number is in ``wanted``."""
    return [(wanted[f], v) for f, v in _fields(data) if f in wanted and isinstance(v, memoryview)]


def _ints(values: list[int | memoryview]) -> list[int]:
    """A repeated int64 field, written packed (one length-delimited run) or one by one."""
    out = []
    for v in values:
        if isinstance(v, int):
            out.append(v)
        else:
            i = 0
            while i < len(v):
                n, i = _varint(v, i)
                out.append(n)
    return [n - (1 << 64) if n >= 1 << 63 else n for n in out]  # int64: two's complement


def _text(v: int | memoryview) -> str:
    return bytes(v).decode("utf-8", "replace") if isinstance(v, memoryview) else ""


def _tensor(part: memoryview, sparse: bool) -> Tensor:
    """A TensorProto, or a SparseTensorProto (its values' name and type, its dense dims)."""
    fields = _fields(part)
    values = next((v for f, v in fields if f == SPARSE_VALUES and isinstance(v, memoryview)),
                  memoryview(b"")) if sparse else part
    inner = _fields(values)
    shape, dims_field = (fields, SPARSE_DIMS) if sparse else (inner, TENSOR_DIMS)
    dims = _ints([v for f, v in shape if f == dims_field])
    kind = next((v for f, v in inner if f == TENSOR_TYPE and isinstance(v, int)), 0)
    elements = 1
    for d in dims:
        elements *= abs(d)
    external = any(f == TENSOR_EXTERNAL for f, _ in inner) or any(
        f == TENSOR_LOCATION and v == EXTERNAL for f, v in inner)
    name = next((_text(v) for f, v in inner if f == TENSOR_NAME), "")
    return Tensor(name, elements * ELEMENT_BYTES.get(kind, 8), sparse, external)


@dataclass(frozen=True)
class Contents:
    """What a model holds: its nodes' operators (``op_type``, ``domain.op_type`` outside the
    standard set; main graph first, then subgraphs and functions as found), those of nodes that
    carry a subgraph or come from another domain, and its constant tensors."""

    operators: list[str]
    refused: list[str]
    tensors: list[Tensor]


def contents(data: bytes) -> Contents:
    """The operators and tensors of the ONNX model ``data``; ``NotProtobuf`` if the bytes are
    not a protobuf message."""
    todo = deque(_messages(memoryview(data), {MODEL_GRAPH: "graph", MODEL_FUNCTIONS: "function"}))
    ops, refused, tensors = [], [], []
    while todo:  # breadth first: the main graph's nodes come first
        kind, part = todo.popleft()
        if kind == "graph":
            todo += _messages(part, {GRAPH_NODE: "node", GRAPH_INITIALIZER: "tensor", GRAPH_SPARSE: "sparse"})
        elif kind == "function":
            todo += _messages(part, {FUNCTION_NODE: "node"})
        elif kind in ("tensor", "sparse"):
            tensors.append(_tensor(part, kind == "sparse"))
        elif kind == "node":
            fields = _messages(part, {NODE_OP_TYPE: "op", NODE_DOMAIN: "domain", NODE_ATTRIBUTE: "attribute"})
            text = {k: _text(v) for k, v in fields if k != "attribute"}
            domain, op = text.get("domain", ""), text.get("op", "")
            op = op if domain in DOMAINS else f"{domain}.{op}"
            ops.append(op)
            if op in CONTROL_FLOW or domain not in DOMAINS:
                refused.append(op)
            for _, attribute in (f for f in fields if f[0] == "attribute"):
                held = _messages(attribute, {ATTRIBUTE_GRAPH: "graph", ATTRIBUTE_GRAPHS: "graph",
                                             ATTRIBUTE_TENSOR: "tensor", ATTRIBUTE_TENSORS: "tensor",
                                             ATTRIBUTE_SPARSE: "sparse", ATTRIBUTE_SPARSES: "sparse"})
                if any(k == "graph" for k, _ in held) and op not in refused:  # Loop's body, If's branches
                    refused.append(op)
                todo += held
    return Contents(ops, refused, tensors)


def operators(data: bytes) -> list[str]:
    """Every node's operator in the ONNX model ``data`` (``Contents.operators``)."""
    return contents(data).operators


def refused_operator(data: bytes | Contents) -> str | None:
    """The first operator of ``data`` that is control flow or a custom domain's, or None."""
    found = data if isinstance(data, Contents) else contents(data)
    return found.refused[0] if found.refused else None
