"""``python -m ttt_research [overrides]`` (or ``ttt-train``): train one agent (Hydra app;
``-m`` for sweeps; ``--help`` lists every command of the project).

Examples::

    python -m ttt_research                                  # REINFORCE as O vs random
    python -m ttt_research net=mlp25 seed=3 budget.games=200000
    python -m ttt_research experiment=antirez_repro         # the seed program, faithfully
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from .confdir import config_dir, plain_overrides
from .config import ConfigError, discard_run_dir, validate


def refuse(error: ConfigError) -> None:
    """One line on stderr, exit 2, and no run folder left behind that holds nothing."""
    hc = HydraConfig.get()
    discard_run_dir(hc.runtime.output_dir, hc.job.name, hc.runtime.cwd)
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def app(cfg: DictConfig) -> float:
    try:
        validate(cfg)  # before torch and Lightning load: a bad value is refused in ~1 s, not ~9
    except ConfigError as e:
        refuse(e)
    from .atomic import OutputError
    from .errors import NonFiniteError
    from .objectives import objective
    from .tracking import finish
    from .train import train

    try:
        report = train(cfg, HydraConfig.get().runtime.output_dir)
    except ConfigError as e:  # found only once training is set up, e.g. resume=true, no checkpoint
        refuse(e)
    except OutputError as e:  # a full or read-only disk: one line, exit 2, no temporary file left
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except NonFiniteError as e:  # the numerical guard (algos/base.py): one line, exit 3
        print(f"error: {e}", file=sys.stderr)
        sys.exit(3)
    except BrokenPipeError:  # `... | head`: the reader left, as a shell's SIGPIPE would end us;
        from .cli import reader_gone  # the last checkpoint stays, resume=true goes on from it

        sys.exit(reader_gone())
    finally:
        finish()  # a W&B run never outlives its job, even a failed one (multiruns: one run per job)
    # What sweepers (Optuna, W&B) optimise: `optimized_metric` of the exact evaluation.
    return objective(report, cfg.seat.side, cfg.optimized_metric)


def main() -> None:
    """``python -m ttt_research`` and ``ttt-train``: the Hydra app on the command line, where
    ``+experiment=NAME`` also works (``confdir.plain_overrides``)."""
    sys.argv[1:] = plain_overrides(sys.argv[1:])
    try:
        app()
    except BrokenPipeError:  # `--help | head`
        from .cli import reader_gone

        sys.exit(reader_gone())


if __name__ == "__main__":
    main()
