"""The operators a policy file may use (evaluation/onnx_ops.py, issue 42 item 7): every graph
the project writes or once wrote passes, a Loop (which can run 2^62 turns) is refused wherever
it hides, and bytes that are no protobuf are told apart from a model."""

import warnings
from pathlib import Path

import onnx
import pytest
import torch

from tests.helpers.onnx_models import looping_model, preference_model
from ttt_research.evaluation import onnx_graph
from ttt_research.evaluation.onnx_ops import OPERATORS, NotProtobuf, operators, refused_operator
from ttt_research.evaluation.policy_file import PolicyFileError, load_onnx
from ttt_research.models.nets import MLP
from ttt_research.models.qtable import QTable

torch.set_num_threads(1)
COMMITTED = sorted((Path(__file__).parents[2] / "experiments").rglob("*.onnx"))
NETS = {"mlp-signed9": lambda: MLP([8], "signed9"), "mlp-planes18": lambda: MLP([8, 8], "planes18"),
        "qtable": QTable}


def torch_export(net, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(2, 9),), str(path), dynamo=False, input_names=["board"],
                          output_names=["logits"], opset_version=onnx_graph.OPSET,
                          dynamic_axes={"board": {0: "N"}, "logits": {0: "N"}})
    return path


@pytest.mark.parametrize("name", sorted(NETS))
def test_the_projects_exports_and_torchs_use_only_allowed_operators(tmp_path, name):
    ours = onnx_graph.model_bytes(NETS[name](), {})
    theirs = torch_export(NETS[name](), tmp_path / "t.onnx").read_bytes()
    for data in (ours, theirs):
        assert refused_operator(data) is None, sorted(set(operators(data)))
        expected = [n.op_type for n in onnx.load_from_string(data).graph.node]
        assert operators(data) == expected  # the wire reader sees what the onnx package sees


def test_the_committed_models_and_the_hand_built_ones_are_allowed(tmp_path):
    assert COMMITTED, "experiments/ holds the leaderboard's ONNX files"
    for path in [*COMMITTED, preference_model(list(range(9)), tmp_path / "p.onnx")]:
        assert set(operators(path.read_bytes())) <= OPERATORS, path


@pytest.mark.parametrize("nested,expected", [(False, ["Loop", "Identity", "Identity"]),
                                             (True, ["If", "Loop", "Loop", "Identity", "Identity"])])
def test_a_loop_is_found_in_the_graph_and_inside_a_branch(tmp_path, nested, expected):
    data = looping_model(tmp_path / "loop.onnx", nested=nested).read_bytes()
    assert operators(data)[:len(expected)] == expected
    assert refused_operator(data) == expected[0]


def test_loading_a_looping_model_is_one_line_naming_file_and_operator(tmp_path):
    path = looping_model(tmp_path / "loop.onnx")
    with pytest.raises(PolicyFileError) as e:
        load_onnx(path)  # before: onnxruntime ran 2^62 turns, and this never returned
    assert str(e.value) == (f"{path}: the model uses the ONNX operator 'Loop', which no policy export of "
                            "this project writes; refused (a Loop or If could run without end)")


def test_a_custom_domain_is_named_and_bytes_that_are_no_protobuf_are_told_apart():
    node = onnx.helper.make_node("Gemm", ["a", "b"], ["c"], domain="com.example")
    graph = onnx.helper.make_graph([node], "g", [], [])
    assert refused_operator(onnx.helper.make_model(graph).SerializeToString()) == "com.example.Gemm"
    for garbage in (b"\x08\x07garbage", b"\x3a\xff\xff\xff\xff\x0f", b"\x80"):
        with pytest.raises(NotProtobuf):
            operators(garbage)
