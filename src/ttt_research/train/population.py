"""A population run's own parts: exact evaluation of every member during training, and the
run folder it leaves (``population/spec.py`` and ``population/results.py`` have the spec and
the file formats; this is the torch side).

``PopulationEvaluation`` evaluates all N members at once (``exact.evaluate_stack``: one
batched forward over the 4,520 decision positions and a batched DP) every ``eval_every``
updates and after the last. It keeps every member's report (the history the plot and
``population_evals.csv`` are drawn from; in checkpoints, so a resumed run has it all) and
logs the aggregate series: for each ``eval/*`` metric the median over the members still
training, with ``_min`` and ``_max``, and ``population/unbeatable_fraction``.

``write_members`` writes a population's own files: ``population.json`` and
``population.csv`` (a row per member), ``population_evals.csv`` (a row per member and
evaluation: wide columns per member in ``metrics.csv`` would reach 13,000 at N=1,024) and
``members/NNN/policy.onnx`` (the best member, or every member with
``population.export=all``); then ``train/run.write_outputs`` writes the run's own, as for a
single run: ``policy.onnx`` of the best member, ``curves.png`` (the members' evaluations)
and ``eval.json`` (the best member's, with a ``population`` block saying so), last, as the
mark that the run is complete.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

from lightning.pytorch.strategies import DDPStrategy

from ttt_research.contract import (
    ELAPSED,
    EVAL_NAMES,
    EXPLOIT_NAMES,
    JUDGED_SEATS,
    REPORT_KEY,
    TRAINED_KEY,
    VALUE_NAMES,
    eval_metrics,
    exploit_metrics,
    learner_loss,
    policy_parts,
    unbeatable,
    value_metrics,
)
from ttt_research.evaluation.exact import evaluate_stack
from ttt_research.evaluation.exploit import Acting
from ttt_research.evaluation.objectives import meaning
from ttt_research.evaluation.onnx import export
from ttt_research.evaluation.text import drawn, eval_table
from ttt_research.files.atomic import atomic_path, write_atomic
from ttt_research.population import results
from ttt_research.train.callbacks import ExactEvaluation, exact_reports


class PopulationEvaluation(ExactEvaluation):
    """Exact evaluation of every member every ``every`` updates and at the end.

    ``history``: ``(games, [report or None per member])``; a member that has stopped
    (``RLModule.stopped``) gets None from then on, so its last report is the one from
    before it failed."""

    def __init__(self, every: int = 25, seat: str = "o"):
        super().__init__(every)
        self.seat = seat

    def _evaluate(self, trainer, module) -> list[dict | None]:
        was_training = module.training
        module.eval()
        seconds = self.clock()  # the time trained until this evaluation, not counting it
        reports = exact_reports(module)  # every member's, one path with the single run's
        module.train(was_training)
        active = module.active.tolist()
        mine = [r if on else None for r, on in zip(reports, active, strict=True)]
        reports = [r for share in module.gather_objects(mine) for r in share]  # every process's
        self.record(module.games_played, reports, seconds)
        return reports

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if not self.due(trainer, batch_idx):
            return
        reports = self.evaluate(trainer, module)
        metrics = {**aggregate_metrics(reports, self.seat), ELAPSED: self.elapsed[-1],
                   "train/games": float(module.games_played)}
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=batch_idx)
        live = [learner_loss(r, self.seat) for r in reports if r is not None]
        module.log("exact_loss", float(statistics.median(live)) if live else float("nan"),
                   prog_bar=True, logger=False, on_step=True, on_epoch=False)

    def latest(self, n: int) -> list[dict | None]:
        """Each member's latest report (None: it never had one)."""
        out: list[dict | None] = [None] * n
        for _, reports in self.history:
            out = [r if r is not None else o for r, o in zip(reports, out, strict=True)]
        return out

    def first_unbeatable(self, n: int, part: str | None = None) -> list[int | None]:
        """Each member's games at its first exact evaluation that found it unbeatable (with
        ``part``: that its report's ``part`` block, another policy of the member, was)."""
        first: list[int | None] = [None] * n
        for games, reports in self.history:
            for k, r in enumerate(reports):
                r = r.get(part) if part is not None and r is not None else r
                if first[k] is None and r is not None and unbeatable(r, self.seat):
                    first[k] = int(games)
        return first

    def summary(self, reports: list[dict | None] | None = None) -> str:
        """The progress line's exact part: medians over the members and how many are unbeatable."""
        reports = self.history[-1][1] if reports is None else reports
        live = [r for r in reports if r is not None]
        if not live:
            return "no member left"
        parts = []
        for s in JUDGED_SEATS[self.seat]:
            key = REPORT_KEY[s]
            win = statistics.median(r[key]["vs_random"]["win"] for r in live)
            loss = statistics.median(r[key]["vs_random"]["loss"] for r in live)
            parts.append(f"{s.upper()} win {win:.4f} loss {loss:.4f}")
        safe = sum(unbeatable(r, self.seat) for r in live)
        said = "unbeatable" if drawn(live[0]) else "hold the game's value"  # a won game: text.unbeatable_line
        return f"median of {len(live)}: " + "  ".join(parts) + f"  {said} {safe}/{len(reports)}"


def aggregate_metrics(reports: list[dict | None], seat: str) -> dict[str, float]:
    """The logged aggregate of one evaluation: each ``eval/*`` metric's median, min and max
    over the members with a report, and the share of all members unbeatable."""
    live = [{**eval_metrics(r), **exploit_metrics(r), **value_metrics(r)} for r in reports if r is not None]
    out: dict[str, float] = {}
    if live:
        for name in [n for n in (*EVAL_NAMES, *EXPLOIT_NAMES, *VALUE_NAMES.values()) if n in live[0]]:
            values = [m[name] for m in live]
            out[name] = float(statistics.median(values))
            out[f"{name}_min"], out[f"{name}_max"] = min(values), max(values)
    out["population/unbeatable_fraction"] = sum(
        r is not None and unbeatable(r, seat) for r in reports) / len(reports)
    return out


def write_evals_csv(path: Path, history: list, members: list, elapsed: list | None = None) -> None:
    """``population_evals.csv``: games, member, seed, the ``eval/*`` metrics, the exploitability
    metrics the reports have (``EXPLOIT_NAMES``: the policy as trained) and, last, ``elapsed_s``
    (the training wall seconds at the evaluation, ``elapsed``: one per history entry; empty
    where unknown), one row per member per exact evaluation (none for a member after it
    stopped); written whole, then renamed into place (``atomic.write_atomic``)."""
    f = io.StringIO(newline="")
    out = csv.writer(f)
    have = {n for _, reports in history for r in reports if r is not None for n in exploit_metrics(r)}
    more = [n for n in EXPLOIT_NAMES if n in have]
    out.writerow(["games", "member", "seed", *EVAL_NAMES, *more, "elapsed_s"])
    elapsed = elapsed if elapsed is not None else [None] * len(history)
    for (games, reports), seconds in zip(history, elapsed, strict=True):
        for m, r in zip(members, reports, strict=True):
            if r is not None:
                metrics = {**eval_metrics(r), **exploit_metrics(r)}
                out.writerow([int(games), m.index, m.seed, *(metrics[n] for n in EVAL_NAMES),
                              *(metrics.get(n, "") for n in more), "" if seconds is None else seconds])
    write_atomic(path, f.getvalue())


def rows_of(whole: dict, evaluation: PopulationEvaluation, games_played: int,
            on_board: dict | None = None) -> list[dict]:
    """population.json's member rows, from ``RLModule.whole`` (every process's members): the
    final reports of the members still training, the last report before it stopped of the
    others. The evaluation ran after the last update (``ExactEvaluation.due``), so its history
    ends with the final reports; only if it does not are the members evaluated again
    (``on_board``: ``RLModule.on_board``, the board's keyword)."""
    n = len(whole["members"])
    if not evaluation.history or evaluation.history[-1][0] != games_played:
        final = evaluate_stack(whole["net"], **(on_board or {}))
        active = whole["active"].tolist()
        final = [r if on else None for r, on in zip(final, active, strict=True)]
        evaluation.record(games_played, final)
    latest = evaluation.latest(n)
    first = evaluation.first_unbeatable(n)
    games = whole["member_games"].tolist()
    rows = []
    for k, m in enumerate(whole["members"]):
        rows.append(results.member_row(m, games[k], latest[k], first[k], whole["stopped"].get(m.index)))
    # Another policy a member is evaluated as (alphazero: its test-time search, ``search``)
    # gets its own first unbeatable evaluation, inside its block.
    for part in sorted({p for r in latest if r for p in policy_parts(r)}):
        for row, games_at in zip(rows, evaluation.first_unbeatable(n, part), strict=True):
            if row["eval"] and part in row["eval"]:
                row["eval"] = {**row["eval"], part: {**row["eval"][part], "first_unbeatable_games": games_at}}
    return rows


def summarise(cfg, module, evaluation: PopulationEvaluation) -> tuple[dict, dict]:
    """(the best member's eval.json report, with its ``population`` block; the
    population.json content), from every process's members (each process computes the
    same; rank 0 writes them)."""
    whole = module.whole
    rows = rows_of(whole, evaluation, module.games_played, module.on_board)
    agg = results.aggregate(rows, cfg.seat.side, cfg.optimized_metric)
    best = agg["best"]
    member = whole["members"][best]
    report = dict(rows[best]["eval"])
    report["population"] = {
        "note": "a population run: this eval.json is its best member's (population.json has every member)",
        "best_member": best, "best_seed": member.seed, "best_hparams": dict(member.hparams),
        "members": len(rows), "ranked_by": agg["objective"]["per_member"],
        "unbeatable": agg["unbeatable"], "objectives": agg["objectives"]}
    return report, {"members": rows, "aggregate": agg}


def write_members(cfg, run_dir: Path, module, evaluation: PopulationEvaluation, content: dict):
    """A population's own files (``summarise`` made their numbers): ``population.json``,
    ``population.csv``, ``population_evals.csv`` and ``members/NNN/policy.onnx`` (the best
    member's, or every member's with ``population.export=all``), each whole or not at all
    (``atomic``). Returns what the run's own ``policy.onnx`` is: the best member's net and
    ONNX metadata, and the largest parity difference of the members' exports
    (``train/run.write_outputs`` writes the rest, ``eval.json`` last)."""
    rows, agg = content["members"], content["aggregate"]
    whole = module.whole
    members = whole["members"]
    results.write_population_json(run_dir / "population.json", rows, agg)
    results.write_population_csv(run_dir / "population.csv", rows, cfg.seat.side)
    write_evals_csv(run_dir / "population_evals.csv", evaluation.history, members, evaluation.elapsed)
    best = agg["best"]
    chosen = range(len(members)) if cfg.population.export == "all" else [best]
    parity, metas = 0.0, {}
    for k in chosen:
        block = rows[k]["eval"].get(TRAINED_KEY) or {}
        acting = Acting(block.get("temperature", 0.0), block.get("epsilon", 0.0)).to_meta()
        metas[k] = {"algo": module.name, "acting": acting, "net": json.dumps(whole["net"].spec()),
                    "seed": str(members[k].seed), "games_trained": str(rows[k]["games"]),
                    "hparams": json.dumps(members[k].hparams), "eval": json.dumps(rows[k]["eval"])}
        with atomic_path(run_dir / "members" / f"{k:03d}" / "policy.onnx") as tmp:
            exported = export(whole["net"].member(k), tmp, metas[k], **module.on_board)
            parity = max(parity, exported["max_abs_diff"])
    return whole["net"].member(best), metas[best], parity


def print_summary(report: dict, agg: dict, members: list, games: int, describe: str, run_dir: Path,
                  parity: float, seat: str) -> None:
    """A population's lines on the console: the unbeatable count, the objective's spread,
    the best member's evaluation table, the run folder."""
    n, best = len(members), agg["best"]
    ob = agg["objective"]
    print(f"\nPopulation of {n} after {games:,} games each ({describe}):")
    said = "unbeatable" if drawn(report) else "hold the game's value (below: what it means per seat)"
    print(f"  {said}: {agg['unbeatable']} of {n} ({agg['unbeatable_fraction']:.3f})"
          + (f"; stopped: {len(agg['stopped'])} (population.json says why)" if agg["stopped"] else ""))
    what = meaning(ob["per_member"])
    print(f"  {ob['per_member']}{f' ({what})' if what else ''}: median {ob['median']:.4f}, "
          f"min {ob['min']:.4f}, max {ob['max']:.4f}")
    print(f"Best member {best} (seed {members[best].seed}"
          + "".join(f", {k}={v:g}" for k, v in members[best].hparams.items()) + "):")
    print(eval_table(report, seat))
    print(f"run folder: {run_dir}  (population.json, population.csv; policy.onnx parity: "
          f"max |diff| {parity:.1e})")


class SplitMembers(DDPStrategy):
    """``trainer=ddp`` for a population: each process trains its own share of the members
    (``population/sharing.shard``). Members are independent, so nothing is averaged: the module is
    not wrapped in ``DistributedDataParallel`` (whose gradient all-reduce would mix one
    process's members with another's), and the processes meet only to share numbers: the
    logged medians, the exact evaluations, the checkpoint, the run folder."""

    def configure_ddp(self) -> None:
        pass  # no wrapper, no gradient hooks: each process's members learn alone
