"""What a run's (algorithm, network) pair has for it, said in its first lines, and the one
``tuned=`` a run refuses.

A **cell** is ``conf/tuned/ALGO_NET.yaml``: settings tuned for that pair, which ``config.yaml``
composes from both choices (``optional tuned: ${algo}_${net}``). The files are the list of
cells (their names say the pair); the specs say the rest (``algos/spec.py``): the net an
algorithm's defaults were tuned on (``tuned_on``: no cell needed there) and the nets where no
settings tried reached a useful agent (``no_cell``: net -> the page that shows it). A pair that
is neither, with no file, trains on the algorithm's defaults, tuned elsewhere: the run says so
too, rather than train a poor agent in silence (issue 58).

Nothing here names an algorithm or a network: the files and the specs do.
"""
from __future__ import annotations

from dataclasses import dataclass

from ttt_research.algos.spec import CELLS, AlgoSpec, specs
from ttt_research.errors import ConfigError
from ttt_research.train.confdir import config_dir


def pair(cell: str) -> tuple[str, str]:
    """``ALGO_NET`` -> (ALGO, NET): a net's name has no underscore, an algorithm's may."""
    algo, _, net = cell.rpartition("_")
    return algo, net


def cells() -> dict[tuple[str, str], str]:
    """Every cell of ``conf/tuned/``, by its (algorithm, network) pair."""
    return {pair(p.stem): p.stem for p in sorted((config_dir() / "tuned").glob("*.yaml"))}


def _spec(algo: str) -> AlgoSpec | None:
    return next((s for s in specs().values() if s.name == algo), None)


def check_chosen(algo: str | None, chosen: str | None) -> None:
    """``tuned=CELL`` of another algorithm than the run's is refused: its keys are another
    algorithm's settings (a cell of the same algorithm on another net is a choice; allowed)."""
    if not algo or not chosen or chosen not in cells().values():
        return
    owner, _ = pair(chosen)
    if owner != algo:
        raise ConfigError(f"tuned={chosen} is a cell of algo={owner} (conf/tuned/{chosen}.yaml), and "
                          f"this run trains algo={algo}: leave tuned out (algo and net choose the "
                          f"cell) or train algo={owner}")


@dataclass(frozen=True)
class Note:
    """What the first line says of the pair (``tag``, beside the net) and, where the pair has
    no cell, the line after it (``line``, with the page that explains it)."""

    tag: str = ""
    line: str = ""


def note(algo: str | None, net: str | None, chosen: str | None) -> Note:
    """The note of a run of ``algo=ALGO net=NET`` whose ``tuned`` choice is ``chosen`` (None:
    ``~tuned``; a pair's own name without a file: no cell composed)."""
    spec = _spec(algo) if algo and net else None
    if spec is None:  # an algorithm of the user's own, or a run outside Hydra: nothing known
        return Note()
    known = cells()
    own = known.get((algo, net))  # this pair's cell, if it has one
    applied = chosen if chosen in known.values() else None
    if applied and applied == own:
        return Note(f"tuned={own}")
    if applied:
        return Note(f"tuned={applied}" + (f", not this pair's tuned={own}" if own else ""))
    if own:  # ~tuned: the pair has a cell, left out
        return Note(f"without this pair's tuned={own}")
    if net == spec.tuned_on:  # the algorithm's own network: its defaults are the cell
        return Note()
    if net in spec.no_cell:
        return Note("no tuned cell", f"no tuned cell for algo={algo} net={net}: no settings tried "
                    f"reached a useful agent ({spec.no_cell[net]})")
    return Note("no tuned cell", f"no tuned cell for algo={algo} net={net}: the algorithm's defaults, "
                f"tuned on net={spec.tuned_on} ({CELLS})")
