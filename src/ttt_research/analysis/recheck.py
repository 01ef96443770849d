"""A run's figures re-checked from its policy, for the report: the greedy figures of its
``eval.json`` (a population member's: its row of ``population.json``) must be what the
exact evaluation gives its ``policy.onnx`` (a member's: ``members/NNN/policy.onnx``, written
for every member with ``population.export=all``, else for the best one). A run whose record
says otherwise (an edited ``eval.json`` that claims a draw where its policy loses) is left out
of the aggregates, and the report names it and the first figure that differs
(``Skipped``, kind ``contradicted``): its numbers are reported, never averaged in. A run
without a policy file (a member not exported) is reported from its record, unchecked
(``RunRecord.checked`` says which); a policy file that does not load skips its run, named.

What is compared: every figure ``exact.evaluate_actions`` gives (per seat: vs random and vs
perfect win, loss and tie, the worst case; the optimal-move rate and the decision points)
and the greedy ``nashconv``, where the record has it; rates within ``TOLERANCE`` (eval.json
rounds them to 12 digits). The export checked that the file's greedy moves are the
network's (``onnx.parity``), so a run's own figures always match. The policy as trained
(``as_trained``), the values (``value_accuracy``) and a search (``search``) are not
re-checked: the file holds neither the values nor a search.

Cheap: a policy file is read once per content (a run copied a thousand times is run once),
run once on its board's decision positions (4,520 on tic-tac-toe; the board is the file's own,
its ``game`` metadata), and the action tables of all the policies of a board are scored
together (``exact.evaluate_actions_stack``: the dynamic programmes pass over many policies at
once, on tables built once).
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path

from ttt_research.analysis.runs import RunRecord
from ttt_research.analysis.skipped import Skipped
from ttt_research.contract import NASHCONV, WORST_VALUE, greedy_nashconv
from ttt_research.files import untrusted
from ttt_research.files.untrusted import Malformed

TOLERANCE = 1e-9  # the figures are exact sums rounded to 12 digits: an honest record is within 1e-12
BATCH = 64        # action tables scored per call (64 x 19,683 moves: 10 MB)
_ABSENT = object()


def policy_of(run: RunRecord) -> Path:
    """The policy file whose figures the run's record gives: its folder's ``policy.onnx``, a
    population member's ``members/NNN/policy.onnx``."""
    if run.member is None:
        return run.path / "policy.onnx"
    return run.path / "members" / f"{run.member:03d}" / "policy.onnx"


def run_name(run: RunRecord, root: Path) -> str:
    """The run as the report names it: its folder under ``root`` (and a member's index)."""
    folder = str(run.path.relative_to(root)) if run.path != root else "."
    return folder if run.member is None else f"{folder} (member {run.member})"


def _leaves(tree, prefix: str = ""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, tree


def _same(said, scored) -> bool:
    if untrusted.is_number(said) and untrusted.is_number(scored):
        return abs(said - scored) <= TOLERANCE
    return type(said) is type(scored) and said == scored


def _show(value) -> str:
    """A figure as the message shows it: a worst case's name, a number, else what it is (the
    text of a file is never echoed: ``untrusted.kind``)."""
    if isinstance(value, str) and value in WORST_VALUE:
        return repr(value)
    if untrusted.is_number(value) and math.isfinite(value):
        return f"{value:.6g}"
    return untrusted.kind(value)


def differences(record: dict, scored: dict) -> list[tuple[str, object, object]]:
    """(figure, the record's value, the policy's) for each figure of ``scored`` that the record
    gives otherwise; a figure the record lacks (an older eval.json) is not compared."""
    out = []
    for key, value in _leaves(scored):
        said = untrusted.select(record, key, _ABSENT)
        if said is not _ABSENT and not _same(said, value):
            out.append((key, said, value))
    return out


def _scored(actions: list, boards: list) -> list[dict]:
    """The greedy report (eval.json's figures, ``nashconv`` with them) of each action table,
    on its policy's board (the tables of one board scored together)."""
    import torch

    from ttt_research.evaluation.exact import evaluate_actions_stack

    reports: list = [None] * len(actions)
    for board in dict.fromkeys(boards):  # each board once, in order
        at = [i for i, b in enumerate(boards) if b == board]
        for start in range(0, len(at), BATCH):
            part = at[start:start + BATCH]
            for i, r in zip(part, evaluate_actions_stack(torch.stack([actions[i] for i in part]), game=board),
                            strict=True):
                reports[i] = r
    for r in reports:
        r[NASHCONV] = greedy_nashconv(r)
    return reports


def recheck(runs: list[RunRecord], root: Path) -> tuple[list[RunRecord], list[Skipped]]:
    """(the runs whose figures hold or cannot be checked, each checked one marked; the runs
    left out: contradicted by their policy, or with a policy file that does not load)."""
    from ttt_research.evaluation.crossplay import one_thread

    with one_thread():  # small tensors: two threads spin against each other on a busy host
        return _recheck(runs, root)


def _recheck(runs: list[RunRecord], root: Path) -> tuple[list[RunRecord], list[Skipped]]:
    from ttt_research.evaluation.exact import greedy_actions
    from ttt_research.evaluation.policy_file import PolicyFileError, file_game, load_policy

    place: dict[str, int] = {}          # a policy's content -> its action table's place
    table: list[int | str | None] = []  # per run: its table's place, why its file is refused, or None
    actions, boards = [], []            # each table and its policy's board (an m,n,k run's own)
    for run in runs:
        path = policy_of(run)
        if run.report is None or not (path.exists() or path.is_symlink()):
            table.append(None)
            continue
        try:
            digest = hashlib.sha256(untrusted.read_bytes(path, str(path))).hexdigest()
            if digest not in place:
                board = file_game(path)  # the file's own board, read before it runs
                policy, _ = load_policy(path, game=board)  # the strict check of every position
                place[digest] = len(actions)
                actions.append(greedy_actions(policy, board)[0])
                boards.append(board)
            table.append(place[digest])
        except (Malformed, PolicyFileError) as e:
            table.append(str(e))
    reports = _scored(actions, boards)
    kept, skipped = [], []
    for run, at in zip(runs, table, strict=True):
        if isinstance(at, str):
            skipped.append(Skipped(run.path, at, "malformed", run_name(run, root)))
            continue
        if at is not None:
            found = differences(run.report, reports[at])
            if found:
                why = contradiction(run, found)
                skipped.append(Skipped(run.path, why, "contradicted", run_name(run, root)))
                continue
            run.checked = True
        kept.append(run)
    return kept, skipped


def contradiction(run: RunRecord, found: list[tuple[str, object, object]]) -> str:
    """``eval.json says as_o.worst_case is 'draw'; its policy.onnx scores 'loss' (and 2 more
    figure(s))``: the first figure that differs (a worst case first: it says who is unbeatable),
    and how many more."""
    record = "eval.json" if run.member is None else f"population.json (member {run.member})"
    key, said, scored = min(found, key=lambda f: not f[0].endswith("worst_case"))
    more = f" (and {len(found) - 1} more figure(s))" if len(found) > 1 else ""
    return (f"{record} says {key} is {_show(said)}; its {policy_of(run).relative_to(run.path)} scores "
            f"{_show(scored)}{more}")
