"""One update of a run or a population built from overrides on a bare Trainer (no run folder),
and the rates it logged, member by member: what a population's member and its seed's single
run are compared on."""

import lightning as L

from tests.helpers.configs import make_cfg
from ttt_research.train import runspec
from ttt_research.train.run import build
from ttt_research.train.validate import validate

ONE_UPDATE = ["budget.games=512"]  # debug=tiny plays 512 games per update


def first_update(*overrides, games: int | None = None):
    """The module of ``overrides`` after one update (a bare Trainer: no run folder); with
    ``games``, after that budget of games instead."""
    cfg = make_cfg(*([f"budget.games={games}"] if games else ONE_UPDATE), *overrides)
    validate(cfg)
    members = runspec.members(cfg)
    if len(members) == 1:
        cfg = runspec.member_config(cfg, members[0])
    L.seed_everything(cfg.seed, verbose=False)
    module = build(cfg)
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module)
    return module


def rates(update, k=None):
    return {name: float(v if k is None else v.reshape(-1)[k]) for name, v in update.rates.items()}


class Stepping:
    """A plain torch optimiser dressed as Lightning's wrapper of it (``.optimizer``, ``step``,
    ``zero_grad``): what ``Run.optimizer()`` hands an algorithm, for an update taken by hand,
    without a Trainer."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def step(self, closure=None):
        return self.optimizer.step(closure)

    def zero_grad(self, set_to_none: bool = True):
        self.optimizer.zero_grad(set_to_none=set_to_none)
