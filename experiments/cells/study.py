"""Every (algorithm, network) cell measured on fresh seeds, as population jobs that a stop never
costs more than one chunk of: one row file per chunk of seeds, written as the chunk's population
ends, and the tables rebuilt from those rows alone.

    python experiments/cells/study.py run reinforce_mlp100 --seeds 6000-6099 --chunk 25
    python experiments/cells/study.py tables          # the matrix into three files (TARGETS)
    python experiments/cells/study.py tables --check  # exit 1 when one of them differs from the rows

``run`` trains each chunk as one population (``algo=ALGO net=NET seed=FIRST population.size=N``
with the cell's defaults: ``conf/algo/ALGO.yaml`` and ``conf/tuned/ALGO_NET.yaml``) in
``runs/cells/CELL/seeds_FIRST-LAST`` and, when it ends, writes
``experiments/cells/CELL/seeds_FIRST-LAST.csv``: one row per seed. Run the same command again
after a stop: finished chunks are skipped, a chunk with a checkpoint resumes (``resume=true``),
so a stopped study loses at most the updates since its last checkpoint. Commit the rows as they
arrive.

A cell's rows are its own: more ``key=value`` after the cell's name may tune it (``algo.lr=...``,
kept in the rows' ``overrides``), but one that changes its algorithm, network, seats or budget
(``algo=ppo``, ``experiment=...``, ``budget.games=...``) is refused before anything runs, and
``tables`` refuses a cell whose chunks disagree with it or with each other, naming the files.
Only ``debug=...`` (a pipeline check in seconds) may shrink the budget: ``tables`` refuses its
rows. Every refusal is one ``error:`` line and exit status 2, nothing written.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from ttt_research.errors import UserError, clipped, command

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "experiments" / "cells"
TARGETS = [REPO / "README.md", REPO / "docs" / "leaderboard.md", ROWS / "README.md"]
BEGIN = "<!-- cells: written by `python experiments/cells/study.py tables` from experiments/cells/ -->"
END = "<!-- /cells -->"
# What a row keeps of the population's members (population.csv), beside the chunk's own columns.
KEEP = ["seed", "games", "unbeatable", "first_unbeatable_games", "eval/x_random_win", "eval/x_random_loss",
        "eval/o_random_win", "eval/o_random_loss", "eval/x_worst_case", "eval/o_worst_case",
        "eval/trained_nashconv", "eval/trained_x_best_response", "eval/trained_o_best_response"]


def cell_overrides(cell: str) -> list[str]:
    """``reinforce_mlp100`` -> ``algo=reinforce net=mlp100`` (an algorithm's name may hold '_')."""
    algo, _, net = cell.rpartition("_")
    if not algo or not net:
        raise UserError(f"a cell is ALGO_NET (reinforce_mlp100), got {clipped(repr(cell))}")
    return [f"algo={algo}", f"net={net}"]


def _composed(cell: str, extra: list[str]):
    """The config of ``python -m ttt_research`` with the cell's choices and ``extra`` (Hydra's
    errors, e.g. an algorithm that does not exist, as one line)."""
    from ttt_research.train.confdir import compose
    from ttt_research.train.hydra_errors import one_line

    try:
        return compose([*cell_overrides(cell), *extra], hydra=True)
    except Exception as e:
        line = one_line(e, extra)
        if line is None:
            raise
        raise UserError(f"{cell}: {line}") from None


def identity(cell: str, extra: list[str] = ()) -> dict[str, object]:
    """What makes a cell's rows its own, of its config with ``extra``: the algorithm, the
    network, the seats and the budget (in games)."""
    cfg = _composed(cell, list(extra))
    return {"algorithm": cfg.hydra.runtime.choices.algo, "network": OmegaConf.to_container(cfg.net),
            "seats": cfg.seat.side, "budget": cfg.budget.games}


def key_of(override: str) -> str:
    """``+budget.games=5`` -> ``budget.games``."""
    return override.partition("=")[0].lstrip("+~")


def check_overrides(cell: str, extra: list[str]) -> None:
    """Refuse ``extra`` that changes the cell's algorithm, network, seats or budget (its rows
    would be filed under a cell they are not of: issue 58's ``algo=ppo`` in the reinforce cell).
    ``debug=...`` shrinks any run into a pipeline check: the cell is compared with it applied."""
    debug = [o for o in extra if key_of(o) == "debug"]
    own, given = identity(cell, debug), identity(cell, extra)
    changed = [k for k in own if own[k] != given[k]]
    if changed:
        raise UserError(f"{cell}: {clipped(' '.join(extra))} changes the cell's {' and '.join(changed)} "
                        f"({', '.join(f'{own[k]} -> {given[k]}' for k in changed)}); its rows would not be "
                        f"the cell's: run the cell that is meant by its name "
                        f"({' '.join(cell_overrides(cell))} is this one)")


SPAN = re.compile(r"(\d+)-(\d+)")


def span(option: str, text: str) -> tuple[int, int]:
    """``FIRST-LAST`` (seeds, FIRST < LAST) read from ``text``, else one line naming ``option``."""
    found = SPAN.fullmatch(text)
    if not found or int(found.group(1)) >= int(found.group(2)):
        raise UserError(f"{option} must be FIRST-LAST, two seeds with FIRST < LAST (e.g. 6000-6099), "
                        f"got {clipped(repr(text))}")
    return int(found.group(1)), int(found.group(2))


def chunks(seeds: str, size: int) -> list[tuple[int, int]]:
    lo, hi = span("--seeds", seeds)
    if size < 2:
        raise UserError(f"--chunk must be at least 2, got {size} (one seed is a single run, not a "
                        f"population: it writes no population.csv)")
    parts = [(s, min(s + size - 1, hi)) for s in range(lo, hi + 1, size)]
    if len(parts) > 1 and parts[-1][0] == parts[-1][1]:  # a last chunk of one seed joins the one before
        parts[-2:] = [(parts[-2][0], hi)]
    return parts


def host() -> str:
    """The CPU's model name (``train.host.cpu_model``) and the number of logical CPUs (the row's host)."""
    from ttt_research.train.host import cpu_model  # imports torch: only once a chunk has trained

    return f"{cpu_model()}, {os.cpu_count()} logical CPUs"


def train(command: list[str]) -> int:
    """Run the training command and return its exit code. Ctrl-C reaches it from the terminal, and
    SIGTERM sent here is passed on: either way it checkpoints and exits (130, 143), and this waits
    for that instead of killing it halfway."""
    import signal

    proc = subprocess.Popen(command, cwd=REPO)
    before = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # the run got the same Ctrl-C: wait for its checkpoint
                continue
    finally:
        signal.signal(signal.SIGTERM, before)


def run_chunk(cell: str, lo: int, hi: int, runs: Path, extra: list[str], tuned_on: str,
              out: Path = ROWS) -> None:
    """Train seeds ``lo..hi`` of ``cell`` as one population and write their rows (or skip: done)."""
    rows = out / cell / f"seeds_{lo}-{hi}.csv"
    if rows.exists():
        print(f"study: {cell} seeds {lo}-{hi}: done ({rows})", flush=True)
        return
    folder = runs / cell / f"seeds_{lo}-{hi}"
    resume = (folder / "checkpoints" / "last.ckpt").exists()
    command = [sys.executable, "-m", "ttt_research", *cell_overrides(cell), f"seed={lo}",
               f"population.size={hi - lo + 1}", "progress=lines", f"hydra.run.dir={folder}", *extra,
               *(["resume=true"] if resume else [])]
    print(f"study: {cell} seeds {lo}-{hi}: {'resuming' if resume else 'starting'} in {folder}", flush=True)
    start = time.monotonic()
    code = train(command)
    if code in (130, 143):  # Ctrl-C or SIGTERM: the run wrote its checkpoint first
        raise SystemExit(f"study: {cell} seeds {lo}-{hi} stopped (exit {code}) with a checkpoint; the same "
                         f"command resumes it")
    if code != 0:
        raise SystemExit(f"error: {cell} seeds {lo}-{hi}: the training command failed (exit {code}), as it "
                         f"says above; nothing of this chunk was written")
    members = list(csv.DictReader(open(folder / "population.csv", newline="")))
    config = yaml.safe_load((folder / ".hydra" / "config.yaml").read_text())
    # the training clock of the whole chunk (it survives resumes: train/elapsed_s in the checkpoint)
    evals = list(csv.DictReader(open(folder / "population_evals.csv", newline="")))
    elapsed = max(float(r["elapsed_s"]) for r in evals if r.get("elapsed_s"))
    seats = config["seat"]["side"]
    rows.parent.mkdir(parents=True, exist_ok=True)
    tmp = rows.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*KEEP, "seats", "budget", "tuned_on", "training_s",
                                               "command_s", "host", "finished", "overrides"])
        writer.writeheader()
        for m in members:
            writer.writerow({**{k: m.get(k, "") for k in KEEP}, "seats": seats,
                             "budget": config["budget"]["games"],
                             "tuned_on": tuned_on, "training_s": round(elapsed, 1),
                             "command_s": round(time.monotonic() - start, 1), "host": host(),
                             "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
                             "overrides": " ".join(extra)})
    tmp.replace(rows)
    print(f"study: {cell} seeds {lo}-{hi}: {len(members)} rows in {rows}", flush=True)


def read_rows() -> dict[str, list[dict]]:
    """Every cell's rows, its chunks in seed order; a cell whose chunks disagree is refused
    (``check_cell``)."""
    cells: dict[str, list[dict]] = {}
    order = lambda p: (p.parent.name, int(p.stem[6:].split("-")[0]))  # noqa: E731 (seeds_FIRST-LAST)
    for path in sorted(ROWS.glob("*/seeds_*.csv"), key=order):
        rows = [{**r, "chunk": path.stem} for r in csv.DictReader(open(path, newline=""))]
        cells.setdefault(path.parent.name, []).extend(rows)
    for cell, rows in cells.items():
        check_cell(cell, rows)
    return cells


# What every row of a cell says the same: the cell's seats and budget, and how it was run.
SAME = ("seats", "budget", "tuned_on", "overrides")


def _where(path: Path) -> str:
    """A row file as the user names it: relative to the repository when it is in it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def check_cell(cell: str, rows: list[dict]) -> None:
    """Refuse a cell whose chunks are not all of it (seats and budget its config's, no override
    that changes its algorithm, network, seats or budget) and the same as each other (tuned on
    the same seeds, with the same overrides), in one line naming each chunk file that is not."""
    own = identity(cell)
    cell_says = {"seats": own["seats"], "budget": str(own["budget"])}
    chunks_say: dict[str, dict[str, set[str]]] = {}
    for r in rows:
        said = chunks_say.setdefault(r["chunk"], {k: set() for k in SAME})
        for k in SAME:
            said[k].add(r.get(k) or "")
    first = next(iter(chunks_say.values()))
    words = lambda values: " and ".join(repr(v) for v in sorted(values))  # noqa: E731
    wrong = []
    for chunk, said in chunks_say.items():
        why = [f"{k} {words(said[k])} (the cell's: {cell_says[k]!r})" for k in cell_says
               if said[k] != {cell_says[k]}]
        why += [f"{k} {words(said[k])} (its first chunk's: {words(first[k])})"
                for k in ("tuned_on", "overrides") if said[k] != first[k] or len(said[k]) > 1]
        extra = " ".join(sorted(said["overrides"])).split()
        if not why and extra:
            try:
                check_overrides(cell, extra)
            except UserError as e:
                why.append(str(e).removeprefix(f"{cell}: ").split("; ")[0])
        if why:
            wrong.append(f"{_where(ROWS / cell / f'{chunk}.csv')}: {', '.join(why)}")
    if wrong:
        raise UserError(f"{cell}: {len(wrong)} of its {len(chunks_say)} chunk files are not the cell's "
                        f"({' '.join(cell_overrides(cell))}, seats {cell_says['seats']}, budget "
                        f"{cell_says['budget']}) or disagree with its first, so no table is written: "
                        f"{'; '.join(wrong)}")


def _iqm(rows: list[dict], key: str) -> str:
    from ttt_research.evaluation.stats import iqm
    return f"{iqm([float(r[key]) for r in rows]):.4f}"


def matrix() -> str:
    """The markdown table of every measured cell."""
    from statistics import median

    from ttt_research.evaluation.stats import wilson

    lines = ["| algorithm, network | seats | seeds: tuned on / reported on | budget (games) "
             "| unbeatable [Wilson 95%] | X win IQM | O win IQM | as trained, IQM "
             "| first unbeatable, median games | training wall time, host |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for cell, rows in read_rows().items():
        algo, _, net = cell.rpartition("_")
        seeds = sorted(int(r["seed"]) for r in rows)
        safe = [r for r in rows if r["unbeatable"] == "True"]
        low, high = wilson(len(safe), len(rows))
        side = rows[0]["seats"]
        x_win = _iqm(rows, "eval/x_random_win") if side in ("x", "both") else "-"
        o_win = _iqm(rows, "eval/o_random_win") if side in ("o", "both") else "-"
        trained = (f"NashConv {_iqm(rows, 'eval/trained_nashconv')}" if side == "both"
                   else f"best response vs {side.upper()} {_iqm(rows, f'eval/trained_{side}_best_response')}")
        firsts = [float(r["first_unbeatable_games"]) for r in rows if r["first_unbeatable_games"]]
        first = f"{median(firsts) / 1e3:,.0f}k" if firsts else "never"
        chunks_s = {r["chunk"]: float(r["training_s"]) for r in rows}  # a chunk's rows share its clock
        wall = sum(chunks_s.values()) / 60
        lines.append(f"| `algo={algo} net={net}` | {side.upper() if side != 'both' else 'X and O'} "
                     f"| {rows[0]['tuned_on']} / {seeds[0]}-{seeds[-1]} | {int(rows[0]['budget']):,} "
                     f"| **{len(safe)}/{len(rows)}** [{low:.2f}, {high:.2f}] | {x_win} | {o_win} | {trained} "
                     f"| {first} | {wall:.1f} min ({len(chunks_s)} population{'s' * (len(chunks_s) > 1)}), "
                     f"{rows[0]['host']} |")
    return "\n".join(lines)


def write_tables(check: bool) -> int:
    """Put ``matrix()`` between the markers of each target file; with ``check``, only compare."""
    table, stale = matrix(), []
    for path in TARGETS:
        text = path.read_text()
        if BEGIN not in text or END not in text:
            raise UserError(f"{_where(path)} has no {BEGIN} ... {END} block")
        head, rest = text.split(BEGIN, 1)
        new = f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}"
        if new != text:
            stale.append(_where(path))
            if not check:
                path.write_text(new)
    if check and stale:
        print(f"error: the matrix in {', '.join(stale)} differs from experiments/cells/*/seeds_*.csv: "
              f"python experiments/cells/study.py tables", file=sys.stderr)
        return 1
    print(f"study: the matrix ({table.count(chr(10)) - 1} cells) {'checked' if check else 'written'}: "
          f"{', '.join(_where(p) for p in TARGETS)}")
    return 0


class Parser(argparse.ArgumentParser):
    """argparse's refusals as one ``error:`` line (exit 2), as the project's commands write them."""

    def error(self, message: str):
        raise UserError(f"{self.prog}: {message}")


@command()
def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python experiments/cells/study.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train a cell's chunks of seeds (skips finished ones, resumes one)")
    run.add_argument("cell", help="ALGO_NET, e.g. reinforce_mlp100")
    run.add_argument("--seeds", default="6000-6099", help="FIRST-LAST (default: 6000-6099, never tuned on)")
    run.add_argument("--chunk", type=int, default=25, help="seeds per population (one row file each)")
    run.add_argument("--tuned-on", required=True, help="the seeds its defaults were tuned on (FIRST-LAST)")
    run.add_argument("--runs", type=Path, default=REPO / "runs" / "cells", help="where the run folders go")
    run.add_argument("--rows", type=Path, default=ROWS, help="where the row files go (CELL/seeds_*.csv)")
    run.add_argument("overrides", nargs="*", help="more key=value for every chunk (kept in the rows)")
    tables = sub.add_parser("tables", help="rebuild the matrix in the three files")
    tables.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file differs")
    args, rest = parser.parse_known_args(argv)  # key=value may also come after the options
    if rest and (args.command != "run" or any("=" not in r or r.startswith("-") for r in rest)):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "run":
        parts, extra = chunks(args.seeds, args.chunk), [*args.overrides, *rest]
        span("--tuned-on", args.tuned_on)
        check_overrides(args.cell, extra)  # before anything runs: the rows must be the cell's
        for lo, hi in parts:
            run_chunk(args.cell, lo, hi, args.runs, extra, args.tuned_on, args.rows)
        return 0
    return write_tables(check=args.check)


if __name__ == "__main__":
    sys.exit(main())
