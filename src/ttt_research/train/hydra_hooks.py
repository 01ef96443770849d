"""``Hooks``: Hydra's callback hooks, each doing nothing, for the project's callbacks to override.

The same methods as ``hydra.experimental.callback.Callback``, without importing Hydra: the
callbacks are built at every start, and ``early_stop``'s must load before anything else."""

from __future__ import annotations


class Hooks:
    """Every hook Hydra calls on a callback (``hydra/_internal/callbacks.py``), as a no-op."""

    def on_run_start(self, config, **kwargs) -> None:
        pass

    def on_run_end(self, config, **kwargs) -> None:
        pass

    def on_multirun_start(self, config, **kwargs) -> None:
        pass

    def on_multirun_end(self, config, **kwargs) -> None:
        pass

    def on_job_start(self, config, **kwargs) -> None:
        pass

    def on_job_end(self, config, job_return, **kwargs) -> None:
        pass
