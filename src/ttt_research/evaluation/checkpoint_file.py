"""Read a training checkpoint's policy network, and which board a policy file is of.

A checkpoint (``.ckpt``, written by training) holds the network's weights and ``net_spec``,
what it takes to rebuild it (an MLP's sizes, its board's ``cells`` off tic-tac-toe, or a
Q-table's ``{"table": "q"}``). Its board (``checkpoint_game``) is, in order: the ``game`` it
names (``"m,n,k"``, written by training on any board but tic-tac-toe), the ``game`` group of
the run's saved config (``RUN/.hydra/config.yaml`` beside ``RUN/checkpoints/``: checkpoints
written before they named their board), or tic-tac-toe for a network of its cells (every
file written before other boards). The network is checked against its spec and its board
before it is built: the sizes are bounded and every tensor must have the shape the spec and
the board imply, so a spec that says ``hidden=[2e8]`` is refused without allocating anything
and a 3,4,3 network is never run on tic-tac-toe's positions.

``game_of`` reads an ONNX file's board from its metadata the same way. Anything wrong raises
``PolicyFileError``, whose message is the one line a user sees (``policy_file`` re-exports both).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import torch

from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.mnk import problem
from ttt_research.errors import UserError
from ttt_research.evaluation.onnx import GAME_KEY
from ttt_research.files import untrusted
from ttt_research.models.encodings import PER_CELL, width
from ttt_research.models.qtable import N_CODES, TABLE

# Bounds on a checkpoint's network, far beyond what is trained here (mlp128 is [128, 128]):
# what a hostile or corrupt net_spec may ask for before anything is allocated.
MAX_LAYERS = 16
MAX_WIDTH = 16_384
RUN_CONFIG = Path(".hydra") / "config.yaml"  # a run folder's composed config, beside checkpoints/


class PolicyFileError(UserError):
    """A policy file is missing, unreadable or does not follow the contract."""


def _board(path: Path, said, where: str) -> Game:
    """The board ``"m,n,k"`` names; ``PolicyFileError`` saying ``where`` it was read otherwise."""
    parts = str(said).split(",")
    sizes = [int(v) for v in parts if v.strip().isdigit()] if len(parts) == 3 else []
    why = problem(*sizes, prefix="") if len(sizes) == 3 else "it is not three whole numbers m,n,k"
    if why is not None:
        raise PolicyFileError(f"{path}: its {where} {str(said)[:40]!r} names no board ({why})")
    return Game(*sizes)


def _expected(path: Path, game: Game, expected: Game | None, what: str = "model") -> Game:
    if expected is not None and game != expected:
        raise PolicyFileError(f"{path}: a {what} of the {game.name} board, not of {expected.name}; "
                              "refused (give one of this board)")
    return game


def game_of(path: str | Path, meta: dict, expected: Game | None = None) -> Game:
    """The board a policy file's metadata names (``game``: ``"m,n,k"``; none: tic-tac-toe, as
    every file written before other boards); ``PolicyFileError`` when it names no board, or
    another than ``expected`` (a model of one board given for another)."""
    said = meta.get(GAME_KEY)
    game = TIC_TAC_TOE if said is None else _board(Path(path), said, "'game' metadata")
    return _expected(Path(path), game, expected)


def _config_game(path: Path) -> Game | None:
    """The board of the run's saved config when ``path`` is ``RUN/checkpoints/NAME.ckpt`` and
    ``RUN/.hydra/config.yaml`` exists, else None."""
    config = path.parent.parent / RUN_CONFIG
    if path.parent.name != "checkpoints" or not config.is_file():
        return None
    try:
        group = untrusted.select(untrusted.load_yaml(config), "game")
    except untrusted.Malformed as e:
        raise PolicyFileError(f"{path}: its run's config cannot be read ({str(e)[:120]})") from None
    if group is None:  # a run from before the game group: tic-tac-toe
        return None
    sizes = [group.get(key) if isinstance(group, dict) else None for key in ("m", "n", "k")]
    return _board(path, ",".join(str(v) for v in sizes), f"run's config ({config}) game")


def checkpoint_game(path: Path, ckpt: dict, expected: Game | None = None) -> Game:
    """The board of a checkpoint (the module's docstring, in that order); ``PolicyFileError``
    when a network off tic-tac-toe's cells names none, or when it is not ``expected``."""
    if GAME_KEY in ckpt:
        game = _board(path, ckpt[GAME_KEY], "'game'")
    else:
        game = _config_game(path)
        spec = ckpt.get("net_spec")
        cells = spec.get("cells") if isinstance(spec, dict) else None
        if game is None and cells not in (None, TIC_TAC_TOE.cells):
            raise PolicyFileError(f"{path}: a checkpoint of a {str(cells)[:20]}-cell network that names no "
                                  "board (no 'game' in it, no run config beside it); refused")
        game = game or TIC_TAC_TOE
    return _expected(path, game, expected, "checkpoint")


def unreadable(e: Exception) -> str:
    """torch.load's error, as a few words a user can act on (its own messages run to
    paragraphs, with terminal colour codes)."""
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


def is_table(spec) -> bool:
    """A ``qtable.QTable``'s spec ({"table": "q", "init": ...}) rather than an MLP's."""
    return isinstance(spec, dict) and "table" in spec


def _table_shapes(path: Path, spec: dict, game: Game) -> dict[str, tuple[int, ...]]:
    """The tensors of a ``QTable`` (``q``, its values, and ``visits``, its counts: a row per
    tic-tac-toe view code, or per reachable position of another board, a column per cell),
    after checking its spec and board."""
    init = spec.get("init", 0.0)
    if spec["table"] != TABLE or type(init) not in (int, float) or not np.isfinite(init):
        raise PolicyFileError(f"{path}: net_spec {str(spec)[:60]} is not a table this version "
                              f"reads (expected {{'table': {TABLE!r}, 'init': a finite number}})")
    if game == TIC_TAC_TOE:  # its rows are tic-tac-toe's view codes
        return {"q": (N_CODES, game.cells), "visits": (N_CODES, game.cells)}
    if spec.get("cells") != game.cells:
        raise PolicyFileError(f"{path}: net_spec {str(spec)[:60]} is not a table of the {game.name} "
                              f"board's {game.cells} cells")
    rows = game.tables().states  # another board's: a row per reachable position (BoardQTable)
    return {"q": (rows, game.cells), "visits": (rows, game.cells)}


def spec_shapes(path: Path, spec, game: Game = TIC_TAC_TOE) -> dict[str, tuple[int, ...]]:
    """The state-dict shapes the network of ``spec`` has on ``game``'s board (``nets.MLP``'s
    ``body.I.weight`` / ``.bias``; a table's ``q``), after checking the spec's sizes and that
    its cells are the board's; ``PolicyFileError`` otherwise."""
    if is_table(spec):
        return _table_shapes(path, spec, game)
    hidden = spec.get("hidden") if isinstance(spec, dict) else None
    encoding = spec.get("encoding") if isinstance(spec, dict) else None
    if not isinstance(encoding, str) or encoding not in PER_CELL:
        raise PolicyFileError(f"{path}: net_spec encoding is {str(encoding)[:40]!r}; "
                              f"expected one of {', '.join(sorted(PER_CELL))}")
    if not (isinstance(hidden, list) and 1 <= len(hidden) <= MAX_LAYERS
            and all(type(h) is int and 1 <= h <= MAX_WIDTH for h in hidden)):
        raise PolicyFileError(f"{path}: net_spec hidden is {str(hidden)[:60]}; expected 1 to "
                              f"{MAX_LAYERS} layer sizes, each an integer from 1 to {MAX_WIDTH:,}")
    cells = spec.get("cells", TIC_TAC_TOE.cells)  # absent: tic-tac-toe's (nets._spec)
    if cells != game.cells:
        raise PolicyFileError(f"{path}: net_spec says a network of {str(cells)[:20]} cells, its board "
                              f"{game.name} has {game.cells}; refused")
    sizes = [width(encoding, game.cells), *hidden, game.cells]
    shapes: dict[str, tuple[int, ...]] = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        shapes[f"body.{2 * i}.weight"] = (fan_out, fan_in)  # Linear layers at 0, 2, ... (ReLUs between)
        shapes[f"body.{2 * i}.bias"] = (fan_out,)
    return shapes


def check_weights(path: Path, spec, weights: dict, game: Game = TIC_TAC_TOE) -> None:
    """Every tensor of the network present, of the shape of the spec on ``game``'s board,
    float and finite."""
    shapes = spec_shapes(path, spec, game)
    if set(weights) != set(shapes):
        odd = sorted(set(weights) ^ set(shapes))
        raise PolicyFileError(f"{path}: checkpoint weights do not fit its network (net_spec; "
                              f"missing or unexpected: {', '.join(odd)[:120]})")
    for name, shape in shapes.items():
        w = weights[name]
        if not isinstance(w, torch.Tensor) or tuple(w.shape) != shape or not w.is_floating_point():
            got = list(w.shape) if isinstance(w, torch.Tensor) else type(w).__name__
            raise PolicyFileError(f"{path}: checkpoint weights do not fit its network "
                                  f"({name} is {got}, net_spec says {list(shape)})")
        if not bool(torch.isfinite(w).all()):  # e.g. a diverged run
            raise PolicyFileError(f"{path}: checkpoint weights are not all finite (NaN or infinite)")


def read_checkpoint(path: Path) -> dict:
    """A training checkpoint's contents (tensors only: ``weights_only``), checked to be one
    agent's; ``PolicyFileError`` otherwise."""
    if not path.is_file():
        raise PolicyFileError(f"{path}: no such file")
    try:
        with warnings.catch_warnings():  # torch warns about odd pickles; the error line says it
            warnings.simplefilter("ignore")
            ckpt = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:
        raise PolicyFileError(f"{path}: not a readable checkpoint ({unreadable(e)})") from None
    if not isinstance(ckpt, dict) or "net_spec" not in ckpt or "state_dict" not in ckpt:
        raise PolicyFileError(f"{path}: not a ttt_research checkpoint (no network description)")
    if "population" in ckpt:  # many agents' weights stacked: no single policy to load
        shares = [s["population"] for s in ckpt.get("member_shards") or [ckpt]]  # trainer=ddp: one a process
        n = sum(len(s["member_games"]) for s in shares)
        raise PolicyFileError(
            f"{path}: a population's checkpoint ({n} members in this file): use a member's "
            "policy.onnx (the run folder's is its best member's; population.export=all writes "
            "every member's under members/NNN/)")
    if not isinstance(ckpt["state_dict"], dict):
        raise PolicyFileError(f"{path}: not a ttt_research checkpoint (its state_dict is not a dict)")
    return ckpt
