"""``python -m ttt_research [overrides]``: train one agent (Hydra app; ``-m`` for sweeps).

Examples::

    python -m ttt_research                                  # REINFORCE as O vs random
    python -m ttt_research net=mlp25 seed=3 budget.games=200000
    python -m ttt_research +experiment=antirez_repro        # the seed program, faithfully
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from .config import ConfigError
from .confdir import config_dir


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def main(cfg: DictConfig) -> float:
    from .errors import NonFiniteError
    from .objectives import objective
    from .tracking import finish
    from .train import train  # imported here so that --help and config errors stay fast

    try:
        report = train(cfg, HydraConfig.get().runtime.output_dir)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except NonFiniteError as e:  # the numerical guard (algos/base.py): one line, exit 3
        print(f"error: {e}", file=sys.stderr)
        sys.exit(3)
    finally:
        finish()  # a W&B run never outlives its job, even a failed one (multiruns: one run per job)
    # What sweepers (Optuna, W&B) optimise: `optimized_metric` of the exact evaluation.
    return objective(report, cfg.seat.side, cfg.optimized_metric)


if __name__ == "__main__":
    main()
