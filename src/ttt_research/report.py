"""``python -m ttt_research.report DIR [DIR ...]``: statistics across seeds for sweeps, populations, or both.

Every folder under DIR that holds an ``eval.json`` is a run; a population's folder
(``population.json``) counts as one run per member, with the member's seed and its varied
hyperparameters as overrides. Runs are grouped into *configurations* by their Hydra
overrides (``.hydra/overrides.yaml``) and member hyperparameters, minus ``seed`` and the
``population.*`` keys; only the keys that differ between runs become columns.

Per configuration and per exact metric M (default: win and loss vs random for each trained
seat, and the optimal-move rate; ``--metrics`` picks others from the metric contract, e.g.
``o_perfect_loss``): the interquartile mean with its 95% stratified bootstrap interval, the
median and the mean; and the share of seeds that cannot be beaten with its Wilson interval
(``stats.py`` says why these). Also the training games after which a seed first was, and
then stayed, unbeatable (from the exact evaluations during training) and the sweep objective.

Writes, into DIR (or ``--out``): ``report.md`` (also printed), ``report.csv`` (one row per
configuration: ``M_iqm``, ``M_iqm_ci_low``, ``M_iqm_ci_high``, ``M_median``, ``M_mean``, ...,
``seeds``, ``unbeatable``, ``unbeatable_fraction``, ``unbeatable_ci_low``,
``unbeatable_ci_high``), ``runs.csv`` (one row per seed), ``report.png`` (IQM learning curves
with their 95% bands) and ``report_profiles.png`` (performance profiles: the share of seeds
above each score; for a loss, at or below). ``--json`` prints report.csv's rows as JSON
instead of the table. ``--compare A B`` prints the probability that configuration A improves
on B (a seed of A beats a seed of B), with its 95% interval, for each metric, and warns when
a side has fewer than ``FEW_SEEDS`` seeds.

Also, per configuration and trained seat (all together; X and O apart when it trains both):
the games until each seed's first unbeatable evaluation (median and IQR over the seeds that got
there, and how many never did) and the training wall seconds per agent until then (from
``elapsed_s``: the job's seconds divided by the agents it trained together), in a second table
of report.md and in report.csv; value accuracy (IQM of eval.json's ``value_accuracy``) where
the runs learn values; and ``report_safe.png``, the share of seeds unbeatable against games
(and wall seconds) with its Wilson band (``analysis/safety.py``).

Several folders (``DIR DIR ...``, e.g. one population per algorithm) compare as one
configuration each, named by the folder (or ``--names a,b,c``), whatever their runs'
overrides are; the report then goes to ``--out``.

DIR may come from anywhere: its files are read as data (``untrusted.py``: no interpolation is
resolved, so no environment value reaches a report), a folder without ``eval.json`` (the last
file a run writes: still running, or killed) and a folder whose files are malformed are
skipped, each with a warning on stderr naming the file and the field, and counted in report.md.
A run's record is not taken on trust: where it has its policy (``policy.onnx``), its greedy
figures must be what the exact evaluation of that policy gives, or the run is skipped, named
with the figure that differs (``analysis/recheck.py``); folders holding the same seed and
config count as one run, the copies said in one line (``analysis/copies.py``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ttt_research.analysis import safety
from ttt_research.analysis.figures import plot, plot_profiles, plot_safe
from ttt_research.analysis.runs import ReportError
from ttt_research.analysis.scan import find_runs, scan_runs
from ttt_research.analysis.skipped import skipped_markdown, warn_skipped
from ttt_research.analysis.summary import (
    CONFIGURATION,
    FEW_SEEDS,
    METRICS,
    best_trial,
    ci_text,
    compare,
    default_metrics,
    find_group,
    label_folders,
    label_text,
    markdown,
    missing_jobs,
    records,
    summarise,
    summarise_one,
    write_rows,
)
from ttt_research.contract import (
    EVAL_SEATS,
)
from ttt_research.errors import command
from ttt_research.evaluation import stats
from ttt_research.evaluation.objectives import direction
from ttt_research.files.atomic import describe_os_error, write_atomic


def report(root: str | Path | list, out: str | Path | None = None, sort: str = "none",
           metrics: list[str] | None = None, reps: int = stats.REPS, seed: int = 0,
           names: list[str] | None = None) -> dict[str, Path]:
    """Write report.md, report.csv, runs.csv, report.png, report_profiles.png and report_safe.png
    for the runs under ``root`` (a folder; or a list of folders, one configuration each,
    named by ``names`` or their folder names)."""
    return _report(root, out, sort, metrics, reps, seed, names)[0]


def _folders(roots: list[Path], names: list[str] | None) -> tuple[list, list[tuple[Path, list]]]:
    """(the runs of several folders, each labelled as its configuration; each folder's skipped
    runs). A folder that holds no complete run is left out with a warning; one that does not
    exist is an error."""
    if names is not None and len(names) != len(roots):
        raise ReportError(f"--names gives {len(names)} name(s) for {len(roots)} folders: one name per folder")
    names = names or [r.name or str(r) for r in roots]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ReportError(f"two folders would be named {dup[0]!r}: name each with --names a,b,c")
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:  # a typo, not a row still running: refuse rather than report fewer rows
        raise ReportError(f"no such directory: {missing[0]}")
    found, skipped = [], []
    for root, name in zip(roots, names, strict=True):
        try:
            runs, skip = scan_runs(root, empty=True)
        except ReportError as e:
            print(f"warning: left out {root}: {e}", file=sys.stderr)
            continue
        warn_skipped(skip, root)
        if not runs:
            print(f"warning: left out {root}: no complete run", file=sys.stderr)
            continue
        found.append((name, runs))
        skipped.append((root, skip))
    if not found:
        raise ReportError(f"none of the {len(roots)} folders holds a complete run")
    return label_folders(found), skipped


def _report(root, out, sort, metrics, reps, seed, names=None) -> tuple[dict[str, Path], list[dict]]:
    """``report``, also returning report.csv's rows (for ``--json``, so nothing is computed twice)."""
    roots = [Path(r) for r in root] if isinstance(root, (list, tuple)) else [Path(root)]
    partial = ""
    if len(roots) == 1 and names is None:
        runs, skipped = scan_runs(roots[0])
        warn_skipped(skipped, roots[0])
        done = tuple(s.path for s in skipped if s.kind in ("copy", "contradicted"))  # finished, left out
        skipped, keys = [(roots[0], skipped)], None
        if partial := missing_jobs(roots[0], runs, done):
            print(f"warning: {partial}", file=sys.stderr)
    else:
        if out is None and len(roots) > 1:
            raise ReportError("several folders: say where the report goes with --out DIR")
        runs, skipped = _folders(roots, names)
        keys = [CONFIGURATION]
    out = Path(out) if out else roots[0]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ReportError(f"cannot write the report into {out}: {describe_os_error(e)}") from e
    keys, rows, per_run = summarise(runs, metrics, reps, seed, keys)
    if sort == "objective":  # best first (the objectives that are minimised: smallest first)
        sign = -1 if direction(rows[0]["metric"]) == "maximize" else 1
        rows.sort(key=lambda r: sign * (r["objective"].iqm if r["objective"] else float("-inf")))
    files = {"md": out / "report.md", "csv": out / "report.csv", "runs": out / "runs.csv",
             "png": out / "report.png", "profiles": out / "report_profiles.png",
             "safe": out / "report_safe.png"}
    where = ", ".join(str(r) for r, _ in skipped)
    intro = (f"{len(runs)} seeds under {where}, {len(rows)} configuration(s). Metrics: the interquartile "
             f"mean over the seeds [its 95% stratified bootstrap CI, {reps} resamples]; unbeatable: "
             f"seeds that cannot be beaten from any trained seat (on a board one side wins, as 3,4,3: seeds "
             f"that hold the game's value, the winner forcing the win and the loser losing only to perfect "
             f"play) [Wilson 95% CI]. {checked_text(runs)}\n\n"
             + (f"**Incomplete:** {partial}.\n\n" if partial else ""))
    tables = markdown(keys, rows) + safety.markdown([label_text(r["label"]) for r in rows],
                                                     [r["runs"] for r in rows])
    write_atomic(files["md"], intro + tables + "".join(skipped_markdown(s, r) for r, s in skipped)
                 + (best_trial(roots[0]) if len(roots) == 1 else ""))
    table = records(keys, rows)
    write_rows(files["csv"], table)
    write_rows(files["runs"], per_run)
    plot(files["png"], keys, rows, reps, seed)
    plot_profiles(files["profiles"], rows, reps, seed)
    plot_safe(files["safe"], rows)
    return files, table


def checked_text(runs: list) -> str:
    """What the report checked of the figures it averages (``analysis/recheck.py``)."""
    k, n = sum(r.checked for r in runs), len(runs)
    return (f"Figures re-checked from each seed's policy.onnx: {k} of {n}"
            + (" (the others have no policy file)." if k < n else "."))


def _metric_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [m.strip().removeprefix("eval/") for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in METRICS]
    if bad or not names:
        raise ReportError(f"--metrics: unknown metric {', '.join(bad) or repr(text)} "
                          f"(one or more of: {', '.join(METRICS)})")
    return names


@command()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ttt_research.report", description=__doc__.split("\n")[0])
    parser.add_argument("dir", nargs="*", metavar="DIR", help="a sweep folder (multirun/DATE/TIME), a "
                        "population's run folder, or any folder of them; several: one configuration each")
    parser.add_argument("--out", help="where to write the report files (default: DIR; required for several)")
    parser.add_argument("--names", help="comma-separated names of the DIRs' configurations, in order "
                        "(default: each folder's name)")
    parser.add_argument("--sort", choices=("none", "objective"), default="none",
                        help="order of the configurations: as found (job order), or best objective first")
    parser.add_argument("--metrics", help="comma-separated exact metrics, e.g. o_random_win,o_perfect_loss "
                        "(default: win and loss vs random per trained seat, optimal_move_rate)")
    parser.add_argument("--json", action="store_true", help="print report.csv's rows as JSON, not the table")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"),
                        help="the probability that configuration A improves on B: each a key=value "
                        "(a varying key), a row number, or (without DIR) a folder of runs")
    parser.add_argument("--reps", type=int, default=stats.REPS,
                        help="bootstrap resamples (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default %(default)s)")
    args = parser.parse_args(argv)
    metrics = _metric_list(args.metrics)
    if args.reps < 100:
        raise ReportError(f"--reps must be at least 100, got {args.reps}")
    names = None if args.names is None else [n.strip() for n in args.names.split(",")]
    if names is not None and (not all(names) or not args.dir):
        raise ReportError(f"--names: {args.names!r} is not one name per DIR, separated by commas")
    if args.compare:
        return _compare_main(args, metrics, names)
    if not args.dir:
        raise ReportError("give a folder of runs (DIR), or --compare A B with two folders")
    files, rows = _report(args.dir, args.out, args.sort, metrics, args.reps, args.seed, names)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(files["md"].read_text(), end="")
    print("\nwrote " + ", ".join(str(p) for p in files.values()))
    return 0


def _compare_main(args, metrics: list[str] | None, names: list[str] | None) -> int:
    a_spec, b_spec = args.compare
    if not args.dir:  # two folders: each is one configuration, whatever its runs vary
        for d in (a_spec, b_spec):
            if not Path(d).is_dir():
                raise ReportError(f"--compare without DIR takes two folders of runs; no such directory: {d}")
        runs = {d: find_runs(Path(d)) for d in (a_spec, b_spec)}
        seats = [s for s in EVAL_SEATS if any(s in r.trained for rs in runs.values() for r in rs)]
        metrics = metrics or default_metrics(seats)
        a, b = (summarise_one(runs[d], metrics, d) for d in (a_spec, b_spec))
    elif len(args.dir) > 1 or names is not None:  # A and B: configuration names (or row numbers)
        runs, _ = _folders([Path(d) for d in args.dir], names)
        keys, rows, _ = summarise(runs, metrics, args.reps, args.seed, [CONFIGURATION])
        metrics = rows[0]["metrics"]
        a_spec, b_spec = (s if "=" in s or s.isdigit() else f"{CONFIGURATION}={s}" for s in args.compare)
        a, b = find_group(keys, rows, a_spec), find_group(keys, rows, b_spec)
    else:
        keys, rows, _ = summarise(find_runs(Path(args.dir[0])), metrics, args.reps, args.seed)
        metrics = rows[0]["metrics"]
        a, b = find_group(keys, rows, a_spec), find_group(keys, rows, b_spec)
    if a is b:
        raise ReportError(f"--compare: {a_spec!r} and {b_spec!r} are the same configuration")
    result = compare(a, b, metrics, args.reps, args.seed)
    few = [c for c in result if c["few_seeds"]]
    if few:
        print(f"warning: --compare: A has {few[0]['seeds_a']} seeds and B {few[0]['seeds_b']}; with fewer "
              f"than {FEW_SEEDS} a side the probability of improvement takes few values and its interval "
              "can shrink to a point: run more seeds before reading it", file=sys.stderr)
    if args.json:
        print(json.dumps({"a": a_spec, "b": b_spec, "comparisons": result}, indent=1))
        return 0
    print(f"A: {a_spec} ({len(a['runs'])} seeds)   B: {b_spec} ({len(b['runs'])} seeds)")
    print(f"P(A improves on B): a seed of A beats a seed of B (0.5: neither better), "
          f"[95% CI, {args.reps} bootstrap resamples]")
    for c in result:
        note = f"  (few seeds: {c['seeds_a']} vs {c['seeds_b']}, read with care)" if c["few_seeds"] else ""
        print(f"  {c['metric']:<32} ({c['better']} is better): {c['p_improvement']:.3f} "
              f"{ci_text(c['ci_low'], c['ci_high'], 3)}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
