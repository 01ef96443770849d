"""ONNX export of a greedy policy, with a parity check against onnxruntime.

The project's own networks (an ``MLP``, a ``QTable``) are written by ``onnx_graph`` as
protobuf bytes, without importing ``onnx`` or tracing the module; any other module goes
through torch's TorchScript exporter.

The exported graph follows the contract: input ``board`` float32 [N, cells] in the mover's
view (cells = m * n: 9 on tic-tac-toe), output ``logits`` float32 [N, cells] with occupied
cells masked; the network's own encoding (``planes18`` or ``signed9``) is inside the graph.
Metadata properties carry ``algo``, ``net``, ``seed``, ``games_trained`` and the ``eval.json``
summary, and, on a board other than tic-tac-toe, ``game`` = ``"m,n,k"`` (``GAME_KEY``; a file
without it is a 3,3,3 model, so every tic-tac-toe file, older or new, is as it always was,
byte for byte).

Parity: after writing the file we run it with onnxruntime on every position where
somebody is to move (4,520 on tic-tac-toe) and compare with torch: the largest absolute difference over the
unmasked logits is reported, and the greedy moves must be identical wherever torch's move is
not a near tie (``TIE``): two float32 computations of one graph round differently, and where
torch's best two empty cells are closer than that noise either may come first. Both sides'
logits must give every position a legal greedy move (``exact.check_logits``, strict: no NaN,
the argmax on an empty cell); otherwise nothing is written. The file is written through
``atomic.atomic_path``: a kill or a failed check leaves the old file or none, never a torn one.
A run writes its ``policy.onnx`` with it; ``python -m ttt_research.export`` exports a checkpoint.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import torch

from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.errors import UserError
from ttt_research.evaluation import onnx_graph
from ttt_research.evaluation.exact import (
    IllegalMoveError,
    board_text,
    check_logits,
    decision_codes,
)
from ttt_research.files.atomic import atomic_path

GAME_KEY = "game"  # the metadata naming a model's board, "m,n,k" (absent: 3,3,3)


class ExportError(UserError):
    """The export failed or its parity check did not hold."""


def game_metadata(game: Game) -> dict[str, str]:
    """The metadata that names ``game`` in a policy file: none for tic-tac-toe (its files stay
    what they were), ``{"game": "m,n,k"}`` for any other board."""
    return {} if game == TIC_TAC_TOE else {GAME_KEY: game.name}


def _write_graph(net: torch.nn.Module, path: Path, metadata: dict[str, str], cells: int) -> None:
    """The project's own networks as bytes written here (``onnx_graph``: no ``onnx`` import,
    no tracing); any other module through torch's exporter, its metadata added after."""
    if onnx_graph.supported(net):
        path.write_bytes(onnx_graph.model_bytes(net, metadata))
        return
    import onnx

    example = torch.zeros(2, cells)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The TorchScript-based exporter: dependency-free for a module that traces.
        torch.onnx.export(net, (example,), str(path), dynamo=False, input_names=["board"],
                          output_names=["logits"], opset_version=onnx_graph.OPSET,
                          dynamic_axes={"board": {0: "N"}, "logits": {0: "N"}})
    model = onnx.load(str(path))
    for key, value in metadata.items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value
    onnx.save(model, str(path))


def export(net: torch.nn.Module, path: str | Path, metadata: dict | None = None,
           game: Game = TIC_TAC_TOE) -> dict:
    """Write ``net`` (view -> masked logits) of ``game``'s board to ``path`` as ONNX,
    atomically, once its parity check holds; return the parity figures."""
    path = Path(path)
    net = net.to("cpu").eval()
    meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (metadata or {}).items()}
    meta |= game_metadata(game)
    with atomic_path(path) as tmp:  # renamed over ``path`` only if everything below succeeds
        _write_graph(net, tmp, meta, game.cells)
        return parity(net, tmp, name=path, game=game)


PARITY_ROWS = 1 << 18  # positions compared at a time (tic-tac-toe's 4,520: one block)
# A near tie: torch's best two empty cells closer than this times the logits' scale (the largest
# |logit| of the position's empty cells, at least 1), where float32's rounding grows with the
# numbers rounded. torch and onnxruntime round a network's sums in their own order: an
# mlp[256, 256] on 4,4,4 differed by up to 2.29e-05 (its moves at one near tie), ~200 float32
# steps at 1 (2^-23 each); 1e-4 is ~840 such steps, and a graph that computes something else
# moves a logit by far more. Those positions' moves are counted (``near_ties``), not compared.
TIE = 1e-4


def parity(net: torch.nn.Module, path: str | Path, name: str | Path | None = None,
           game: Game = TIC_TAC_TOE) -> dict:
    """Compare torch and onnxruntime on every decision position of ``game``; raise if moves
    differ where torch's is no near tie (``TIE``), or if either gives some position no legal
    greedy move. ``name``: the file to name in errors (``path`` may be its temporary file).
    Returns ``positions``, ``max_abs_diff`` (over the empty cells' logits), ``greedy_identical``,
    ``near_ties`` (positions not compared) and ``near_ties_differing`` (of them, with other moves)."""
    import onnxruntime as ort

    name = name or path
    t = game.tables()
    codes = decision_codes(game)
    # One thread, no spinning: 4,520 rows are a few ms of work, and onnxruntime's default pool
    # (a thread per core, spinning between runs) takes a core from whatever else runs.
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    max_diff, differing, near, near_differing, first = 0.0, 0, 0, 0, None
    # In blocks of rows: 4,4,4's 9,062,619 positions at once held 11 GB of activations, twice.
    for lo in range(0, codes.numel(), PARITY_ROWS):
        block = codes[lo:lo + PARITY_ROWS]
        views = t.view[block].float()  # (R, cells)
        with torch.no_grad():
            ref = net(views).float()
        if ref.shape != views.shape:
            raise ExportError(f"{name}: not written, the network gives {list(ref.shape[1:])} logits for a "
                              f"board of {game.cells} cells (game {game.name})")
        got = session.run(["logits"], {"board": views.numpy()})[0]
        for side, logits in (("the network", ref), ("the exported graph", torch.from_numpy(got))):
            try:
                check_logits(logits, block, strict=True, game=game)
            except IllegalMoveError as e:
                raise ExportError(f"{name}: not written, {side}: {e}") from None
        legal = t.legal[block]
        max_diff = max(max_diff, float(np.abs(np.where(legal.numpy(), ref.numpy() - got, 0.0)).max()))
        theirs = torch.from_numpy(got).argmax(-1)
        differ = ref.argmax(-1) != theirs  # (R,) the greedy moves (the strict check: on empty cells)
        tie = near_tie(ref, legal)
        wrong = differ & ~tie
        differing += int(wrong.sum())
        near += int(tie.sum())
        near_differing += int((differ & tie).sum())
        if first is None and bool(wrong.any()):
            row = int(wrong.nonzero()[0])
            first = (int(block[row]), int(ref[row].argmax()), int(theirs[row]))
    if differing:
        code, mine, theirs = first
        raise ExportError(f"{name}: onnxruntime's greedy moves differ from torch's at {differing} of "
                          f"{codes.numel()} positions (near ties aside), first at {board_text(code, game)}: "
                          f"torch plays cell {mine + 1}, onnxruntime {theirs + 1} "
                          f"(max |diff| {max_diff:.2e})")
    return {"positions": int(codes.numel()), "max_abs_diff": max_diff, "greedy_identical": True,
            "near_ties": near, "near_ties_differing": near_differing}


def near_tie(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """(R,) bool: the positions whose best two empty cells' (R, cells) ``logits`` are within
    ``TIE`` of their scale (the largest |logit| of an empty cell, at least 1); a position with one
    empty cell is never a tie."""
    masked = torch.where(legal, logits, -torch.inf)
    top = masked.topk(min(2, logits.shape[-1]), -1).values  # (R, 2)
    scale = torch.where(legal, logits.abs(), 0.0).amax(-1).clamp(min=1.0)
    return top[:, 0] - top[:, -1] <= TIE * scale
