"""Load a trained policy from a file, with one-line errors for bad files.

A policy file is either an ONNX model that follows the contract (input ``board`` float32
``[N, cells]`` in the mover's view, output ``logits`` float32 ``[N, cells]``, cells = m * n of
the board its ``game`` metadata names, ``"m,n,k"``; a file without it is a tic-tac-toe model,
9 cells: ``game_of``) or a Lightning
checkpoint written by training (``.ckpt``: the network's weights plus ``net_spec``, what it
takes to rebuild the network: an MLP's sizes, or a Q-table's ``{"table": "q"}``). Loading
returns a batched logits function (``exact.PolicyFn``) and metadata. Anything wrong with the file raises
``PolicyFileError`` whose message is the one line a user sees.

An ONNX file may use any operator of the standard set but control flow and custom domains
(``onnx_ops``): no ``Loop`` or ``If`` that could run without end. What it allocates is bounded
(``onnx_session``: a run-time arena of 1 GiB; no sparse tensor that would be larger once dense,
no data in another file). Every loaded policy is run once on all the positions of its board
where somebody moves (4,520 on tic-tac-toe) and checked with the strict rule of
``exact.check_logits`` (no NaN, the argmax on an empty cell, a finite largest logit), so that
no command scores, plays or exports a policy that picks an occupied cell anywhere; and a sample
of those boards is run again, alone and as one batch (``SAMPLE``), and must get the greedy
moves of the whole batch: a model that plays one policy when scored (a batch of 4,520) and
another when playing (a board at a time) is refused, so the figures describe what plays. A
checkpoint's board and network are read and checked by ``checkpoint_file`` (its spec and
weights against its board, before it is built), then the network is checked as an ONNX model's,
on that board's positions.

A run folder stands for its ``policy.onnx`` (``run_policy``). ``load_probs`` turns a file's
logits into the move probabilities the exact evaluator of stochastic policies scores
(``exploit.policy_report``): greedy, at a temperature with epsilon mixed in, or as its
training played (the ``acting`` metadata); ``add_acting_args`` are those options on a command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.errors import IllegalMoveError, UserError
from ttt_research.evaluation import onnx_session
from ttt_research.evaluation.checkpoint_file import (  # noqa: F401 (PolicyFileError, game_of: their names here too)
    MAX_LAYERS,
    MAX_WIDTH,
    PolicyFileError,
    check_weights,
    checkpoint_game,
    game_of,
    is_table,
    read_checkpoint,
)
from ttt_research.evaluation.exact import board_text, check_policy, decision_codes
from ttt_research.evaluation.exploit import Acting, logits_to_probs
from ttt_research.evaluation.onnx import game_metadata
from ttt_research.evaluation.onnx_ops import NotProtobuf, contents, refused_operator
from ttt_research.evaluation.options import add_acting_args  # noqa: F401 (the options of acting_for)
from ttt_research.models.nets import MLP
from ttt_research.models.qtable import QTable

RUN_POLICY = "policy.onnx"  # a run folder's policy file
# Boards of the batch check: every 45th of the 4,520 decision positions, each run alone, and
# all of them as one batch (~100 runs of one board: a few ms for the project's networks).
SAMPLE = 101
# Decision positions ``played`` runs one at a time: every one up to this many (3x3's 4,520 in
# ~0.1 s); beyond it (3,4,3's 79,563 would take ~2.5 s, 4,4,4's 9.1M minutes) this many of
# them, evenly spaced, so that play starts in seconds on any board (~0.6 s on this 2-core host).
ALONE_MAX = 20_000
# Logits closer than this (relative to the largest) are a tie: batched matrix kernels may round
# differently from one-row ones, and a near-tie may then break the other way.
TIE = 1e-5


def _checked(path: Path, logits, game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """The strict check of every decision position (``exact.check_logits``), as a
    ``PolicyFileError`` that names the file; returns the (M, cells) logits."""
    try:
        return check_policy(logits, where=f"{path}: ", strict=True, game=game)
    except IllegalMoveError as e:
        raise PolicyFileError(str(e)) from None


def _greedy_differs(got: torch.Tensor, whole: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """(B,) whether two runs' logits of the same boards pick different legal cells, beyond a
    tie (``TIE``, relative to the largest legal logit) in either run; a NaN is no tie."""
    a = torch.where(legal, got, -torch.inf).argmax(-1)
    b = torch.where(legal, whole, -torch.inf).argmax(-1)
    moves = torch.stack([a, b], -1)

    def tied(x: torch.Tensor) -> torch.Tensor:
        pick = x.gather(-1, moves)
        scale = torch.where(legal, x.abs(), 0.0).amax(-1).clamp(min=1.0)
        return (pick[:, 0] - pick[:, 1]).abs() / scale <= TIE

    return (a != b) & ~(tied(got) & tied(whole))


def _batch_free(path: Path, logits, batched: torch.Tensor, played: bool = False,
                game: Game = TIC_TAC_TOE) -> None:
    """Refuse a model whose greedy move on a board depends on the batch it comes in: the
    ``SAMPLE`` boards, each alone and all as one batch, against ``batched``, the (M, cells) logits
    of every decision position in one batch (what ``evaluate`` scores). ``played``: the model is
    about to play a board at a time (``play``, the page), so every decision position goes alone
    (about 0.1 s on 3x3), up to ``ALONE_MAX`` of them: a model that switches on one board outside
    the sample is refused too."""
    codes = decision_codes(game)
    t = game.tables()
    sample = torch.linspace(0, codes.numel() - 1, SAMPLE).round().long()
    every = torch.arange(codes.numel()) if codes.numel() <= ALONE_MAX else \
        torch.linspace(0, codes.numel() - 1, ALONE_MAX).round().long()
    checks = {"alone": every if played else sample, f"in a batch of {SAMPLE}": sample}
    for how, rows in checks.items():
        views = t.view[codes[rows]].float()
        legal = t.legal[codes[rows]]
        got = (logits(views) if how != "alone" else torch.cat([logits(v[None]) for v in views])).float()
        differs = _greedy_differs(got, batched[rows], legal)
        if bool(differs.any()):
            i = int(differs.nonzero()[0])
            move = int(torch.where(legal[i], got[i], -torch.inf).argmax())
            other = int(torch.where(legal[i], batched[rows[i]], -torch.inf).argmax())
            board = board_text(int(codes[rows[i]]), game)
            raise PolicyFileError(
                f"{path}: the model plays differently by batch: at {board} it picks cell {move} {how} "
                f"and cell {other} in a batch of all {codes.numel():,} positions "
                f"({int(differs.sum())} of {rows.numel():,} boards checked differ); refused, its scores "
                "would describe another policy than the one that plays")


def _check_io(name: str, arg, kind: str, game: Game = TIC_TAC_TOE) -> None:
    """The contract: float32 with a last dimension of the board's cells (9 on tic-tac-toe) and
    a free (or any) batch dimension."""
    shape = list(arg.shape)
    if arg.type != "tensor(float)" or len(shape) != 2 or shape[1] != game.cells:
        board = "" if game == TIC_TAC_TOE else f" for its game {game.name}"
        raise PolicyFileError(
            f"{name}: model {kind} {arg.name!r} is {arg.type} {shape}; "
            f"the contract wants float32 [N, {game.cells}]{board}"
        )


def _allowed_bytes(path: Path) -> bytes:
    """The ONNX file's bytes, once ``_allowed`` passed them."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PolicyFileError(f"{path}: cannot be read ({e.strerror or type(e).__name__})") from None
    return _allowed(path, data)


def _allowed(path: Path, data: bytes, inlined: bool = False) -> bytes:
    """``data``, once ``onnx_ops`` finds no control flow or custom operator in it (a ``Loop`` of
    2^62 turns would hang every command) and nothing that allocates before the arena of
    ``onnx_session`` bounds it: a sparse tensor larger than that once dense. Data kept in another
    file beside it (``NAME.onnx.data``) is read into the model (``_inlined``), then checked again."""
    try:
        found = contents(data)
    except NotProtobuf as e:
        raise PolicyFileError(f"{path}: not a valid ONNX model ({e})") from None
    op = refused_operator(found)
    if op is not None:
        raise PolicyFileError(f"{path}: the model uses the ONNX operator {op[:60]!r}; refused: a policy may "
                              "not use control flow (Loop, If, Scan: it could run without end) or a custom "
                              "domain's operators")
    external = next((t for t in found.tensors if t.external), None)
    if external is not None:  # torch.onnx.export's default since torch 2.9
        if inlined:  # a location _inlined did not read: never trusted
            raise PolicyFileError(f"{path}: tensor {external.name[:60]!r} keeps its data in another file")
        return _allowed(path, _inlined(path, data), inlined=True)
    for t in found.tensors:
        if t.sparse and t.nbytes > onnx_session.MAX_BYTES:
            raise PolicyFileError(f"{path}: sparse tensor {t.name[:60]!r} is {t.nbytes / 2**30:.1f} GiB once "
                                  f"dense; a policy may use at most {onnx_session.MAX_BYTES / 2**30:g} GiB")
    return data


def _inlined(path: Path, data: bytes) -> bytes:
    """The model with its external data (``torch.onnx.export`` writes ``NAME.onnx.data`` beside
    the file) read into it, so that every command and the page run one self-contained model.
    Each data file must be a plain file in the model's own folder (a ``location`` naming another
    folder is refused: a model may not read the user's other files), all of them within the
    bytes a policy may use."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, load_external_data_for_model

    try:
        model = onnx.load_from_string(data)  # bytes: their external data is never read here
    except Exception as e:
        raise PolicyFileError(f"{path}: not a valid ONNX model ({str(e)[:160]})") from None
    total = 0
    for tensor in _get_all_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = ExternalDataInfo(tensor)
        where = path.parent / info.location
        if Path(info.location).name != info.location or not where.is_file() or where.is_symlink():
            raise PolicyFileError(f"{path}: tensor {tensor.name[:60]!r} keeps its data in "
                                  f"{info.location[:80]!r}, not a file beside the model; refused (export "
                                  "with external_data=False)")
        length = info.length if info.length else where.stat().st_size - (info.offset or 0)
        total += max(length, 0)
    if total > onnx_session.MAX_BYTES:
        raise PolicyFileError(f"{path}: its external data holds {total / 2**30:.1f} GiB; a policy may use "
                              f"at most {onnx_session.MAX_BYTES / 2**30:g} GiB")
    try:
        load_external_data_for_model(model, str(path.parent))
    except Exception as e:
        raise PolicyFileError(f"{path}: its external data cannot be read ({str(e)[:160]})") from None
    return model.SerializeToString()


def load_onnx(path: str | Path, played: bool = False, game: Game | None = None,
              checked: list | None = None):
    """(logits_fn, metadata) for an ONNX policy file; ``PolicyFileError`` if it is not one.
    ``played``: it will play a board at a time (``_batch_free`` checks every position alone).
    ``game``: the board it must be a model of (``game_of``; None: whichever it names).
    ``checked``: a list that receives the (M, cells) logits its check ran (``load_policy``)."""
    _, logits, meta = onnx_model(path, played, game, checked)
    return logits, meta


def _session(path: Path):
    """(the file's bytes, an onnxruntime session of them) once ``_allowed`` passed them."""
    if not path.is_file():
        raise PolicyFileError(f"{path}: no such file")
    data = _allowed_bytes(path)
    try:  # the bytes checked are the bytes run
        return data, onnx_session.session(data)
    except Exception as e:  # onnxruntime raises several private exception types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PolicyFileError(f"{path}: not a valid ONNX model ({first[:160]})") from None


def file_game(path: str | Path) -> Game:
    """The board of a policy file or run folder, read without running its policy (an ONNX
    file's ``game`` metadata, a checkpoint's ``checkpoint_game``): a command that needs one
    board for several files refuses another before it scores any."""
    path = run_policy(path)
    if path.suffix == ".ckpt":
        return checkpoint_game(path, read_checkpoint(path))
    if path.suffix not in (".onnx", ""):
        raise _unknown(path)
    _, session = _session(path)
    return game_of(path, dict(session.get_modelmeta().custom_metadata_map))


def onnx_model(path: str | Path, played: bool = False, game: Game | None = None,
               checked: list | None = None) -> tuple[bytes, object, dict]:
    """(the file's bytes, logits_fn, metadata) for an ONNX policy file, checked as
    ``load_onnx`` says: the bytes are those checked and run (the page serves them)."""
    path = Path(path)
    data, session = _session(path)
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1:
        raise PolicyFileError(f"{path}: model has {len(inputs)} inputs; the contract wants one, 'board'")
    meta = dict(session.get_modelmeta().custom_metadata_map)
    board = game_of(path, meta, game)
    _check_io(str(path), inputs[0], "input", board)
    _check_io(str(path), outputs[0], "output", board)
    in_name, out_name = inputs[0].name, outputs[0].name

    def logits(view: torch.Tensor) -> torch.Tensor:
        x = view.detach().cpu().numpy().astype(np.float32)
        try:
            out = session.run([out_name], {in_name: x})[0]
        except Exception as e:
            why = onnx_session.refusal(e)
            if why:  # the arena refused a tensor: the model's own doing, said as such
                raise PolicyFileError(f"{path}: the model {why}; refused") from None
            raise PolicyFileError(
                f"{path}: the model failed to run on a [N, {board.cells}] batch ({str(e)[:160]})") from None
        if out.shape != x.shape:
            raise PolicyFileError(
                f"{path}: model output has shape {list(out.shape)}, expected {list(x.shape)}")
        return torch.from_numpy(out)

    batched = _checked(path, logits, board)  # NaN, -inf everywhere, a taken cell preferred: refused here
    _batch_free(path, logits, batched, played, board)  # scored in a batch, played alone: same moves
    if checked is not None:
        checked.append(batched)
    return data, logits, meta


def load_checkpoint(path: str | Path, game: Game | None = None, checked: list | None = None):
    """(net, metadata) from a training checkpoint; ``PolicyFileError`` if it is not one, or
    not of ``game``'s board (None: whichever it is of, ``checkpoint_game``). The metadata
    names the board as an ONNX file's does (``game``, off tic-tac-toe only)."""
    path = Path(path)
    ckpt = read_checkpoint(path)
    board = checkpoint_game(path, ckpt, game)
    spec, state = ckpt["net_spec"], ckpt["state_dict"]
    weights = {k[len("net."):]: v for k, v in state.items() if isinstance(k, str) and k.startswith("net.")}
    check_weights(path, spec, weights, board)  # before MLP(...) allocates anything
    try:
        if is_table(spec):
            net = QTable(init=spec.get("init", 0.0), cells=spec.get("cells"))
            if board != TIC_TAC_TOE:
                net.attach(board)  # its rows and the view -> row map, then the saved values
        else:
            net = MLP(hidden=spec["hidden"], encoding=spec["encoding"], cells=board.cells)
        net.load_state_dict(weights)
    except Exception as e:
        why = " ".join(str(e).split())  # one line: torch's message spans several
        raise PolicyFileError(f"{path}: checkpoint weights do not fit its network ({why[:160]})") from None
    net.eval()
    batched = _checked(path, net, board)
    if checked is not None:
        checked.append(batched)
    hp = ckpt.get("hyper_parameters", {})
    meta = {
        "algo": str(ckpt.get("algo", hp.get("algo", ""))),
        "net": json.dumps(spec),
        "seed": str(hp.get("seed", "")),
        "games_trained": str(ckpt.get("games_played", "")),
        **game_metadata(board),  # {} on tic-tac-toe: its metadata as it always was
    }
    if isinstance(ckpt.get("acting"), str):  # the policy as trained (checkpoints since issue 32)
        meta["acting"] = ckpt["acting"]
    return net, meta


def run_policy(path: str | Path) -> Path:
    """``path`` itself, or a run folder's ``policy.onnx`` when ``path`` is a folder."""
    path = Path(path)
    if not path.is_dir():
        return path
    if not (path / RUN_POLICY).is_file():
        raise PolicyFileError(f"{path}: a folder without {RUN_POLICY} (expected a run folder or a "
                              "policy file)")
    return path / RUN_POLICY


def load_policy(path: str | Path, played: bool = False, game: Game | None = None,
                checked: list | None = None):
    """(logits_fn, metadata) for a policy file, chosen by its suffix (.onnx or .ckpt); a run
    folder stands for its ``policy.onnx``. ``played``, ``game``: see ``load_onnx`` (a checkpoint's
    board: ``checkpoint_file.checkpoint_game``). Its board: ``game_of(path, metadata)``.
    ``checked``: a list that receives the (M, cells) logits at ``decision_codes`` its check
    computed, for a caller that needs them (``load_probs``: 4,4,4's forward is seconds)."""
    path = run_policy(path)
    if path.suffix == ".ckpt":
        net, meta = load_checkpoint(path, game, checked)

        def logits(view: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return net(view)

        return logits, meta
    if path.suffix == ".onnx" or not path.suffix:
        return load_onnx(path, played, game, checked)
    raise _unknown(path)


def _unknown(path: Path) -> PolicyFileError:
    return PolicyFileError(f"{path}: unknown policy file type {path.suffix!r} (expected .onnx or .ckpt)")


def acting_for(path: str | Path, meta: dict, temperature: float | None = None,
               epsilon: float | None = None, as_trained: bool = False) -> Acting:
    """Which transform of a policy file's logits to score: greedy by default, the softmax at
    ``temperature`` with ``epsilon`` uniform moves mixed in, or (``as_trained``) the one its
    training played, from its ``acting`` metadata (``exploit.Acting``)."""
    if as_trained:
        if temperature is not None or epsilon is not None:
            raise UserError("--as-trained reads the temperature and epsilon from the file: give it alone")
        acting = Acting.from_meta(meta)
        if acting is None:
            said = f"malformed 'acting' metadata {meta['acting'][:60]!r}" if "acting" in meta else \
                "no 'acting' metadata (how its training acted)"
            raise PolicyFileError(f"{path}: {said}; give --temperature and --epsilon instead")
        return acting
    t = 0.0 if temperature is None else temperature
    e = 0.0 if epsilon is None else epsilon
    if not (np.isfinite(t) and t >= 0):
        raise UserError(f"--temperature must be a finite number >= 0 (0: greedy), got {t}")
    if not 0 <= e <= 1:
        raise UserError(f"--epsilon must be a number from 0 to 1, got {e}")
    return Acting(float(t), float(e))


def load_probs(path: str | Path, temperature: float | None = None, epsilon: float | None = None,
               as_trained: bool = False, game: Game | None = None) -> tuple[torch.Tensor, dict, Acting]:
    """A policy file's move probabilities: ``(probs (M, cells) float64 at decision_codes(its
    game), metadata, acting)``, the logits transformed as ``acting_for`` says; its board is
    ``game_of(path, metadata)`` (``game``: the one it must be)."""
    checked: list[torch.Tensor] = []  # the logits the load's check computed: not computed again
    _, meta = load_policy(path, game=game, checked=checked)
    board = game_of(path, meta)
    acting = acting_for(run_policy(path), meta, temperature, epsilon, as_trained)
    return acted_probs(run_policy(path), checked[0], acting, board), meta, acting


def acted_probs(path: str | Path, logits: torch.Tensor, acting: Acting,
                game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """``acting``'s (M, cells) probabilities of a file's ``logits`` at ``decision_codes(game)``,
    refused when they are not finite: logits over a tiny temperature leave float64's range
    (3e38 / 1e-300), the softmax of infinities is NaN, and NaN would be scored into NaN
    figures (or written into a table) as if it were a policy."""
    probs = logits_to_probs(logits, acting.temperature, acting.epsilon, game)
    if bool(torch.isfinite(probs).all()):
        return probs
    legal = game.tables().legal[decision_codes(game)].to(logits.device)
    finite = logits.double()[legal & torch.isfinite(logits)]
    largest = float(finite.abs().max()) if finite.numel() else 0.0
    least = largest / torch.finfo(torch.float64).max  # below it, some logit / T overflows
    raise PolicyFileError(f"{path}: temperature {float(acting.temperature):g} overflows: the logits (largest "
                          f"{largest:g}) divided by it leave float64's range, so the policy would be NaN; "
                          f"use a temperature above {least:.3g}, or 0 for greedy")
