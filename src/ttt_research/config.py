"""Validation of a composed config, before any work starts.

Hydra already refuses unknown group options (with the list of choices). This module checks
the *values*: each rule names its key and what is allowed, and the first broken rule
becomes the one-line error a user sees (``ConfigError``), with no traceback.
"""

from __future__ import annotations

import math
from numbers import Real

from omegaconf import DictConfig, OmegaConf

from .encodings import ENCODINGS
from .objectives import NAMES as OBJECTIVES
from .rollout import SEATS


class ConfigError(ValueError):
    """A config value is out of its allowed range; the message names key and range."""


def _get(cfg: DictConfig, key: str):
    return OmegaConf.select(cfg, key, default=None)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v)


def _need(ok: bool, key: str, allowed: str, value) -> None:
    if not ok:
        raise ConfigError(f"{key} must be {allowed}, got {value!r}")


def positive_int(cfg, key):
    v = _get(cfg, key)
    _need(_is_int(v) and v > 0, key, "a positive integer", v)


def validate(cfg: DictConfig) -> None:
    """Raise ``ConfigError`` for the first value out of range."""
    v = _get(cfg, "seed")
    _need(_is_int(v) and v >= 0, "seed", "a non-negative integer", v)
    for key in ("budget.games", "eval_every", "checkpoint_every"):
        positive_int(cfg, key)
    v = _get(cfg, "resume")
    _need(isinstance(v, bool), "resume", "true or false", v)
    v = _get(cfg, "threads")
    _need(v is None or (_is_int(v) and v > 0), "threads", "a positive integer or null", v)
    v = _get(cfg, "progress")
    _need(v in ("auto", True, False), "progress", "auto, true or false", v)
    v = _get(cfg, "optimized_metric")
    _need(v in OBJECTIVES, "optimized_metric", f"one of {', '.join(OBJECTIVES)}", v)

    hidden = _get(cfg, "net.hidden")
    ok = OmegaConf.is_list(hidden) and len(hidden) > 0 and all(_is_int(h) and h > 0 for h in hidden)
    _need(ok, "net.hidden", "a non-empty list of positive integers, e.g. [128, 128]",
          OmegaConf.to_container(hidden) if OmegaConf.is_list(hidden) else hidden)
    v = _get(cfg, "net.encoding")
    _need(v in ENCODINGS, "net.encoding", f"one of {', '.join(sorted(ENCODINGS))}", v)
    v = _get(cfg, "net.init")
    _need(v in ("default", "uniform"), "net.init", "default or uniform", v)

    for term in ("win", "tie", "loss", "illegal"):
        v = _get(cfg, f"reward.{term}")
        _need(_is_number(v), f"reward.{term}", "a finite number", v)

    if "p_perfect" in cfg.opponent:
        v = _get(cfg, "opponent.p_perfect")
        _need(_is_number(v) and 0.0 <= v <= 1.0, "opponent.p_perfect", "a probability in [0, 1]", v)
    for key in ("opponent.strong", "opponent.weak"):
        v = _get(cfg, key)
        if v is not None and not OmegaConf.is_config(v):
            _need(v in ("random", "minimax", "rules"), key, "random, minimax or rules", v)
    for key in ("opponent.every", "opponent.size"):
        if _get(cfg, key) is not None:
            positive_int(cfg, key)

    v = _get(cfg, "seat.side")
    _need(v in SEATS, "seat.side", f"one of {', '.join(SEATS)}", v)

    _validate_algo(cfg)


def _validate_algo(cfg: DictConfig) -> None:
    positive_int(cfg, "algo.games_per_update")
    for key in ("algo.minibatches", "algo.epochs"):
        if _get(cfg, key) is not None:
            positive_int(cfg, key)
    v = _get(cfg, "algo.lr")
    _need(_is_number(v) and v > 0, "algo.lr", "a positive number", v)
    if _get(cfg, "algo.temperature") is not None:
        v = _get(cfg, "algo.temperature")
        _need(_is_number(v) and v >= 0, "algo.temperature", "a number >= 0 (0 = greedy)", v)
    for key, lo, hi in (("algo.gamma", 0.0, 1.0), ("algo.gae_lambda", 0.0, 1.0), ("algo.clip", 0.0, 1.0)):
        v = _get(cfg, key)
        if v is not None:
            _need(_is_number(v) and lo < v <= hi, key, f"a number in ({lo:g}, {hi:g}]", v)
    for key in ("algo.ent_coef", "algo.vf_coef", "algo.max_grad_norm"):
        v = _get(cfg, key)
        if v is not None:
            _need(_is_number(v) and v >= 0, key, "a number >= 0", v)
    for key in ("algo.faithful", "algo.masked_softmax", "algo.masking", "algo.shared_trunk",
                "algo.norm_adv"):
        if _get(cfg, key) is not None:
            v = _get(cfg, key)
            _need(isinstance(v, bool), key, "true or false", v)
