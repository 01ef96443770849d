"""A W&B workspace (and, if asked, a report) with the charts this project's runs need.

    python -m ttt_research.dashboard --entity E --project P                  # the workspace
    python -m ttt_research.dashboard --entity E --project P --sweep multirun/DATE/TIME
    python -m ttt_research.dashboard --entity E --project P --report --print  # see it, save nothing

Built with W&B's own library for saved views (``wandb-workspaces``, the ``dashboard`` extra).
Every line chart's x axis is ``train/games`` (games played), so runs with different games per
update line up; every metric key comes from the metric contract (``contract.py``), so a chart
cannot name a series that no run logs. The panels, section by section, are described in
docs/dashboards.md.

``--sweep`` names a multirun folder: W&B groups a sweep's jobs by that folder
(``tracking._sweep_group``), so the views show only that group, and the folder's
``multirun.yaml`` says which keys the sweep varied; they become the axes of a parallel
coordinates panel that ends on the ``objective``. ``--params`` names them instead (a sweep
that ran on another machine).

Saving needs a W&B API key and the server: without either, one line says which, and nothing
is half-saved.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ttt_research.contract import (
    EVAL_NAMES,
    EVAL_SEATS,
    EXPLOIT_NAMES,
    GAMES,
    PERF_NAMES,
    ROLLOUT_NAMES,
    UNBEATABLE_FRACTION,
    band,
    eval_name,
)
from ttt_research.errors import MissingExtra, UserError, command
from ttt_research.files.untrusted import Malformed, load_yaml, select
from ttt_research.train import wandb_server

# A value of an override that makes Hydra sweep it: a list (a,b), or a sweep function.
SWEEP_VALUE = re.compile(r"^(range|choice|interval|tag|glob)\(|,")
# Override keys that are never hyperparameters of the runs (report.NOISE, plus the seeds).
NOT_PARAMS = ("seed", "progress", "hydra.run.dir", "hydra.sweep.dir", "resume", "threads")


class DashboardError(UserError):
    """A bad argument, a sweep folder that says nothing, or W&B out of reach."""


def _lib():
    """``wandb_workspaces``' two modules, or one line naming the extra to install."""
    try:
        import wandb_workspaces.reports.v2 as wr
        import wandb_workspaces.workspaces as ws
    except ImportError as e:
        raise MissingExtra("dashboard", "the dashboard", e) from None
    return ws, wr


# ---------------------------------------------------------------------- what the panels show


def line(wr, title: str, ys: list[str], **kw):
    """A line chart of ``ys`` over games played."""
    return wr.LinePlot(title=title, x=GAMES, y=list(ys), title_x="games played", **kw)


def sections(wr, ws, params: list[str] | None = None) -> list:
    """The workspace's sections (each a list of panels), in the order a researcher reads a
    run: is it good (exact vs random), is it safe (vs perfect, worst case), does training
    see what evaluation sees (sampled vs exact), how spread is a population, how fast, and
    for a sweep, which hyperparameters matter."""
    win = [eval_name(s, "random_win") for s in EVAL_SEATS]
    loss = [eval_name(s, "random_loss") for s in EVAL_SEATS]
    out = [
        ws.Section(name="Exact vs random", is_open=True, panels=[
            line(wr, "Win rate vs random (exact)", win, range_y=(0, 1)),
            line(wr, "Loss rate vs random (exact)", loss),
            line(wr, "Tie rate vs random (exact)", [eval_name(s, "random_tie") for s in EVAL_SEATS]),
            line(wr, "Optimal-move rate (exact)", ["eval/optimal_move_rate"], range_y=(0, 1)),
        ]),
        ws.Section(name="Safety", is_open=True, panels=[
            line(wr, "Loss rate vs a perfect player (log scale)",
                 [eval_name(s, "perfect_loss") for s in EVAL_SEATS], log_y=True),
            line(wr, "Worst case: 1 win, 0 draw (unbeatable), -1 loss",
                 [eval_name(s, "worst_case") for s in EVAL_SEATS], range_y=(-1, 1), line_marks={
                     eval_name(s, "worst_case"): "points" for s in EVAL_SEATS}),
            line(wr, "Share of a population's members unbeatable", [UNBEATABLE_FRACTION], range_y=(0, 1)),
        ]),
        # What the agent plays while it learns (docs/exploitability.md): 0 = nobody beats it.
        ws.Section(name="Policy as trained", is_open=True, panels=[
            line(wr, "NashConv: the greedy policy and the policy as trained (log scale)",
                 ["eval/nashconv", "eval/trained_nashconv"], log_y=True),
            line(wr, "A best response's value against the policy as trained, per seat (log scale)",
                 [f"eval/trained_{s}_best_response" for s in EVAL_SEATS], log_y=True),
        ]),
        ws.Section(name="Sampled vs exact", panels=[
            line(wr, "Win rate: sampled in training vs exact", [ROLLOUT_NAMES[0], *win]),
            line(wr, "Loss rate: sampled in training vs exact", [ROLLOUT_NAMES[1], *loss]),
        ]),
        ws.Section(name="Population", panels=[
            line(wr, f"{m.removeprefix('eval/')}: members' median and range", [m, *band(m)],
                 line_marks={band(m)[0]: "dashed", band(m)[1]: "dashed"})
            for m in (*win, *loss)
        ]),
        ws.Section(name="Speed", panels=[
            line(wr, "Games per second", [PERF_NAMES[0]]),
            line(wr, "Environment steps per second (PPO)", [PERF_NAMES[1]]),
        ]),
    ]
    if params is not None:
        columns = [wr.ParallelCoordinatesPlotColumn(metric=wr.Config(p)) for p in params]
        columns.append(wr.ParallelCoordinatesPlotColumn(metric=wr.SummaryMetric("objective")))
        out.append(ws.Section(name="Sweep", is_open=True, panels=[
            wr.ParallelCoordinatesPlot(title="Varied hyperparameters -> objective", columns=columns),
            wr.ParameterImportancePlot(with_respect_to="objective"),
        ]))
    return out


def metric_keys(panels) -> set[str]:
    """Every metric a list of panels names (lines' y, parallel coordinates' columns)."""
    keys: set[str] = set()
    for p in panels:
        for y in getattr(p, "y", None) or []:
            keys.add(y if isinstance(y, str) else y.name)
        for c in getattr(p, "columns", None) or []:
            keys.add(c.metric if isinstance(c.metric, str) else c.metric.name)
    return keys


def known_metrics() -> set[str]:
    """The metric contract's names: what any panel may show."""
    names = (*EVAL_NAMES, *EXPLOIT_NAMES)
    return {*names, *(n for m in names for n in band(m)), *ROLLOUT_NAMES, *PERF_NAMES,
            UNBEATABLE_FRACTION, GAMES}


# ---------------------------------------------------------------------- a sweep's axes


def swept_params(sweep: Path) -> list[str]:
    """The keys a multirun varied, as W&B config keys: ``algo.lr`` for a value, ``choices.net``
    for a config group (tracking logs Hydra's group choices under ``choices``). Read from the
    sweep folder's ``multirun.yaml``: the command line's overrides with a list or a sweep
    function as value, and the sweeper's ``params`` (presets and Optuna search spaces).

    The file is read as plain YAML (``untrusted.py``): an interpolation in it is text, never
    resolved, so no environment value can reach W&B through a key's name."""
    path = sweep / "multirun.yaml"
    if not path.exists():
        raise DashboardError(f"{sweep} is not a multirun folder (no multirun.yaml); name the varied "
                             "keys with --params")
    try:
        hydra = select(load_yaml(path), "hydra")
        task, params = select(hydra, "overrides.task"), select(hydra, "sweeper.params") or {}
        choices = select(hydra, "runtime.choices") or {}
        if not isinstance(task, list) or not isinstance(params, dict) or not isinstance(choices, dict):
            raise Malformed("multirun.yaml: hydra.overrides.task, hydra.sweeper.params or "
                            "hydra.runtime.choices is not what Hydra writes")
    except Malformed as e:
        raise DashboardError(f"{e} (in {sweep}); name the varied keys with --params") from None
    varied: dict[str, str] = {}
    for text in task:
        key, _, value = str(text).partition("=")
        varied[key.lstrip("+~")] = value
    varied.update({str(k): str(v) for k, v in params.items()})
    groups = {str(k) for k in choices}
    keys = [k for k, v in varied.items() if SWEEP_VALUE.search(v) and k not in NOT_PARAMS]
    return [f"choices.{k}" if k in groups else k for k in keys]


# ---------------------------------------------------------------------- building and saving


def build(entity: str, project: str, sweep: str | None = None, params: list[str] | None = None,
          name: str | None = None):
    """The workspace (not saved): the sections above, runs of ``sweep``'s group only if given,
    every chart over games played, runs grouped by nothing (each job its own line)."""
    ws, wr = _lib()
    settings = ws.WorkspaceSettings(x_axis=GAMES, max_runs=100)
    runset = ws.RunsetSettings(filters=ws.And(ws.Metric("Group") == sweep)) if sweep else ws.RunsetSettings()
    title = name or (f"ttt_research: sweep {Path(sweep).name}" if sweep else "ttt_research")
    return ws.Workspace(entity=entity, project=project, name=title, settings=settings,
                        runset_settings=runset, sections=sections(wr, ws, params))


def build_report(entity: str, project: str, sweep: str | None = None, params: list[str] | None = None):
    """A W&B report with the same panels, one panel grid per section, under a short text."""
    ws, wr = _lib()
    filters = ws.And(ws.Metric("Group") == sweep) if sweep else ""
    runset = wr.Runset(entity=entity, project=project, name="runs", filters=filters)
    blocks = [wr.H1("ttt_research"), wr.P(
        "Exact evaluation over the whole game tree (5,478 positions), charted against games played. "
        "A seat is unbeatable when its worst case is 0 or 1.")]
    for section in sections(wr, ws, params):
        blocks += [wr.H2(section.name), wr.PanelGrid(runsets=[runset], panels=section.panels)]
    return wr.Report(entity=entity, project=project, title=f"ttt_research{': ' + sweep if sweep else ''}",
                     blocks=blocks)


def describe(workspace) -> dict:
    """The workspace as plain data: sections, each panel's title and metric keys."""
    return {"entity": workspace.entity, "project": workspace.project, "name": workspace.name,
            "x_axis": workspace.settings.x_axis,
            "sections": [{"name": s.name, "panels": [
                {"type": type(p).__name__, "title": getattr(p, "title", None),
                 "metrics": sorted(metric_keys([p]))} for p in s.panels]} for s in workspace.sections]}


def _check_reachable() -> None:
    """One line if saving cannot work: no API key, or the server does not answer."""
    host, port = wandb_server.server()
    if not wandb_server.has_api_key(host):
        raise DashboardError(f"no W&B API key for {host}: set WANDB_API_KEY or run `wandb login` "
                             "(or look first with --print); nothing was saved")
    if not wandb_server.reachable(host, port):
        raise DashboardError(f"the W&B server {host}:{port} did not answer within 2 s; nothing was saved")


@command()  # not OSError: a reader gone (BrokenPipeError is one) ends quietly, as elsewhere
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ttt_research.dashboard",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--entity", required=True, help="the W&B entity (your user or team)")
    parser.add_argument("--project", default="ttt_research", help="the W&B project (default %(default)s)")
    parser.add_argument("--sweep", help="a multirun folder (multirun/DATE/TIME): only its jobs, and a "
                        "parallel coordinates panel of the keys it varied")
    parser.add_argument("--params", help="comma-separated config keys for the parallel coordinates "
                        "(default: read from the sweep folder's multirun.yaml), e.g. algo.lr,choices.net")
    parser.add_argument("--name", help="the workspace's name (default: ttt_research[: sweep NAME])")
    parser.add_argument("--report", action="store_true", help="also save a W&B report with the same panels")
    parser.add_argument("--print", action="store_true", dest="dry",
                        help="print the workspace's sections and metric keys as JSON; save nothing")
    args = parser.parse_args(argv)
    params = None
    if args.params is not None:
        params = [p.strip() for p in args.params.split(",") if p.strip()]
        if not params:
            raise DashboardError("--params names no key")
    elif args.sweep:
        params = swept_params(Path(args.sweep))
        if not params:
            raise DashboardError(f"the sweep {args.sweep} varied no key (only seeds?); name the axes "
                                 "with --params")
    workspace = build(args.entity, args.project, args.sweep, params, args.name)
    if args.dry:
        print(json.dumps(describe(workspace), indent=1))
        sys.stdout.flush()  # here, not at exit: a reader gone (``| head``) is met inside command()
        return 0
    _check_reachable()
    try:
        workspace.save()
        print(f"workspace: {workspace.url}")
        if args.report:
            report = build_report(args.entity, args.project, args.sweep, params)
            report.save()
            print(f"report: {report.url}")
    except Exception as e:  # the W&B client's errors carry its server's message
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DashboardError(f"W&B refused to save: {first}") from e
    return 0


if __name__ == "__main__":
    sys.exit(main())
