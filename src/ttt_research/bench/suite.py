"""The bench's figures and their table: what ``python -m ttt_research.bench`` runs once its
options passed (``bench/options.py``). The figures are described in the package's docstring
(``bench/__init__.py``); each is the median of several repeats, and every ratio printed is one
measured in the same run.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from ttt_research import __version__
from ttt_research.baselines import antirez as bench_antirez
from ttt_research.baselines import sb3
from ttt_research.bench import floor, parallel, safe
from ttt_research.bench.board_training import bench_board_training, board_training_lines
from ttt_research.bench.boards import bench_boards, boards_lines
from ttt_research.bench.crossplay import bench_tournament
from ttt_research.bench.exploit import bench_nashconv
from ttt_research.bench.fitting import fit, trainer_for
from ttt_research.bench.latency import bench_latency
from ttt_research.bench.options import ANTIREZ_GAMES, DEFAULT_GAMES, SAFE_GAMES, SAFE_NETS
from ttt_research.bench.search import bench_search
from ttt_research.env import game
from ttt_research.errors import UserError
from ttt_research.evaluation.exact import evaluate_policy
from ttt_research.train.host import busy_warning, machine

# Constants for orientation only: another host's figures, never divided by ours.
MEASURED_ON = "measured on the project's 2-core development host, 2026-11-30"
REFERENCES = {
    "reinforce_games_per_s": ("antirez's C ttt-rl, 1 thread", 89_000),
    "ppo_steps_per_s": ("SB3 MaskablePPO (seed), 1 thread", 700),
    "time_to_unbeatable_s": ("SB3 MaskablePPO: not unbeatable as O after 300k steps (~420 s)", None),
}


def _say(msg: str) -> None:
    """Progress on stderr, so ``--json`` output stays clean."""
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def env_games_per_s(batch: int, steps: int, device: torch.device, seed: int = 0) -> float:
    """Games per second of random-vs-random play over ``steps`` moves of ``batch`` games."""
    g = game.Games(batch, device)
    gen = torch.Generator(device=device).manual_seed(seed)
    finished = torch.zeros((), dtype=torch.long, device=device)
    for _ in range(10):  # warm up: games in flight at every stage, caches hot
        g.step(game.random_moves(g.code, gen, g.t))
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        s = g.step(game.random_moves(g.code, gen, g.t))
        finished += s.ended.sum()  # stays on the device: no sync per move
    _sync(device)
    return finished.item() / (time.perf_counter() - start)


def bench_env(device: torch.device, quick: bool, repeats: int) -> dict:
    batches = [2**16, 2**18] if quick else [2**14, 2**16, 2**18, 2**20, 2**22]
    if device.type == "cuda":
        batches += [2**24]
    best = {}
    for b in batches:
        steps = max(20, min(200, 2**24 // b * 4))
        best[b] = statistics.median(env_games_per_s(b, steps, device, seed=r) for r in range(repeats))
    top = max(best, key=best.get)
    return {"env_games_per_s": best[top], "env_best_batch": top,
            "env_by_batch": {str(b): round(v) for b, v in best.items()}}


def bench_eval(repeats: int) -> dict:
    net = torch.nn.Sequential(torch.nn.Linear(9, 64), torch.nn.ReLU(), torch.nn.Linear(64, 9))
    evaluate_policy(net)  # warm up the cached tables
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        evaluate_policy(net)
        times.append(time.perf_counter() - start)
    return {"eval_s": statistics.median(times)}


def bench_reinforce(device: str, games: int, repeats: int, threads: int | None,
                    antirez: Path | None = None, antirez_games: int = ANTIREZ_GAMES) -> dict:
    """REINFORCE's training speed; with ``antirez``, that binary timed between our runs (first
    in every other round, so that a drift of the host's speed hits both sides alike)."""
    rates, theirs, used = [], [], 0
    for r in range(repeats):
        for side in ("ours", "c") if r % 2 == 0 else ("c", "ours"):
            if side == "ours":
                module, clock = fit([f"budget.games={games}", f"seed={r}", f"trainer={trainer_for(device)}"],
                                    threads=threads)
                used = torch.get_num_threads()
                rates.append(module.games_played / clock.train_s)
                _say(f"reinforce run {r + 1}/{repeats}: {rates[-1]:,.0f} games/s")
            elif antirez is not None:
                theirs.append(bench_antirez.run_once(antirez, antirez_games))
                _say(f"antirez run {r + 1}/{repeats}: {antirez_games / theirs[-1]:,.0f} games/s")
    out = {"reinforce_games_per_s": statistics.median(rates), "reinforce_threads": used,
           "reinforce_games_per_s_per_run": rates}
    if antirez is not None:
        rate = antirez_games / statistics.median(theirs)  # games over the median time
        out["antirez"] = {"games": antirez_games, "runs": repeats, "seconds": statistics.median(theirs),
                          "games_per_s": rate, "games_per_s_per_run": [antirez_games / s for s in theirs],
                          "ratio_reinforce": out["reinforce_games_per_s"] / rate, "threads": 1,
                          "timed": "the process's wall time: start, training, one game fed on stdin, exit"}
    return out


def bench_ppo(device: str, games: int, repeats: int, threads: int | None) -> dict:
    rates, times = [], []
    for r in range(repeats):
        module, clock = fit(["algo=ppo", "net=mlp128", f"budget.games={games}", f"seed={r}",
                             f"trainer={trainer_for(device)}"], watch=True, threads=threads)
        used = torch.get_num_threads()
        rates.append(module.env_steps / clock.train_s)
        times.append(clock.unbeatable_s)
        when = "never" if clock.unbeatable_s is None else f"{clock.unbeatable_s:.1f} s"
        _say(f"ppo run {r + 1}/{repeats}: {rates[-1]:,.0f} steps/s, unbeatable at {when}")
    reached = [t for t in times if t is not None]
    # The median over runs that got there; null when fewer than half did.
    ttu = statistics.median(reached) if len(reached) * 2 > len(times) else None
    return {"ppo_steps_per_s": statistics.median(rates), "time_to_unbeatable_s": ttu,
            "details_ppo_unbeatable_s": times, "ppo_threads": used}


# Populations (population.size=N): sizes and games per member of each figure, (full, quick).
POPULATION_SIZES = {"reinforce": ((16, 64), (64,)), "ppo": ((16,), (16,))}
POPULATION_GAMES = {"reinforce": (262_144, 131_072), "ppo": (40_960, 20_480)}


def bench_population(device: str, algo: str, sizes: tuple[int, ...], games: int, repeats: int,
                     threads: int | None) -> dict[str, dict]:
    """The speed of a population of each size, summed over its members: training games per
    second for REINFORCE (its default config), learner steps per second for the flagship PPO;
    ``games`` per member. Returns ``{size: {"median": x, "per_run": [...]}}``."""
    out = {}
    algo_overrides = ["algo=ppo", "net=mlp128"] if algo == "ppo" else []
    for n in sizes:
        rates = []
        for r in range(repeats):
            module, clock = fit([*algo_overrides, f"population.size={n}", f"seed={1000 * (r + 1)}",
                                 f"budget.games={games}", f"trainer={trainer_for(device)}"], threads=threads)
            done = module.env_steps if algo == "ppo" else module.games_played * module.n
            rates.append(done / clock.train_s)
            _say(f"population of {n} {algo}, run {r + 1}/{repeats}: {rates[-1]:,.0f} "
                 f"{'steps' if algo == 'ppo' else 'games'}/s (all members)")
        out[str(n)] = {"median": statistics.median(rates), "per_run": rates}
    return out


def run(device: str = "cpu", quick: bool = False, threads: int | None = None,
        reinforce_games: int | None = None, ppo_games: int | None = None,
        compare: list[str] | None = None, sb3_steps: int = 50_000, repeats: int | None = None,
        antirez: Path | None = None, antirez_games: int = ANTIREZ_GAMES,
        populations: bool = True, population_sizes: tuple[int, ...] | None = None,
        population_games: int | None = None, antirez_seeded: dict[int, Path] | None = None,
        safe_seeds: int | None = None, antirez_safe_games: int = SAFE_GAMES,
        safe_nets: tuple[str, ...] = SAFE_NETS, safe_population: bool = True, singles: bool = True,
        parallel_sizes: tuple[int, ...] | None = None, boards: bool = True) -> dict:
    """Every figure, and with ``compare`` (``"antirez"``: needs ``antirez``, a checked binary;
    ``"sb3"``) the same-run comparisons, under ``compare``; ``populations``: the
    ``population_*`` figures too; ``singles`` (with them, on the CPU):
    ``population_vs_parallel_singles`` (``parallel.py``), of ``parallel_sizes`` agents; with
    ``antirez_seeded`` (the patched C per hidden size), the time to a safe agent of ``safe_nets``
    (``safe.measure``; ``safe_population``: ours also as one population of the seeds);
    ``boards``: the m,n,k boards' figures (``bench/boards.py``) and training on each board
    (``bench/board_training.py``)."""
    compare = compare or []
    dev = torch.device(device)
    measure_repeats = 3 if quick else 5
    train_repeats = repeats or (1 if quick else 3)
    pick = 1 if quick else 0
    out: dict = {"device": str(dev), "host": machine()}  # its load: before any figure is measured
    if warning := busy_warning(out["host"]["load"]):
        _say(warning)
    _say("engine")
    if threads:
        torch.set_num_threads(threads)
    engine_threads = torch.get_num_threads()
    env = bench_env(dev, quick, measure_repeats)
    out["env_games_per_s"] = env.pop("env_games_per_s")
    c_bin = antirez if "antirez" in compare else None
    _say("training: default REINFORCE" + (", antirez's C ttt-rl between its runs" if c_bin else ""))
    rf = bench_reinforce(device, reinforce_games or DEFAULT_GAMES["reinforce"][pick], train_repeats, threads,
                         c_bin, antirez_games)
    same_run = {"antirez": rf.pop("antirez")} if "antirez" in compare else {}
    out["reinforce_games_per_s"] = rf["reinforce_games_per_s"]
    _say("training: flagship PPO until unbeatable")
    ppo = bench_ppo(device, ppo_games or DEFAULT_GAMES["ppo"][pick], train_repeats, threads)
    out["threads"] = {"engine": engine_threads, "reinforce": rf["reinforce_threads"],
                      "ppo": ppo.pop("ppo_threads")}
    if populations:
        _say("populations: default REINFORCE and flagship PPO, many agents per process")
        def population_of(algo: str) -> dict:
            return bench_population(device, algo, population_sizes or POPULATION_SIZES[algo][pick],
                                    population_games or POPULATION_GAMES[algo][pick], train_repeats, threads)

        pop_rf, pop_ppo = population_of("reinforce"), population_of("ppo")
        out["population_reinforce_games_per_s"] = {n: v["median"] for n, v in pop_rf.items()}
        out["population_ppo_steps_per_s"] = {n: v["median"] for n, v in pop_ppo.items()}
        # Same-run ratios: to the single run measured above, and to antirez's C when timed.
        out["population_ratios"] = {
            f"reinforce_{n}_vs_single": v / out["reinforce_games_per_s"]
            for n, v in out["population_reinforce_games_per_s"].items()}
        out["population_ratios"].update({
            f"ppo_{n}_vs_single": v / ppo["ppo_steps_per_s"]
            for n, v in out["population_ppo_steps_per_s"].items()})
        if "antirez" in same_run:
            out["population_ratios"].update({
                f"reinforce_{n}_vs_antirez": v / same_run["antirez"]["games_per_s"]
                for n, v in out["population_reinforce_games_per_s"].items()})
        out["details"] = {"population_reinforce_per_run": {n: v["per_run"] for n, v in pop_rf.items()},
                          "population_ppo_per_run": {n: v["per_run"] for n, v in pop_ppo.items()}}
    if singles and populations and device == "cpu":  # a 2-core host's question; the workers run on the CPU
        _say("population_vs_parallel_singles: N agents as one population, then as single runs "
             f"{parallel.WORKERS} at a time")
        out["population_vs_parallel_singles"] = parallel.bench_parallel(
            device, ("reinforce", "ppo"), parallel_sizes or parallel.SIZES[pick], quick, threads, _say,
            population_games)
    out["details"] = {**out.get("details", {}), **env,
                      "reinforce_games_per_s_per_run": rf["reinforce_games_per_s_per_run"],
                      "ppo_unbeatable_s_per_run": ppo.pop("details_ppo_unbeatable_s")}
    out.update(ppo)
    if threads:
        torch.set_num_threads(threads)
    out.update(bench_eval(measure_repeats))
    out.update(bench_nashconv(measure_repeats, log=_say))
    out.update(bench_tournament(measure_repeats, log=_say))
    _say("alphazero self-play search")
    out.update(bench_search(device, measure_repeats, log=_say))
    _say("move latency")
    out.update(bench_latency(measure_repeats))
    out.update(floor.bench_floor(measure_repeats, log=_say))  # whole processes: the whole command's floor
    if boards:
        _say("m,n,k boards: tables built and loaded, one exact evaluation (fresh processes)")
        out["boards"] = bench_boards(quick, 3, threads, log=_say)
        _say("per board: REINFORCE and PPO trained, then one exact evaluation (fresh processes)")
        out["board_training"] = bench_board_training(quick, train_repeats, threads, log=_say)
    if "antirez" in compare and (block := safe.measure(antirez_seeded, quick, safe_seeds, antirez_safe_games,
                                                       nets=safe_nets, log=_say,
                                                       population=safe_population)):
        same_run["antirez"]["time_to_safe"] = block
    if "sb3" in compare:
        _say(f"SB3 MaskablePPO, {sb3_steps:,d} steps")
        same_run["sb3"] = sb3.compare(sb3_steps, threads, out, log=_say)
    if same_run:
        out["compare"] = same_run
    out["versions"] = {"ttt_research": __version__, "torch": torch.__version__,
                       "python": platform.python_version()}
    return out


def format_table(res: dict) -> str:
    """The figures; beside them a ratio only where the other side ran in this run, else the
    labelled constant of the development host."""
    lat, ttu, th, h = res["move_latency_ms"], res["time_to_unbeatable_s"], res["threads"], res["host"]
    same = res.get("compare", {})
    load = h.get("load")
    rows = [f"host: {h['cpu']}, {h['logical_cpus']} logical CPU(s); device {res['device']}; torch "
            f"{res['versions']['torch']}; torch threads: engine {th['engine']}, REINFORCE {th['reinforce']}, "
            f"PPO {th['ppo']}",
            "load before the run: " + ("unknown (no load average on this system)" if not load else
                                       f"{load['1min']:.2f} / {load['5min']:.2f} / {load['15min']:.2f} "
                                       f"(1 / 5 / 15 min) on {load['logical_cpus']} logical CPU(s)"
                                       + (" - BUSY: other work shared the cores, figures are low"
                                          if load["busy"] else " - idle enough")),
            f"{'figure':<24} {'ours':>14}  beside it",
            f"{'env_games_per_s':<24} {res['env_games_per_s']:>14,.0f}  "
            f"(batch {res['details']['env_best_batch']})"]
    for key, other in (("reinforce_games_per_s", "antirez"), ("ppo_steps_per_s", "sb3")):
        if other in same:
            c = same[other]
            rate = c["games_per_s"] if other == "antirez" else c["steps_per_s"]
            ratio = c["ratio_reinforce"] if other == "antirez" else c["ratio_steps_per_s"]
            what = "antirez's C ttt-rl" if other == "antirez" else "SB3 MaskablePPO"
            beside = f"{what} in this run ({c['threads']} thread): {rate:,.0f}; ours {ratio:.2f}x"
        else:
            name, ref = REFERENCES[key]
            beside = f"{name}: ~{ref:,} ({MEASURED_ON})"
        rows.append(f"{key:<24} {res[key]:>14,.0f}  {beside}")
    rows.append(f"{'time_to_unbeatable_s':<24} {'never' if ttu is None else f'{ttu:.1f}':>14}  "
                f"{REFERENCES['time_to_unbeatable_s'][0]} ({MEASURED_ON})")
    for key, single in (("population_reinforce_games_per_s", "reinforce"),
                        ("population_ppo_steps_per_s", "ppo")):
        if res.get(key):
            rows.append(f"{key}: all members together")
        for n, rate in res.get(key, {}).items():
            ratios = res["population_ratios"]
            beside = f"{ratios[f'{single}_{n}_vs_single']:.1f}x the single run above"
            if f"reinforce_{n}_vs_antirez" in ratios and single == "reinforce":
                beside += f", {ratios[f'reinforce_{n}_vs_antirez']:.1f}x antirez's C in this run"
            rows.append(f"{f'  N={n} agents':<24} {rate:>14,.0f}  {beside}")
    if "population_vs_parallel_singles" in res:
        rows += parallel.format_lines(res["population_vs_parallel_singles"])
    rows.append(f"{'eval_s':<24} {res['eval_s']:>14.4f}")
    if "nashconv_ms" in res:
        rows.append(f"{'nashconv_ms':<24} {res['nashconv_ms']:>14.1f}  one policy, both seats (its report "
                    f"{res['nashconv_report_ms']:.1f} ms; 100 reports at once "
                    f"{res['nashconv_reports_100_ms']:.0f} ms)")
    if "tournament_100_s" in res:
        ph = res["tournament_phases_s"]
        rows.append(f"{'tournament_100_s':<24} {res['tournament_100_s']:>14.2f}  exact round robin, 10,000 "
                    f"ordered pairs (cross-play {ph['cross_play']:.2f} s + ratings {ph['ratings']:.2f} s)")
    if "search_us_per_game" in res:
        ph, st = res["search_phases_ms"], res["search_setting"]
        rows.append(f"{'search_us_per_game':<24} {res['search_us_per_game']:>14.1f}  alphazero self-play, "
                    f"{st['batch']:,d} games x {st['simulations']} simulations, 1 thread (tables "
                    f"{ph['tables']:.0f} ms + subtrees {ph['subtrees']:.0f} ms of each batch)")
    rows += [floor.format_line(res)] if "command_floor_s" in res else []
    rows += boards_lines(res.get("boards", {}))
    rows += board_training_lines(res.get("board_training", {}))
    rows.append(f"{'move_latency_ms torch':<24} {lat['torch']:>14.4f}")
    rows.append(f"{'move_latency_ms onnxrt':<24} {lat['onnxruntime']:>14.4f}  seed web agent: ~10 ms in "
                "the browser (another host)")
    if "antirez" in same:
        c = same["antirez"]
        per = ", ".join(f"{v:,.0f}" for v in c["games_per_s_per_run"])
        ours = ", ".join(f"{v:,.0f}" for v in res["details"]["reinforce_games_per_s_per_run"])
        rows.append(f"antirez's C ttt-rl, {c['games']:,d} games x {c['runs']} run(s) between REINFORCE's: "
                    f"median {c['games_per_s']:,.0f} games/s ({c['seconds']:.2f} s; runs {per})")
        rows.append(f"  timed: {c['timed']}")
        rows.append(f"  REINFORCE runs {ours} games/s: ratio of the medians {c['ratio_reinforce']:.2f}x")
        if "time_to_safe" in c:
            rows += safe.format_lines(c["time_to_safe"])
    if "sb3" in same:
        c = same["sb3"]
        sttu = c["time_to_unbeatable_s"]
        rows.append(f"SB3 MaskablePPO here, {c['steps']:,d} steps: {c['steps_per_s']:,.0f} steps/s "
                    f"(ours {c['ratio_steps_per_s']:.0f}x), unbeatable "
                    f"{'never' if sttu is None else f'at {sttu:.1f} s'}"
                    + (f" (ours {c['ratio_time_to_unbeatable']:.0f}x sooner)"
                       if "ratio_time_to_unbeatable" in c else ""))
    return "\n".join(rows)


def execute(args, sizes: tuple[int, ...] | None) -> int:
    """The bench for options that passed ``options.check``: what needs torch is checked here
    (a CUDA device, SB3's extra), then the figures run and print."""
    compare = args.compare or []
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda but no CUDA device is available")
    if "sb3" in compare:
        sb3.require_sb3()  # MissingExtra, a UserError, if the extra is not installed
    with tempfile.TemporaryDirectory(prefix="ttt-bench-") as tmp:
        binary, seeded = args.antirez_bin, None
        if "antirez" in compare:
            if args.antirez_src is not None:
                binary = bench_antirez.build(args.antirez_src, Path(tmp), log=_say)
                seeded = safe.prepare(args.antirez_src, args.safe_seeds, Path(tmp), args.safe_nets, log=_say)
            bench_antirez.check_binary(binary)  # fail in seconds, not after the engine's minute
        res = run(args.device, args.quick, args.threads, args.reinforce_games, args.ppo_games,
                  compare, args.sb3_steps, args.repeats, binary, args.antirez_games,
                  populations=not args.no_populations, population_sizes=sizes,
                  population_games=args.population_games, antirez_seeded=seeded,
                  safe_seeds=args.safe_seeds, antirez_safe_games=args.antirez_safe_games,
                  safe_nets=args.safe_nets, safe_population=args.safe_population,
                  singles=not args.no_parallel, parallel_sizes=args.parallel_sizes, boards=not args.no_boards)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0
