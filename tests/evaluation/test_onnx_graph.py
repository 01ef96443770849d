"""The ONNX files written without torch's exporter (``evaluation/onnx_graph.py``) are valid
models by the ``onnx`` package's own checker, compute what the torch module computes and
what torch's exporter writes, and carry their metadata; other modules still export."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from ttt_research.evaluation import onnx_graph
from ttt_research.evaluation.onnx import export
from ttt_research.models.nets import MLP
from ttt_research.models.qtable import QTable


def _nets():
    torch.manual_seed(3)
    table = QTable()
    with torch.no_grad():
        table.q.normal_()
    return {"signed9 128x128": MLP([128, 128], "signed9"), "planes18 100": MLP([100], "planes18"),
            "planes18 25x25 uniform": MLP([25, 25], "planes18", init="uniform"), "table": table}


NETS = _nets()


def _run(path, boards: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["logits"], {"board": boards})[0]


def _boards(n: int = 3000) -> np.ndarray:
    """Every kind of cell value a board may hold, positions or not (a full board, nine own
    pieces): the graph is a function of the (N, 9) input, whatever it holds."""
    return np.random.default_rng(0).integers(-1, 2, size=(n, 9)).astype(np.float32)


@pytest.mark.parametrize("name", list(NETS))
def test_the_written_graph_passes_onnx_checker_and_computes_the_module(name, tmp_path):
    net = NETS[name]
    assert onnx_graph.supported(net)
    meta = {"algo": "ppo", "eval": json.dumps({"é": 1.5}), "seed": "7"}
    figures = export(net, tmp_path / "p.onnx", meta)
    assert figures["greedy_identical"] and figures["positions"] == 4520
    model = onnx.load(str(tmp_path / "p.onnx"))
    onnx.checker.check_model(model, full_check=True)  # types and shapes inferred end to end
    assert {p.key: p.value for p in model.metadata_props} == meta
    assert [i.name for i in model.graph.input] == ["board"]
    assert [o.name for o in model.graph.output] == ["logits"]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    boards = _boards()
    got = _run(tmp_path / "p.onnx", boards)
    with torch.no_grad():
        want = net(torch.from_numpy(boards)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (got[boards != 0] == -1e9).all()


# torch's TorchScript-based exporter is the reference here, on purpose (as in evaluation/onnx.py,
# which silences it too): its deprecation notices are torch's news, not this test's failure.
@pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript-based ONNX:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:The feature will be removed:DeprecationWarning")
@pytest.mark.parametrize("name", list(NETS))
def test_the_written_graph_computes_what_torchs_exporter_writes(name, tmp_path):
    net = NETS[name].eval()
    ours = tmp_path / "ours.onnx"
    ours.write_bytes(onnx_graph.model_bytes(net))
    theirs = tmp_path / "torch.onnx"
    torch.onnx.export(net, (torch.zeros(2, 9),), str(theirs), dynamo=False, input_names=["board"],
                      output_names=["logits"], opset_version=17,
                      dynamic_axes={"board": {0: "N"}, "logits": {0: "N"}})
    boards = _boards(500)
    np.testing.assert_allclose(_run(ours, boards), _run(theirs, boards), rtol=1e-5, atol=1e-5)


def test_a_module_of_another_class_goes_through_torchs_exporter(tmp_path):
    class Shifted(MLP):  # a subclass may compute something else: its own forward is traced
        def forward(self, view):
            return super().forward(view) + 1.0

    torch.manual_seed(0)
    net = Shifted([16], "signed9")
    assert not onnx_graph.supported(net)
    export(net, tmp_path / "s.onnx", {"algo": "mine"})
    boards = _boards(200)
    with torch.no_grad():
        want = net(torch.from_numpy(boards)).numpy()
    np.testing.assert_allclose(_run(tmp_path / "s.onnx", boards), want, rtol=1e-5, atol=1e-4)
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "s.onnx")).metadata_props}
    assert meta == {"algo": "mine"}


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 2**31, 2**63 - 1, -1, -(2**63)])
def test_varints_read_back_as_protobuf_reads_them(n):
    # An int64 attribute, read back by onnx's own protobuf parser.
    attr = onnx.AttributeProto()
    attr.ParseFromString(onnx_graph._bytes(1, "k") + onnx_graph._int(3, n) + onnx_graph._int(20, 2))
    assert (attr.name, attr.i, attr.type) == ("k", n, onnx.AttributeProto.INT)
