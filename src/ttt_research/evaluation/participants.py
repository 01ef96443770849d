"""Who plays in a tournament: command-line names and paths, turned into move probabilities.

Each participant is a name and a policy as ``probs``, (M, cells) float64 at
``exact.decision_codes(game)`` (the convention of ``exploit.py``), all of one board (``board_of``:
``--game``, else the first file's, else tic-tac-toe; a file of another board is refused in one
line before it runs). An argument is one of:

* a built-in player: ``random`` (uniform over the empty cells), ``perfect`` (uniform over the
  minimax-optimal moves), ``rules`` (``opponents.rules_probs``: win, block, fork, ..., on any board),
  ``best-response`` (no policy of its own: against each opponent, from each seat, that
  opponent's exact best response, ``exploit.best_response_outcomes``; its ``probs`` is None);
* a run folder (its ``policy.onnx``), named as given;
* a population folder: every ``members/NNN/policy.onnx``, named ``FOLDER/NNN`` (not the
  folder's own ``policy.onnx``, the best member's again);
* a policy file: ``.onnx`` or ``.ckpt`` (``policy_file.load_policy``), or a policy table
  (``.csv`` / ``.json``, ``policy_table.read_table``: tic-tac-toe's positions only).

Networks play greedy (the masked argmax, as ``evaluate`` scores them) unless ``as_trained``:
then the transform of their logits that the algorithm played while training, read from the
file's ``acting`` metadata (``exploit.Acting``); a file without it plays greedy and its note
says so. Anything wrong is a ``UserError``: one line, exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ttt_research.env import opponents, solver
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.errors import UserError
from ttt_research.evaluation.exact import decision_codes
from ttt_research.evaluation.exploit import Acting, logits_to_probs
from ttt_research.evaluation.options import BUILTINS, RESPONDER, TABLE_SUFFIXES, require_participant
from ttt_research.evaluation.policy_file import acted_probs, file_game, load_policy
from ttt_research.evaluation.policy_table import read_table, require_tic_tac_toe
from ttt_research.files import untrusted

NETWORK_SUFFIXES = (".onnx", ".ckpt")


@dataclass(frozen=True)
class Participant:
    name: str
    probs: torch.Tensor | None  # (M, cells) float64 at decision_codes(); None: the best responder
    plays: str  # how it chooses its moves, in words ("greedy (argmax)", "built-in", ...)
    note: str = ""  # something the user should know (no acting metadata, ...)


def _builtin(name: str, game: Game = TIC_TAC_TOE) -> Participant:
    if name == RESPONDER:  # a different policy against each opponent: cross_play cannot play it
        return Participant(name, None, "built-in: each opponent's exact best response")
    codes = decision_codes(game)
    table = {"random": lambda: solver.random_probs(game), "perfect": lambda: solver.perfect_probs(game),
             "rules": lambda: opponents.rules_probs(game)}[name]()
    # the rule player's last rule: tic-tac-toe's seed order, another board's lines (rule_player.py)
    last = "centre, corner, side" if game == TIC_TAC_TOE else "the cell on most open lines"
    what = {"random": "uniform over empty cells", "perfect": "uniform over minimax-optimal moves",
            "rules": f"win, block, fork, block a fork, {last}"}[name]
    return Participant(name, table[codes].double(), f"built-in: {what}")


def _network(path: Path, name: str, as_trained: bool, game: Game = TIC_TAC_TOE) -> Participant:
    """A policy file of ``game``'s board (another board's is refused) run once on the decision
    positions (4,520 on tic-tac-toe), then greedy or as trained."""
    policy, meta = load_policy(path, game=game)  # refuses a file with no legal greedy move somewhere
    views = game.tables().view[decision_codes(game)].float()  # (M, cells) mover's view
    with torch.no_grad():
        logits = policy(views).detach().to("cpu", torch.float64)  # (M, cells)
    if not as_trained:
        return Participant(name, logits_to_probs(logits, game=game), "greedy (argmax)")
    acting = Acting.from_meta(meta)
    if acting is None:
        return Participant(name, logits_to_probs(logits, game=game), "greedy (argmax)",
                           note=f"{name}: no 'acting' metadata in {path.name}; played greedy")
    return Participant(name, acted_probs(path, logits, acting, game), acting.describe())  # refuses NaN


def _table(path: Path, name: str, fill: str, illegal: str) -> Participant:
    probs, info = read_table(path, fill, illegal)
    filled = int(info.get("filled", 0))  # positions without a row and illegal answers
    note = f"{name}: {filled:,} position(s) filled, {info.get('fill')} (--fill)" if filled else ""
    return Participant(name, torch.as_tensor(probs, dtype=torch.float64), "policy table", note)


def _members(folder: Path) -> list[Path]:
    """The ``members/NNN`` folders of a population that hold a ``policy.onnx``, in order."""
    root = folder / "members"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "policy.onnx").is_file())


def resolve(arg: str, as_trained: bool = False, fill: str = "refuse",
            illegal: str = "refuse", game: Game = TIC_TAC_TOE) -> list[Participant]:
    """The participant(s) one command-line argument names (``fill``, ``illegal``: for policy
    tables, ``policy_table.read_table``'s rules for positions without a row and illegal answers),
    on ``game``'s board (policy tables: tic-tac-toe only)."""
    name = arg.rstrip("/") or arg
    path = Path(arg)
    if arg in BUILTINS and not path.exists():
        return [_builtin(arg, game)]
    if path.is_dir():
        # A population's folder also holds a policy.onnx, its best member's (a copy of one of
        # members/NNN/): the members come first, so that none plays twice.
        members = _members(path)
        if members:
            return [_network(m / "policy.onnx", f"{name}/{m.name}", as_trained, game) for m in members]
        if (path / "policy.onnx").is_file():  # a run folder
            return [_network(path / "policy.onnx", name, as_trained, game)]
        raise UserError(f"{arg}: a folder with no policy.onnx (not a run folder) and no "
                        "members/NNN/policy.onnx (not a population)")
    require_participant(arg)  # nothing on disk
    suffix = path.suffix.lower()
    if suffix in NETWORK_SUFFIXES:
        return [_network(path, name, as_trained, game)]
    if suffix in TABLE_SUFFIXES:
        require_tic_tac_toe(arg, game)
        return [_table(path, name, fill, illegal)]
    raise UserError(f"{arg}: not a policy (expected a run or population folder, .onnx, .ckpt, "
                    f".csv, .json, or one of {', '.join(BUILTINS)})")


def arg_board(arg: str) -> Game | None:
    """The board of one argument's policy, read without running it (``policy_file.file_game``):
    a table's is tic-tac-toe; None for a built-in (it plays any board) or what names no policy
    (``resolve`` refuses it)."""
    path = Path(arg)
    if arg in BUILTINS and not path.exists():
        return None
    if path.is_dir():
        members = _members(path)
        if members:
            return file_game(members[0] / "policy.onnx")
        return file_game(path) if (path / "policy.onnx").is_file() else None
    suffix = path.suffix.lower()
    if suffix in TABLE_SUFFIXES:
        return TIC_TAC_TOE
    return file_game(path) if suffix in NETWORK_SUFFIXES else None


def board_of(args: list[str], sizes: tuple[int, int, int] | None = None) -> tuple[Game, str]:
    """(the board a tournament plays, where it comes from): ``sizes`` (``--game``'s m, n, k)
    when given, else the first file's, else tic-tac-toe (built-ins alone). Every file of another
    board is refused (one line) before any policy runs: participants play one board."""
    game = Game(*sizes) if sizes is not None else None
    said = "--game" if game is not None else ""
    for arg in args:
        found = arg_board(arg)
        if found is None:
            continue
        if game is None:
            game, said = found, arg
        elif found != game:
            raise UserError(f"{arg}: a policy of the {found.name} board, but the tournament plays "
                            f"{game.name} ({said}); participants must all be of one board")
    return (game, said) if game is not None else (TIC_TAC_TOE, "")


def gather(args: list[str], as_trained: bool = False, fill: str = "refuse",
           illegal: str = "refuse", game: Game = TIC_TAC_TOE) -> list[Participant]:
    """Every argument's participants on ``game``'s board (``board_of``), in order; fewer than
    2 or a name twice is refused."""
    players = [p for arg in args for p in resolve(arg, as_trained, fill, illegal, game)]
    seen: set[str] = set()
    for p in players:
        if p.name in seen:
            raise UserError(f"{p.name}: named twice; each participant plays once")
        seen.add(p.name)
    if len(players) < 2:
        raise UserError(f"a tournament needs at least 2 participants, got {len(players)}"
                        + "".join(_unexported(arg) for arg in args))
    return players


def _unexported(arg: str) -> str:
    """A hint for a population folder whose members were not all exported (``population.export``
    is ``best`` by default: only the best member's policy.onnx), else ''."""
    try:
        members = len(untrusted.load_json(Path(arg) / "population.json")["members"])
    except (untrusted.Malformed, KeyError, TypeError):  # not a population's record
        return ""
    exported = len(_members(Path(arg)))
    if exported >= members:
        return ""
    return (f" ({arg} exported {exported} of its {members} members' policies: train it with "
            "population.export=all to enter every member)")
