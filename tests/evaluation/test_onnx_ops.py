"""What a policy file may hold (evaluation/onnx_ops.py, issue 42 item 7, issue 58 item 1): every
graph the project writes or once wrote passes, and so do networks of the user's own exported by
``torch.onnx.export`` with either exporter (ConstantOfShape, Tanh, Softmax, Conv, ...); control
flow (a Loop can run 2^62 turns) is refused wherever it hides, as are custom domains, data in
another file and sparse constants too large once dense; bytes that are no protobuf are told
apart from a model."""

import warnings
from pathlib import Path

import onnx
import pytest
import torch

from tests.helpers.onnx_models import looping_model, preference_model, sparse_model
from ttt_research.env import game
from ttt_research.evaluation import onnx_graph
from ttt_research.evaluation.exact import decision_codes, decision_logits
from ttt_research.evaluation.onnx_ops import NotProtobuf, contents, operators, refused_operator
from ttt_research.evaluation.policy_file import PolicyFileError, load_onnx
from ttt_research.models.nets import MLP
from ttt_research.models.qtable import QTable

torch.set_num_threads(1)
COMMITTED = sorted((Path(__file__).parents[2] / "experiments").rglob("*.onnx"))
NETS = {"mlp-signed9": lambda: MLP([8], "signed9"), "mlp-planes18": lambda: MLP([8, 8], "planes18"),
        "qtable": QTable}


def torch_export(net, path: Path, dynamo: bool = False) -> Path:
    """``net`` as a user would export it: either of torch's exporters, the batch dimension free
    (the dynamo exporter's weights kept in the file: its default writes them beside it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        axes = {"dynamic_shapes": ({0: torch.export.Dim("N")},), "external_data": False} if dynamo else \
            {"dynamic_axes": {"board": {0: "N"}, "logits": {0: "N"}}, "opset_version": onnx_graph.OPSET}
        torch.onnx.export(net, (torch.zeros(2, 9),), str(path), dynamo=dynamo, input_names=["board"],
                          output_names=["logits"], **axes)
    return path


class MaskedMLP(torch.nn.Module):
    """The issue's network: an MLP masked with torch.where and full_like (ConstantOfShape)."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(9, 32), torch.nn.ReLU(), torch.nn.Linear(32, 9))

    def forward(self, board):
        logits = self.body(board)
        return torch.where(board == 0, logits, torch.full_like(logits, -1e9))


class SB3Actor(torch.nn.Module):
    """An SB3-style actor: a Tanh MLP (``policy_net``, ``action_net``), logits masked as
    MaskablePPO does (-1e8 on invalid actions)."""

    def __init__(self):
        super().__init__()
        self.policy_net = torch.nn.Sequential(torch.nn.Linear(9, 64), torch.nn.Tanh(),
                                              torch.nn.Linear(64, 64), torch.nn.Tanh())
        self.action_net = torch.nn.Linear(64, 9)

    def forward(self, board):
        logits = self.action_net(self.policy_net(board))
        return torch.where(board != 0, torch.tensor(-1e8), logits)


class Zoo(torch.nn.Module):
    """A network of the operators outside networks use: Conv, LayerNormalization, Tanh, Sub,
    Div, ReduceMax, Softmax, Log, Exp, ArgMax, Expand."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.norm = torch.nn.LayerNorm(36)
        self.out = torch.nn.Linear(36, 9)

    def forward(self, board):
        h = self.norm(self.conv(board.reshape(-1, 1, 3, 3)).flatten(1))
        z = self.out(torch.tanh(h))
        z = (z - z.amax(-1, keepdim=True)) / 2.0
        z = torch.log(torch.softmax(z, -1) + 1e-6) + torch.exp(z) * 0
        z = z + (torch.argmax(board, -1, keepdim=True).float() * 0).expand(-1, 9)
        return torch.where(board == 0, z, torch.full_like(z, -1e9))


OUTSIDE = {"masked-mlp": MaskedMLP, "sb3-actor": SB3Actor, "zoo": Zoo}


@pytest.mark.parametrize("name", sorted(NETS))
def test_the_projects_exports_and_torchs_use_no_refused_operator(tmp_path, name):
    ours = onnx_graph.model_bytes(NETS[name](), {})
    theirs = torch_export(NETS[name](), tmp_path / "t.onnx").read_bytes()
    for data in (ours, theirs):
        assert refused_operator(data) is None, sorted(set(operators(data)))
        expected = [n.op_type for n in onnx.load_from_string(data).graph.node]
        assert operators(data) == expected  # the wire reader sees what the onnx package sees


def test_the_committed_models_and_the_hand_built_ones_are_allowed(tmp_path):
    assert COMMITTED, "experiments/ holds the leaderboard's ONNX files"
    for path in [*COMMITTED, preference_model(list(range(9)), tmp_path / "p.onnx")]:
        assert refused_operator(path.read_bytes()) is None, path


def _loads_and_plays_as_torch(net, path):
    """The file loads (every check of policy_file) and its greedy moves are torch's."""
    policy, _ = load_onnx(path)
    legal = game.tables().legal[decision_codes()]
    views = game.tables().view[decision_codes()].float()
    with torch.no_grad():
        want = torch.where(legal, net(views), -torch.inf).argmax(-1)
    got = torch.where(legal, decision_logits(policy), -torch.inf).argmax(-1)
    assert torch.equal(got, want)


@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_an_outside_network_exported_by_torchscript_is_accepted(tmp_path, name):
    # Issue 58 item 1: before, the masked MLP was refused for 'ConstantOfShape', the others
    # for Tanh, Softmax, Conv, ...
    torch.manual_seed(0)
    net = OUTSIDE[name]().eval()
    path = torch_export(net, tmp_path / f"{name}.onnx")
    if name != "sb3-actor":
        assert "ConstantOfShape" in operators(path.read_bytes())
    _loads_and_plays_as_torch(net, path)


@pytest.mark.slow  # the dynamo exporter takes 3 to 10 s a network
@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_an_outside_network_exported_by_dynamo_is_accepted(tmp_path, name):
    pytest.importorskip("onnxscript", reason="torch's dynamo exporter needs onnxscript")
    torch.manual_seed(0)
    net = OUTSIDE[name]().eval()
    path = torch_export(net, tmp_path / f"{name}.onnx", dynamo=True)
    _loads_and_plays_as_torch(net, path)


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
    assert str(e.value) == (f"{path}: the model uses the ONNX operator 'Loop'; refused: a policy may not use "
                            "control flow (Loop, If, Scan: it could run without end) or a custom domain's "
                            "operators")


@pytest.mark.parametrize("op", ["Scan", "SequenceMap", "Identity"])
def test_every_node_that_carries_a_subgraph_is_refused(op):
    # Scan and SequenceMap run a body like Loop; any other node holding a graph is refused too.
    body = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["a"], ["b"])], "body", [], [])
    node = onnx.helper.make_node(op, ["x"], ["y"], body=body)
    data = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [], [])).SerializeToString()
    assert refused_operator(data) == op


def test_external_data_beside_the_model_is_read_into_it_and_elsewhere_refused(tmp_path):
    """torch.onnx.export's default since torch 2.9 (the dynamo exporter) writes the weights in
    NAME.onnx.data beside the file: found on a fresh clone, a user's plain export was refused. Now
    they are read into the model (every command and the page run one self-contained model); data
    in another folder, or more than a policy may use, is refused."""
    net = MaskedMLP()
    plain = torch_export(net, tmp_path / "plain.onnx")
    path = torch_export(net, tmp_path / "external.onnx")
    onnx.save(onnx.load(str(path)), str(path), save_as_external_data=True, location="external.onnx.data",
              size_threshold=0)
    assert (tmp_path / "external.onnx.data").stat().st_size > path.stat().st_size  # the weights moved out
    views = torch.eye(9)[:4] - torch.eye(9)[4:8]
    assert torch.equal(load_onnx(path)[0](views), load_onnx(plain)[0](views))
    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../elsewhere.data"
    (tmp_path.parent / "elsewhere.data").write_bytes((tmp_path / "external.onnx.data").read_bytes())
    onnx.save(model, str(tmp_path / "outside.onnx"))
    with pytest.raises(PolicyFileError) as e:
        load_onnx(tmp_path / "outside.onnx")
    assert "keeps its data in '../elsewhere.data', not a file beside the model; refused" in str(e.value)


def test_a_sparse_constant_too_large_once_dense_is_refused(tmp_path):
    # 500 million floats, one of them set: onnxruntime made them dense (2 GB) as it loaded.
    small = sparse_model(tmp_path / "sparse.onnx", 500_000_000)
    assert small.stat().st_size < 1000
    assert [t.nbytes for t in contents(small.read_bytes()).tensors if t.sparse] == [2_000_000_000]
    with pytest.raises(PolicyFileError) as e:
        load_onnx(small)
    assert str(e.value) == (f"{small}: sparse tensor 'values' is 1.9 GiB once dense; a policy may use "
                            "at most 1 GiB")


def test_a_custom_domain_is_named_and_bytes_that_are_no_protobuf_are_told_apart():
    node = onnx.helper.make_node("Gemm", ["a", "b"], ["c"], domain="com.example")
    graph = onnx.helper.make_graph([node], "g", [], [])
    assert refused_operator(onnx.helper.make_model(graph).SerializeToString()) == "com.example.Gemm"
    for garbage in (b"\x08\x07garbage", b"\x3a\xff\xff\xff\xff\x0f", b"\x80"):
        with pytest.raises(NotProtobuf):
            operators(garbage)
