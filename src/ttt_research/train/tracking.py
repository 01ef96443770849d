"""Experiment tracking: the loggers of a run and what they receive when it ends.

``make_loggers`` gives Lightning the CSV logger (always on: ``metrics.csv`` is what plots and
``analysis/runs.py`` read; ``csvlog.MetricsCSV``, append-only, so no kill loses a row) plus
whatever ``logger=`` chose (``wandb``, ``tensorboard``, or both with
``logger=[wandb,tensorboard]``), each writing under the run folder. ``publish`` runs once
the run folder is complete: the objective and the final report as the run's summary,
``curves.png`` as an image, ``eval.json``, ``policy.onnx`` and the final checkpoint as a W&B
``model`` artifact, and then ``wandb.finish()``, so that every job of a multirun is its own
W&B run. ``finish`` is the safety net the entry point calls whatever happened.

A population run (``population.json``) is published as its best member's run, plus the
population: its aggregate in the summary (``population/*``), a ``members`` table (W&B) or
markdown text (TensorBoard) with a row per member, and ``population.json`` and
``population.csv`` in the artifact.

Every W&B series is plotted against games played (``define_metrics``), and so is every
TensorBoard scalar (``GamesTensorBoardLogger``): an update is a different number of games in
different runs, so only games line two runs up.

A run killed and resumed (``resume=true``) continues its W&B run, and ``replay`` sends it
again the ``metrics.csv`` rows up to the checkpoint that the killed session logged but W&B
never recorded (the last seconds before a ``kill -9`` stay in W&B's pipe): its history then
holds every row ``metrics.csv`` holds.

W&B never blocks a run: with ``mode: auto`` it goes online only when an API key is at hand
*and* the server answers within two seconds; otherwise it writes an offline run under
``RUN/wandb/`` (upload it later with ``wandb sync RUN/wandb/offline-run-*``). It is never
asked to log in, so it never prompts.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import warnings
from pathlib import Path

from hydra.utils import get_class, instantiate
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from ttt_research.contract import (
    EVAL_NAMES,
    EXPLOIT_NAMES,
    GAMES,
    better,
    eval_metrics,
    exploit_metrics,
    unbeatable,
)
from ttt_research.errors import ConfigError
from ttt_research.evaluation.objectives import objective
from ttt_research.train.csvlog import MetricsCSV
from ttt_research.train.wandb_server import wandb_mode

log = logging.getLogger(__name__)

WANDB_MODES = ("auto", "online", "offline", "disabled")
# Keys of a logger's config that are ours, not its constructor's.
OWN_KEYS = ("mode", "log_artifacts")
# Members shown in TensorBoard's text tab at most: a markdown table past that is unreadable
# there (and slow to render); population.csv and the W&B table hold them all.
TEXT_ROWS = 1024
# The logged families W&B plots against games played (contract.GAMES): the metric names' prefixes.
SERIES = ("rollout", "train", "eval", "perf", "population")


# ---------------------------------------------------------------------- building


def make_loggers(cfg: DictConfig, run_dir: str | Path) -> list[Logger]:
    """CSV (always) + the ``logger`` group's choices, all writing under ``run_dir``."""
    run_dir = Path(run_dir)
    # Hydra's train.log is already in the run folder; Lightning warns about any file there.
    warnings.filterwarnings("ignore", message=".*Experiment logs directory .* exists and is not empty.*")
    # A fresh run starts metrics.csv anew; a resume appends to the rows kept up to its
    # checkpoint (csvlog.keep_rows_until, which train() calls first).
    loggers: list[Logger] = [MetricsCSV(run_dir, fresh=not cfg.get("resume", False))]
    for key, spec in cfg.logger.items():
        if not (isinstance(spec, DictConfig) and "_target_" in spec):
            continue
        target = str(spec._target_)
        if target.endswith("WandbLogger"):
            loggers.append(_wandb_logger(cfg, spec, run_dir))
        elif target.endswith("TensorBoardLogger"):
            if not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
                raise ConfigError("logger=tensorboard needs the tensorboard package: "
                                  "pip install 'ttt_research[tensorboard]'")
            loggers.append(instantiate(spec, save_dir=str(run_dir)))
        else:
            loggers.append(instantiate(spec, save_dir=str(run_dir)))
        log.debug("logger %s: %s", key, target)
    return loggers


def offline_line(why: str, run_dir: Path) -> str:
    """What an offline W&B run says at its start: why it is offline and how to upload it."""
    return (f"W&B offline ({why}): {run_dir}/wandb/; upload later with "
            f"`wandb sync {run_dir}/wandb/offline-run-*`")


def _wandb_logger(cfg: DictConfig, spec: DictConfig, run_dir: Path) -> Logger:
    if importlib.util.find_spec("wandb") is None:
        raise ConfigError("logger=wandb needs the wandb package: pip install 'ttt_research[wandb]'")
    requested = spec.get("mode", "auto")
    if requested not in WANDB_MODES:
        raise ConfigError(f"logger.wandb.mode must be one of {', '.join(WANDB_MODES)}, got {requested!r}")
    # A W&B variable set but empty (`WANDB_MODE=` in a CI file) means "unset" to a user, but
    # wandb's settings parser takes it as a value and stops with a pydantic traceback.
    for key in [k for k, v in os.environ.items() if k.startswith("WANDB_") and not v.strip()]:
        del os.environ[key]
    # Before wandb is imported: no banners, no prompts, no code or git snapshot to collect.
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("WANDB_DISABLE_CODE", "true")
    mode = wandb_mode(requested)
    import wandb

    kwargs = {k: v for k, v in OmegaConf.to_container(spec, resolve=True).items() if k not in OWN_KEYS}
    kwargs["name"] = kwargs.get("name") or _job_name(run_dir)
    kwargs["group"] = kwargs.get("group") or _sweep_group()
    kwargs["tags"] = list(kwargs.get("tags") or [])
    previous = _previous_run_id(run_dir) if cfg.resume else None
    if previous:
        kwargs["id"] = previous  # resume=true continues the same W&B run (resume="allow")
    kwargs["mode"] = mode
    kwargs["settings"] = wandb.Settings(console="off", silent=True, init_timeout=60)
    run_dir.mkdir(parents=True, exist_ok=True)
    # Called, not instantiate()d: the Settings object must reach wandb.init as it is.
    logger = get_class(kwargs.pop("_target_"))(save_dir=str(run_dir), **kwargs)
    # Lightning always passes `anonymous`, which wandb>=0.2x ignores with a warning per job.
    getattr(logger, "_wandb_init", {}).pop("anonymous", None)
    if mode == "offline":  # a plain line, as the run's others (not in the log's format)
        why = "logger.wandb.mode=offline" if requested == "offline" else "no API key or no server"
        print(offline_line(why, run_dir))
    # The whole resolved config, as the run's config (Lightning logs no hyperparameters of ours),
    # and Hydra's group choices (`choices.net: mlp25`): a sweep over a group varies them, and a
    # dashboard's parallel coordinates need them as values (ttt_research.dashboard).
    config = OmegaConf.to_container(cfg, resolve=True)
    if choices := hydra_choices():
        config["choices"] = choices
    logger.log_hyperparams(config)
    define_metrics(logger.experiment)  # rank 0 only: elsewhere `experiment` is a no-op stand-in
    return logger


class GamesTensorBoardLogger(TensorBoardLogger):
    """Lightning's TensorBoard logger with games played as every scalar's step.

    TensorBoard has one x axis per scalar, its step; Lightning passes the update index, which
    means a different number of games in each run (``algo.games_per_update``). Every row we
    log carries ``train/games``, so it becomes the step and two runs' curves line up."""

    @rank_zero_only
    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        games = metrics.get(GAMES)
        super().log_metrics(metrics, step=step if games is None else int(games))


def metric_definitions() -> list[tuple[str, dict]]:
    """W&B's ``define_metric`` calls, as (name or glob, keyword arguments), in order.

    Every series is plotted against ``train/games`` (``GAMES``), not Lightning's step: an
    update is 2,048 games in one run and 16,384 in another, so only games line two runs up.
    Summaries: an exact win or loss rate, and what a best response gets (NashConv, per seat),
    keep their best value (``contract.better``'s way: ``max`` or ``min``) and their last;
    anything else its last (W&B's default). Exact names are listed first: W&B matches a
    logged key by its own definition before a glob."""
    out: list[tuple[str, dict]] = [(GAMES, {"summary": "max"})]
    for name in (*EVAL_NAMES, *EXPLOIT_NAMES):
        if name in EVAL_NAMES and name.rsplit("_", 1)[-1] not in ("win", "loss"):
            continue  # a worst case, a draw rate, the optimal-move rate: the last is enough
        best = "min" if better(name) == "lower" else "max"
        out.append((name, {"step_metric": GAMES, "summary": f"{best},last"}))
    out += [(f"{prefix}/*", {"step_metric": GAMES}) for prefix in SERIES]
    return out


def define_metrics(run) -> None:
    """Apply ``metric_definitions`` to a W&B run (a new one, or one resumed)."""
    for name, kwargs in metric_definitions():
        run.define_metric(name, **kwargs)


def _job_name(run_dir: Path) -> str:
    """The job's overrides (``net=mlp25,seed=1``) when Hydra runs it, else the folder name."""
    try:
        from hydra.core.hydra_config import HydraConfig

        name = HydraConfig.get().job.override_dirname
    except ValueError:  # not under @hydra.main (tests, the compose API)
        name = ""
    return name or run_dir.name


def hydra_choices() -> dict[str, str]:
    """The job's config group choices, ``{"net": "mlp100", "algo": "reinforce", ...}``
    (Hydra's own groups left out); empty outside a Hydra run (tests compose configs)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        found = HydraConfig.get().runtime.choices
    except ValueError:
        return {}
    return {k: v for k, v in found.items() if isinstance(v, str) and not k.startswith("hydra/")}


def _sweep_group() -> str | None:
    """In a multirun, the sweep folder: one W&B group per sweep. A single run: no group."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        return str(hc.sweep.dir) if hc.mode == RunMode.MULTIRUN else None
    except ValueError:
        return None


def _previous_run_id(run_dir: Path) -> str | None:
    """The id of the W&B run this folder already holds (``wandb/latest-run`` points to it)."""
    latest = run_dir / "wandb" / "latest-run"
    if not latest.exists():
        return None
    return os.path.realpath(latest).rsplit("-", 1)[-1] or None


# ---------------------------------------------------------------------- after a kill


def replay(loggers: list[Logger], run_dir: str | Path, rows: list[dict[str, str]]) -> int:
    """Send a resumed W&B run the ``metrics.csv`` rows (kept up to the checkpoint resumed
    from) that no earlier session of the run recorded; return how many were sent.

    What an earlier session recorded is read from W&B's own transaction logs in the run
    folder (``wandb/*-ID/run-ID.wandb``, online and offline alike): a row counts as recorded
    when a logged row has its games and its kind (an evaluation's, or an update's). If those
    logs cannot be read, every row is sent again: a row twice on a games axis draws the same
    point, a row missing is a hole in the curve."""
    wandb_loggers = [lg for lg in loggers if type(lg).__name__ == "WandbLogger"]
    if not wandb_loggers or not rows:
        return 0
    sent = 0
    for logger in wandb_loggers:
        run = logger.experiment
        seen = _recorded(Path(run_dir), run.id) or set()
        for row in rows:
            metrics = {k: float(v) for k, v in row.items()
                       if v not in ("", None) and k not in ("step", "epoch")}
            if GAMES not in metrics or _row_key(metrics) in seen:
                continue
            step = row.get("step")
            logger.log_metrics(metrics, step=int(float(step)) if step not in ("", None) else None)
            sent += 1
    if sent:
        log.info("W&B: %d row(s) of metrics.csv sent again after the resume", sent)
    return sent


def _row_key(metrics: dict) -> tuple[float, bool]:
    """(games, whether it is an evaluation's row): what tells two logged rows apart."""
    return float(metrics[GAMES]), any(k.startswith("eval/") for k in metrics)


def _recorded(run_dir: Path, run_id: str) -> set[tuple[float, bool]] | None:
    """The rows (``_row_key``) the W&B transaction logs of this run already hold; None if a
    log could not be read. The format: a 7-byte header, then LevelDB-style chunks (4 bytes
    of checksum, 2 of length, 1 of type) in 32 KiB blocks, carrying protobuf ``Record``s;
    a torn tail (a killed session) ends the reading of its file."""
    try:
        from wandb.proto import wandb_internal_pb2 as pb
    except ImportError:
        return None
    import struct

    keys: set[tuple[float, bool]] = set()
    try:
        for path in sorted(run_dir.glob(f"wandb/*-{run_id}/run-{run_id}.wandb")):
            raw = path.read_bytes()
            if raw[:4] != b":W&B":
                return None
            pos, buf = 7, b""
            while pos + 7 <= len(raw):
                left = 32768 - pos % 32768
                if left < 7:  # a block's tail too short for a chunk header is padding
                    pos += left
                    continue
                _, length, kind = struct.unpack("<IHB", raw[pos:pos + 7])
                if pos + 7 + length > len(raw):
                    break  # torn: the session was killed while writing it
                buf += raw[pos + 7:pos + 7 + length]
                pos += 7 + length
                if kind in (1, 4):  # a whole record, or the last chunk of one
                    record = pb.Record()
                    record.ParseFromString(buf)
                    buf = b""
                    if record.WhichOneof("record_type") == "history":
                        items = {(i.key or "/".join(i.nested_key)): i.value_json for i in record.history.item}
                        if GAMES in items:
                            keys.add(_row_key({**items, GAMES: json.loads(items[GAMES])}))
    except Exception:  # a format this reader does not know: send every row again
        log.debug("W&B transaction logs unreadable", exc_info=True)
        return None
    return keys


# ---------------------------------------------------------------------- at the end


def publish(cfg: DictConfig, loggers: list[Logger], run_dir: str | Path, report: dict,
            population: dict | None = None) -> float:
    """Send the finished run folder to the trackers; close the W&B run. Returns the objective.

    ``population``: a population run's ``population.json``, parsed (``report`` is then its
    best member's report); None for a single run, which is published as it always was."""
    run_dir = Path(run_dir)
    name = cfg.get("optimized_metric", "score")
    value = objective(report, cfg.seat.side, name)
    summary = {**eval_metrics(report), **exploit_metrics(report), "objective": value}
    for logger in loggers:
        if type(logger).__name__ == "WandbLogger":
            spec = next((s for s in cfg.logger.values() if isinstance(s, DictConfig)
                         and str(s.get("_target_", "")).endswith("WandbLogger")), {})
            _publish_wandb(logger.experiment, run_dir, report, summary, name,
                           artifacts=bool(spec.get("log_artifacts", True)),
                           population=population, seat=cfg.seat.side)
        elif isinstance(logger, TensorBoardLogger):
            _publish_tensorboard(logger, cfg, run_dir, report, summary, population)
    finish()
    return value


def population_summary(aggregate: dict) -> dict[str, float]:
    """A population's ``aggregate`` (``population.aggregate``) as flat numbers for a run's
    summary: ``population/members``, ``population/stopped`` (how many), ``population/best``
    (the best member's index), ``population/unbeatable_fraction``,
    ``population/objective_median`` and ``population/<eval/* name>_median`` for each of
    ``EVAL_NAMES``. A figure no member has (no member evaluated: None) is left out."""
    out = {"population/members": aggregate["members"],
           "population/stopped": len(aggregate["stopped"]),
           "population/best": aggregate["best"],
           "population/unbeatable_fraction": aggregate["unbeatable_fraction"],
           "population/objective_median": aggregate["objective"]["median"]}
    out.update({f"population/{m}_median": aggregate["metrics"][m]["median"]
                for m in (*EVAL_NAMES, *EXPLOIT_NAMES) if m in aggregate["metrics"]})
    return {k: v for k, v in out.items() if v is not None}


def members_table(population: dict, seat: str) -> tuple[list[str], list[list]]:
    """``population.json``'s members as (columns, one row per member in index order):
    index, seed, each varied key (the union over members, alphabetical; None where a member
    lacks it), games, stopped ("" if it ran to the end), unbeatable, first_unbeatable_games,
    then the ``EVAL_NAMES`` metrics. A member without a report has None for unbeatable and
    the metrics; a stopped member is not unbeatable (its report predates the failure), as in
    ``population.csv``."""
    members = sorted(population["members"], key=lambda r: r["index"])
    hparams = sorted({k for r in members for k in r["hparams"]})
    columns = ["index", "seed", *hparams, "games", "stopped", "unbeatable",
               "first_unbeatable_games", *EVAL_NAMES]
    rows = []
    for r in members:
        report = r["eval"]
        metrics = eval_metrics(report) if report is not None else {}
        safe = None if report is None else r["stopped"] is None and unbeatable(report, seat)
        rows.append([r["index"], r["seed"], *(r["hparams"].get(k) for k in hparams), r["games"],
                     r["stopped"] or "", safe, r["first_unbeatable_games"],
                     *(metrics.get(m) for m in EVAL_NAMES)])
    return columns, rows


def markdown_table(columns: list[str], rows: list[list], limit: int = TEXT_ROWS) -> str:
    """A markdown table of at most ``limit`` rows (a last line says how many were left out);
    numbers to 6 significant digits, None as an empty cell."""
    def cell(v) -> str:
        if v is None:
            return ""
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"\n{len(rows) - limit} more members not shown (population.csv has them all)")
    return "\n".join(lines)


def _publish_wandb(run, run_dir: Path, report: dict, summary: dict, name: str, artifacts: bool,
                   population: dict | None = None, seat: str = "o") -> None:
    import wandb

    pop = population_summary(population["aggregate"]) if population is not None else {}
    # Not the eval/* figures: their summaries come from the logged series (define_metrics:
    # best and last), which writing the final numbers over them would erase. The final
    # report (a population's: its best member's) is the summary's `eval`, whole.
    final = {k: v for k, v in summary.items() if not k.startswith("eval/")}
    run.summary.update({**final, "optimized_metric": name, "eval": report, **pop})
    if (run_dir / "curves.png").is_file():
        run.log({"curves": wandb.Image(str(run_dir / "curves.png"))})
    if population is not None:
        columns, rows = members_table(population, seat)
        run.log({"members": wandb.Table(columns=columns, data=rows)})
    if not artifacts:
        return
    meta = {"eval": report, "objective": summary["objective"], "optimized_metric": name}
    files = [run_dir / "eval.json", run_dir / "policy.onnx", run_dir / "checkpoints" / "last.ckpt"]
    if population is not None:
        meta["population"] = population["aggregate"]
        files += [run_dir / "population.json", run_dir / "population.csv"]
    art = wandb.Artifact(f"policy-{run.id}", type="model", metadata=meta)
    for path in files:
        if path.is_file():
            art.add_file(str(path), name=path.name)
    run.log_artifact(art, aliases=["final"])


def _publish_tensorboard(logger, cfg: DictConfig, run_dir: Path, report: dict, summary: dict,
                         population: dict | None = None) -> None:
    # hparams with the final metrics: TensorBoard's HPARAMS tab compares runs on them. Under
    # final/*: Lightning also logs them as scalars at step 0, which must not join eval/* curves.
    final = {"final/" + k.rsplit("/", 1)[-1]: v for k, v in summary.items()}
    if population is not None:  # population/eval/o_random_win_median -> final/population_o_random_win_median
        final.update({"final/population_" + k.rsplit("/", 1)[-1]: v
                      for k, v in population_summary(population["aggregate"]).items()})
    logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True), final)
    writer = logger.experiment
    writer.add_text("eval.json", "```\n" + json.dumps(report, indent=2) + "\n```")
    if population is not None:
        writer.add_text("population", markdown_table(*members_table(population, cfg.seat.side)))
    png = run_dir / "curves.png"
    if png.is_file():
        import matplotlib.image as mpimg

        writer.add_image("curves", mpimg.imread(str(png)), dataformats="HWC")  # (H, W, 4) in [0, 1]
    writer.flush()


def finish() -> None:
    """Close the W&B run of this process, if one is open (a no-op without wandb).

    ``wandb.finish()`` ends the run; ``wandb.teardown()`` then stops W&B's background
    process, which is what writes the run's files out: without it an offline run can stay a
    7-byte header until the process exits (and a reused joblib worker may never exit cleanly).
    """
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()
        wandb.teardown()
