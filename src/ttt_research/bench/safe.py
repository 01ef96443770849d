"""Time to a safe agent, per network of the card: how long antirez's C ttt-rl and our
``algo=reinforce`` each take to produce an agent that no X strategy beats, measured in one run
(``bench --compare antirez``).

Speed per game says little about what a user waits for: an agent that cannot be beaten. So
both programs are run as a user runs them, seed by seed, and every agent is judged by the
same exact evaluation as O ("safe" = ``contract.unbeatable(report, "o")``: ``eval.json``'s
``as_o.worst_case`` is a draw or a win, the same as losing no game to a random X). Each of
the card's networks (``options.SAFE_NETS``: ``mlp25``, ``mlp100``, ``mlp128``) is one pair:

* **C**: the patched copy of ttt-rl (``baselines/antirez.py``: ``ttt N SEED OUT``) built with
  the network's hidden size (``-DNN_HIDDEN_SIZE=H``), for ``options.SAFE_GAMES`` = 2,000,000
  games, its README's "usually no longer loses" budget. Timed: the process's wall time (start,
  training, writing its network, exit). Not timed: reading the dump, the parity check of its
  logits and the exact evaluation of its own moves (``eval_s``). The C has one hidden layer
  only: a network of two (``mlp128``) has no C beside it, and ours is reported alone.
* **ours**: ``python -m ttt_research algo=reinforce net=NET seed=S hydra.run.dir=TMP
  progress=false`` in a subprocess: the card's algorithm on that network as configured today
  (its budget and tuned settings are the config's; ``conf/tuned/``). Timed: the whole command
  (imports, validation, training with its periodic exact evaluations, checkpoint, export,
  plots); its verdict is its own ``eval.json``.

* **ours, as a population** (``population=True``, the bench's default): the same seeds trained
  by one command, ``population.size=SEEDS seed=SEED_BASE threads=1``: many agents in one process
  on one core, as the C runs on one core. Timed: that whole command; its verdicts are its
  ``population.json`` members'. Its seconds per safe agent are the command's over its safe members.

Seeds ``SEED_BASE``, ``SEED_BASE + 1``, ...: the same seed numbers on both sides (each seeds
its own generator; nothing is shared). Seed by seed, every network in turn, sides alternating
(C first for the 1st, 3rd, ... seed, ours first for the others) so that a drift in the host's
speed hits both alike. Per side: the share of safe agents with Wilson's 95% interval, the median
seconds per agent and the **seconds per safe agent** (all seconds over the number of safe
agents: the expected wait for one, restarting on failure; ``None`` when none was safe); then
the C/ours ratios of both.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import OmegaConf

from ttt_research.baselines import antirez
from ttt_research.bench.options import SAFE_GAMES, SAFE_NETS, SAFE_SEEDS
from ttt_research.contract import REPORT_KEY, unbeatable
from ttt_research.errors import UserError
from ttt_research.evaluation.stats import wilson
from ttt_research.train.confdir import compose

SEED_BASE = 1
OURS = [sys.executable, "-m", "ttt_research", "algo=reinforce"]  # the card's algorithm
NO_C = "antirez's C has one hidden layer only: no such network, ours alone"
SAFE = "unbeatable as O: as_o.worst_case is 'draw' or 'win' (no X strategy beats it)"


def hidden_sizes(nets: Sequence[str]) -> dict[str, list[int]]:
    """Each network's hidden layers as ``algo=reinforce net=NAME`` composes them (``{"mlp25": [25]}``)."""
    return {name: list(compose(["algo=reinforce", f"net={name}"]).net.hidden) for name in nets}


def c_width(hidden: list[int]) -> int | None:
    """The C's ``NN_HIDDEN_SIZE`` for a network of these layers: its one layer's, else None."""
    return hidden[0] if len(hidden) == 1 else None


def run_c(binary: Path, games: int, seed: int, folder: Path, hidden: int | None = None) -> dict:
    """One seed of the patched C program (``hidden`` units: its dump must have them): its wall
    time, then its exact evaluation (not timed)."""
    out = folder / f"antirez-{binary.name}-{seed}.bin"
    seconds = antirez.run_seeded(binary, games, seed, out)
    ev = antirez.evaluate_dump(out, hidden)
    return {"seed": seed, "seconds": seconds, "unbeatable_as_o": ev["unbeatable_as_o"],
            "o": ev["o"], "eval_s": ev["eval_s"], "parity_max_abs_diff": ev["parity_max_abs_diff"],
            "greedy_differs": ev["greedy_differs"]}


def _timed(argv: list[str], what: str, limit: int) -> float:
    """Run our command ``argv`` (``what``: how errors name it) to its end within ``limit``
    seconds; its wall seconds. A timeout or a failure is one line (``UserError``)."""
    start = time.perf_counter()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise UserError(f"{what} did not finish within {limit:,d} s") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{what} exited with status {r.returncode}: {last}")
    return time.perf_counter() - start


def run_ours(seed: int, folder: Path, net: str, overrides: Sequence[str] = ()) -> dict:
    """One seed of ``python -m ttt_research algo=reinforce net=NET``, timed as a whole; its
    verdict from its ``eval.json``."""
    run_dir = folder / f"ours-{net}-{seed}"
    argv = [*OURS, f"net={net}", f"seed={seed}", f"hydra.run.dir={run_dir}", "progress=false", *overrides]
    what = f"python -m ttt_research algo=reinforce net={net} seed={seed}"
    seconds = _timed(argv, what, 3600)
    try:
        report = json.loads((run_dir / "eval.json").read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"{what} left no readable eval.json in {run_dir}: "
                        f"{err}") from None
    return {"seed": seed, "seconds": seconds, "unbeatable_as_o": unbeatable(report, "o"),
            "o": report[REPORT_KEY["o"]], "config": _config(run_dir)}


def run_population(seeds: Sequence[int], folder: Path, net: str, overrides: Sequence[str] = ()) -> dict:
    """``seeds`` (consecutive) as one population of ``python -m ttt_research algo=reinforce
    net=NET`` on one thread, timed as a whole; each member's verdict from its ``population.json``."""
    run_dir = folder / f"population-{net}"
    extra = [f"seed={seeds[0]}", f"population.size={len(seeds)}", "threads=1"]
    argv = [*OURS, f"net={net}", *extra, f"hydra.run.dir={run_dir}", "progress=false", *overrides]
    what = f"python -m ttt_research algo=reinforce net={net} {' '.join(extra)}"
    seconds = _timed(argv, what, 3600 * len(seeds))
    try:
        members = json.loads((run_dir / "population.json").read_text())["members"]
        verdicts = [{"seed": m["seed"], "unbeatable_as_o": unbeatable(m["eval"], "o"),
                     "o": m["eval"][REPORT_KEY["o"]]} for m in members]
    except (OSError, ValueError, KeyError) as err:
        raise UserError(f"{what} left no readable population.json in {run_dir}: {err}") from None
    return {"seconds": seconds, "members": verdicts, "command": what}


def population_summary(run: dict) -> dict:
    """The population's figures as a side's (``summary``), its wall time shared by its members:
    the command's seconds over its safe ones per safe agent."""
    share = run["seconds"] / len(run["members"])
    out = summary([{**m, "seconds": share} for m in run["members"]])
    out.update(total_seconds=run["seconds"], command=run["command"] + " hydra.run.dir=TMP progress=false",
               timed="the whole command's wall time, shared by its members (median_seconds: per member)")
    return out


def _config(run_dir: Path) -> dict:
    """What our job was in this run: its algorithm, net and budget (from .hydra/config.yaml)."""
    try:
        cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    except OSError:
        return {}
    pick = {"algo": "algo._target_", "net_hidden": "net.hidden", "encoding": "net.encoding",
            "budget_games": "budget.games", "seat": "seat.side"}
    found = {k: OmegaConf.select(cfg, key, default=None) for k, key in pick.items()}
    return {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v
            for k, v in found.items() if v is not None}


def summary(runs: list[dict]) -> dict:
    """A side's figures over its seeds: share safe (Wilson 95%), median and per-safe seconds."""
    k = len(runs)
    safe = sum(r["unbeatable_as_o"] for r in runs)
    total = sum(r["seconds"] for r in runs)
    lo, hi = wilson(safe, k)
    return {"runs": k, "unbeatable": safe, "share": safe / k, "share_ci95": [lo, hi],
            "median_seconds": statistics.median(r["seconds"] for r in runs), "total_seconds": total,
            "seconds_per_safe_agent": total / safe if safe else None, "per_seed": runs}


def _ratio(c: float | None, ours: float | None) -> float | None:
    return c / ours if c is not None and ours else None


def _pair(name: str, hidden: list[int], c_runs: list[dict], our_runs: list[dict], games: int,
          overrides: Sequence[str], population: dict | None = None) -> dict:
    """One network's block: both sides' summaries (the C's None where it has no such network, ours
    one command a seed None where they did not run), ours as one population where it ran (else
    None), and the C/ours ratios."""
    ours = summary(our_runs) if our_runs else None
    if ours is not None:
        ours.update(command=f"python -m ttt_research algo=reinforce net={name} seed=SEED hydra.run.dir=TMP "
                            "progress=false" + "".join(f" {o}" for o in overrides),
                    config=our_runs[0].pop("config"),
                    timed="the whole command's wall time: imports, training and its evaluations, "
                          "export, plots")
        for r in our_runs[1:]:
            r.pop("config")
    width = c_width(hidden)
    together = None if population is None else population_summary(population)
    block = {"hidden": hidden, "ours": ours, "antirez": None, "antirez_note": NO_C if width is None else None,
             "ours_population": together, "ratio_median_seconds": None, "ratio_seconds_per_safe_agent": None,
             "ratio_population_seconds_per_safe_agent": None}
    if width is not None:
        c = summary(c_runs)
        c.update(games=games, hidden=width,
                 command=f"ttt {games} SEED OUT (the patched copy built with -DNN_HIDDEN_SIZE={width}: "
                         "srand(SEED), network dumped, no interactive game)",
                 timed="the process's wall time: start, training, writing its network, exit")
        block.update(antirez=c)
        if ours is not None:
            block.update(ratio_median_seconds=_ratio(c["median_seconds"], ours["median_seconds"]),
                         ratio_seconds_per_safe_agent=_ratio(c["seconds_per_safe_agent"],
                                                             ours["seconds_per_safe_agent"]))
        if together is not None:
            block["ratio_population_seconds_per_safe_agent"] = _ratio(c["seconds_per_safe_agent"],
                                                                      together["seconds_per_safe_agent"])
    return block


def time_to_safe(binaries: dict[int, Path], seeds: int, games: int = SAFE_GAMES,
                 overrides: Sequence[str] = (), base: int = SEED_BASE, nets: Sequence[str] = SAFE_NETS,
                 log: Callable[[str], None] = lambda msg: None, population: bool = False,
                 singles: bool = True) -> dict:
    """Every network of ``nets``, both sides, over ``seeds`` seeds from ``base``, alternating;
    then, with ``population``, ours again as one population of those seeds per network; the
    ``time_to_safe`` block: ``{"seeds", "safe", "algo", "networks": {NET: its pair}}``.

    ``binaries``: the patched C program per hidden size (``antirez.build_seeded``, one for each
    one-layer network of ``nets``); ``games``: its training games; ``overrides``: extra Hydra
    overrides for our command (tests shrink its budget). ``singles=False`` (with ``population``):
    no command of ours a seed, only the C's seeds and then ours as one population of them (one
    command a seed takes a minute on mlp25, which keeps the seeds few; a population's cost per
    member falls as it grows)."""
    if seeds < 1:
        raise ValueError(f"time_to_safe needs at least one seed, got {seeds}")
    if not (singles or population):
        raise ValueError("time_to_safe without singles needs population=True: nothing of ours would run")
    layers = hidden_sizes(nets)
    missing = sorted({w for h in layers.values() if (w := c_width(h)) is not None} - set(binaries))
    if missing:
        raise ValueError(f"time_to_safe needs the C program built with hidden sizes {missing}")
    c_runs: dict[str, list[dict]] = {name: [] for name in nets}
    our_runs: dict[str, list[dict]] = {name: [] for name in nets}
    with tempfile.TemporaryDirectory(prefix="ttt-safe-") as tmp:
        for i, seed in enumerate(range(base, base + seeds)):
            for name in nets:
                width = c_width(layers[name])
                sides = ("c", "ours") if i % 2 == 0 else ("ours", "c")
                for side in sides:
                    if (side == "c" and width is None) or (side == "ours" and not singles):
                        continue  # no C of two layers; no command of ours a seed without singles
                    where = f"time to safe, seed {seed} ({i + 1}/{seeds}), net={name}:"
                    if side == "c":
                        r = run_c(binaries[width], games, seed, Path(tmp), width)
                        c_runs[name].append(r)
                        log(f"{where} antirez's C (hidden {width}), {games:,d} games: {r['seconds']:.1f} s, "
                            f"unbeatable as O: {_yes(r)} (evaluated in {r['eval_s']:.2f} s, not counted)")
                    else:
                        r = run_ours(seed, Path(tmp), name, overrides)
                        our_runs[name].append(r)
                        log(f"{where} ours, python -m ttt_research algo=reinforce net={name}: "
                            f"{r['seconds']:.1f} s, unbeatable as O: {_yes(r)}")
        together = {}
        for name in nets if population else ():
            r = together[name] = run_population(range(base, base + seeds), Path(tmp), name, overrides)
            safe = sum(m["unbeatable_as_o"] for m in r["members"])
            log(f"time to safe, net={name}: ours as one population of {seeds} (one thread): "
                f"{r['seconds']:.1f} s, {safe}/{seeds} unbeatable as O")
    return {"seeds": list(range(base, base + seeds)), "safe": SAFE, "algo": "reinforce", "games": games,
            "networks": {name: _pair(name, layers[name], c_runs[name], our_runs[name], games, overrides,
                                     together.get(name)) for name in nets}}


def prepare(src: Path | None, seeds: int | None, into: Path, nets: Sequence[str] = SAFE_NETS,
            log: Callable[[str], None] = lambda msg: None) -> dict[int, Path] | None:
    """The patched program per hidden size of ``nets``' one-layer networks, built from ``src``
    into ``into`` and probed, when this figure will run (a source and not 0 seeds); else None.
    Before the bench's long runs, so a source that cannot be patched fails in seconds."""
    if src is None or seeds == 0:
        return None
    widths = sorted({w for h in hidden_sizes(nets).values() if (w := c_width(h)) is not None})
    binaries = {}
    for width in widths:
        binaries[width] = antirez.build_seeded(src, into, log, hidden=width)
        antirez.check_seeded(binaries[width], width)
    return binaries


def measure(binaries: dict[int, Path] | None, quick: bool, seeds: int | None, games: int = SAFE_GAMES,
            overrides: Sequence[str] = (), nets: Sequence[str] = SAFE_NETS,
            log: Callable[[str], None] = lambda msg: None, population: bool = True) -> dict | None:
    """The bench's ``time_to_safe`` block, or None where it does not run: 0 seeds, or no
    patched program (``--antirez-bin`` alone: nothing to patch). ``seeds`` None: the default."""
    seeds = SAFE_SEEDS[1 if quick else 0] if seeds is None else seeds
    if not seeds:
        return None
    if binaries is None:
        log("time to a safe agent: skipped (it needs --antirez-src, to build a seeded copy)")
        return None
    log(f"time to a safe agent: antirez's C ({games:,d} games, built with each one-layer network's hidden "
        f"size) and our algo=reinforce, nets {', '.join(nets)}, {seeds} seed(s) each, in turn")
    return time_to_safe(binaries, seeds, games, overrides, nets=nets, log=log, population=population)


def _yes(run: dict) -> str:
    if run["unbeatable_as_o"]:
        return "yes"
    return f"no ({run['o']['vs_random']['loss']:.4f} losses vs random)"


def format_lines(block: dict) -> list[str]:
    """The console lines of a ``time_to_safe`` block: per network, the C beside ours."""
    def side(s: dict) -> str:
        lo, hi = s["share_ci95"]
        per = s["seconds_per_safe_agent"]
        return (f"{s['unbeatable']}/{s['runs']} unbeatable as O ({s['share']:.0%}, "
                f"95% CI {lo:.0%}-{hi:.0%}); median {s['median_seconds']:.1f} s per agent; "
                + ("no safe agent" if per is None else f"{per:.1f} s per safe agent"))

    def ratio(x: float | None) -> str:
        return "n/a (a side has no safe agent)" if x is None else f"{x:.2f}x"

    seeds = block["seeds"]
    singles = any(pair["ours"] is not None for pair in block["networks"].values())
    which = (f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"
             + (", sides alternating" if singles else ", the C's first, then ours as one population"))
    lines = [f"time to a safe agent (unbeatable as O: no X strategy beats it), algo=reinforce, {which}:"]
    for name, pair in block["networks"].items():
        lines.append(f"  net={name} (hidden {pair['hidden']}):")
        c = pair["antirez"]
        if c is None:
            lines.append(f"    {pair['antirez_note']}")
        else:
            lines.append(f"    antirez's C ttt-rl, NN_HIDDEN_SIZE {c['hidden']}, {c['games']:,d} games: "
                         f"{side(c)}")
        if pair["ours"] is not None:
            lines.append(f"    ours, python -m ttt_research algo=reinforce net={name}: {side(pair['ours'])}")
        together = pair.get("ours_population")
        if together is not None:
            lines.append(f"    ours, the same seeds as one population on one thread: {side(together)}")
        if c is not None:
            parts = [] if pair["ours"] is None else [
                f"median seconds {ratio(pair['ratio_median_seconds'])}",
                f"seconds per safe agent {ratio(pair['ratio_seconds_per_safe_agent'])}"]
            if together is not None:
                parts.append(f"as one population {ratio(pair['ratio_population_seconds_per_safe_agent'])}")
            lines.append(f"    C / ours: {', '.join(parts)}")
    return lines
