"""Load a trained policy from a file, with one-line errors for bad files.

A policy file is either an ONNX model that follows the contract (input ``board`` float32
``[N, 9]`` in the mover's view, output ``logits`` float32 ``[N, 9]``) or a Lightning
checkpoint written by training (``.ckpt``: the network's weights plus ``net_spec``, what it
takes to rebuild the network). Loading returns a batched logits function
(``evaluate.PolicyFn``) and metadata. Anything wrong with the file raises
``PolicyFileError`` whose message is the one line a user sees.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import torch

from .cli import UserError


class PolicyFileError(UserError):
    """A policy file is missing, unreadable or does not follow the contract."""


def _unreadable(e: Exception) -> str:
    """torch.load's error, as a few words a user can act on (its own messages run to
    paragraphs, with terminal colour codes)."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    code = re.search(r"(?:Unsupported global: |unsupported )GLOBAL ([\w.]+)", text)
    if code:  # weights_only=True stopped a pickle that would import (and could run) code
        return f"it asks to load the Python object {code.group(1)}; refused, a checkpoint holds tensors only"
    if isinstance(e, EOFError | OSError) or "zip archive" in text or "central directory" in text:
        return "empty, truncated or not a PyTorch file"
    if isinstance(e, KeyError) or "Weights only load failed" in text:
        return "not a PyTorch checkpoint"
    first = (text.strip().splitlines() or [type(e).__name__])[0]
    return first[:160]


def _check_io(name: str, arg, kind: str) -> None:
    """The contract: float32 with a last dimension of 9 and a free (or any) batch dimension."""
    shape = list(arg.shape)
    if arg.type != "tensor(float)" or len(shape) != 2 or shape[1] != 9:
        raise PolicyFileError(
            f"{name}: model {kind} {arg.name!r} is {arg.type} {shape}; "
            f"the contract wants float32 [N, 9]"
        )


def load_onnx(path: str | Path):
    """(logits_fn, metadata) for an ONNX policy file; ``PolicyFileError`` if it is not one."""
    import onnxruntime as ort

    path = Path(path)
    if not path.is_file():
        raise PolicyFileError(f"{path}: no such file")
    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # errors come back to us as exceptions, not log spam
    try:
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises several private exception types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PolicyFileError(f"{path}: not a valid ONNX model ({first[:160]})") from None
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1:
        raise PolicyFileError(f"{path}: model has {len(inputs)} inputs; the contract wants one, 'board'")
    _check_io(str(path), inputs[0], "input")
    _check_io(str(path), outputs[0], "output")
    in_name, out_name = inputs[0].name, outputs[0].name

    def logits(view: torch.Tensor) -> torch.Tensor:
        x = view.detach().cpu().numpy().astype(np.float32)
        try:
            out = session.run([out_name], {in_name: x})[0]
        except Exception as e:
            raise PolicyFileError(
                f"{path}: the model failed to run on a [N, 9] batch ({str(e)[:160]})") from None
        if out.shape != x.shape:
            raise PolicyFileError(
                f"{path}: model output has shape {list(out.shape)}, expected {list(x.shape)}")
        if np.isnan(out).any():  # masked cells may be -inf, but NaN has no greedy move
            raise PolicyFileError(f"{path}: the model returns NaN logits")
        return torch.from_numpy(out)

    meta = dict(session.get_modelmeta().custom_metadata_map)
    return logits, meta


def load_checkpoint(path: str | Path):
    """(net, metadata) from a training checkpoint; ``PolicyFileError`` if it is not one."""
    from .nets import MLP

    path = Path(path)
    if not path.is_file():
        raise PolicyFileError(f"{path}: no such file")
    try:
        with warnings.catch_warnings():  # torch warns about odd pickles; the error line says it
            warnings.simplefilter("ignore")
            ckpt = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:
        raise PolicyFileError(f"{path}: not a readable checkpoint ({_unreadable(e)})") from None
    if not isinstance(ckpt, dict) or "net_spec" not in ckpt or "state_dict" not in ckpt:
        raise PolicyFileError(f"{path}: not a ttt_research checkpoint (no network description)")
    if "population" in ckpt:  # many agents' weights stacked: no single policy to load
        shares = [s["population"] for s in ckpt.get("member_shards") or [ckpt]]  # trainer=ddp: one a process
        n = sum(len(s["member_games"]) for s in shares)
        raise PolicyFileError(
            f"{path}: a population's checkpoint ({n} members in this file): use a member's "
            "policy.onnx (the run folder's is its best member's; population.export=all writes "
            "every member's under members/NNN/)")
    spec = ckpt["net_spec"]
    weights = {k[len("net."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("net.")}
    try:
        net = MLP(hidden=spec["hidden"], encoding=spec["encoding"])
        net.load_state_dict(weights)
    except Exception as e:
        why = " ".join(str(e).split())  # one line: torch's message spans several
        raise PolicyFileError(f"{path}: checkpoint weights do not fit its network ({why[:160]})") from None
    if not all(bool(torch.isfinite(w).all()) for w in weights.values()):  # e.g. a diverged run
        raise PolicyFileError(f"{path}: checkpoint weights are not all finite (NaN or infinite)")
    hp = ckpt.get("hyper_parameters", {})
    meta = {
        "algo": str(ckpt.get("algo", hp.get("algo", ""))),
        "net": json.dumps(spec),
        "seed": str(hp.get("seed", "")),
        "games_trained": str(ckpt.get("games_played", "")),
    }
    return net.eval(), meta


def load_policy(path: str | Path):
    """(logits_fn, metadata) for a policy file, chosen by its suffix (.onnx or .ckpt)."""
    path = Path(path)
    if path.suffix == ".ckpt":
        net, meta = load_checkpoint(path)

        def logits(view: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return net(view)

        return logits, meta
    if path.suffix == ".onnx" or not path.suffix:
        return load_onnx(path)
    raise PolicyFileError(f"{path}: unknown policy file type {path.suffix!r} (expected .onnx or .ckpt)")
