"""The metric contract in one place: names of seats, of ``eval.json`` keys and ``eval/*``
metrics, what "unbeatable" means, and the limits of what the code can hold. Every other
module imports these; none redefines them.

Standard library only, so the config validation, the report and the sweep objective can
use it without importing torch.

An ``eval.json`` report (``evaluation/exact.py``) has one block per seat, ``as_x`` and ``as_o``,
each with exact ``vs_random`` and ``vs_perfect`` rates and a ``worst_case`` against a
best-response opponent. A learner is trained from a *training seat*: ``x``, ``o`` or
``both``; the report's blocks for that training seat are ``SEAT_KEYS[seat]``.
"""

from __future__ import annotations

# Seats a learner trains from (``seat.side``), and the two seats a report evaluates.
TRAINING_SEATS = ("x", "o", "both")
EVAL_SEATS = ("x", "o")
# The piece of each evaluated seat on the board (``game.X``, ``game.O``; a test holds them equal).
SEAT_PIECE = {"x": 1, "o": -1}
# The evaluated seats a training seat is judged on, and their eval.json blocks.
JUDGED_SEATS = {"x": ("x",), "o": ("o",), "both": EVAL_SEATS}
REPORT_KEY = {s: f"as_{s}" for s in EVAL_SEATS}
SEAT_KEYS = {t: tuple(REPORT_KEY[s] for s in JUDGED_SEATS[t]) for t in TRAINING_SEATS}

OUTCOMES = ("win", "loss", "tie")
# A report's worst_case, the agent's result against a best-response opponent: +1 it wins
# whatever the opponent does, 0 it draws at worst, -1 some opponent beats it. WORST_NAME
# names the result in eval.json; WORST_VALUE is the eval/*_worst_case metric of each name.
WORST_NAME = {1: "win", 0: "draw", -1: "loss"}
WORST_VALUE = {name: float(v) for v, name in WORST_NAME.items()}
# The greedy block's share of optimal moves over every decision point of the game, both seats
# (lean4-mlir's measure), beside ``optimal_move_rate``: over the points the policy reaches.
OPTIMAL_ALL = "optimal_move_rate_all"
# Each seat's block also says what the game allows that seat (``game_value``: its result under
# perfect play from the empty board, a WORST_NAME) and whether the agent holds it
# (``holds_value``): where the value is a win or a draw, its worst case equals it (no opponent
# does better against it than perfect play; on a drawn game: it cannot be beaten); where the
# game is lost for the seat (O on 3,4,3, where X wins), it loses only to a perfect opponent: it
# plays an optimal move at every point it can reach, so a position an erring opponent hands it
# is kept. Beside them the seat's own ``optimal_move_rate`` over its ``decision_points``.
GAME_VALUE = "game_value"
HOLDS_VALUE = "holds_value"


def eval_name(seat: str, what: str) -> str:
    """The ``eval/*`` metric of evaluated seat ``seat``: ``what`` is ``random_win`` (any
    outcome), ``perfect_loss`` or ``worst_case``."""
    return f"eval/{seat}_{what}"


# The eval/* metric names (logged every eval_every updates; docs/contracts.md, "Metric names").
EVAL_NAMES = tuple(
    [eval_name(s, f"random_{o}") for s in EVAL_SEATS for o in OUTCOMES]
    + [eval_name(s, "perfect_loss") for s in EVAL_SEATS]
    + [eval_name(s, "worst_case") for s in EVAL_SEATS]
    + ["eval/optimal_move_rate"])

# Every row logged carries games played, the x axis of every chart (W&B's step metric,
# TensorBoard's step); the other families (docs/contracts.md, "Metric names").
GAMES = "train/games"
ROLLOUT_NAMES = tuple(f"rollout/{o}_rate" for o in OUTCOMES)  # sampled, vs the training opponent
PERF_NAMES = ("perf/games_per_s", "perf/steps_per_s")        # steps: PPO only
UNBEATABLE_FRACTION = "population/unbeatable_fraction"       # a population's share, per evaluation
ELAPSED = "train/elapsed_s"  # training wall seconds since the fit began (resumes continue it), per evaluation
# An algorithm with action values (Algorithm.action_values): eval.json's value_accuracy
# block (evaluation/values.py) and the eval/* metrics logged from it.
VALUE_KEY = "value_accuracy"
VALUE_NAMES = {"sign_agreement": "eval/value_sign_agreement", "mae": "eval/value_mae"}


# The policy as trained (evaluation/exploit.py): eval.json's ``as_trained`` block scores the
# policy an algorithm plays while training (softmax at its temperature, epsilon-greedy, ...)
# beside the greedy report: its NashConv and, per seat, a best response's value against it
# (+1 win, 0 draw, -1 loss for the responder) and its outcomes vs random. ``nashconv`` at the
# top level is the greedy policy's (from its worst cases). Logged as the eval/* metrics below.
TRAINED_KEY = "as_trained"
NASHCONV = "nashconv"
EXPLOIT_NAMES = ("eval/nashconv", "eval/trained_nashconv",
                 *(f"eval/trained_{s}_{what}" for s in EVAL_SEATS
                   for what in ("best_response", "random_win", "random_loss")))


def greedy_nashconv(report: dict) -> float:
    """The greedy policy's NashConv: against a deterministic policy a best response gets
    exactly the negated worst case, summed over the two seats (0: unbeatable from both)."""
    return -sum(WORST_VALUE[report[REPORT_KEY[s]]["worst_case"]] for s in EVAL_SEATS) + 0.0


def exploit_metrics(report: dict) -> dict[str, float]:
    """The ``EXPLOIT_NAMES`` metrics a report has: the greedy NashConv where it has
    ``nashconv``, the policy as trained's where it has an ``as_trained`` block (reports written
    before either existed have none)."""
    m = {"eval/nashconv": float(report[NASHCONV])} if NASHCONV in report else {}
    block = report.get(TRAINED_KEY)
    if block:
        m["eval/trained_nashconv"] = float(block["nashconv"])
        for s in EVAL_SEATS:
            side = block[REPORT_KEY[s]]
            m[f"eval/trained_{s}_best_response"] = float(side["best_response"])
            m[f"eval/trained_{s}_random_win"] = float(side["vs_random"]["win"])
            m[f"eval/trained_{s}_random_loss"] = float(side["vs_random"]["loss"])
    return m


def trained_exploit(report: dict, seat: str) -> float | None:
    """What the policy as trained concedes from the training seat ``seat``: NashConv for
    ``both``, else that seat's best-response value (None without an ``as_trained`` block)."""
    block = report.get(TRAINED_KEY)
    if not block:
        return None
    if seat == "both":
        return float(block["nashconv"])
    return float(block[REPORT_KEY[seat]]["best_response"])


# Which way each metric improves, in one place: the report's --compare and its performance
# profiles, W&B's summaries and a sweep's direction all ask ``better``. Lower is better for
# what the agent gives away: a loss rate, and what a best response gets against it (NashConv;
# a seat's ``best_response``, the responder's value: what the policy concedes), and a value
# error. Everything else is higher-is-better: a win rate, the worst case (+1 win .. -1 loss),
# the optimal-move rate, the value sign agreement, a sweep's score. A draw rate counts as
# higher too (a draw beats a loss), though against random more draws can mean fewer wins.
LOWER_IS_BETTER = ("loss", "nashconv", "best_response", "mae")


def better(name: str) -> str:
    """``"lower"`` or ``"higher"``: which way the metric ``name`` (``eval/`` or not; an
    objective's name such as ``population_iqm_loss``) improves."""
    name = name.removeprefix("eval/")
    lower = any(name == end or name.endswith(f"_{end}") for end in LOWER_IS_BETTER)
    return "lower" if lower else "higher"


def band(name: str) -> tuple[str, str]:
    """A population's lowest and highest member for the ``eval/*`` metric ``name`` (the
    logged ``name`` itself is the members' median)."""
    return f"{name}_min", f"{name}_max"


# The network encodings ``net.encoding`` may name (``encodings.ENCODINGS`` implements them).
ENCODING_NAMES = ("planes18", "signed9")


def eval_metrics(report: dict) -> dict[str, float]:
    """The ``eval/*`` metrics of an ``eval.json`` report, by the names of ``EVAL_NAMES``."""
    m: dict[str, float] = {}
    for seat in EVAL_SEATS:
        side = report[REPORT_KEY[seat]]
        for outcome in OUTCOMES:
            m[eval_name(seat, f"random_{outcome}")] = float(side["vs_random"][outcome])
        m[eval_name(seat, "perfect_loss")] = float(side["vs_perfect"]["loss"])
        m[eval_name(seat, "worst_case")] = WORST_VALUE[side["worst_case"]]
    m["eval/optimal_move_rate"] = float(report["optimal_move_rate"])
    return m


def value_metrics(report: dict) -> dict[str, float]:
    """The ``eval/value_*`` metrics of a report's ``value_accuracy`` block (none without one)."""
    block = report.get(VALUE_KEY)
    return {name: float(block[key]) for key, name in VALUE_NAMES.items()} if block else {}


def unbeatable(report: dict, seat: str = "both") -> bool:
    """The agent holds the game's value from every seat the training seat ``seat`` is judged
    on (``HOLDS_VALUE``). On a drawn game, tic-tac-toe's, that is: no opponent, however it
    plays, can beat it (its worst case is a draw or a win; equivalently it loses no game to
    the random player, who plays every line with positive probability). A report written
    before the key existed (a drawn 3x3 game) is judged by that worst case."""
    return all(report[k].get(HOLDS_VALUE, report[k]["worst_case"] != "loss") for k in SEAT_KEYS[seat])


def policy_parts(report: dict) -> dict[str, dict]:
    """The blocks of a report that are reports themselves: another policy of the same agent
    evaluated alike (``alphazero``'s ``search``), by name."""
    return {k: v for k, v in report.items() if isinstance(v, dict) and REPORT_KEY["x"] in v
            and "worst_case" in v[REPORT_KEY["x"]]}  # not a policy-as-trained block (no worst case)


def learner_loss(report: dict, seat: str) -> float:
    """The exact loss rate vs random of the training seat ``seat`` (the worse of two)."""
    return max(float(report[k]["vs_random"]["loss"]) for k in SEAT_KEYS[seat])


# What the code can hold. Seeds go to ``L.seed_everything`` (numpy's range: 32 bits); a
# population's members take ``seed + k``, so the last member's seed must fit too.
SEED_MAX = 2**32 - 1

# The largest board, in cells (m * n <= 16): 3^16 = 43M codes would fit int64, but not a table
# per code and cell; the reachable positions of 4x4 (9.7M at most) are what env/positions.py
# indexes. env/mnk.py refuses a larger board; a setting bounded by a board's cells
# (AlphaZero's max_considered) is bounded by this.
MAX_CELLS = 16

# Games: counters are int64 and a resumed run's random streams are seeded from
# ``games_played << 20`` (64 bits: train/module.py), so 2**44 games is the hard limit; 10**13 keeps
# clear of it (about 230 days at 500k games/s) and of float64's exact integers (2**53).
GAMES_MAX = 10**13

# Learning rates, coefficients and rewards enter float32 training (max ~3.4e38): 1e30 is held
# exactly enough, with headroom. A value that large can still make training diverge (a batch
# sums over ~10**7 moves, PPO squares returns); that is the numerical guard's to stop in one
# line (train/guards.py: exit 3, or the member alone in a population), not a crash.
VALUE_MAX = 1e30

GAMES_WHY = " (64-bit game counters and random seeds derived from them)"

# Members of one population: each has its own random stream and rows in every tensor; the
# memory estimate (population.memory_estimate) refuses most populations long before this.
MEMBERS_MAX = 1_000_000
