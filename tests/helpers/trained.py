"""A tiny real training run for tests that need a checkpoint and its policy.onnx."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.configs import make_cfg


def tiny_run(run_dir: Path, *overrides: str) -> dict:
    """Train 2,048 games (about 2 s) into ``run_dir``; returns the run's eval.json report."""
    from ttt_research.train.run import train

    return train(make_cfg(*overrides), run_dir)
