"""What a population is, before any tensor: its members (seed and hyperparameters each) read
from the ``population:`` block of the config, and the memory they will need.

A member is one independent agent. The population is a **grid** of hyperparameter values
(``population.vary``) crossed with **seeds** (``population.size`` of them, or
``population.seeds`` named); each member may also **draw** values of its own
(``population.sample``). Only continuous values that keep every tensor's shape can differ
between members (``variable``: each algorithm's spec says which of its own); the net, the
games per update and the algorithm stay a Hydra multirun: ``-m net=mlp25,mlp100
population.size=64`` is one process per net, 64 agents each.

Spellings (the same on the command line and in a config file)::

    python -m ttt_research population.size=64                 # seeds 0..63 (seed + k)
    python -m ttt_research seed=100 population.size=64        # seeds 100..163
    python -m ttt_research population.seeds=[3,5,8]           # three members, these seeds
    python -m ttt_research population.vary.algo.lr=[0.5,1,2] population.size=16
                                                              # 3 grid points x 16 seeds = 48
    python -m ttt_research population.sample.algo.lr={low:0.1,high:4,log:true} population.size=32
                                                              # 32 members, each its own lr
    python -m ttt_research algo=ppo population.vary.algo.ent_coef=[0.01,0.08] \\
        population.sample.reward.tie={low:0,high:0.5} population.size=8

``config.yaml`` declares every key that can vary, as ``null`` (not varied), under both
``vary`` and ``sample``, so these spellings need no ``+``; with a ``+`` they work as well
(Hydra adds a list or a dict over a ``null``). A key that cannot vary is not declared, so
Hydra refuses it without a ``+`` ("Key 'net' is not in struct"); with the ``+`` the config
check names the keys that can. A dict of dotted keys works too, on the command line
(``'+population.vary={algo.lr:[0.5,1,2]}'``, quoted for the shell) and in a file::

    population:                     # e.g. in conf/experiment/NAME.yaml (# @package _global_)
      size: 16
      vary:
        algo: {lr: [0.5, 1, 2]}     # or, the same:  algo.lr: [0.5, 1, 2]
      sample:
        reward.tie: {low: 0.0, high: 0.5, log: false}

Rules (``train.validate.validate`` refuses anything else, in one line naming the key):

- ``vary.<key>``: a non-empty list of distinct numbers, each valid for the key. Grid points
  are the product of the lists, keys in alphabetical order, the last key changing fastest.
- ``sample.<key>``: ``{low, high, log}``, ``low < high``, both valid for the key; ``log``
  (default false) draws log-uniformly and needs ``low > 0``, else uniformly. A key is
  varied or sampled, not both. Draws are seeded by ``seed``: the same config gives the
  same draws; member (grid point g, seed position s) draws from its own stream named by
  ``seed``, g, s and the key, so a larger ``size`` keeps the earlier members' draws.
- ``size``: seeds *per grid point*, so the population has (grid points) x ``size`` members
  (no grid: ``size`` members). Seeds default to ``seed + k``, k = 0..size-1. Every grid
  point runs the same seeds: a comparison of values is paired, seed for seed.
- ``seeds``: distinct non-negative integers; they fix the number of seeds, so ``size``
  must then be 1 (its default) or their number.
- Member order: grid points slowest, seeds fastest: member ``g * S + s`` is grid point
  ``g`` with the ``s``-th seed (S seeds per grid point).
- A key must exist in the composed config and be one its algorithm lets a member set
  (``algos/NAME_spec.py``'s ``varies``: ``algo.momentum`` is REINFORCE's, ``algo.ent_coef``
  PPO's); ``opponent.p_perfect`` is ``opponent=mixed``'s.

The files a population run writes are ``results.py``'s; how its members are shared out
between processes is ``sharing.py``'s.
"""
from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ttt_research.algos.spec import AlgoSpec, Memory, named, specs
from ttt_research.contract import VALUE_MAX
from ttt_research.errors import ConfigError, shown

# The keys a member may set for itself, with the values each may take: an algorithm's are in
# its spec (``algos/spec.py``: ``varies``, ranged by its rules), the reward's and opponent's
# here, the one statement of these ranges, which the config check (train/validate.py) applies to
# a single run's values too. VALUE_MAX keeps float32 training finite. Each is a scalar read where
# a run is built, so a population can hold it as an (N,) tensor without changing any shape.
# config.yaml declares every key some algorithm may vary under population.vary and .sample (a
# test holds the two lists equal).
_M = VALUE_MAX


SETTINGS: dict[str, tuple[Callable[[float], bool], str]] = {
    "reward.win": (lambda v: -_M <= v <= _M, f"a finite number in [-{_M:g}, {_M:g}]"),
    "reward.tie": (lambda v: -_M <= v <= _M, f"a finite number in [-{_M:g}, {_M:g}]"),
    "reward.loss": (lambda v: -_M <= v <= _M, f"a finite number in [-{_M:g}, {_M:g}]"),
    "opponent.p_perfect": (lambda v: 0 <= v <= 1, "a probability in [0, 1]"),
}


def variable(spec: AlgoSpec) -> dict[str, tuple[Callable[[float], bool], str]]:
    """The keys a member of the algorithm ``spec`` declares may set for itself, with their rules."""
    own = {f"algo.{k}": (spec.rule(k).ok, spec.rule(k).allowed) for k in spec.varies}
    return {**own, **SETTINGS}


def every_variable() -> list[str]:
    """Every key some algorithm's members may set for themselves, then the reward's and the
    opponent's: what config.yaml declares."""
    keys = dict.fromkeys(f"algo.{k}" for s in specs().values() for k in s.varies)
    return [*sorted(keys, key=lambda k: (k != "algo.lr", k)), *SETTINGS]


def home(key: str) -> str | None:
    """Where a key lives when this config lacks it (for the error that refuses it)."""
    group, leaf = key.split(".")
    if group == "algo":
        return ", ".join(f"algo={name}" for name in named(leaf)) or None
    return {"opponent.p_perfect": "opponent=mixed"}.get(key)


EXPORTS = ("best", "all")  # population.export: policy.onnx of the best member, or of all


SAMPLE_FIELDS = ("low", "high", "log")


@dataclass(frozen=True)
class Member:
    """One agent of a population: its place, its seed, and the values it sets for itself
    (only the varied and sampled keys; every other value is the config's)."""

    index: int
    seed: int
    hparams: dict[str, float] = field(default_factory=dict)


def declared() -> dict:
    """The ``vary`` and ``sample`` skeleton of ``config.yaml``: every key of ``every_variable``,
    nested by its dots, as ``None`` (not varied)."""
    tree: dict = {}
    for key in every_variable():
        group, leaf = key.split(".")
        tree.setdefault(group, {})[leaf] = None
    return tree


def _flatten(node, prefix: str, is_leaf: Callable[[object], bool], out: dict, where: str) -> dict:
    # Nested dicts and dotted keys name the same key: {algo: {lr: ...}} and {algo.lr: ...}.
    for k, v in node.items():
        key = f"{prefix}{k}"
        if v is None:
            continue
        if isinstance(v, dict) and not is_leaf(v):
            _flatten(v, f"{key}.", is_leaf, out, where)
            continue
        if key in out:
            raise ConfigError(f"{where}.{key} is given twice (as nested keys and as a dotted key)")
        out[key] = v
    return out


def _is_range(v: dict) -> bool:
    return bool(set(v) & set(SAMPLE_FIELDS))


def parse(node, part: str) -> dict[str, object]:
    """``population.<part>`` (``vary`` or ``sample``, as plain Python: ``train/runspec.py`` reads
    it from the config) as ``{dotted key: value}``, unvalidated, keys left null dropped. A dict
    that names low, high or log is one key's range, not a level of nesting (in ``vary`` it is
    a wrong value, refused by the validation)."""
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise ConfigError(f"population.{part} must be {EXAMPLES[part]}, got {shown(node)}")
    return _flatten(node, "", _is_range, {}, f"population.{part}")


EXAMPLES = {"vary": "keys with lists of values, e.g. {algo.lr: [0.5, 1, 2]}",
            "sample": "keys with ranges, e.g. {algo.lr: {low: 0.1, high: 4, log: true}}"}


@dataclass(frozen=True)
class Plan:
    """A population as its config asks for it, read once (``train/runspec.plan``): the run's
    ``seed`` (which names the sampled values' streams), the seeds each grid point runs, and
    ``vary`` / ``sample`` as ``{dotted key: list}`` / ``{dotted key: {low, high, log}}``."""

    seed: int
    seeds: tuple[int, ...]
    vary: dict[str, object] = field(default_factory=dict)
    sample: dict[str, object] = field(default_factory=dict)


def grid_points(plan: Plan) -> list[dict[str, float]]:
    """The grid of ``population.vary``: one dict per point, keys in alphabetical order,
    the last key changing fastest (``[{}]`` without a grid)."""
    keys = sorted(plan.vary)
    return [dict(zip(keys, (float(v) for v in values), strict=True))
            for values in itertools.product(*(plan.vary[k] for k in keys))]


def draw(seed: int, point: int, position: int, key: str, low: float, high: float, log: bool) -> float:
    """One member's value of a sampled ``key``: uniform (or log-uniform) in [low, high], from
    a stream of its own (Python's ``random`` seeded by a string hashes it with SHA-512, so
    the value is the same on every machine and Python 3 version)."""
    u = random.Random(f"ttt_research.population/{seed}/{point}/{position}/{key}").random()
    if log:
        v = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
    else:
        v = low + u * (high - low)
    return min(max(v, low), high)  # exp/log may round a hair past a bound


def members(plan: Plan) -> list[Member]:
    """Every member of the population, in order (grid points slowest, seeds fastest), of a
    plan that passed ``train.validate.validate`` (which refuses a bad block in one line)."""
    out = []
    for g, point in enumerate(grid_points(plan)):
        for s, seed in enumerate(plan.seeds):
            hp = dict(point)
            for key in sorted(plan.sample):
                r = plan.sample[key]
                hp[key] = draw(plan.seed, g, s, key, float(r["low"]), float(r["high"]),
                               bool(r.get("log", False)))
            out.append(Member(len(out), seed, dict(sorted(hp.items()))))
    return out


def phrase(members: list[Member]) -> str:
    """A population in a few words: ``64 agents, seeds 0..63`` or ``48 agents (3 grid points
    x 16 seeds 0..15)``."""
    seeds = sorted({m.seed for m in members})
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        span = f"{seeds[0]}..{seeds[-1]}"
    else:
        span = ", ".join(map(str, seeds)) if len(seeds) <= 4 else f"{seeds[0]}, {seeds[1]}, ..., {seeds[-1]}"
    points = len(members) // len(seeds)
    if points > 1:
        return f"{len(members)} agents ({points} grid points x {len(seeds)} seeds {span})"
    return f"{len(members)} agents, seeds {span}"


def count(plan: Plan) -> int:
    """How many members the plan asks for: grid points x seeds (no validation; counted from
    the lengths, before any list of members is made: a grid can be huge)."""
    return math.prod(len(v) for v in plan.vary.values()) * len(plan.seeds)


# Peak resident memory of a run on the CPU, from the config's shapes alone (no torch): a
# baseline for Python, torch and Lightning, plus per member the algorithm's model
# (``algos.spec.Memory``, fitted to the peak resident memory of one update, torch 2.13 on
# CPU, each algorithm's fit in its spec).
BASE_BYTES = 480 * 2**20


# A member's preallocated buffers (a replay ring) are held twice at the peak: the ring, and
# the checkpoint Lightning serialises whole in memory before writing it (a resume loads one
# too). Measured: algo=dqn debug=tiny with algo.capacity=20,000,000 (a 534 MB ring) peaked
# 1,020 MB above algo.capacity=50,000, whether or not the ring had been written.
BUFFER_COPIES = 2


POSITIONS = {"x": 2423, "o": 2097, "both": 4520}  # decision positions of the learner's seat(s)
FITTED_CELLS = 9  # the board the models were fitted on (tic-tac-toe's cells)

# Another board (``Shapes.board``: its placements, ``mnk.MNK.placements``, a bound on its
# reachable positions known before they are built): each process holds its rule tables, the
# solution and the exact evaluation's tree and working set, about this many bytes a placement
# (4,4,4, one agent: 3.5 GB at the peak, 10.2M placements; tic-tac-toe's are in BASE_BYTES) ...
BOARD_BYTES = 300
# ... and each member about this many more (its moves and reports in a population's final
# evaluation). Measured peaks against this estimate: 4,4,4, 30 REINFORCE members 7.1 GB (7.1),
# 30 PPO 6.9 GB (6.7); 4,4,3, 30 REINFORCE 5.4 GB (7.1: its 10.2M placements overstate its 6.0M
# positions); 3,4,3, 16 REINFORCE 1.84 GB (1.90), one 0.58 GB (0.60).
BOARD_MEMBER_BYTES = 10


# Each weight: itself, its gradient and two optimiser slots (Adam's moments; SGD's momentum).
PER_PARAM = 16


INPUTS = {"planes18": 2, "signed9": 1}  # the encodings' input widths, per cell


@dataclass(frozen=True)
class MemoryEstimate:
    """What a run will hold at its peak: ``processes`` x ``base`` + ``members`` x ``per_member``."""

    members: int
    per_member: float  # bytes
    base: float  # bytes, per process
    processes: int = 1
    buffers: float = 0  # bytes of ``per_member`` for the buffers (a replay, and its checkpoint)
    base_holds: str = "Python and torch"  # what ``base`` is, in the memory check's words

    @property
    def total(self) -> float:
        return self.processes * self.base + self.members * self.per_member


@dataclass(frozen=True)
class Shapes:
    """What a run's peak memory depends on, read from its config (``train/runspec.shapes``):
    its algorithm's fitted model, the net's hidden layers and input encoding, the games of
    one update (and the ``rollouts`` they are played in), the seat(s) it trains, and the
    buffers (a replay) each member preallocates, in bytes."""

    model: Memory
    layers: tuple[int, ...]
    encoding: str | None
    games_per_update: int
    rollouts: int
    side: str
    buffers: int = 0  # bytes one member preallocates (``algos.spec.AlgoSpec.buffer_bytes``)
    cells: int = FITTED_CELLS  # the board's cells: the nets' widths and a game's moves
    board: int = 0  # another board's placements (``mnk.MNK.placements``); 0 on tic-tac-toe


def memory_estimate(shapes: Shapes, members: int = 1, processes: int = 1) -> MemoryEstimate:
    """The peak memory of a run of ``members`` agents of these ``shapes`` (``processes``:
    trainer=ddp's on this machine, each with its own baseline and, for one agent, its own
    batch of games)."""
    model = shapes.model
    hidden = sum(shapes.layers)
    games = shapes.games_per_update  # the games of one batch
    if model.batch == "rollout":
        games = -(-games // shapes.rollouts)
    elif model.batch == "game":
        games = 1
    positions = POSITIONS.get(shapes.side, POSITIONS["both"])
    scale = shapes.cells / FITTED_CELLS  # a game's moves and a position's numbers grow with the cells
    base = BASE_BYTES + BOARD_BYTES * shapes.board
    if shapes.board:  # the positions a batch reaches: a game's moves are up to its cells, a side's
        # half of them, and many repeat (3,4,3, batches of 8,192: 84 MB a member, as cells / 4 says)
        positions = min(shapes.board, games * shapes.cells // 4)
    # The weights themselves: small for the shipped nets, the whole story for a huge one.
    widths = [INPUTS.get(str(shapes.encoding), 2) * shapes.cells, *shapes.layers, shapes.cells]
    params = sum(a * b + b for a, b in itertools.pairwise(widths))
    if model.table is not None:  # no hidden layer: the table's values
        hidden, params = 0, model.table
    per_member = (model.per_member + games * scale * (model.per_game + model.per_game_unit * hidden)
                  + positions * model.per_table_unit * hidden + params * PER_PARAM * model.nets
                  + shapes.buffers * BUFFER_COPIES  # a replay ring, and its checkpoint
                  + shapes.board * (BOARD_MEMBER_BYTES + model.per_position_cell * shapes.cells))
    # One agent under DDP: every process plays its own batch (and its own replay); a population
    # is shared out.
    return MemoryEstimate(members if members > 1 else processes, per_member, base, processes,
                          shapes.buffers * BUFFER_COPIES,
                          "Python, torch and the board's tables" if shapes.board else "Python and torch")
