"""Which operators an ONNX file runs, read from its bytes before onnxruntime sees it.

A policy is a dozen element-wise and matrix nodes, yet ONNX also has control flow: a ``Loop``
with a trip count of 2^62 makes every command that runs the model (``evaluate``, ``play``,
``tournament``, ``export --table``) never return, and nothing in onnxruntime bounds it. So a
policy file may use only ``OPERATORS``: what the project's own exports write
(``onnx_graph``), what ``torch.onnx.export`` writes for the project's networks (an ``MLP`` of
either encoding, a ``QTable``: adds ``Constant``, ``Not``, ``Shape``, ``Slice``, as in the
committed files of ``experiments/``), and the element-wise ``Abs`` and ``Mul`` of hand-built
policies (the tests' ``preference_model``). Nodes are collected everywhere a graph can hide
one: the main graph, subgraphs held in attributes, model-local functions.

The file is read with the protobuf wire format (field numbers of ``onnx.proto``), standard
library only: importing the ``onnx`` package costs about a second (``onnx_graph`` says why),
and the walk uses a work list, not recursion, so no nesting depth can overflow the stack.
"""
from __future__ import annotations

from collections import deque

OPERATORS = frozenset({
    "Add", "Cast", "Clip", "Concat", "Constant", "Equal", "Gather", "Gemm", "Greater", "Less",
    "MatMul", "Not", "Relu", "Reshape", "Round", "Shape", "Slice", "Unsqueeze", "Where",  # exports
    "Abs", "Mul",  # hand-built element-wise policies
})
DOMAINS = ("", "ai.onnx")  # the standard operator set; any other domain is somebody's custom op

# onnx.proto field numbers: ModelProto.graph and .functions, GraphProto.node, NodeProto.op_type,
# .attribute and .domain, AttributeProto.g and .graphs, FunctionProto.node.
MODEL_GRAPH, MODEL_FUNCTIONS = 7, 25
GRAPH_NODE = 1
NODE_OP_TYPE, NODE_ATTRIBUTE, NODE_DOMAIN = 4, 5, 7
ATTRIBUTE_GRAPH, ATTRIBUTE_GRAPHS = 6, 11
FUNCTION_NODE = 7
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5  # wire types (3 and 4, groups, are not in ONNX)


class NotProtobuf(ValueError):
    """Bytes that are no protobuf message: the caller says the file is no ONNX model."""


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


def _messages(data: memoryview, wanted: dict[int, str]) -> list[tuple[str, memoryview]]:
    """(name, bytes) of each length-delimited field of the message ``data`` whose number is
    in ``wanted`` (named there), in file order; every other field is skipped."""
    found, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == VARINT:
            _, i = _varint(data, i)
        elif wire in (FIXED64, FIXED32):
            i += 8 if wire == FIXED64 else 4
        elif wire == LENGTH:
            size, i = _varint(data, i)
            if field in wanted:
                found.append((wanted[field], data[i:i + size]))
            i += size
        else:
            raise NotProtobuf(f"wire type {wire} of field {field}")
        if i > len(data):
            raise NotProtobuf(f"field {field} runs past the end")
    return found


def operators(data: bytes) -> list[str]:
    """Every node's operator in the ONNX model ``data``, as ``op_type`` (``domain.op_type``
    outside the standard set): main graph first, then subgraphs and functions as found.
    ``NotProtobuf`` if the bytes are not a protobuf message."""
    todo = deque(_messages(memoryview(data), {MODEL_GRAPH: "graph", MODEL_FUNCTIONS: "function"}))
    ops = []
    while todo:  # breadth first: the main graph's nodes come first
        kind, part = todo.popleft()
        if kind == "graph":
            todo += _messages(part, {GRAPH_NODE: "node"})
        elif kind == "function":
            todo += _messages(part, {FUNCTION_NODE: "node"})
        elif kind == "node":
            fields = _messages(part, {NODE_OP_TYPE: "op", NODE_DOMAIN: "domain", NODE_ATTRIBUTE: "attribute"})
            text = {k: bytes(v).decode("utf-8", "replace") for k, v in fields if k != "attribute"}
            domain, op = text.get("domain", ""), text.get("op", "")
            ops.append(op if domain in DOMAINS else f"{domain}.{op}")
            todo += [(k, v) for k, v in fields if k == "attribute"]
        else:  # an attribute: the graphs it holds (Loop's body, If's branches, Scan's body)
            todo += _messages(part, {ATTRIBUTE_GRAPH: "graph", ATTRIBUTE_GRAPHS: "graph"})
    return ops


def refused_operator(data: bytes) -> str | None:
    """The first operator of ``data`` outside ``OPERATORS``, or None when every one is allowed."""
    return next((op for op in operators(data) if op not in OPERATORS), None)
