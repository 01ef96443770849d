"""The typed pieces of a run, read once from its composed config: what the layers below
``train/`` are given instead of the raw ``DictConfig`` (a population's plan, the shapes its
memory estimate needs, the trainer's processes, the settings an algorithm's spec checks), and
a member's own config (the single run
that ``python -m ttt_research seed=S algo.lr=V ...`` composes).

Each reader takes a config whose values ``train/validate.py`` checks (it calls them itself,
after the checks of the keys they read).
"""
from __future__ import annotations

import copy

from omegaconf import DictConfig, OmegaConf

from ttt_research.algos.spec import AlgoSpec, Settings, spec_for
from ttt_research.env.mnk import MNK, TIC_TAC_TOE, config_problem
from ttt_research.errors import value_of
from ttt_research.population import sharing
from ttt_research.population import spec as pop


def _plain(node):
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def settings(cfg: DictConfig) -> Settings:
    """What an algorithm's spec reads of the run (``algos.spec.Settings``): its ``algo``,
    ``reward`` and ``opponent`` blocks as plain values, interpolations resolved."""
    return {group: _plain(cfg[group]) for group in ("algo", "reward", "opponent") if group in cfg}


def algo_spec(cfg: DictConfig) -> AlgoSpec:
    """The spec of the run's algorithm (``algos.spec.spec_for`` of its settings)."""
    return spec_for(settings(cfg))


def plan(cfg: DictConfig) -> pop.Plan:
    """The ``population:`` block as a ``population.spec.Plan`` (one agent, the run's seed,
    for a config from before populations)."""
    seed = int(cfg.seed)
    named = OmegaConf.select(cfg, "population.seeds", default=None)
    size = OmegaConf.select(cfg, "population.size", default=1)
    seeds = tuple(int(s) for s in named) if named is not None else tuple(seed + k for k in range(size))
    return pop.Plan(seed, seeds,
                    pop.parse(_plain(OmegaConf.select(cfg, "population.vary", default=None)), "vary"),
                    pop.parse(_plain(OmegaConf.select(cfg, "population.sample", default=None)), "sample"))


def members(cfg: DictConfig) -> list[pop.Member]:
    """Every member of the config's population, in order (``population.spec.members``)."""
    return pop.members(plan(cfg))


def processes(cfg: DictConfig) -> int:
    """How many training processes the trainer config asks for (``population.sharing.processes``)."""
    devices = value_of(cfg, "trainer.devices")
    return sharing.processes(_plain(devices), value_of(cfg, "trainer.num_nodes"))


def shapes(cfg: DictConfig) -> pop.Shapes:
    """What the run's peak memory depends on (``population.spec.memory_estimate``)."""
    return pop.Shapes(
        model=algo_spec(cfg).memory_of(settings(cfg), board_of(OmegaConf.select(cfg, "game"))),
        layers=tuple(int(h) for h in OmegaConf.select(cfg, "net.hidden", default=[100])),
        encoding=OmegaConf.select(cfg, "net.encoding"),
        games_per_update=int(cfg.algo.games_per_update),
        rollouts=int(OmegaConf.select(cfg, "algo.rollouts", default=1) or 1),
        side=str(OmegaConf.select(cfg, "seat.side", default="both")),
        buffers=algo_spec(cfg).buffer_bytes(settings(cfg)),
        **board_shapes(OmegaConf.select(cfg, "game")))


def board_of(g) -> MNK:
    """The board a ``game`` group names (tic-tac-toe where there is none, or one the config
    check refuses: that check says why)."""
    if g is None or config_problem(g) is not None:
        return MNK(3, 3, 3)
    return MNK(int(g.m), int(g.n), int(g.k))


def board_shapes(g) -> dict:
    """The board's part of the shapes: its cells, and another board's placements (a bound on
    its positions, known before they are built); tic-tac-toe's are in the baseline. A ``game``
    group the config check refuses counts as tic-tac-toe here (that check says why)."""
    if g is None or config_problem(g) is not None:
        return {}
    board = board_of(g)
    return {"cells": board.cells, "board": 0 if board == TIC_TAC_TOE else board.placements}


def memory_estimate(cfg: DictConfig, processes: int = 1) -> pop.MemoryEstimate:
    """The peak memory of the run ``cfg`` describes (``processes``: trainer=ddp's on this machine)."""
    return pop.memory_estimate(shapes(cfg), pop.count(plan(cfg)), processes)  # no population block: 1


def member_config(cfg: DictConfig, member: pop.Member) -> DictConfig:
    """The single-run config of ``member``: its seed and values applied, and the population
    block back to one agent (``size=1``, no seeds, nothing varied), so that the member can be
    run alone: ``python -m ttt_research seed=S algo.lr=V ...`` composes the same config."""
    c = copy.deepcopy(cfg)
    c.seed = member.seed
    for key, value in member.hparams.items():
        OmegaConf.update(c, key, value, merge=False)
    c.population.size = 1
    c.population.seeds = None
    c.population.vary = pop.declared()
    c.population.sample = pop.declared()
    return c
