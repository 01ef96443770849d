"""Exact evaluation of a greedy policy: the numbers in ``eval.json``, never sampled.

The evaluated agent is the greedy policy: argmax of the masked logits, ties to the
lowest cell. One batched forward pass over the 4,520 reachable positions where somebody
is to move gives the agent's move everywhere (an ``(N,)`` action table over all codes);
then each figure is a dynamic programme over plies, from full boards back to the empty
one, in float64:

* ``vs_random`` / ``vs_perfect``: outcome probabilities when the opponent draws uniformly
  from its legal / minimax-optimal moves (``solver.outcome_probs``: a sum over the game tree).
* ``worst_case``: the result against a best-response opponent that knows the policy
  (``_worst_case``: min over the opponent's moves, the agent's own move at its positions).
* ``optimal_move_rate``: over the agent's decision points reachable from either seat
  against any opponent, the share of moves that keep the minimax value.

Why exact: sampling 100 games against a rule-based player is how the PPO seed came to
claim it "never loses"; the tree says it loses 73% of games as O to a minimax player.

Exactness at the edges: a number is only exact if the policy it describes has a legal
greedy move everywhere. ``check_logits`` refuses (``IllegalMoveError``, one line naming
the board) logits with no such move: NaN, or nothing finite to prefer (all -inf, where
an argmax lands on cell 1 whether it is taken or not). Its strict rule, for policy files
(``policy_file``, ``export``, ``play``, the web page), also refuses an argmax on an
occupied cell: the ONNX contract's greedy move is "the argmax" of logits the model has
masked, and a reader of the file that does not mask again would play the taken cell.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ttt_research.contract import (
    EVAL_SEATS,
    GAME_VALUE,
    HOLDS_VALUE,
    OPTIMAL_ALL,
    REPORT_KEY,
    SEAT_PIECE,
    WORST_NAME,
)
from ttt_research.env import game as rules
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.env.solver import solve
from ttt_research.errors import IllegalMoveError
from ttt_research.evaluation import window
from ttt_research.evaluation.tree import Tree, decision_codes, one_thread, tree
from ttt_research.models.nets import MLPStack
from ttt_research.models.qtable import QTableStack

PolicyFn = Callable[[torch.Tensor], torch.Tensor]  # (M, cells) float32 mover's view -> (M, cells) logits
_Compact, _compact = Tree, tree  # the names crossplay.py and older callers know the tree by
# Positions per forward call, per check and per DP block: a board's every decision position at
# once would hold (9M, H) activations on 4,4,4 (4.6 GB at H = 128); 2^16 rows keep one near
# 34 MB (2^18 held 0.3 GB more at the peak, for no gain in time). Tic-tac-toe (4,520) is one
# call, as it always was.
ROWS = 2**16
# Positions per forward call past ``ROWS`` (4x4): 4,096 keep the (4,096, H) activations in the
# core's cache. One thread on 4,4,4's 2M rows from ply 8 (mlp100, loaded 2-core host): 4,096
# 1.07 s, 2^14 1.4 s, 2^16 2.4 s; the logits are bit for bit the same for any split.
FORWARD_ROWS = 2**12


# --------------------------------------------------------------------------- positions


def decision_logits(policy: PolicyFn, game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(M, cells) float32 logits of ``policy`` at ``decision_codes(game)``, on the CPU: one
    call on tic-tac-toe, else one per ``FORWARD_ROWS`` positions, written into one (M, cells)
    table made beforehand (a normal tensor: the calls run in inference mode, with no autograd
    bookkeeping)."""
    t, codes = game.tables(), decision_codes(game)
    if codes.numel() <= ROWS:
        with torch.inference_mode():
            logits = policy(t.view[codes].float()).detach().to("cpu", torch.float32)
        return logits.clone()  # tic-tac-toe's 4,520 rows: one call, as always
    out = torch.empty(codes.numel(), game.cells, dtype=torch.float32)
    with torch.inference_mode():
        for lo in range(0, codes.numel(), FORWARD_ROWS):
            out[lo:lo + FORWARD_ROWS] = policy(t.view[codes[lo:lo + FORWARD_ROWS]].float())
    return out


def greedy_actions(policy: PolicyFn, game: Game = TIC_TAC_TOE) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``policy`` once on every decision position and take its greedy moves.

    Returns ``(actions, raw_illegal)``: (N,) int64 masked-argmax moves over all rows of the
    game's tables (0 where nobody moves), and (N,) bool marking where the unmasked argmax was
    an occupied cell (the raw policy's illegal choices). Nothing is refused here (PPO without
    masking counts its raw illegal choices with it); ``evaluate_policy`` checks first.
    """
    return _greedy(decision_logits(policy, game), game)


def _greedy(logits: torch.Tensor, game: Game = TIC_TAC_TOE) -> tuple[torch.Tensor, torch.Tensor]:
    """``greedy_actions`` from the (M, cells) logits at ``decision_codes(game)``."""
    actions, raw_illegal = greedy_actions_stack(logits[None], game)
    return actions[0], raw_illegal[0]


def checked_greedy(logits: torch.Tensor, game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """``check_logits`` (the evaluator's rule) and the greedy moves of one policy's (M, cells)
    logits at ``decision_codes(game)`` in one pass: (rows,) int64 masked-argmax moves over the
    game's tables, as ``_greedy``'s. Each block of ``ROWS`` positions is masked once and its
    argmax serves both (on 4,4,4 the two passes took 3x this one); a policy with no legal
    greedy move somewhere goes to ``check_logits`` for its refusal."""
    t, codes = game.tables(logits.device), decision_codes(game).to(logits.device)
    x = logits.detach().float()
    actions = torch.zeros(t.states, dtype=torch.long, device=x.device)
    bad = False
    for lo in range(0, codes.numel(), ROWS):
        part, xs = codes[lo:lo + ROWS], x[lo:lo + ROWS]
        masked = torch.where(t.legal[part], xs, -torch.inf)  # (m, cells)
        best = masked.argmax(-1, keepdim=True)  # the greedy move: the first maximum
        # ``_bad``'s rule: a NaN on an empty cell, or an infinite logit at the greedy move.
        bad = bad or bool((masked.isnan().any(-1) | xs.gather(-1, best).isinf().squeeze(-1)).any())
        actions[part] = best.squeeze(-1)
    if bad:
        check_logits(logits, game=game)  # raises, naming the first such position
    return actions


# --------------------------------------------------------------------------- exactness at the edges


def board_text(code: int, game: Game = TIC_TAC_TOE) -> str:
    """A board in one word, rows split by '/': ``X.O/.X./...`` (and who is to move); ``code``
    is a row of the game's tables (tic-tac-toe: its code)."""
    t = game.tables()
    marks = "".join({rules.X: "X", rules.O: "O", rules.EMPTY: "."}[v] for v in t.board[code].tolist())
    mover = "X" if int(t.mover[code]) == rules.X else "O"
    return "/".join(marks[r * game.n:(r + 1) * game.n] for r in range(game.m)) + f" ({mover} to move)"


def _why(row: torch.Tensor, legal: torch.Tensor, strict: bool) -> str | None:
    """Why the (cells,) logits ``row`` give no legal greedy move where ``legal`` (cells,) holds
    (the rule of ``check_logits``), or None when they do. Cells are named from 1, as in ``play``."""
    def cells(mask: torch.Tensor) -> str:
        return " ".join(str(i + 1) for i in mask.nonzero().flatten().tolist())

    nan = row.isnan() & (True if strict else legal)
    if bool(nan.any()):
        return f"its logits are NaN at cell(s) {cells(nan)}"
    free = torch.where(legal, row, -torch.inf)
    best = int((row if strict else free).argmax())  # the greedy move: the first maximum
    top = float(row[best])
    if not bool(legal[best]):
        alt = int(free.argmax())
        if top == -torch.inf:
            return f"every logit is -inf, so its argmax is the occupied cell {best + 1}"
        return (f"it picks the occupied cell {best + 1} (logit {top:.4g}; the best empty cell, "
                f"{alt + 1}, has {float(row[alt]):.4g})")
    if top == -torch.inf:
        return f"every empty cell's logit is -inf ({cells(legal)}): it prefers none of them"
    if top == torch.inf:
        return f"its largest logit is inf (cell {best + 1}): no move probabilities"
    return None


def _bad(x: torch.Tensor, legal: torch.Tensor, strict: bool) -> torch.Tensor:
    """(N, m) bool: the positions of (N, m, cells) logits ``x`` without a legal greedy move."""
    nan = x.isnan()
    if strict:
        best = x.argmax(-1, keepdim=True)  # NaN counts as the maximum
        bad = nan.any(-1) | ~legal.gather(-1, best).squeeze(-1)
    else:
        best = torch.where(legal, x, -torch.inf).argmax(-1, keepdim=True)
        bad = (nan & legal).any(-1)
    return bad | x.gather(-1, best).squeeze(-1).isinf()  # (N, m)


def check_logits(logits: torch.Tensor, codes: torch.Tensor | None = None, where: str = "",
                 strict: bool = False, first: int = 0, game: Game = TIC_TAC_TOE) -> None:
    """Refuse logits that give some position no legal greedy move (``IllegalMoveError``).

    Args:
        logits: (M, cells), or (N, M, cells) for N policies (members ``first``, ``first + 1``,
            ...), float logits at the rows ``codes`` (M,) of ``game``'s tables (default:
            ``decision_codes(game)``); on any device (only a refusal leaves it).
        where: what the message starts with (``"policy.onnx: "``).
        strict: the rule for a policy file, whose logits the ONNX contract says are
            masked already and whose greedy move is "the argmax": then a NaN anywhere, an
            argmax on an occupied cell or an infinite largest logit is refused. Otherwise
            (the evaluator's own rule: it masks occupied cells itself) a NaN on an empty
            cell, or an infinite largest logit among the empty cells (all -inf: nothing
            to choose; +inf: no probabilities).

    The message names how many positions fail, the first one's board and what it picks.
    Positions are checked ``ROWS`` at a time (4,4,4's 9M would want 1.5 GB of temporaries).
    """
    device = logits.device
    codes = (decision_codes(game) if codes is None else codes).to(device)
    x = logits.detach().float()
    x = x if x.dim() == 3 else x[None]  # (N, M, cells)
    legal_all = game.tables(device).legal
    bad = torch.cat([_bad(x[:, lo:lo + ROWS], legal_all[codes[lo:lo + ROWS]].expand_as(x[:, lo:lo + ROWS]),
                          strict) for lo in range(0, max(codes.numel(), 1), ROWS)], 1)  # (N, M)
    if not bool(bad.any()):  # the one sync with the device
        return
    member, row = (int(i) for i in bad.nonzero()[0])
    who = f"member {first + member}: " if logits.dim() == 3 else ""
    count = int(bad[member].sum())
    why = _why(x[member, row].cpu(), legal_all[codes[row]].cpu(), strict)
    raise IllegalMoveError(
        f"{where}{who}the policy has no legal greedy move at {count} of {codes.numel()} positions "
        f"where it moves, first at {board_text(int(codes[row]), game)}: {why}; refused, not scored")


def check_policy(policy: PolicyFn, where: str = "", strict: bool = False,
                 game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """Run ``policy`` on every decision position and ``check_logits``; returns the (M, cells) logits."""
    logits = decision_logits(policy, game)
    check_logits(logits, where=where, strict=strict, game=game)
    return logits


# --------------------------------------------------------------------------- the report


def _wlt_row(row: torch.Tensor | list[float], seat: int) -> dict[str, float]:
    # Rounded to 12 places: the sums are exact rationals, float64 only adds noise below that.
    x, o, tie = (round(float(p), 12) + 0.0 for p in row)
    win, loss = (x, o) if seat == rules.X else (o, x)
    return {"win": win, "loss": loss, "tie": tie}


def evaluate_actions(actions: torch.Tensor, game: Game = TIC_TAC_TOE) -> dict:
    """The ``eval.json`` report for a deterministic policy given as an (N,) action table (a
    cell at every row of the game's tables, the finished boards' included: any cell there,
    since no move is made from them): the population's evaluation of one member
    (``evaluate_actions_stack``), one path for one agent and many."""
    return evaluate_actions_stack(actions[None], game=game)[0]


def evaluate_policy(policy: PolicyFn, game: Game = TIC_TAC_TOE) -> dict:
    """The ``eval.json`` report for a policy given as a batched logits function; a policy
    without a legal greedy move somewhere is refused (``check_logits``), never scored."""
    return evaluate_actions(checked_greedy(decision_logits(policy, game), game), game)


# --------------------------------------------------------------------------- populations
#
# The same report for N policies at once (a population of agents): one forward over the
# decision positions for all members, then every DP below with a member axis. The DPs keep
# only the reachable positions (``tree.Tree``: children of reachable positions are reachable,
# so nothing else is ever read) and lay tables out as (rows, members, ...), so that following
# a move gathers whole rows of members; members go through in chunks to bound memory. They
# run on the device of the logits (CPU or GPU). One agent is a population of one here:
# ``evaluate_actions`` is this evaluation of one member (tests/evaluation/test_exact.py holds
# it to a plain recursion over the game tree, tests/models/test_population_core.py holds a
# member's report to its single policy's).

StackPolicyFn = Callable[[torch.Tensor], torch.Tensor]  # (N, M, cells) views -> (N, M, cells) logits
# Members per DP pass. On the CPU small chunks keep the (5,478, chunk, 3) float64 tables
# in cache (64 was faster than 256 or 1,024 at N=1,024); a GPU wants them all at once.
CHUNK = {"cpu": 64}
GPU_CHUNK = 4096
# ... and fewer where a chunk's (rows, chunk, 3) float64 tables would pass this many bytes:
# 30 members of 4,4,4 (9,722,011 rows) took a population's evaluation past 11.5 GB; 4 at a
# time hold 0.9 GB (tic-tac-toe, 3,4,3 keep 64). A member's columns are the same in any chunk.
CHUNK_BYTES = 2**30
# Members per forward pass of an MLPStack: on the CPU, 16 keeps the (16, 4,520, H)
# activations near the cache (8-16 beat 64 by 1.5-2x at N=1,024); a GPU wants wide batches.
FORWARD_CHUNK = {"cpu": 16}
GPU_FORWARD_CHUNK = 1024
# ... and fewer where a chunk's (chunk, M, cells) float32 logits would pass this many bytes:
# 16 members of 4,4,4 (9,062,619 positions) held 9.3 GB of logits, past the host's share;
# one at a time holds 0.58 GB (4,4,3: 4; 3,4,3 and tic-tac-toe keep 16).
FORWARD_CHUNK_BYTES = 2**30


def greedy_actions_stack(logits: torch.Tensor, game: Game = TIC_TAC_TOE) -> tuple[torch.Tensor, torch.Tensor]:
    """``greedy_actions`` for N policies given their logits on the decision positions.

    Args:
        logits: (N, M, cells) logits at ``decision_codes(game)``, masked or not.

    Returns:
        ``(actions, raw_illegal)``: (N, rows) int64 masked-argmax moves over the rows of the
        game's tables (0 where nobody moves, ties to the lowest cell) and (N, rows) bool
        unmasked argmax on an occupied cell.
    """
    logits = logits.detach().float()
    device = logits.device
    codes = decision_codes(game).to(device)
    t = game.tables(device)
    n = logits.shape[0]
    actions = torch.zeros(n, t.states, dtype=torch.long, device=device)
    raw_illegal = torch.zeros(n, t.states, dtype=torch.bool, device=device)
    for lo in range(0, codes.numel(), ROWS):  # one pass on tic-tac-toe, as always
        part, x = codes[lo:lo + ROWS], logits[:, lo:lo + ROWS]
        legal = t.legal[part]  # (m, cells)
        masked = torch.where(legal, x, -torch.inf)  # (N, m, cells)
        actions[:, part] = masked.argmax(-1)
        raw_illegal[:, part] = ~legal.expand(n, -1, -1).gather(2, x.argmax(-1, keepdim=True)).squeeze(-1)
    return actions, raw_illegal


def _outcomes(c: Tree, act: torch.Tensor, opponent: str | torch.Tensor, seat: int,
              plies: list[torch.Tensor]) -> torch.Tensor:
    """(n, 3) P(X wins), P(O wins), P(tie) from the empty board: n agents (act: (R, n)
    deterministic moves) as ``seat`` against ``opponent`` (``Tree.opponent``: ``"random"``,
    ``"perfect"`` or an (R, cells) float64 table of move probabilities).

    ``outcome_probs`` with a member axis after the row axis, so that a gather of child rows
    moves whole (n, 3) blocks. At the agent's rows the single version's one-hot sum is
    exactly the chosen child's row (x * 1 + 0 * y + ... is x), so we gather it; at the
    opponent's rows we add p_c * child_c cell by cell from 0, the order in which the
    single version's small (1 x cells) @ (cells x 3) products add them. ``plies``: the rows
    to fill per ply (``_live``). Another board has both opponents' at once in two plies' tables
    (``window.greedy_outcomes``)."""
    n = act.shape[1]
    members = torch.arange(n, device=act.device)
    # Finished rows one-hot, filled column by column (an (R, 3) float64 first would be a second
    # 233 MB table on 4,4,4; the values are the same).
    result = torch.zeros(c.size, n, 3, dtype=torch.float64, device=act.device)  # (R, n, 3)
    for k, ended in enumerate((c.winner == rules.X, c.winner == rules.O, c.done & (c.winner == 0))):
        result[:, :, k] = ended[:, None]
    for ply in reversed(range(c.cells)):
        rows = plies[ply]
        nxt = c.next[rows]  # (r, cells)
        if c.ply_mover[ply] == seat:
            result[rows] = result[nxt.gather(1, act[rows]), members]  # (r, n, 3)
        else:
            pi = c.opponent(opponent, rows)  # (r, cells)
            acc = torch.zeros(rows.numel(), n, 3, dtype=torch.float64, device=act.device)
            for cell in range(c.cells):  # in place: the same additions, one (r, n, 3) table fewer at a time
                acc.add_(pi[:, cell, None, None] * result.index_select(0, nxt[:, cell]))
            result[rows] = acc
    return result[c.empty]


def _worst_case(c: Tree, act: torch.Tensor, seat: int, plies: list[torch.Tensor]) -> torch.Tensor:
    """(n,) ``worst_case`` of n agents (act: (R, n)) as ``seat``: +1 win, 0 draw, -1 loss."""
    n = act.shape[1]
    members = torch.arange(n, device=act.device)
    value = (c.winner * seat).to(torch.int8)[:, None].expand(-1, n).clone()  # (R, n), agent's side
    for ply in reversed(range(c.cells)):
        rows = plies[ply]
        nxt = c.next[rows]  # (r, cells)
        if c.ply_mover[ply] == seat:
            value[rows] = value[nxt.gather(1, act[rows]), members]
        else:  # the opponent's best reply: the smallest legal child
            value[rows] = torch.where(c.legal[rows, :, None], value[nxt], 2).amin(1)
    return value[c.empty]


def _reach(c: Tree, act: torch.Tensor, seat: int) -> torch.Tensor:
    """(R, n) bool the rows n agents (act: (R, n)) as ``seat`` can reach against some opponent."""
    n = act.shape[1]
    members = torch.arange(n, device=act.device).expand(act.shape)
    reach = torch.zeros(c.size, n, dtype=torch.uint8, device=act.device)  # 0/1, for index_add_
    reach[c.empty] = 1
    for ply in range(c.cells):
        rows = c.plies[ply]
        here = reach[rows].bool()  # (r, n)
        if c.game != TIC_TAC_TOE:  # only the rows some agent reaches (a fraction of 4x4's 9.7M)
            keep = here.any(-1)
            rows, here = rows[keep], here[keep]
        nxt = c.next[rows]  # (r, cells)
        if c.ply_mover[ply] == seat:  # the agent follows its own move
            reach[nxt.gather(1, act[rows])[here], members[: rows.numel()][here]] = 1
        else:  # the opponent may play any legal move: OR the parents into each child
            parent, cell = c.legal[rows].nonzero(as_tuple=True)
            reach.index_add_(0, nxt[parent, cell], here[parent].to(torch.uint8))
    return reach.bool()


def _live(c: Tree, reach: torch.Tensor) -> list[torch.Tensor]:
    """Each ply's unfinished rows that some agent reaches (``reach`` (R, n)): on 4x4 a policy
    leads to a fraction of the 9.7M rows, and no DP reads the others (a reached row's
    children are reached). Tic-tac-toe's DPs keep every row, as they always have."""
    if c.game == TIC_TAC_TOE:
        return c.plies
    return [rows[reach[rows].any(-1)] for rows in c.plies]


def evaluate_actions_stack(actions: torch.Tensor, chunk: int | None = None,
                           game: Game = TIC_TAC_TOE) -> list[dict]:
    """``evaluate_actions`` for N deterministic policies: (N, rows) action tables -> N reports.
    The DPs run on the actions' device, ``chunk`` members at a time."""
    with one_thread(actions.device):  # small operations (tree.one_thread)
        return _evaluate_actions_stack(actions, chunk, game)


def _evaluate_actions_stack(actions: torch.Tensor, chunk: int | None, game: Game) -> list[dict]:
    c = tree(str(actions.device), game)
    chunk = chunk or min(CHUNK.get(actions.device.type, GPU_CHUNK), max(1, CHUNK_BYTES // (24 * c.size)))
    # Every decision point of the game, for both seats: the share of optimal moves over them
    # is lean4-mlir's measure, which does not depend on where the policy leads.
    every = c.decision
    value_x = int(solve(g=game).value[int(c.codes[c.empty])])  # the empty board's, from X's side
    reports: list[dict] = []
    for start in range(0, actions.shape[0], chunk):
        part = actions[start:start + chunk]
        act = (part if game != TIC_TAC_TOE else part[:, c.codes]).T.long().contiguous()  # (R, n)
        n = act.shape[1]
        blocks: list[dict] = [{} for _ in range(n)]
        points = torch.zeros(c.size, n, dtype=torch.bool, device=actions.device)
        good = c.optimal.gather(1, act)  # (R, n) the move keeps the minimax value
        tables = None if c.offsets is None else window.outcome_tables(c, n, actions.device)
        for side in EVAL_SEATS:
            seat = SEAT_PIECE[side]
            reach = _reach(c, act, seat)
            plies = _live(c, reach)
            if c.offsets is None:  # tic-tac-toe: a pass per opponent over its 5,478 rows, as always
                vs_random = _outcomes(c, act, "random", seat, plies).tolist()
                vs_perfect = _outcomes(c, act, "perfect", seat, plies).tolist()
            else:
                vs_random, vs_perfect = window.greedy_outcomes(c, act, seat, plies, tables).tolist()
            worst = _worst_case(c, act, seat, plies).tolist()
            mine = reach & (~c.done & (c.mover == seat))[:, None]  # (R, n) its decision points as seat
            seat_count, seat_kept = _count(mine).tolist(), _count(good & mine).tolist()
            value = value_x if seat == rules.X else -value_x  # the game's value for this seat
            for k in range(n):  # building the dicts, not the hot path
                blocks[k][REPORT_KEY[side]] = {
                    "vs_random": _wlt_row(vs_random[k], seat),
                    "vs_perfect": _wlt_row(vs_perfect[k], seat),
                    "worst_case": WORST_NAME[worst[k]],
                    GAME_VALUE: WORST_NAME[value],
                    # Where the game is lost for the seat, every line loses to a perfect
                    # opponent; holding it means losing to nothing less: an optimal move at
                    # every point it can reach (so a position an erring opponent gives it is kept).
                    HOLDS_VALUE: worst[k] == value if value > -1 else seat_kept[k] == seat_count[k],
                    "optimal_move_rate": seat_kept[k] / seat_count[k] if seat_count[k] else 1.0,
                    "decision_points": seat_count[k],
                }
            points |= mine
        kept = good & points
        count = _count(points)
        # An integer count over an integer count: the same float as the single version's mean.
        rate = (_count(kept).double() / count.clamp_min(1).double()).tolist()
        count = count.tolist()
        everywhere = (_count(good[every]).double() / max(every.numel(), 1)).tolist()
        for k in range(n):
            blocks[k]["optimal_move_rate"] = rate[k] if count[k] else 1.0
            blocks[k]["decision_points"] = count[k]
            blocks[k][OPTIMAL_ALL] = everywhere[k]
        reports += blocks
    return reports


# Rows a count sums at a time: a sum of bools casts them to int64 first, 78 MB of new pages a
# count over 4,4,4's 9.7M rows (five counts an evaluation); tic-tac-toe's 5,478 are one sum.
COUNT_ROWS = 2**20


def _count(mask: torch.Tensor) -> torch.Tensor:
    """(R, n) bool -> (n,) int64 the true rows of each column, ``COUNT_ROWS`` at a time."""
    return sum(mask[lo:lo + COUNT_ROWS].sum(0) for lo in range(0, max(mask.shape[0], 1), COUNT_ROWS))


def evaluate_stack(policy: StackPolicyFn | torch.Tensor, n: int | None = None,
                   chunk: int | None = None, each: Callable | None = None,
                   game: Game = TIC_TAC_TOE) -> list[dict]:
    """The ``eval.json`` report of each of N policies, as a list of N dicts.

    ``policy`` is one of:

    * an ``nets.MLPStack`` (or a ``qtable.QTableStack``): run on the decision positions
      (``decision_codes(game)``) ``chunk`` members and ``ROWS`` positions at a time (bounds
      the (chunk, rows, H) activations; ``n`` defaults to its size);
    * a function from (n, M, cells) float32 views to (n, M, cells) logits, called once;
    * the (N, M, cells) logits at ``decision_codes(game)`` themselves.

    A member without a legal greedy move somewhere is refused (``check_logits``). ``each``,
    if given, is called with ``(first member, logits)`` for every checked block of logits (the
    policy as trained is scored from them: ``exploit.trained_blocks``), so no caller runs the
    forward pass twice or keeps all N members' logits.
    """
    codes = decision_codes(game)
    views = game.tables().view[codes].float()  # (M, cells)
    if isinstance(policy, MLPStack | QTableStack):
        views = views.to(next(policy.parameters()).device)
        chunk = chunk or min(FORWARD_CHUNK.get(views.device.type, GPU_FORWARD_CHUNK),
                             max(1, FORWARD_CHUNK_BYTES // (4 * views.numel())))
        parts = []
        with torch.no_grad():
            for lo in range(0, policy.n, chunk):
                members = slice(lo, lo + chunk)
                logits = torch.cat([policy(views[r:r + ROWS], members)
                                    for r in range(0, views.shape[0], ROWS)], 1)  # (chunk, M, cells)
                check_logits(logits, first=lo, game=game)
                if each is not None:
                    each(lo, logits)
                # a cell number fits a byte: 30 members' (M,) int64 moves on 4,4,4 held 2.2 GB
                parts.append(greedy_actions_stack(logits, game)[0].to(torch.uint8))
        actions = torch.cat(parts)
    else:
        if callable(policy):
            if n is None:
                raise ValueError("evaluate_stack needs n, the number of members, with a policy function")
            with torch.no_grad():
                policy = policy(views.expand(n, -1, -1))
        check_logits(policy, game=game)
        if each is not None:
            each(0, policy)
        actions, _ = greedy_actions_stack(policy, game)
    return evaluate_actions_stack(actions, game=game)
