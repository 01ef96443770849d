"""A tiny real training run for tests that need a checkpoint and its policy.onnx."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from ttt_research.confdir import config_dir

TINY = ["budget.games=2048", "algo.games_per_update=512", "eval_every=2", "progress=false"]


def tiny_run(run_dir: Path, *overrides: str) -> dict:
    """Train 2,048 games (about 2 s) into ``run_dir``; returns the run's eval.json report."""
    from ttt_research.train import train

    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*TINY, *overrides])
    return train(cfg, run_dir)
