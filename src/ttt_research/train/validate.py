"""Validation of a composed config, before any work starts.

Hydra already refuses unknown group options (with the list of choices). This module checks
the *values*: each rule names its key and what is allowed, and the first broken rule
becomes the one-line error a user sees (``ConfigError``), with no traceback.

Values are also bounded by what the code can hold (``SEED_MAX``, ``GAMES_MAX``, ``VALUE_MAX``;
``threads`` by the CPUs the process may use, ``cpus.allowed``),
so a value that passes here never overflows later, and a population's memory is estimated
(``train/runspec.memory_estimate``) and refused when the machine cannot hold it.

It imports neither torch nor Lightning (the names it checks come from ``contract.py``), so
``python -m ttt_research`` refuses a bad value about as fast as ``--cfg job`` prints the
config. Lightning is imported only to check a trainer key or strategy outside the usual
ones, torch only to ask whether a GPU asked for is there. Keys added with ``+`` and the
folder of a refused job are ``train/refusal.py``'s.
"""
from __future__ import annotations

import os
from dataclasses import replace

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from ttt_research.algos.spec import FLOAT32, specs
from ttt_research.contract import (
    ENCODING_NAMES,
    GAMES_MAX,
    GAMES_WHY,
    MEMBERS_MAX,
    SEED_MAX,
    TRAINING_SEATS,
    VALUE_MAX,
)
from ttt_research.env import cache
from ttt_research.env.mnk import MNK, TIC_TAC_TOE, config_problem
from ttt_research.errors import ConfigError, bounded, is_int, is_number, need, positive_int, value_of
from ttt_research.evaluation.objectives import NAMES as OBJECTIVES
from ttt_research.population import spec as pop
from ttt_research.train import cpus, launch, runspec
from ttt_research.train.cells import check_chosen, check_groups
from ttt_research.train.confdir import config_dir


def validate(cfg: DictConfig) -> None:
    """Raise ``ConfigError`` for the first value out of range, or one that cannot be resolved
    (an interpolation such as ``algo.lr='${nope}'``: one line, not OmegaConf's traceback)."""
    try:
        _validate(cfg)
    except InterpolationResolutionError as e:
        key = getattr(e, "full_key", None) or "a value"
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"{key} cannot be resolved: {reason}") from None


def _validate(cfg: DictConfig) -> None:
    v = value_of(cfg, "seed")
    need(is_int(v) and v >= 0, "seed", "a non-negative integer", v)
    need(v <= SEED_MAX, "seed", f"at most {SEED_MAX} (numpy's seed range: 32 bits)", v)
    positive_int(cfg, "budget.games", GAMES_MAX, GAMES_WHY)
    for key in ("eval_every", "checkpoint_every"):
        positive_int(cfg, key)
    for key in ("resume", "league"):
        v = value_of(cfg, key)
        need(isinstance(v, bool), key, "true or false", v)
    if value_of(cfg, "league") and (value_of(cfg, "population.size") or 1) > 1:
        raise ConfigError("league=true plays a run against its earlier selves: one agent only "
                          "(population.size=1); for many agents, python -m ttt_research.tournament")
    v = value_of(cfg, "threads")
    need(v is None or v == "auto" or (is_int(v) and v > 0), "threads",
         "auto, a positive integer or null", v)
    if is_int(v):  # more threads than CPUs only wait for each other (1e8: OpenMP's segfault)
        most = cpus.allowed()
        need(v <= most, "threads", f"at most {most}, the CPUs this process may use "
             "(os.sched_getaffinity), or auto", v)
    v = value_of(cfg, "progress")
    need(v in ("auto", True, False, "lines"), "progress", "auto, true, false or lines", v)
    v = value_of(cfg, "optimized_metric")
    need(v in OBJECTIVES, "optimized_metric", f"one of {', '.join(OBJECTIVES)}", v)
    _validate_tuned()
    _validate_game(cfg)

    _validate_net(cfg)

    for term in ("win", "tie", "loss"):
        in_range(cfg, f"reward.{term}", FLOAT32)
    v = value_of(cfg, "reward.illegal")  # the one reward a member cannot set for itself
    need(bounded(v, -VALUE_MAX, VALUE_MAX), "reward.illegal",
          f"a finite number in [-{VALUE_MAX:g}, {VALUE_MAX:g}] {FLOAT32}", v)

    if "p_perfect" in cfg.opponent:
        in_range(cfg, "opponent.p_perfect")
    for key in ("opponent.strong", "opponent.weak"):
        v = value_of(cfg, key)
        if v is not None and not OmegaConf.is_dict(v):  # a name, or an opponent's config
            need(v in ("random", "minimax", "rules"), key, "random, minimax or rules", v)
    for key in ("opponent.every", "opponent.size"):
        if value_of(cfg, key) is not None:
            positive_int(cfg, key)

    v = value_of(cfg, "seat.side")
    need(v in TRAINING_SEATS, "seat.side", f"one of {', '.join(TRAINING_SEATS)}", v)

    runspec.algo_spec(cfg).validate(runspec.settings(cfg))  # the algorithm's keys, by its spec
    _validate_stages(cfg)
    validate_population(cfg)
    _validate_trainer(cfg)
    check_memory(cfg)


def _validate_game(cfg: DictConfig) -> None:
    """The board (``mnk.config_problem``), and an algorithm that trains on it (its spec's
    ``any_board``)."""
    if (why := config_problem(cfg.game)) is not None:
        raise ConfigError(why)
    game = MNK(cfg.game.m, cfg.game.n, cfg.game.k)
    spec = runspec.algo_spec(cfg)
    if game != TIC_TAC_TOE and not spec.any_board:
        takers = " or ".join(f"algo={s.name}" for s in specs().values() if s.any_board)
        raise ConfigError(f"algo={spec.name} trains on tic-tac-toe only (game=ttt), not on the {game.name} "
                          f"board of game={_choice_of(cfg)}; " + (f"use {takers}" if takers else
                          "training on other boards is not built yet: python -m ttt_research.solve "
                          "gives their exact facts"))
    if game != TIC_TAC_TOE and spec.board is not None:  # the algorithm's own rule there (a table's size)
        spec.board(game, pop.count(runspec.plan(cfg)), cache.positions)
    for target in _opponent_targets(OmegaConf.to_container(cfg.opponent)):  # a curriculum's stages too
        if game != TIC_TAC_TOE and target not in ANY_BOARD_OPPONENTS:
            name = str(target).rsplit(".", 1)[-1]
            raise ConfigError(f"opponent {name} plays tic-tac-toe only (game=ttt), not the {game.name} "
                              f"board of game={_choice_of(cfg)}; choose opponent=random, minimax, rules, "
                              "self, pool, mixed or curriculum")


# The opponents that play any board (``env/opponents.py``: each takes the game, and a
# composite hands it to its parts); another class named by ``_target_`` is refused off 3x3
# (a fixed table over tic-tac-toe's codes, ``TableOpponent``, plays that board only).
ANY_BOARD_OPPONENTS = tuple(f"ttt_research.env.opponents.{name}"
                            for name in ("RandomOpponent", "MinimaxOpponent", "SelfPlay", "RulesOpponent",
                                         "PoolOpponent", "MixedOpponent", "Curriculum"))


def _opponent_targets(node) -> list:
    """Every ``_target_`` in an opponent's config (a curriculum's stages, a mixed's players)."""
    if isinstance(node, dict):
        own = [node["_target_"]] if "_target_" in node else []
        return own + [t for v in node.values() for t in _opponent_targets(v)]
    if isinstance(node, list):
        return [t for v in node for t in _opponent_targets(v)]
    return []


def _choice_of(cfg: DictConfig) -> str:
    return "ttt" if value_of(cfg, "game.name") == "ttt" else "mnk"


TABLE_NET = "ttt_research.models.qtable.QTable"  # net=qtable: a table of action values


def _validate_net(cfg: DictConfig) -> None:
    """An MLP's sizes and encoding, or a table's initial value; a net of a kind the
    algorithm takes (its spec's ``nets``)."""
    table = value_of(cfg, "net._target_") == TABLE_NET
    spec = runspec.algo_spec(cfg)
    if "table" in spec.nets and "mlp" not in spec.nets and not table:
        raise ConfigError(f"algo={spec.name} {spec.net_why}: use net=qtable (got {_net_named(cfg)})")
    if table:
        takers = " or ".join(f"algo={s.name}'s" for s in specs().values() if "table" in s.nets)
        need("table" in spec.nets, "net", "an MLP (mlp25, mlp100, mlp128) for this algorithm: net=qtable "
             f"is {takers} table", "qtable")
        v = value_of(cfg, "net.init")
        need(bounded(v, -VALUE_MAX, VALUE_MAX), "net.init",
             f"a finite number in [-{VALUE_MAX:g}, {VALUE_MAX:g}] (the table's initial value)", v)
        return
    hidden = value_of(cfg, "net.hidden")
    ok = OmegaConf.is_list(hidden) and len(hidden) > 0 and all(is_int(h) and h > 0 for h in hidden)
    need(ok, "net.hidden", "a non-empty list of positive integers, e.g. [128, 128]",
          OmegaConf.to_container(hidden) if OmegaConf.is_list(hidden) else hidden)
    v = value_of(cfg, "net.encoding")
    need(v in ENCODING_NAMES, "net.encoding", f"one of {', '.join(sorted(ENCODING_NAMES))}", v)
    v = value_of(cfg, "net.init")
    need(v in ("default", "uniform"), "net.init", "default or uniform", v)


def _validate_tuned() -> None:
    """``tuned=NAME`` typed by hand names a file of ``conf/tuned/``. The group is optional (most
    (algorithm, network) pairs have no cell), so Hydra skips a missing option in silence: a typo
    would train without the settings it asked for. A cell of another algorithm is refused too
    (``cells.check_chosen``), and a cell's values of another group (a reward) on another option
    of that group than the one it was tuned with, unless typed (``cells.check_groups``)."""
    from hydra.core.hydra_config import HydraConfig

    try:  # the overrides as typed: an interpolation in one is the value's, resolved (or refused) later
        task = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    except ValueError:  # not inside a Hydra job (the compose API)
        return
    choices = HydraConfig.get().runtime.choices
    for override in task:
        key, _, name = override.partition("=")
        if key.lstrip("+") == "tuned" and not (config_dir() / "tuned" / f"{name}.yaml").is_file():
            cells = sorted(p.stem for p in (config_dir() / "tuned").glob("*.yaml"))
            need(False, "tuned", f"one of {', '.join(cells)} (conf/tuned/; it is chosen by algo and net "
                 "when left out)", name)
    check_chosen(choices.get("algo"), choices.get("tuned"))  # another algorithm's cell: its keys
    check_groups(choices.get("tuned"), choices, {o.partition("=")[0].lstrip("+~") for o in task})


def _net_named(cfg: DictConfig) -> str:
    """The net as the user chose it: ``net=mlp128`` (Hydra's choice), else its hidden sizes."""
    from hydra.core.hydra_config import HydraConfig

    try:
        chosen = HydraConfig.get().runtime.choices.get("net")
    except ValueError:  # not inside a Hydra job (the compose API)
        chosen = None
    if chosen:
        return f"net={chosen}"
    hidden = value_of(cfg, "net.hidden")
    return f"an MLP with hidden={OmegaConf.to_container(hidden) if OmegaConf.is_list(hidden) else hidden}"


def in_range(cfg: DictConfig, key: str, why: str = "") -> None:
    """A reward or opponent value a population's members may set for themselves, checked in a
    single run by the same rule (``population.spec.SETTINGS``: each range is written there, once)."""
    ok, allowed = pop.SETTINGS[key]
    v = value_of(cfg, key)
    need(is_number(v) and ok(v), key, f"{allowed} {why}".rstrip(), v)


def _validate_stages(cfg: DictConfig) -> None:
    """``opponent=curriculum``: stages of {until, opponent}, ``until`` rising in (0, 1]."""
    if "stages" not in cfg.opponent:
        return
    stages = value_of(cfg, "opponent.stages")
    allowed = "a non-empty list of {until: share of the budget in (0, 1], opponent: {...}}"
    need(OmegaConf.is_list(stages) and len(stages) > 0
          and all(OmegaConf.is_dict(s) and {"until", "opponent"} <= set(s) for s in stages),
          "opponent.stages", allowed,
          OmegaConf.to_container(stages) if OmegaConf.is_config(stages) else stages)
    last = 0.0
    for i, stage in enumerate(stages):
        v = stage.until
        need(is_number(v) and last < v <= 1.0, f"opponent.stages[{i}].until",
              f"a number in ({last:g}, 1] (stages end in order)", v)
        last = v
        need(OmegaConf.is_dict(stage.opponent) and "_target_" in stage.opponent,
              f"opponent.stages[{i}].opponent", "an opponent config with a _target_",
              OmegaConf.to_container(stage.opponent) if OmegaConf.is_config(stage.opponent)
              else stage.opponent)


def validate_population(cfg: DictConfig) -> None:
    """The ``population:`` block (``population/spec.py`` says what each key means)."""
    if value_of(cfg, "population") is None:  # a config from before populations: one agent
        return
    positive_int(cfg, "population.size", MEMBERS_MAX, " (members of one process)")
    named = value_of(cfg, "population.seeds")
    if named is not None:
        seeds = OmegaConf.to_container(named) if OmegaConf.is_list(named) else named
        need(isinstance(seeds, list) and len(seeds) > 0
              and all(is_int(s) and 0 <= s <= SEED_MAX for s in seeds)
              and len(set(seeds)) == len(seeds), "population.seeds",
              f"null or a non-empty list of distinct non-negative integers up to {SEED_MAX}, e.g. [3, 5, 8]",
              seeds)
        size = value_of(cfg, "population.size")
        need(size in (1, len(seeds)), "population.size", f"1 or {len(seeds)} (the number of "
              "population.seeds, which fix how many seeds each grid point runs)", size)
    else:  # members take seed + k, k < size: the last one's seed must fit numpy's range too
        seed, size = value_of(cfg, "seed"), value_of(cfg, "population.size")
        if is_int(seed) and seed + size - 1 > SEED_MAX:
            raise ConfigError(f"seed + population.size - 1 must be at most {SEED_MAX} (the members' "
                              f"seeds are seed + k, k < size; numpy's seed range), got "
                              f"{seed} + {size} - 1 = {seed + size - 1}")
    v = value_of(cfg, "population.export")
    need(v in pop.EXPORTS, "population.export", f"one of {', '.join(pop.EXPORTS)}", v)

    plan = runspec.plan(cfg)
    grid, sampled = plan.vary, plan.sample
    variable = pop.variable(runspec.algo_spec(cfg))
    for part, spec in (("vary", grid), ("sample", sampled)):
        for key, value in spec.items():
            where = f"population.{part}.{key}"
            if key not in pop.every_variable():
                raise ConfigError(
                    f"{where}: only these keys can differ between members: {', '.join(pop.every_variable())} "
                    f"(values that change shapes, e.g. net, algo.games_per_update, algo, stay a Hydra "
                    f"multirun: -m net=mlp25,mlp100 population.size=64)")
            group, leaf = key.split(".")
            node = value_of(cfg, group)
            home = f" (a key of {pop.home(key)})" if pop.home(key) else ""
            if not (OmegaConf.is_dict(node) and leaf in node):
                raise ConfigError(f"{where}: this config has no {key} to vary{home}")
            if key not in variable:
                raise ConfigError(f"{where}: this algorithm's members cannot set {key} for themselves "
                                  f"(they can: {', '.join(k for k in variable if k.startswith('algo.'))})")
            ok, allowed = variable[key]
            if part == "vary":
                need(isinstance(value, list) and len(value) > 0
                      and all(is_number(x) and ok(x) for x in value) and len(set(value)) == len(value),
                      where, f"a non-empty list of distinct numbers, each {allowed}", value)
                continue
            # bash splits an unquoted {low:1,high:2} into two words before Hydra sees it
            shell = (" (quote the braces for the shell: "
                     f"'{where}={{low:0.1,high:4}}')") if isinstance(value, str) and ":" in value else ""
            need(isinstance(value, dict) and {"low", "high"} <= set(value) <= set(pop.SAMPLE_FIELDS),
                  where, "{low: NUMBER, high: NUMBER, log: true|false} (log is optional)" + shell, value)
            low, high, log = value["low"], value["high"], value.get("log", False)
            for bound in (low, high):
                need(is_number(bound) and ok(bound), where, f"bounds that are each {allowed}", value)
            need(low < high, where, "low < high", value)
            need(isinstance(log, bool), f"{where}.log", "true or false", log)
            if log:
                need(low > 0, where, "low > 0 with log: true (a log-uniform draw)", value)
    both = sorted(set(grid) & set(sampled))
    if both:
        raise ConfigError(f"population.vary.{both[0]} and population.sample.{both[0]}: "
                          "a key is varied on a grid or sampled, not both")
    n = pop.count(plan)
    if n > MEMBERS_MAX:
        raise ConfigError(f"a population of {n:,} members (grid points x seeds) is more than "
                          f"{MEMBERS_MAX:,}, the most one process trains")
    if n > 1:
        _population_setting(cfg, n)


def _population_setting(cfg: DictConfig, n: int) -> None:
    """What a population of ``n`` > 1 cannot train yet, refused in one line each."""
    spec = runspec.algo_spec(cfg)
    why = spec.population(runspec.settings(cfg)) if spec.population is not None else None  # its own first
    if why is not None:
        raise ConfigError(f"population of {n} agents: {why}")
    if value_of(cfg, "algo.optimizer") is not None:
        why = ("a population uses its algorithm's own optimiser, one learning rate per member: "
               "leave algo.optimizer null")
    elif runspec.processes(cfg) > n:
        why = (f"trainer=ddp gives each process its share of the members: {runspec.processes(cfg)} "
               "processes need at least as many members")
    elif runspec.processes(cfg) > 1 and value_of(cfg, "trainer.strategy") not in ("ddp", None):
        why = "trainer=ddp shares the members out with strategy ddp only (each process its share)"
    if why:
        raise ConfigError(f"population of {n} agents: {why}")


ACCELERATORS = ("cpu", "gpu", "cuda", "mps", "auto")


# Arguments of lightning.Trainer and strategy names that need no import of Lightning to
# accept (tests/commands/test_cli.py checks each against Lightning); any other is looked up there.
TRAINER_KEYS = frozenset({
    "accelerator", "strategy", "devices", "num_nodes", "precision", "logger", "callbacks",
    "max_epochs", "min_epochs", "max_steps", "min_steps", "max_time", "log_every_n_steps",
    "num_sanity_val_steps", "enable_checkpointing", "enable_progress_bar", "enable_model_summary",
    "gradient_clip_val", "gradient_clip_algorithm", "deterministic", "benchmark",
    "default_root_dir", "limit_train_batches", "limit_val_batches", "val_check_interval",
    "check_val_every_n_epoch", "accumulate_grad_batches", "use_distributed_sampler",
    "sync_batchnorm", "reload_dataloaders_every_n_epochs", "fast_dev_run", "profiler",
    "detect_anomaly", "barebones", "plugins", "inference_mode"})


STRATEGIES = frozenset({"auto", "ddp", "ddp_spawn", "ddp_fork", "ddp_notebook",
                        "ddp_find_unused_parameters_true"})


# Trainer arguments the project sets itself, refused rather than silently overridden or half
# honoured: one epoch of exactly the budget's updates (train/module.py), the run's own loggers,
# callbacks, checkpoints and progress (train/run.py), and manual optimisation, under which
# Lightning's accumulation and clipping refuse to run.
BUDGET = "the updates come from budget.games, in one epoch: set budget.games instead"
PROJECT_KEYS = {
    **dict.fromkeys(("max_epochs", "min_epochs", "max_steps", "min_steps", "limit_train_batches",
                     "fast_dev_run", "overfit_batches"), BUDGET),
    **dict.fromkeys(("accumulate_grad_batches", "gradient_clip_val", "gradient_clip_algorithm"),
                    "the algorithms step their own optimisers; algo.max_grad_norm clips where one does"),
    **dict.fromkeys(("logger", "callbacks", "enable_checkpointing", "enable_progress_bar"),
                    "the run sets it (logger=..., checkpoint_every, progress=...)"),
}


def _trainer_keys(cfg: DictConfig) -> None:
    for key, why in PROJECT_KEYS.items():
        v = value_of(cfg, f"trainer.{key}")
        if v is not None and not (key == "max_epochs" and v == 1):  # trainer_base.yaml's own 1
            raise ConfigError(f"trainer.{key} is not a setting of this project ({why}), got "
                              f"{OmegaConf.to_container(v) if OmegaConf.is_config(v) else v}")
    unusual = [k for k in cfg.trainer if k != "_target_" and k not in TRAINER_KEYS]
    if not unusual:
        return
    import inspect

    import lightning as L

    known = set(inspect.signature(L.Trainer.__init__).parameters) - {"self"}
    for key in unusual:
        need(key in known, f"trainer.{key}", "an argument of lightning.Trainer (this key is not one)",
              value_of(cfg, f"trainer.{key}"))


def _validate_trainer(cfg: DictConfig) -> None:
    """The Lightning Trainer's keys, before Lightning itself would fail with a traceback."""
    _trainer_keys(cfg)
    v = value_of(cfg, "trainer.accelerator")
    need(v in ACCELERATORS, "trainer.accelerator", f"one of {', '.join(ACCELERATORS)}", v)
    if v in ("gpu", "cuda"):
        import torch

        need(torch.cuda.is_available(), "trainer.accelerator",
              "cpu here (no CUDA GPU is visible to torch on this machine)", v)
    v = value_of(cfg, "trainer.devices")
    ok = (is_int(v) and (v > 0 or v == -1)) or v == "auto" or (
        OmegaConf.is_list(v) and len(v) > 0 and all(is_int(d) and d >= 0 for d in v))
    need(ok, "trainer.devices", "a positive integer, -1 (all), auto, or a list of device indices",
          OmegaConf.to_container(v) if OmegaConf.is_config(v) else v)
    if value_of(cfg, "trainer.accelerator") == "cpu":  # CPU processes are counted, not indexed
        need(not OmegaConf.is_list(v), "trainer.devices", "a number of processes with "
              "trainer.accelerator=cpu", OmegaConf.to_container(v) if OmegaConf.is_config(v) else v)
    for key, lo in (("trainer.num_nodes", 1), ("trainer.log_every_n_steps", 1),
                    ("trainer.num_sanity_val_steps", 0)):
        v = value_of(cfg, key)
        if v is not None:
            need(is_int(v) and v >= lo, key, "a positive integer" if lo else "an integer >= 0", v)
    v = value_of(cfg, "trainer.enable_model_summary")
    need(v is None or isinstance(v, bool), "trainer.enable_model_summary", "true or false", v)
    v = value_of(cfg, "trainer.strategy")
    usual = isinstance(v, str) and v in STRATEGIES
    if v is not None and not usual and not (OmegaConf.is_dict(v) and "_target_" in v):
        from lightning.pytorch.strategies import StrategyRegistry

        names = ["auto", *sorted(n for n in StrategyRegistry.available_strategies() if n.startswith("ddp"))]
        need(isinstance(v, str) and (v == "auto" or v in StrategyRegistry.available_strategies()),
              "trainer.strategy", f"a Lightning strategy, e.g. {', '.join(names[:4])}",
              OmegaConf.to_container(v) if OmegaConf.is_config(v) else v)
    spec = runspec.algo_spec(cfg)
    if runspec.processes(cfg) > 1 and spec.one_process:
        need(False, "algo", spec.one_process, spec.name)
    why = launch.stray(runspec.processes(cfg))  # LOCAL_RANK=1 left set: a 30-minute wait, deaf to signals
    if why:
        raise ConfigError(why)


def available_memory() -> int | None:
    """Bytes the machine can give a new process now (``MemAvailable`` of /proc/meminfo), or
    None where there is no such file (macOS, Windows): then nothing is checked."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gb(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.1f} MB"


def check_memory(cfg: DictConfig) -> None:
    """Refuse a run whose estimated peak memory (``train/runspec.memory_estimate``: the
    algorithm's model, and the buffers its spec declares, a replay of ``algo.capacity``
    records) exceeds what the machine has available, before it starts rather than in the
    allocator minutes later. On a GPU the batches live in the GPU's memory, but the buffers
    are made on the host first (then moved): they and the baseline are checked. In the process
    the user started (a DDP rank's own start would see the others' memory as taken)."""
    if os.environ.get("LOCAL_RANK", "0") != "0":
        return
    free = available_memory()
    if free is None:
        return
    devices = value_of(cfg, "trainer.devices")
    here = devices if is_int(devices) and devices > 0 else 1  # processes on this machine
    est = runspec.memory_estimate(cfg, here)
    if value_of(cfg, "trainer.accelerator") not in ("cpu", None):
        est = replace(est, per_member=est.buffers)
    if est.total <= free:
        return
    spec, settings = runspec.algo_spec(cfg), runspec.settings(cfg)
    held = f"{est.members:,} x {_gb(est.per_member)}"
    if est.buffers * 2 >= est.per_member and spec.buffers:  # its replay is most of it
        buffer = max(spec.buffers, key=lambda b: b.bytes(settings))
        n = value_of(settings, buffer.key)
        held += (f": {buffer.key}={n:,} {buffer.what} x {buffer.record} B, held twice (the replay and "
                 f"its checkpoint) = {_gb(est.buffers)} a member,")
        room = free - est.processes * est.base - est.members * (est.per_member - est.buffers)
        fit = max(0, int(room // (est.members * buffer.record * pop.BUFFER_COPIES)))
        what = f"a population of {est.members:,} members" if est.members > here else "this run"
        advice = f"lower {buffer.key} (at most {fit:,} fit here)"
    elif est.members > here:  # a population: how many members would fit
        fit = max(0, int((free - est.processes * est.base) // est.per_member))
        what, advice = (f"a population of {est.members:,} members",
                        f"at most {fit:,} members fit here (population.size, or the grid of "
                        "population.vary); train the rest in another job (-m seed=...)")
    else:
        what, advice = "this run", "play fewer games per update (algo.games_per_update)"
    extra = None if spec.memory_advice is None else spec.memory_advice(
        settings, runspec.board_of(OmegaConf.select(cfg, "game")))
    if extra:
        advice = f"{extra}, or {advice}"
    raise ConfigError(f"{what} needs about {_gb(est.total)} of memory ({held} + "
                      f"{_gb(est.processes * est.base)} for {est.base_holds}), "
                      f"more than the {_gb(free)} this machine has available (MemAvailable): {advice}")
