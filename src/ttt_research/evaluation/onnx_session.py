"""An onnxruntime session for a policy file somebody else may have written, with a bound on
what the model may allocate while it runs.

A model's constants are in its file, but the tensors it makes at run time are not: a
``ConstantOfShape``, ``Expand``, ``Tile``, ``Range`` or ``Resize`` whose shape is computed from
the board can ask for gigabytes, and the process is killed for memory instead of saying why.
Every tensor a session of ``session`` makes comes from one onnxruntime arena, registered once
per process, that refuses to grow past ``MAX_BYTES``: the request fails with an exception,
which ``refusal`` turns into one line. Constant folding, which evaluates constant subgraphs
while the session is built (up to 1 GiB each, outside the arena), is switched off; a policy's
graph is a few nodes, and the arena then sees every tensor. ``onnx_ops`` reads what allocates
before the model runs (a sparse tensor made dense, data in another file).

Measured (2026-12, onnxruntime 1.32, a 9-node model whose ``ConstantOfShape`` asks for 2 GiB):
without the bound the process peaked at 2.2 GB of resident memory; with it, 0.07 GB and a
refusal in 4 ms. The project's networks need a few MB of it (``mlp128`` on 4,520 boards: two
activations of 4,520 x 128 floats, 2.3 MB each).
"""
from __future__ import annotations

import re
import threading

MAX_BYTES = 1 << 30  # what one process's policies may allocate while they run: 1 GiB
ENV_ALLOCATORS = "session.use_env_allocators"
_registered = threading.Lock()
_done: list[bool] = []


def _register_arena(ort) -> None:
    """The process-wide arena of at most ``MAX_BYTES`` (once: onnxruntime keeps one per device)."""
    with _registered:
        if _done:
            return
        info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
        # extend strategy 1, kSameAsRequested: the arena grows by what is asked, not to the next
        # power of two, so a legitimate request near the bound is not refused for the rounding.
        ort.create_and_register_allocator(info, ort.OrtArenaCfg(MAX_BYTES, 1, -1, -1))
        _done.append(True)


def session(data: bytes, threads: int | None = None):
    """An ``onnxruntime.InferenceSession`` of the model ``data`` whose run-time tensors come
    from the bounded arena; ``threads``: its intra-op threads (default: onnxruntime's)."""
    import onnxruntime as ort

    _register_arena(ort)
    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # errors come back to us as exceptions, not log spam
    opts.add_session_config_entry(ENV_ALLOCATORS, "1")
    if threads is not None:
        opts.intra_op_num_threads = threads
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["ConstantFolding"])


def refusal(e: Exception) -> str | None:
    """What a run that the arena stopped asked for, as a few words ("asked for 2.0 GiB in its
    ConstantOfShape node, beyond the 1 GiB a policy may use while it runs"), or None when
    ``e`` is some other failure."""
    text = str(e)
    asked = re.search(r"requested bytes of (\d+)|buffer of size (\d+)", text)
    if asked is None:
        return None
    size = int(asked.group(1) or asked.group(2))
    node = re.search(r"running (\w+) node", text)
    amount = f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"
    at = f" in its {node.group(1)} node" if node else ""
    return f"asked for {amount}{at}, beyond the {MAX_BYTES / 2**30:g} GiB a policy may use while it runs"
