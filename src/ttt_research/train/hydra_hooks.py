"""``Hooks``: Hydra's callback hooks, each doing nothing, for the project's callbacks to override;
``Refused``: what a hook raises to refuse the command.

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


class Refused(BaseException):
    """A hook's refusal of the command, one line (``__main__`` prints it and exits 2). A
    ``BaseException``: Hydra turns a callback's ``Exception`` into a warning and goes on
    (``Callbacks._notify``), and would then write what the refusal keeps from being written."""
