"""What an algorithm declares about itself, read before any tensor exists: its keys and the
values each may take, the keys a population member may set for itself, the networks it
takes (the one its defaults were tuned on, those no settings made it learn on), whether it
trains in several processes, what a population of it cannot do, and its memory model (with the
buffers it preallocates: ``Buffer``). Plain Python over the run's settings (no torch, no Hydra:
``Settings``, the plain values ``train/runspec.settings`` reads once from the config), so the
config check refuses a bad value before torch loads.

Each algorithm ``algos/NAME.py`` declares ``SPEC = AlgoSpec(...)`` in ``algos/NAME_spec.py``
beside it (torch-free, unlike the algorithm). ``spec_for(settings)`` finds the spec of the
run's ``algo._target_``: a spec of this package by its target, else, for an algorithm of
the user's own, the ``SPEC`` of the module beside it (``mine/algo_spec.py`` for
``mine.algo.Mine``), else the spec of the nearest of its base classes that has one (that one
import loads torch), else ``GENERIC`` (the keys every algorithm has). Nothing outside ``algos/``
names an algorithm: the config check, the population and the shell ask the spec.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache

from ttt_research.contract import GAMES_MAX, GAMES_WHY, VALUE_MAX
from ttt_research.errors import ConfigError, bounded, is_int, need, value_of

FLOAT32 = "(training runs in float32)"
CELLS = "experiments/cells/README.md"  # what each (algorithm, network) pair reached: a spec's no_cell pages

# What a spec reads of a run: its settings as plain values, nested by group
# ({"algo": {...}, "reward": {...}, "opponent": {...}}: ``train/runspec.settings``), each read
# by its dotted key with ``errors.value_of``.
Settings = Mapping[str, object]


@dataclass(frozen=True)
class Rule:
    """The values one key may hold: ``ok(v)``, said as ``allowed`` in the error; ``null``:
    None is allowed too (a schedule's constant, an option off); ``most``: an integer bound
    checked after ``ok``, with its own error (``why`` says why); ``note``: added to a single
    run's error (a population member's range is the same)."""

    ok: Callable[[object], bool]
    allowed: str
    null: bool = False
    most: int | None = None
    why: str = ""
    note: str = ""

    def check(self, key: str, v) -> None:
        """``ConfigError`` naming ``key`` unless ``v`` is allowed."""
        if v is None and self.null:
            return
        need(self.ok(v), key, f"{self.allowed} {self.note}".rstrip(), v)
        if self.most is not None:
            need(v <= self.most, key, f"at most {self.most:,}{self.why}", v)


def count(most: int | None = None, why: str = "") -> Rule:
    """A positive integer (at most ``most``)."""
    return Rule(lambda v: is_int(v) and v > 0, "a positive integer", most=most, why=why)


def games() -> Rule:
    """A positive count of games or positions, up to what the counters hold."""
    return count(GAMES_MAX, GAMES_WHY)


def between(lo: float, hi: float, allowed: str, low_open: bool = False, high_open: bool = False,
            null: bool = False, note: str = "") -> Rule:
    """A finite number in [lo, hi] (``low_open``: lo excluded; ``high_open``: hi excluded)."""
    def ok(v) -> bool:
        return bounded(v, lo, hi, low_open) and not (high_open and v == hi)
    return Rule(ok, allowed, null=null, note=note)


def flag() -> Rule:
    """True or false."""
    return Rule(lambda v: isinstance(v, bool), "true or false")


def integer(lo: int, hi: int, allowed: str) -> Rule:
    """An integer in [lo, hi]."""
    return Rule(lambda v: is_int(v) and lo <= v <= hi, allowed)


M = VALUE_MAX
# The rules several algorithms share, by what the key means (an algorithm's spec names its keys).
RATE = between(0, M, f"a positive number up to {M:g}", low_open=True, note=FLOAT32)  # a learning rate
RATE_FINAL = between(0, M, f"a number >= 0, or null (constant); at most {M:g}", null=True)
SHARE = between(0, 1, "a number in (0, 1]", low_open=True)  # gamma, gae_lambda, clip
WEIGHT = between(0, M, f"a number >= 0 up to {M:g}", note=FLOAT32)  # a loss term's weight, a clip norm
PROBABILITY = between(0, 1, "a probability in [0, 1]")
PROBABILITY_FINAL = between(0, 1, "a probability in [0, 1], or null (constant)", null=True)
TEMPERATURE = between(0, M, f"a number >= 0 (0 = greedy) up to {M:g}")
OPTIMIZER = Rule(lambda v: isinstance(v, Mapping) and "_target_" in v,
                 "null or a partial optimizer, e.g. {_target_: torch.optim.Adam, _partial_: true}", null=True)


@dataclass(frozen=True)
class Memory:
    """Peak resident memory per member on the CPU (``population.spec.memory_estimate``):
    ``per_member + games x (per_game + per_game_unit x H) + positions x per_table_unit x H
    + weights x 16 x nets`` (H: hidden units summed over layers; positions: the learner's
    decision positions; games: those one batch plays, ``batch``: the update's, one rollout's
    (``games_per_update / rollouts``) or one). ``table``: the number of values when the net
    is a table (no hidden layer). The defaults are fitted to DQN, AlphaZero and Q-learning."""

    per_member: float = 0
    per_game: float = 2600
    per_game_unit: float = 3
    per_table_unit: float = 13
    nets: int = 1  # networks of the policy's size (PPO: its value network too)
    batch: str = "update"  # update, rollout or game
    table: int | None = None
    # Bytes a member holds per (position, cell) of another board, for an algorithm that tables
    # every position (AlphaZero's search reads its net's logits and values at all of them;
    # Q-learning's table holds a value and a count at each).
    per_position_cell: float = 0


@dataclass(frozen=True)
class Buffer:
    """Records an algorithm preallocates per member, as many as a key of its settings says (a
    replay ring, ``algos/replay.py``): ``record`` bytes each (the ring's fields summed; a test
    of each algorithm checks the figure against the ring it builds). A run holds them whole
    from its start, so ``population.spec.memory_estimate`` counts ``key`` x ``record`` per member."""

    key: str  # algo.KEY: the records
    record: int  # bytes of one record
    what: str  # what the records are, for the memory check's advice

    def bytes(self, settings: Settings) -> int:
        """Bytes of one member's buffer for these settings (0 when the key is unset)."""
        n = value_of(settings, self.key)
        return int(n) * self.record if is_int(n) and n > 0 else 0


@dataclass(frozen=True)
class AlgoSpec:
    """One algorithm, as the config check, a population and the shell see it.

    ``hyper`` is the dataclass of its hyperparameters with their defaults, one docstring under
    each: the schema of ``conf/algo/NAME.yaml`` (``register`` stores it in Hydra's
    ConfigStore as ``algo_schema_NAME``, which the YAML places at ``algo``), so each default
    is written there and nowhere else; its ``_target_`` is the algorithm's class. The fields
    are typed ``Any``: a value is checked by its rule in ``keys`` (one line naming the key and
    its range), not converted by OmegaConf first (``algo.lr=2`` stays 2, ``algo.lr=abc`` is
    refused by the rule)."""

    name: str  # its algo= option (conf/algo/NAME.yaml)
    keys: dict[str, Rule]  # algo.KEY -> its rule (games_per_update is every algorithm's)
    hyper: type | None = None  # its hyperparameters and their defaults (a dataclass)
    target: str = ""  # its class, as algo._target_ names it (from ``hyper`` when it has one)
    acting: str = "greedy"  # the policy it plays while training: what eval.json's as_trained scores
    varies: tuple[str, ...] = ()  # keys a population member may set for itself (a scalar each)
    nets: tuple[str, ...] = ("mlp",)  # the kinds of net it takes: mlp, table
    net_why: str = ""  # why, when it takes a table only
    tuned_on: str = "mlp128"  # the net (conf/net/NAME.yaml) its defaults were tuned on: no cell needed there
    # Nets it takes where no settings tried reached a useful agent (no conf/tuned/ cell, and none
    # to hope for): net -> the page that shows it. A run on one says so in its first lines.
    no_cell: Mapping[str, str] = field(default_factory=dict)
    one_process: str = ""  # why it cannot train in several processes ("" : it can)
    any_board: bool = False  # it trains on any m,n,k board (game=mnk); False: tic-tac-toe only
    # Its own rule for another board (the board, the run's members, a function from the board
    # to its solved positions): raises ConfigError before anything is written (a table that
    # would not fit); None: none.
    board: Callable[..., None] | None = None
    check: Callable[[Settings], None] | None = None  # rules across keys, after each key's own
    population: Callable[[Settings], str | None] | None = None  # why a population cannot train
    memory: Memory = field(default_factory=Memory)
    # Its memory model where its settings and the board (an ``env.mnk.MNK``) choose it: (settings,
    # board) -> a Memory; None: ``memory`` always.
    memory_for: Callable[..., Memory] | None = None
    # What frees memory for it, said first when the memory check refuses a run: (settings,
    # board) -> a clause, or None where it has nothing to add to the check's own advice.
    memory_advice: Callable[..., str | None] | None = None
    buffers: tuple[Buffer, ...] = ()  # what it preallocates per member, sized by its settings

    def __post_init__(self) -> None:
        if self.hyper is not None and not self.target:
            object.__setattr__(self, "target", self.hyper._target_)

    def defaults(self) -> dict:
        """The hyperparameters' defaults as constructor arguments (``_target_`` left out):
        ``PPO(net, **SPEC.defaults())`` builds what ``algo=ppo`` builds."""
        return {f.name: f.default for f in fields(self.hyper) if f.name != "_target_"}

    def memory_of(self, settings: Settings, board) -> Memory:
        """Its memory model for these settings on ``board`` (``memory_for``, else ``memory``)."""
        return self.memory if self.memory_for is None else self.memory_for(settings, board)

    def buffer_bytes(self, settings: Settings) -> int:
        """Bytes one member's preallocated buffers take for these settings (``buffers``)."""
        return sum(b.bytes(settings) for b in self.buffers)

    def rule(self, key: str) -> Rule | None:
        """The rule of ``algo.KEY`` (``key`` without the prefix)."""
        return {"games_per_update": games(), **self.keys}.get(key)

    def validate(self, settings: Settings) -> None:
        """Each of this algorithm's keys by its rule, then the rules across keys."""
        for key in ("games_per_update", *self.keys):
            self.rule(key).check(f"algo.{key}", value_of(settings, f"algo.{key}"))
        if self.check is not None:
            self.check(settings)


# An algorithm of the user's own with no spec of its own or of a base class: the keys all have.
GENERIC = AlgoSpec(name="", keys={})


@cache
def specs() -> dict[str, AlgoSpec]:
    """Every spec of this package, by target: the ``SPEC`` of each ``algos/*_spec.py``."""
    package = importlib.import_module(__package__)
    out = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.endswith("_spec"):
            spec = importlib.import_module(f"{__package__}.{info.name}").SPEC
            out[spec.target] = spec
    return out


def spec_for(settings: Settings) -> AlgoSpec:
    """The spec of the run's algorithm (``algo._target_``)."""
    return spec_of(str(value_of(settings, "algo._target_") or ""))


@cache
def spec_of(target: str) -> AlgoSpec:
    """The spec of the class ``target`` names: this package's, or the ``SPEC`` of the module
    beside a user's algorithm (``mine/algo.py``'s ``mine/algo_spec.py``, read without torch,
    as this package's are), or that of its nearest base class with one."""
    if target in specs():
        return specs()[target]
    module, _, name = target.rpartition(".")
    own = _declared(f"{module}_spec", target)
    if own is not None:
        return own
    try:  # a user's algorithm: imported (torch with it) to read its base classes
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return GENERIC  # instantiating it says what is wrong, as before
    for base in getattr(cls, "__mro__", ())[1:]:
        found = specs().get(f"{base.__module__}.{base.__qualname__}")
        if found is not None:
            return found
    return GENERIC


def schema_name(spec: AlgoSpec) -> str:
    """The ConfigStore node of ``spec``'s hyperparameters, as ``conf/algo/NAME.yaml`` names it."""
    return f"algo_schema_{spec.name}"


@cache
def register() -> None:
    """Store every spec's hyperparameters in Hydra's ConfigStore (``schema_name``), before
    Hydra composes the tree (``train.confdir.config_dir``). At the root, not in a group: a
    schema is no option of the command line."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for spec in specs().values():
        if spec.hyper is not None:
            store.store(name=schema_name(spec), node=spec.hyper)


def _declared(module: str, target: str) -> AlgoSpec | None:
    """The ``SPEC`` of ``module`` if it is an ``AlgoSpec`` for ``target`` (None otherwise)."""
    try:
        found = getattr(importlib.import_module(module), "SPEC", None)
    except (ImportError, ValueError):  # no such module: the algorithm declares nothing of its own
        return None
    return found if isinstance(found, AlgoSpec) and found.target == target else None


def named(key: str) -> list[str]:
    """The algo= options whose members may vary ``algo.KEY``, sorted."""
    return sorted(s.name for s in specs().values() if key in s.varies)


# Rules across keys that several algorithms share.

def rollouts_divide(cfg: Settings) -> None:
    """An update plays ``rollouts`` batches of equal size: anything but a multiple would play
    more games per update than counted, past the budget."""
    gpu, rollouts = value_of(cfg, "algo.games_per_update"), value_of(cfg, "algo.rollouts")
    if gpu % rollouts:
        low, high = gpu - gpu % rollouts, gpu - gpu % rollouts + rollouts
        nearest = f"{low:,} or {high:,}" if low else f"{high:,}"
        raise ConfigError(f"algo.games_per_update must be a multiple of algo.rollouts ({rollouts}): "
                          f"an update plays {rollouts} equal batches, so {gpu:,} would play "
                          f"{high:,} games per update; use e.g. {nearest}")


def zero_sum(cfg: Settings, why: str) -> None:
    """The reward table must be zero-sum (win = -loss, tie = 0)."""
    win, tie, loss = (value_of(cfg, f"reward.{k}") for k in ("win", "tie", "loss"))
    need(tie == 0 and win == -loss, "reward", f"a zero-sum table {why} (win = -loss, tie = 0; "
         "e.g. reward=zero_sum)", {"win": win, "tie": tie, "loss": loss})


def self_play(cfg: Settings) -> bool:
    """The run plays against itself (``opponent=self``)."""
    return str(value_of(cfg, "opponent._target_") or "").endswith(".SelfPlay")

