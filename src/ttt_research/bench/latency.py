"""``move_latency_ms``: one greedy move for one board with the flagship's network, in torch and
in onnxruntime (the bench's figure; its definition is in the bench's docstring)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from ttt_research.evaluation.onnx import export
from ttt_research.models.nets import MLP


def bench_latency(repeats: int, calls: int = 2000) -> dict:
    """Median time of one greedy move for one board, torch and onnxruntime, in ms."""
    import onnxruntime as ort  # the `onnx` extra

    net = MLP([128, 128], "signed9").eval()
    board = torch.zeros(1, 9)
    board[0, 4] = -1.0  # a position after the opponent took the centre

    def per_call(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - start) / calls * 1e3)
        return statistics.median(times)

    with torch.inference_mode():
        torch_ms = per_call(lambda: int(net(board).argmax(-1)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy.onnx"
        export(net, path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1  # one board: threads only cost
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        x = board.numpy()
        ort_ms = per_call(lambda: int(np.argmax(session.run(None, {"board": x})[0])))
    return {"move_latency_ms": {"torch": torch_ms, "onnxruntime": ort_ms}}
