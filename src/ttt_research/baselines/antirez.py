"""antirez's C ttt-rl as a reference timed in the same run as ours (``bench --compare antirez``).

Speeds measured on different hosts do not divide: the project's torch code and a scalar C
program gain differently from a CPU's SIMD width and caches. So ``bench`` times the C program
itself, between its own training runs, and reports only the ratio of the two.

This module owns building the program from its source (``cc -O3 -ffast-math``, into a
temporary folder; the source is antirez's, BSD licence, and never part of this project),
checking that a binary behaves like it, and timing it.

The program's interface, as used here: ``ttt N`` trains against a random opponent for N games,
printing ``Training neural network against N random games...``, a ``Games: K, ...`` line every
10,000 games and ``Training complete!``; then it plays one interactive game (the human is X
and moves first, reading one character per move from stdin, refusing occupied squares) and
asks ``Play again? (y/n)``. ``ANSWERS`` plays squares 0, 1, ..., 8 in turn, so every square is
tried at most once and the game ends before they run out; the next character left (a square
or the final ``n``) is not ``y``, so the program exits. Without answers it would wait on the
terminal, and at end of input it loops on its last (refused) move forever.

What is timed: the wall time of the whole process (start, N training games, the one game on
stdin, exit), nothing subtracted. Its stdout is a pipe, hence fully buffered: the progress lines
carry no usable timestamps. At 300,000 games the training is all but a few milliseconds of it.

For the bench's time to a safe agent (``bench/safe.py``), ``patch_source`` makes a seeded copy
of the source: ``ttt N SEED OUT`` trains N games after ``srand(SEED)`` (not ``srand(time(NULL))``),
writes its network and its own greedy moves to OUT (``DUMP_LAYOUT``) and exits 0 before the
interactive game; with fewer arguments it behaves as the original. ``build_seeded(..., hidden=H)``
compiles it with ``-DNN_HIDDEN_SIZE=H`` (the copy's define yields to the flag), the card's
one-layer networks' other widths. ``read_dump`` reads OUT (its hidden size from its length),
``to_network`` loads it into the project's ``MLP(hidden=[H], encoding="planes18")``,
``check_parity`` checks that its logits are the C program's, and ``evaluate_dump`` does all three
and scores the C program's moves exactly as O (the project's evaluator: ``evaluation/exact.py``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ttt_research.contract import REPORT_KEY, unbeatable
from ttt_research.env import game
from ttt_research.errors import UserError
from ttt_research.evaluation.exact import decision_codes, evaluate_actions, greedy_actions
from ttt_research.models.nets import MLP

ANSWERS = "0\n1\n2\n3\n4\n5\n6\n7\n8\nn\n"
CHECK_GAMES = 10_000  # the probe: one progress line, a fraction of a second
PROGRESS_EVERY = 10_000  # the program's own progress interval
_PROGRESS = re.compile(r"^Games: (\d+), Wins: \d+", re.MULTILINE)


class AntirezError(UserError):
    """The program cannot be built, started, or does not behave like ttt-rl: one line."""


def build(src: Path, into: Path, log: Callable[[str], None] = lambda msg: None, name: str = "ttt",
          flags: tuple[str, ...] = ()) -> Path:
    """Compile ``src`` (antirez's ttt.c) into ``into/name`` with ``$CC`` or ``cc`` and ``flags``
    (``-D...``) after the optimisation ones; the binary's path."""
    if not src.is_file():
        raise AntirezError(f"--antirez-src {src}: no such file")
    cc = shlex.split(os.environ.get("CC", "")) or [
        next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), "")]
    if not cc[0] or not shutil.which(cc[0]):
        raise AntirezError("--antirez-src needs a C compiler, and none was found (cc, gcc, clang or $CC)")
    out = into / name
    log(f"building {src} with {cc[0]} -O3 -ffast-math" + "".join(f" {f}" for f in flags))
    try:
        r = subprocess.run([*cc, "-O3", "-ffast-math", *flags, "-o", str(out), str(src), "-lm"],
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise AntirezError(f"compiling {src} with {cc[0]} took over 300 s") from None
    if r.returncode != 0:
        first = next((line for line in r.stderr.splitlines() if "error" in line), r.stderr.strip()[:200])
        raise AntirezError(f"{cc[0]} could not compile {src}: {first}")
    return out


def _timeout(games: int) -> float:
    """A run's time limit: 1,000 games/s would be ~100x slower than expected."""
    return 60 + games / 1_000


def _timed(argv: list[str], stdin: str | None, timeout: float, name: str,
           not_done: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``argv`` (``stdin`` fed, or none), its output captured; (the result, wall seconds).
    ``AntirezError`` naming ``name`` if it cannot start, or "``name`` did not ``not_done``" at
    ``timeout``."""
    start = time.perf_counter()
    try:
        r = subprocess.run(argv, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AntirezError(f"{name} did not {not_done}") from None
    except OSError as err:
        raise AntirezError(f"{name} could not be started: {err.strerror}") from None
    return r, time.perf_counter() - start


def check_binary(binary: Path) -> None:
    """Refuse a path that is missing or not executable; then run a short training as a probe."""
    if not binary.exists():
        raise AntirezError(f"--antirez-bin {binary}: no such file")
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise AntirezError(f"--antirez-bin {binary} is not an executable file")
    run_once(binary, CHECK_GAMES, timeout=60)


def run_once(binary: Path, games: int, timeout: float | None = None) -> float:
    """Train the program for ``games`` games, answering its game on stdin; the process's wall time in s."""
    timeout = timeout or _timeout(games)
    hint = "is it antirez's ttt-rl?"
    r, seconds = _timed([str(binary), str(games)], ANSWERS, timeout, f"--antirez-bin {binary}",
                        f"finish {games:,d} games and the game on stdin within {timeout:.0f} s ({hint})")
    if r.returncode != 0:
        raise AntirezError(f"--antirez-bin {binary} exited with status {r.returncode} ({hint})")
    out = r.stdout
    counts = [int(k) for k in _PROGRESS.findall(out)]
    expected = games // PROGRESS_EVERY * PROGRESS_EVERY
    if (f"against {games} random games" not in out or "Training complete!" not in out
            or (expected and (not counts or counts[-1] != expected))):
        raise AntirezError(f"--antirez-bin {binary} did not print ttt-rl's training progress for "
                           f"{games:,d} games ({hint})")
    return seconds


# --------------------------------------------------------------------------- a seeded, dumping copy
#
# The bench's time to a safe agent needs three things the original program does not give: a
# chosen seed (it seeds with the clock), its network after training (it keeps it in memory)
# and an exit without the interactive game. ``patch_source`` adds them by exact string
# replacements on a temporary copy of the source, so a source that is not ttt-rl's is refused
# rather than half-patched. The added C (``_DUMP_C``) is ours; the rest stays antirez's.

SEEDED_NAME = "ttt-seeded"

# What the dump holds, in order, native byte order (written and read on one host), for H
# hidden units (NN_HIDDEN_SIZE: 100 in the source, another with build_seeded's ``hidden``):
#   8 bytes b"TTTRLNN1"; int32 P, the number of positions below (2,097);
#   float32 weights_ih[18 * H], index j * H + h: input j -> hidden h (C's row-major [j][h]);
#   float32 weights_ho[H * 9], index h * 9 + o: hidden h -> output o;
#   float32 biases_h[H]; float32 biases_o[9];
#   P records, one per position where O is to move, in code order: int32 code (the project's
#   board code: sum of digit_i * 3**i, digit 0 empty, 1 X, 2 O), float32 raw_logits[9] (the
#   C forward pass's logits there), int32 move (what get_computer_move() plays there).
DUMP_LAYOUT = "TTTRLNN1, P, weights_ih, weights_ho, biases_h, biases_o, P x (code, raw_logits[9], move)"
MAGIC = b"TTTRLNN1"
N_IN, N_HIDDEN, N_OUT = 18, 100, 9  # N_HIDDEN: the source's NN_HIDDEN_SIZE
_HEAD = struct.Struct("=8si")
_RECORD = struct.Struct("=i9fi")  # 44 bytes: code, 9 logits, move
O_POSITIONS = 2_097  # unfinished positions reachable from the empty board with O to move
# Max |our logit - C's logit|: float32 sums in another order (and -ffast-math) differ by
# about 1e-5 (7.6e-6 after 2M games, logits up to 55); a wrong layout by whole units. The
# rounding grows with the logits: past 100 the bound is PARITY_REL of the largest (25 hidden
# units, seed 64: logits up to 237, 1.07e-4 apart, 7 float32 steps at that size).
PARITY_TOL = 1e-4
PARITY_REL = 1e-6


def _arrays(hidden: int) -> tuple[tuple[str, int], ...]:
    """The dump's float arrays for ``hidden`` units: (name, length), in file order."""
    return (("weights_ih", N_IN * hidden), ("weights_ho", hidden * N_OUT),
            ("biases_h", hidden), ("biases_o", N_OUT))


def dump_size(hidden: int) -> int:
    """A dump's length in bytes for ``hidden`` units: 28 * hidden + 9 floats between the header
    and the records (103,516 at 100, 95,116 at 25)."""
    return _HEAD.size + 4 * sum(n for _, n in _arrays(hidden)) + _RECORD.size * O_POSITIONS


def hidden_of(size: int) -> int | None:
    """The hidden size whose dump is ``size`` bytes long (``dump_size``'s inverse); None if none is."""
    floats, rest = divmod(size - _HEAD.size - _RECORD.size * O_POSITIONS, 4)
    hidden, odd = divmod(floats - N_OUT, N_IN + N_OUT + 1)
    return hidden if rest == 0 and odd == 0 and hidden >= 1 else None

_DUMP_C = r"""
/* ---- Added to a temporary copy by ttt_research's bench; not part of ttt-rl. ----
 * Write the trained network, then, for every unfinished position with O to move, the
 * raw logits of the forward pass and the move get_computer_move() plays there: the
 * bench evaluates exactly these moves. Layout: DUMP_LAYOUT in baselines/antirez.py. */
static int ttt_research_dump(NeuralNetwork *nn, const char *path) {
    FILE *fp = fopen(path, "wb");
    if (fp == NULL) return 3;
    int count = 0;
    fwrite("TTTRLNN1", 1, 8, fp);
    fwrite(&count, sizeof(count), 1, fp); /* rewritten once the positions are counted */
    fwrite(nn->weights_ih, sizeof(float), NN_INPUT_SIZE * NN_HIDDEN_SIZE, fp);
    fwrite(nn->weights_ho, sizeof(float), NN_HIDDEN_SIZE * NN_OUTPUT_SIZE, fp);
    fwrite(nn->biases_h, sizeof(float), NN_HIDDEN_SIZE, fp);
    fwrite(nn->biases_o, sizeof(float), NN_OUTPUT_SIZE, fp);
    for (int code = 0; code < 19683; code++) {
        GameState state;
        char winner;
        int rest = code, xs = 0, os = 0;
        init_game(&state);
        for (int i = 0; i < 9; i++, rest /= 3) {
            int digit = rest % 3; /* the project's board codes: 0 empty, 1 X, 2 O */
            state.board[i] = ".XO"[digit];
            xs += digit == 1;
            os += digit == 2;
        }
        state.current_player = 1;
        /* O to move and nobody has a line: reachable, since lines only ever grow. */
        if (xs != os + 1 || check_game_over(&state, &winner)) continue;
        int move = get_computer_move(&state, nn, 0);
        fwrite(&code, sizeof(code), 1, fp);
        fwrite(nn->raw_logits, sizeof(float), NN_OUTPUT_SIZE, fp);
        fwrite(&move, sizeof(move), 1, fp);
        count++;
    }
    fseek(fp, 8, SEEK_SET);
    fwrite(&count, sizeof(count), 1, fp);
    int failed = ferror(fp);
    return (fclose(fp) != 0 || failed) ? 3 : 0;
}

"""

# (anchor, replacement): each anchor must occur exactly once in the source.
_TRAIN = "if (random_games > 0) train_against_random(&nn, random_games);"
_HIDDEN = f"#define NN_HIDDEN_SIZE {N_HIDDEN}"
_PATCHES = (
    # The seed: argv[2] when given, else the clock as before.
    ("srand(time(NULL));",
     "srand(argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : (unsigned)time(NULL));"),
    # The dump, defined where everything it calls is already declared.
    ("int main(int argc, char **argv) {", _DUMP_C.lstrip("\n") + "int main(int argc, char **argv) {"),
    # After training: with an output path, dump and exit before the interactive game.
    (_TRAIN, _TRAIN + "\n    if (argc > 3) return ttt_research_dump(&nn, argv[3]);"),
    # The width: a -DNN_HIDDEN_SIZE=H flag wins over the source's 100 (build_seeded's hidden).
    (_HIDDEN, f"#ifndef NN_HIDDEN_SIZE\n{_HIDDEN}\n#endif"),
)


def patch_source(text: str, name: str = "the source") -> str:
    """antirez's ttt.c -> the seeded, dumping copy (``ttt N SEED OUT``); ``AntirezError`` (one
    line naming ``name``) when an anchor is missing or repeated: not ttt-rl's source."""
    for anchor, replacement in _PATCHES:
        found = text.count(anchor)
        if found != 1:
            what = "no" if found == 0 else f"{found} times"
            raise AntirezError(f"{name} does not look like antirez's ttt-rl: {what} `{anchor}` to patch")
        text = text.replace(anchor, replacement)
    return text


def build_seeded(src: Path, into: Path, log: Callable[[str], None] = lambda msg: None,
                 hidden: int | None = None) -> Path:
    """Patch a copy of ``src`` (``patch_source``) in ``into`` and compile it as ``build`` does;
    ``hidden``: its ``NN_HIDDEN_SIZE`` (``-DNN_HIDDEN_SIZE=hidden``, the binary named
    ``ttt-seeded-hHIDDEN``), else the source's."""
    if hidden is not None and hidden < 1:
        raise ValueError(f"a hidden size is at least 1, got {hidden}")
    try:
        text = src.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise AntirezError(f"--antirez-src {src}: {err.strerror or err}") from None
    patched = into / "ttt_seeded.c"
    patched.write_text(patch_source(text, f"--antirez-src {src}"), encoding="utf-8")
    if hidden is None:
        return build(patched, into, log, name=SEEDED_NAME)
    return build(patched, into, log, name=f"{SEEDED_NAME}-h{hidden}",
                 flags=(f"-DNN_HIDDEN_SIZE={hidden}",))


def run_seeded(binary: Path, games: int, seed: int, out: Path, timeout: float | None = None) -> float:
    """``binary games seed out``: train, dump to ``out``, exit; the process's wall time in s."""
    timeout = timeout or _timeout(games)
    hint = "is it the bench's patched ttt-rl?"
    r, seconds = _timed([str(binary), str(games), str(seed), str(out)], None, timeout, str(binary),
                        f"train {games:,d} games (seed {seed}) and write its network within "
                        f"{timeout:.0f} s ({hint})")
    if r.returncode != 0:
        raise AntirezError(f"{binary} exited with status {r.returncode} training {games:,d} games "
                           f"(seed {seed}; status 3: it could not write {out})")
    if (games > 0 and "Training complete!" not in r.stdout) or not out.is_file():
        raise AntirezError(f"{binary} did not train {games:,d} games and write {out} ({hint})")
    return seconds


# --------------------------------------------------------------------------- reading a dump


class Dump:
    """A dump's contents (``DUMP_LAYOUT``), as plain Python lists."""

    def __init__(self, arrays: dict[str, list[float]], codes: list[int], logits: list[tuple[float, ...]],
                 moves: list[int], hidden: int = N_HIDDEN):
        self.hidden = hidden  # NN_HIDDEN_SIZE of the program that wrote it
        self.arrays = arrays  # name -> flat float list, C's own order
        self.codes = codes  # (P,) board codes, increasing
        self.logits = logits  # (P, 9) the C program's raw logits at each code
        self.moves = moves  # (P,) its move at each code


def read_dump(path: Path, hidden: int | None = None) -> Dump:
    """Read and check a dump's framing; ``AntirezError`` (one line) if it is short, long or
    not one (codes out of order, moves outside 0..8). ``hidden``: the width it must have (the
    bench knows what it built); None: the one its length gives (``hidden_of``)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise AntirezError(f"cannot read the network dump {path}: {err.strerror or err}") from None
    bad = f"the network dump {path}"
    if len(data) < _HEAD.size or data[:len(MAGIC)] != MAGIC:
        raise AntirezError(f"{bad} is not one (no {MAGIC.decode()} header): not written by the patched "
                           "ttt-rl")
    _, count = _HEAD.unpack_from(data)
    width = hidden if hidden is not None else hidden_of(len(data))
    if count != O_POSITIONS or width is None or len(data) != dump_size(width):
        expected = (f"{dump_size(hidden):,d} bytes, {hidden} hidden units" if hidden is not None else
                    f"the length of some hidden size H: {dump_size(N_HIDDEN):,d} bytes at H = {N_HIDDEN}, "
                    f"{4 * (N_IN + N_OUT + 1)} more or less a unit")
        raise AntirezError(f"{bad} is truncated or malformed: {len(data):,d} bytes for {count:,d} positions "
                           f"(expected {O_POSITIONS:,d} positions in {expected})")
    floats = sum(n for _, n in _arrays(width))
    values = struct.unpack_from(f"={floats}f", data, _HEAD.size)
    arrays, at = {}, 0
    for name, n in _arrays(width):
        arrays[name], at = list(values[at:at + n]), at + n
    records = list(struct.iter_unpack(_RECORD.format, data[_HEAD.size + 4 * floats:]))
    codes = [r[0] for r in records]
    moves = [r[-1] for r in records]
    in_order = codes == sorted(set(codes))  # increasing: no code twice
    if not in_order or any(not 0 <= c < 3**9 for c in codes) or any(not 0 <= m < 9 for m in moves):
        raise AntirezError(f"{bad} is malformed: its board codes or moves are out of range")
    return Dump(arrays, codes, [r[1:-1] for r in records], moves, width)


# --------------------------------------------------------------------------- into the project's network


def to_network(dump: Dump) -> MLP:
    """The dump's weights in the project's ``MLP(hidden=[H], encoding="planes18")``, H its width.

    C stores weights as [from][to] (``weights_ih[j * H + h]``); ``nn.Linear`` wants
    (to, from): a transpose. C's inputs are absolute bits per cell, (X, O); planes18's are
    the mover's, (own, opponent), which for O to move is (O, X): the two bits of every
    cell swap. So our input 2i reads C's input 2i + 1 and the other way round, and the
    network plays O exactly as C's does (as X it would see its bits the wrong way round;
    the C program never plays X)."""
    a = {k: torch.tensor(v, dtype=torch.float32) for k, v in dump.arrays.items()}
    swap = torch.arange(N_IN).view(9, 2).flip(-1).flatten()  # (18,) [1, 0, 3, 2, ...]
    with torch.random.fork_rng(devices=[]):  # its throwaway init must not move the caller's RNG
        net = MLP(hidden=[dump.hidden], encoding="planes18")
    first, last = net.body[0], net.body[-1]
    with torch.no_grad():
        first.weight.copy_(a["weights_ih"].view(N_IN, dump.hidden)[swap].T)  # (H, 18)
        first.bias.copy_(a["biases_h"])
        last.weight.copy_(a["weights_ho"].view(dump.hidden, N_OUT).T)  # (9, H)
        last.bias.copy_(a["biases_o"])
    return net.eval()


def check_parity(net: MLP, dump: Dump, where: str = "the dump") -> float:
    """Max |our raw logits - the C program's| over the dump's positions; ``AntirezError`` at
    ``PARITY_TOL`` or more, or ``PARITY_REL`` of the largest logit where that is more (a wrong
    layout, or not this network)."""
    views = game.tables().view[torch.tensor(dump.codes)]  # (P, 9) O's view: +1 O, -1 X
    with torch.no_grad():
        ours = net.raw_logits(views)  # (P, 9)
    theirs = torch.tensor(dump.logits, dtype=torch.float32)
    diff = float((ours - theirs).abs().max())
    tolerance = max(PARITY_TOL, PARITY_REL * float(theirs.abs().max()))
    if not diff < tolerance:  # NaN fails too
        raise AntirezError(f"{where}: the project's network, loaded from the C weights, gives logits up to "
                           f"{diff:.3g} away from the C program's own (tolerance {tolerance:.3g}): "
                           "the weight layout is not as expected")
    return diff


def evaluate_dump(path: Path, hidden: int | None = None) -> dict:
    """Exact evaluation as O of what the dumped C program plays: ``{"o": eval.json's block as O,
    "unbeatable_as_o", "parity_max_abs_diff", "greedy_differs", "eval_s"}``.

    The moves evaluated are the C program's own (``get_computer_move``: the first largest
    softmax output among empty cells, in its ``-ffast-math`` arithmetic); ``greedy_differs``
    counts the positions where the loaded network's greedy move (argmax of the masked
    logits, ties to the lowest cell: the evaluator's rule) is another one (0 but at near-ties).
    ``hidden``: as ``read_dump``'s."""
    start = time.perf_counter()
    dump = read_dump(path, hidden)
    net = to_network(dump)
    diff = check_parity(net, dump, f"the network dump {path}")
    t = game.tables()
    codes, moves = torch.tensor(dump.codes), torch.tensor(dump.moves)
    every = decision_codes()
    if not torch.equal(codes, every[t.mover[every] == game.O]):
        raise AntirezError(f"the network dump {path} is malformed: its positions are not the "
                           f"{O_POSITIONS:,d} where O is to move")
    if not bool(t.legal[codes, moves].all()):
        raise AntirezError(f"the network dump {path} is malformed: a move on an occupied cell")
    actions, _ = greedy_actions(net)  # (N,) the loaded network's greedy moves; X's are unused
    differs = int((actions[codes] != moves).sum())
    actions[codes] = moves
    report = evaluate_actions(actions)
    return {"o": report[REPORT_KEY["o"]], "unbeatable_as_o": unbeatable(report, "o"),
            "parity_max_abs_diff": diff, "greedy_differs": differs,
            "eval_s": time.perf_counter() - start}


def check_seeded(binary: Path, hidden: int | None = None) -> None:
    """A probe of the patched program, in a second: 1,000 games, its dump read (of ``hidden``
    units when given), loaded and checked (``evaluate_dump``), so that a layout problem stops
    the bench before its long runs."""
    with tempfile.TemporaryDirectory(prefix="ttt-probe-") as tmp:
        out = Path(tmp) / "probe.bin"
        run_seeded(binary, 1_000, 0, out, timeout=60)
        evaluate_dump(out, hidden)
