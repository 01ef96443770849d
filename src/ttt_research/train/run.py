"""One training run, as a short plain sequence (``python -m ttt_research`` calls ``train``).

validate the config -> claim the run folder (``runfolder.py``: its lock, and every check of
the folder and of a resume, before anything is written) -> build net, opponent, reward,
algorithm (``_target_``) -> callbacks and loggers -> Trainer -> fit (stopped cleanly by a
signal: ``signals.py``) -> exact evaluation -> run folder: ``eval.json``,
``policy.onnx``, ``curves.png`` beside Lightning's ``checkpoints/last.ckpt`` and
``metrics.csv`` -> the evaluation as a table on the console.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import lightning as L
import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from ttt_research.analysis.curves import plot_curves, plot_population
from ttt_research.contract import VALUE_KEY
from ttt_research.env import board
from ttt_research.errors import ConfigError
from ttt_research.evaluation.onnx import export
from ttt_research.evaluation.text import eval_table
from ttt_research.files import untrusted
from ttt_research.files.atomic import atomic_path, write_atomic
from ttt_research.models.stacks import stack_of
from ttt_research.population import sharing
from ttt_research.population import spec as population
from ttt_research.train import allocator, cells, cores, early_stop, launch, runfolder, runspec
from ttt_research.train import population as population_run
from ttt_research.train.callbacks import ExactEvaluation, PeriodicCheckpoint, final_report
from ttt_research.train.console import GamesProgress, OpeningLine, ProgressLines
from ttt_research.train.csvlog import METRICS_FILE, keep_rows_until, read_rows
from ttt_research.train.host import run_json_host
from ttt_research.train.league import league_problem, league_rows, league_text, write_league
from ttt_research.train.module import RLModule
from ttt_research.train.population import PopulationEvaluation
from ttt_research.train.signals import StopOnSignal, agreed, part_ways, stop_on_signals
from ttt_research.train.tracking import make_loggers, publish, replay
from ttt_research.train.validate import validate


def quiet_lightning() -> None:
    """Keep the console for what matters: Lightning's start-up chatter and the warning about
    dataloader workers (our data is made on the device, there is nothing to load) go."""
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in (".*does not have many workers.*", ".*litlogger.*", ".*LitLogger.*",
                    ".*smaller than the logging interval.*", ".*TorchScript-based ONNX.*",
                    ".*LeafSpec.*", ".*this fit will run with no optimizer.*"):  # a table's update writes it
        warnings.filterwarnings("ignore", message=pattern)


def progress_bar(setting, callbacks: list, evaluation: ExactEvaluation, seat: str) -> bool:
    """``progress``: a Rich display in games with the exact figures on a terminal (``auto``)
    or when asked (``true``); off a terminal (``auto``) or when asked (``lines``), a line per
    exact evaluation; ``false``: neither. Returns False: Lightning's own bar ("Epoch 0/0",
    iterations) stays off either way."""
    tty = sys.stdout.isatty()
    if setting is True or (setting == "auto" and tty):
        callbacks.append(GamesProgress(evaluation, seat))
    elif setting == "lines" or (setting == "auto" and not tty):
        callbacks.append(ProgressLines(evaluation, seat))
    return False


def build_process(cfg: DictConfig, members: list | None = None) -> tuple[RLModule, dict]:
    """The module this process trains and what its Trainer needs besides the config: with
    ``trainer=ddp`` a population's share of the members (``population.sharing.shard``, this
    process's rank read from the environment) and the strategy that keeps them apart;
    otherwise ``build(cfg)`` and nothing. ``members``: the config's (``runspec.members``)."""
    members = members if members is not None else runspec.members(cfg)
    world = runspec.processes(cfg)
    if len(members) > 1 and world > 1:  # trainer=ddp: each process trains its share of the members
        rank = sharing.rank_from_environment(world // (OmegaConf.select(cfg, "trainer.num_nodes") or 1))
        module = build(cfg, sharing.shard(members, rank, world), len(members), rank)
        return module, {"strategy": population_run.SplitMembers()}
    return build(cfg), {}


def build(cfg: DictConfig, members: list | None = None, size: int | None = None,
          shard_rank: int | None = None) -> RLModule:
    """The LightningModule of the config: its algorithm (``cfg.algo``'s ``_target_``) with
    its net, and the opponent, reward and budget, for one agent or a population of them
    (``population.size`` and friends; ``members``: the config's), all in one module.

    One path for both: each member's networks are built under its own seed, as its single
    run builds them (so member k starts where ``seed=<its seed>`` alone starts; a single run
    is the member of ``cfg.seed``), then a population's are stacked
    (``models.stacks.stack_of``: an ``MLPStack``, or a ``QTableStack`` of tables) and the
    values members set for themselves are passed as (N,) tensors to the algorithm, (N, 1)
    ones to the reward table (one per member, broadcast over its games) and the mixed
    opponent's ``p_perfect``; a single run keeps its plain networks and its config's values.
    ``size``: the members of all processes; ``shard_rank``: trainer=ddp's rank whose share
    ``members`` is (a population even when the share is one member)."""
    members = members if members is not None else runspec.members(cfg)
    many = len(members) > 1 or shard_rank is not None
    g = board.of_config(cfg.game)  # the board, built once: every part below that plays it is given it
    # Another board reaches the parts that take it (validate.py lets through only those: an MLP,
    # an algorithm whose spec says any_board, an opponent of ANY_BOARD_OPPONENTS); tic-tac-toe's
    # parts are built as they always were.
    on_board = {} if g == board.TIC_TAC_TOE else {"game": g}
    companions = get_class(cfg.algo._target_).companion_nets
    nets, extra = [], {}
    for m in members:  # (a single run: its config's seed, which train() made its member's)
        L.seed_everything(m.seed if many else cfg.seed, verbose=False)
        net = instantiate(cfg.net, **({"cells": g.cells} if on_board else {}))
        nets.append(net)
        for name, companion in companions(net).items():
            extra.setdefault(name, []).append(companion)
    L.seed_everything(cfg.seed, verbose=False)
    together = stack_of if many else (lambda group: group[0])  # a population's stack, or the one net
    net, member_nets = together(nets), {name: together(group) for name, group in extra.items()}

    def values(key: str) -> torch.Tensor:  # (N,) float32: one value per member
        return torch.tensor([float(m.hparams[key]) for m in members])

    keys = members[0].hparams if many else {}  # (a single run's values are in its config)
    own = {group: {k.split(".", 1)[1]: values(k) for k in keys if k.startswith(group + ".")}
           for group in ("algo", "reward", "opponent")}
    columns = {group: {k: v[:, None] for k, v in own[group].items()} for group in ("reward", "opponent")}
    reward = instantiate(cfg.reward, _partial_=True)(**columns["reward"])
    opponent = instantiate(cfg.opponent, _partial_=True)(**columns["opponent"], **on_board)
    # A partial, called with the built nets: instantiate() would turn them into configs.
    algo = instantiate(cfg.algo, _partial_=True)(net=net, **member_nets, **own["algo"], **on_board)
    return RLModule(algo, opponent, reward, seat=cfg.seat.side, budget_games=cfg.budget.games,
                    seed=cfg.seed, members=members if many else None,
                    population_size=size or len(members), shard_rank=shard_rank, game=g)


OPTIMIZER_FORM = "a partial torch optimiser, e.g. {_target_: torch.optim.Adam, _partial_: true}"


def check_optimizer(cfg: DictConfig) -> None:
    """``algo.optimizer`` (null, or a partial the algorithm completes with its parameters and
    ``lr``) builds a torch optimiser: tried on a parameter of its own before the run folder is
    claimed, so that an unknown target, a target that is no optimiser (``os.getcwd``) or
    arguments the optimiser refuses (``betas: [2, 2]``) are one line, not a traceback once
    ``.hydra/`` and ``run.json`` are written."""
    spec = OmegaConf.select(cfg, "algo.optimizer")
    if spec is None:
        return
    target = spec.get("_target_") if OmegaConf.is_dict(spec) else None
    try:
        made = _locate(str(target))
    except Exception as e:  # noqa: BLE001  not importable, or an error of the module imported
        raise ConfigError(f"algo.optimizer._target_={target} cannot be found ({_reason(e)}): "
                          f"it must be {OPTIMIZER_FORM}") from None
    if not (isinstance(made, type) and issubclass(made, torch.optim.Optimizer)):
        raise ConfigError(f"algo.optimizer._target_={target} is not a torch optimiser (a subclass of "
                          f"torch.optim.Optimizer): it must be {OPTIMIZER_FORM}")
    lr = OmegaConf.select(cfg, "algo.lr")
    try:
        instantiate(spec)([torch.nn.Parameter(torch.zeros(1))], lr=float(lr) if lr is not None else 1e-3)
    except Exception as e:  # noqa: BLE001  whatever the optimiser's own checks raise
        raise ConfigError(f"algo.optimizer does not build an optimiser ({_reason(e)}): it must be "
                          f"{OPTIMIZER_FORM}, with arguments the optimiser takes") from None


def _locate(path: str):
    """The object a dotted path names (the longest importable module, then attributes), as
    Hydra finds a ``_target_``, without Hydra's error log (it would land in ``train.log``)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            found = getattr(found, name)
        return found
    raise ImportError(f"no module named {parts[0]}")


def _reason(error: BaseException) -> str:
    """The first line of the innermost cause (Hydra wraps a constructor's error in its own)."""
    while error.__cause__ is not None:
        error = error.__cause__
    lines = str(error).strip().splitlines()
    return lines[0][:160] if lines else type(error).__name__


def train(cfg: DictConfig, run_dir: str | Path, hydra_files: bool = False, validated: bool = False,
          sweep: bool = False) -> dict:
    """Train one agent into ``run_dir``; return the exact evaluation (``eval.json``).

    The folder is claimed first (``runfolder.claim``: its lock for the run's life, then every
    check of the folder, the resume and the checkpoint), and nothing in it is written before
    every check passed: then ``.hydra/`` (``hydra_files``: the command's, not the compose
    API's), ``run.json`` and the metrics kept from before a resume. A stop signal ends the
    run after the update it arrived in, with a checkpoint (``signals.Stopped``).

    The config is validated once per run, here (``validate.validate``), unless the caller
    did it already on this very config (``validated``): the command does, before torch loads.

    ``sweep``: a job of a multirun, which ``resume=true`` continues as a whole: a job that
    never started starts, a finished job (checked as any resume) is left as it is, its
    ``eval.json`` returned."""
    if not validated:
        validate(cfg)
    check_optimizer(cfg)
    early_stop.check()  # a stop signal while the command started: nothing claimed, nothing trained
    # A process this run started: the first one answers before Lightning's wait in C++, deaf to
    # signals; one that came while it waited ends it here, nothing trained.
    signum = launch.wait_for_first(lambda: early_stop.noted)
    if signum:
        raise early_stop.StoppedEarly(signum)
    job_cfg = cfg  # as the command composed it: what .hydra/config.yaml and the checks compare
    members = runspec.members(cfg)
    if len(members) == 1:  # a population of one is the single run of its seed and values
        cfg = runspec.member_config(cfg, members[0])
    quiet_lightning()
    run_dir = Path(run_dir)
    ckpt_dir = run_dir / "checkpoints"
    first = runfolder.several_processes(cfg) and not runfolder.secondary(cfg)  # it starts the others
    launch.mark(first)
    with runfolder.claim(run_dir, job_cfg, sweep) as folder:
        if folder.finished is not None:  # a finished job of a continued sweep: nothing to do
            print(f"{run_dir} finished already: left as it is", file=sys.stderr)  # (not in train.log)
            return finished_report(folder.finished)
        # kept_freed_memory: no page faults each minibatch
        with stop_on_signals() as stop, allocator.kept_freed_memory(population=len(members) > 1):
            report = _train(cfg, job_cfg, run_dir, ckpt_dir, members, folder, stop, hydra_files)
            if stop.signum:  # noted while the outputs were written: they are whole, the run is done
                raise stop.stopped(stop.games, complete=True)
            return report


def finished_report(path: Path) -> dict:
    """The exact evaluation a finished run wrote (``eval.json``), read as untrusted data and
    checked field by field (``files.untrusted.check_report``), or one line saying why not."""
    try:
        return untrusted.check_report(untrusted.load_json(path, str(path)), str(path))
    except untrusted.Malformed as e:
        raise ConfigError(f"{e}: not the exact evaluation of a finished run; remove the job's folder "
                          "to train it again; nothing was changed") from None


def _train(cfg, job_cfg, run_dir: Path, ckpt_dir: Path, members: list, folder, stop,
           hydra_files: bool) -> dict:
    resume_from = folder.resume_from
    if folder.requeued:  # a requeued SLURM job is a resume for everyone (e.g. W&B continues its run)
        cfg = OmegaConf.merge(cfg, {"resume": True})
    if folder.restart or folder.fresh:  # nothing to continue: a fresh run in its own folder
        cfg = OmegaConf.merge(cfg, {"resume": False})
    threads = cores.starting_threads(cfg.threads)  # auto: one; a population then takes what is free
    if threads is not None:
        torch.set_num_threads(threads)
    L.seed_everything(cfg.seed, verbose=False)
    many = len(members) > 1
    module, extra = build_process(cfg, members)
    league = bool(cfg.get("league", False))  # another board's league may not fit (train/league.py)
    if league and (why := league_problem(module.game, module.total_updates, cfg.eval_every)):
        raise ConfigError(why)
    folder.check_fits(module)  # the last check: the checkpoint's tensors against the module's
    evaluation = (PopulationEvaluation(cfg.eval_every, cfg.seat.side) if many
                  else ExactEvaluation(cfg.eval_every, league=league))
    checkpoint = PeriodicCheckpoint(str(ckpt_dir), cfg.checkpoint_every)
    cell = cells.note(_choice("algo"), _choice("net"), _choice("tuned"))  # the pair's cell, or why none
    callbacks: list = [OpeningLine(describe(cfg, module, members=members, cell=cell.tag), cfg.budget.games,
                                   after=cell.line),
                       evaluation, checkpoint, runfolder.RunIdentity(job_cfg)]
    show_bar = progress_bar(cfg.progress, callbacks, evaluation, cfg.seat.side)
    callbacks += cores.callbacks(cfg.threads, many)  # auto: a population on the cores left free
    callbacks.append(StopOnSignal(stop, checkpoint))  # last: after the update's evaluation and checkpoint
    loggers = make_loggers(cfg, run_dir)  # CSV always, + logger=wandb / tensorboard (tracking.py)
    # The number of updates is the length of the module's data (train/module.py), sized from
    # the Trainer's world_size: with trainer=ddp the budget takes that many times fewer.
    trainer = instantiate(cfg.trainer, logger=loggers, callbacks=callbacks,
                          enable_checkpointing=False, enable_progress_bar=show_bar, **extra)
    # Every check passed: the first writes into the folder.
    folder.commit(job_cfg, hydra_files)
    if folder.requeued and trainer.is_global_zero:
        print(f"SLURM requeued this job (restart {folder.requeued}): resuming from {resume_from}")
    if folder.restart and trainer.is_global_zero:
        print(f"no checkpoint in {run_dir} yet: the run starts again from its beginning")
    if trainer.is_global_zero:
        record_run(cfg, run_dir, resumed=resume_from is not None)
    if resume_from is not None and trainer.is_global_zero:
        resume_metrics(run_dir, resume_from, loggers)  # metrics.csv back to the checkpoint's rows
    trainer.fit(module, ckpt_path=str(resume_from) if resume_from else None)
    stop.games, stop.trained = module.games_played, True
    stop.signum = agreed(trainer, stop.signum)  # trainer=ddp: every process decides the same
    # trainer=ddp: the processes leave their group together, stopped or finished, before rank 0
    # writes the outputs alone (the last collective is above: summarise reads what fit gathered).
    part_ways()
    if stop.signum:  # noted after the last update (or in a resumed run with none left to play)
        raise stop.stopped(stop.games)

    if many:  # population.json and friends; eval.json and policy.onnx of the best member
        report, content = population_run.summarise(cfg, module, evaluation)
    else:
        report, content = single_report(module, evaluation), None
    if trainer.is_global_zero:
        if cfg.get("league", False):  # the final policy against its earlier selves (train/league.py)
            final = evaluation.snapshots[-1][1] if evaluation.snapshots else None
            rows = league_rows(evaluation.snapshots[:-1], final, cfg.seat.side, module.on_board) \
                if final is not None else []
            write_league(run_dir / "league.csv", rows)
            print(league_text(rows))
        title = describe(cfg, module, opponent=False, members=members)
        write_outputs(cfg, run_dir, module, report, title, evaluation, content)
        publish(cfg, loggers, run_dir, report, population=content)  # summary + artifacts, wandb.finish()
    return report


def single_report(module, evaluation: ExactEvaluation) -> dict:
    """A single run's ``eval.json`` report: its last exact evaluation, then the algorithm's
    own figures (PPO without masking), ``value_accuracy`` staying last."""
    report = final_report(module, evaluation)
    value = report.pop(VALUE_KEY, None)
    report.update(module.extra_report())
    if value is not None:
        report[VALUE_KEY] = value
    return report


def describe(cfg: DictConfig, module, opponent: bool = True, members: list | None = None,
             cell: str = "") -> str:
    """One phrase for the run: algorithm, net (and ``cell``, what the pair's tuned cell is to
    the run: ``cells.Note.tag``), seat (and the opponent chosen, when Hydra runs the job and
    ``opponent``), seed."""
    spec = module.net.spec()
    against = _choice("opponent") if opponent else None
    members = members or module.members
    who = population.phrase(members) if members and len(members) > 1 else f"seed {cfg.seed}"
    net = "table" if "table" in spec else f"{spec['hidden']} {spec['encoding']}"  # models/qtable.py
    return (f"{module.name} {net}{f' ({cell})' if cell else ''}, seat {cfg.seat.side}"
            f"{f' vs {against}' if against else ''}, {who}")


def _choice(group: str) -> str | None:
    """The option chosen for a config group, when Hydra runs the job (None in tests)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return HydraConfig.get().runtime.choices.get(group)
    except ValueError:  # not inside a Hydra job (the compose API)
        return None


def record_run(cfg: DictConfig, run_dir: Path, resumed: bool) -> None:
    """``run.json``: the command, the host (CPU model, SIMD level, threads, versions) and
    when each session of the run started, with its ``threads`` setting (``auto``: the count
    a population ran on is ``perf/threads`` in metrics.csv), so two results can be compared knowingly (float
    order, hence exact numbers, can differ between kinds of CPU)."""
    path = run_dir / "run.json"
    sessions = runfolder.sessions(path) if resumed else []  # checked by the claim, before any write
    sessions.append({"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "resumed": resumed,
                     "argv": sys.argv[1:], "threads": cfg.threads, "host": run_json_host()})
    write_atomic(path, json.dumps({"seed": cfg.seed, "host": sessions[-1]["host"],
                                   "sessions": sessions}, indent=2) + "\n")


def resume_metrics(run_dir: Path, checkpoint: Path, loggers: list | None = None) -> None:
    """Before a resumed fit: ``metrics.csv`` keeps its rows up to the games of ``checkpoint``
    (one atomic rewrite, ``csvlog.keep_rows_until``); the resumed session plays the later
    updates again and appends their rows, so each update has its row once. The kept rows
    that the killed session logged but W&B never recorded are sent to W&B again
    (``tracking.replay``; ``loggers``: the run's, made by ``make_loggers``)."""
    path = run_dir / METRICS_FILE
    keep_rows_until(path, _checkpoint_games(checkpoint))
    if loggers:
        replay(loggers, run_dir, read_rows(path)[1])


def _checkpoint_games(checkpoint: Path) -> int:
    """Games played when ``checkpoint`` was written."""
    return int(torch.load(str(checkpoint), map_location="cpu", weights_only=True).get("games_played", 0))


def write_outputs(cfg: DictConfig, run_dir: Path, module, report: dict, title: str,
                  evaluation=None, content: dict | None = None) -> None:
    """The run folder's outputs, one path for one agent and many: a population's own files
    first (``content``: ``population_run.summarise``'s; ``population_run.write_members``), then
    ``policy.onnx`` (with its parity check: the agent's, a population's best member's),
    ``curves.png``, then ``eval.json``, and the console's summary.

    Each file is written whole or not at all (a temporary file renamed, ``atomic``), and
    ``eval.json``, which marks the run complete, comes last: a kill before it leaves a run
    that ``report`` knows is unfinished, never a finished-looking one with a torn model."""
    if content is not None:
        net, meta, parity = population_run.write_members(cfg, run_dir, module, evaluation, content)
    else:
        net, parity = module.net, 0.0
        meta = {"algo": module.name, "acting": module.algo.acting(module).to_meta(),
                "net": json.dumps(module.net.spec()), "seed": str(cfg.seed),
                "games_trained": str(module.games_played), "eval": json.dumps(report)}
    with atomic_path(run_dir / "policy.onnx") as tmp:
        parity = max(parity, export(net, tmp, meta, **module.on_board)["max_abs_diff"])
    if content is not None:  # a population's curves: the members' evaluations (population_evals.csv)
        plot_population(run_dir / "population_evals.csv", run_dir / "curves.png", cfg.seat.side, title)
    else:
        plot_curves(run_dir / "metrics.csv", run_dir / "curves.png", cfg.seat.side, title)
    write_atomic(run_dir / "eval.json", json.dumps(report, indent=2) + "\n")
    if content is not None:
        population_run.print_summary(report, content["aggregate"], module.whole["members"],
                                     module.games_played, title, run_dir, parity, cfg.seat.side)
        return
    print(f"\nExact evaluation after {module.games_played:,} games ({title}):")
    print(eval_table(report, cfg.seat.side))
    print(f"run folder: {run_dir}  (policy.onnx parity: max |diff| {parity:.1e})")
