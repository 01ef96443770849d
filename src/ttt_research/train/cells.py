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

from collections.abc import Mapping
from dataclasses import dataclass

import yaml

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


PAIR_GROUPS = ("algo", "net")  # the groups that choose a cell: its values are theirs


def default_choices() -> dict[str, str]:
    """Each config group's option when none is chosen (``config.yaml``'s defaults list:
    ``{"reward": "antirez", ...}``; the optional and override entries left out)."""
    listed = yaml.safe_load((config_dir() / "config.yaml").read_text())["defaults"]
    return {k: v for item in listed if isinstance(item, dict)
            for k, v in item.items() if " " not in k and isinstance(v, str)}


def check_groups(chosen: str | None, choices: Mapping[str, str | None], typed: set[str]) -> None:
    """A cell that sets values of another group than its pair's (``reward.tie``) was tuned with
    that group's default option: with another option chosen (``reward=zero_sum``), the cell's
    value would silently replace the option's own, a table nobody asked for. Refused, naming the
    keys and the option's own values, unless each key is typed too (``typed``: the keys of the
    command line's overrides) or the cell is left out."""
    if not chosen or chosen not in cells().values():
        return
    body = yaml.safe_load((config_dir() / "tuned" / f"{chosen}.yaml").read_text()) or {}
    for group, default in default_choices().items():
        option = choices.get(group)
        if group in PAIR_GROUPS or not isinstance(body.get(group), dict) or option in (None, default):
            continue
        own = yaml.safe_load((config_dir() / group / f"{option}.yaml").read_text()) or {}
        missing = [k for k in body[group] if f"{group}.{k}" not in typed]
        if missing:
            sets = ", ".join(f"{group}.{k}={body[group][k]}" for k in missing)
            its = " ".join(f"{group}.{k}={own.get(k)}" for k in missing)
            raise ConfigError(f"tuned={chosen} sets {sets} for {group}={default} (conf/tuned/{chosen}.yaml), "
                              f"and this run chose {group}={option}: type its value too ({its} is "
                              f"{option}'s own) or leave the cell out (~tuned)")


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
