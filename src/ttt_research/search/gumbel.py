"""Batched Monte-Carlo tree search with a Gumbel root, B searches at once, on tables.

The search of Gumbel AlphaZero (Danihelka et al., "Policy improvement by planning with
Gumbel", ICLR 2022): at the root, Gumbel-top-k sampling and sequential halving over the
simulations; below it, the deterministic rule that makes the visit counts follow the
improved policy; as the training target, the improved policy softmax(logits + sigma(q)),
q completed with a mixed value where a move was not visited. Written from the paper's
equations; the constants are the paper's (c_visit 50, c_scale 0.1, q rescaled to [0, 1]).

Why tables: during a search the network is fixed, and the game has 5,478 positions. The
caller computes the network's masked prior logits and value for every position once (an
(R, 9) and an (R,) table, one row per board code, a population's members one block of
rows each: ``offset``) and the search reads them by gather, never calling the network.

Why one subtree per position, shared by every tree: only the root is random (its Gumbel
noise). Below it the rule is deterministic and a node's choices depend only on its own
subtree, so the k-th simulation that enters a position's subtree always ends at the same
leaf, whatever tree it belongs to and however it got there. ``Subtrees`` plays that out
once per network, for every position at once (a node per position: per edge visits and
value sums, its children the positions one move on), and records, for each position and
k, the value the k-th visit backs up and how deep it went. A search is then just its
root, in phases as the paper writes sequential halving: each phase scores the moves
still in, keeps the best (the Gumbel top-k first, then the better half), and gives each
of them its share of visits, whose values are one gather from its child's row. The
visits, values and moves are those of B separate trees of K nodes walked one simulation
and one depth at a time (``tests/helpers/tree_search.py``, that literal search, is
checked against this one bit for bit), at a cost of a few steps over the 5,478 positions
per network (a position is played only as deep as a search can reach: 8 visits for 16
simulations over 9 moves, ``visits_needed``) plus a few phases per search, instead of
S * depth steps over B trees.

Layout: edges are (9, B), cells first, so that the sums and maxima over a node's nine
edges are elementwise work over B contiguous values (several times faster on a CPU than
reducing rows of nine); masks are applied by arithmetic where torch's boolean kernels
are slow.

Any m,n,k board (``game``, a ``board.Game``; tic-tac-toe unless told): the tables' rows are
its positions (tic-tac-toe's every code, another board's reachable positions, ``env/indexed.py``)
and every (9, B) below is (cells, B); the subtrees are played over the board's unfinished
positions (3,4,3: 79,563 a member; 4,4,4: 9.1M, a single run's update peaking at 8.5 GB).

Values are the mover's: +1 a win, -1 a loss, 0 a tie. A finished position's value is its
result for the side that would move there (-1 or 0), whatever the table says; a value
backed up through a move is negated once per ply (zero-sum).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ttt_research.env.board import TIC_TAC_TOE, Game

C_VISIT = 50.0  # sigma's offset in visits (the paper's c_visit)
C_SCALE = 0.1  # sigma's scale (c_scale): sigma(q) = (c_visit + max visits) * c_scale * q
NEG = -torch.inf


@dataclass
class Search:
    """The result of B searches. (B, 9) rows are over the cells; illegal cells are 0."""

    action: torch.Tensor  # (B,) int64 the move the search chooses
    policy: torch.Tensor  # (B, 9) the improved policy softmax(logits + sigma(completed q))
    visits: torch.Tensor  # (B, 9) the root's visit counts
    q: torch.Tensor  # (B, 9) the root's completed q values (the mover's), illegal cells 0
    value: torch.Tensor  # (B,) the root's mixed value (the prior value and the visits' q)
    depth: torch.Tensor  # (B,) the deepest path any simulation took (edges from the root)
    prior: torch.Tensor  # (B, 9) the network's policy at the root, softmax of its logits


MOVES = TIC_TAC_TOE.cells  # the most moves at a root, unless told (a board's cells)
# Positions a step of ``subtrees`` plays at once: its (cells, columns) temporaries, a dozen of
# them, were 0.6 GB each over 4,4,4's 9M positions (tic-tac-toe's positions stay one step).
COLUMNS = 1 << 18


@functools.cache
def halving_schedule(simulations: int, max_considered: int = MOVES, moves: int = MOVES) -> torch.Tensor:
    """(moves + 1, simulations) int64: row m, column s is the visit count the root move of
    simulation s must have, with m moves considered (sequential halving).

    The simulations are spent in rounds: a round gives each of the moves still considered
    the same number of visits (at least one, about simulations / (log2 m * considered)),
    then the better half stays (at least 2). Simulation s visits the best-scored move among
    those with exactly the visits the schedule names, so each round visits every
    considered move once before any twice."""
    table = torch.zeros(moves + 1, max(simulations, 1), dtype=torch.long)
    for m in range(1, moves + 1):
        m_eff = min(m, max_considered)
        if m_eff == 1:
            table[m] = torch.arange(table.shape[1])
            continue
        rounds = math.ceil(math.log2(m_eff))
        sequence: list[int] = []
        visits = [0] * m_eff
        considered = m_eff
        while len(sequence) < simulations:
            extra = max(1, simulations // (rounds * considered))
            for _ in range(extra):
                sequence += visits[:considered]
                visits[:considered] = [v + 1 for v in visits[:considered]]
            considered = max(2, considered // 2)
        table[m, :simulations] = torch.tensor(sequence[:simulations])
    return table


def leaf_values(codes: torch.Tensor, value: torch.Tensor, rows: torch.Tensor,
                game: Game = TIC_TAC_TOE) -> torch.Tensor:
    """(B,) values of positions (``game``'s table rows) for their movers: exact where the game
    is over (-1: the side to move has lost, 0: a tie), else the table's ``value[rows]``."""
    t = game.tables(codes.device)
    over = t.done.index_select(0, codes)
    exact = (t.winner.index_select(0, codes) * t.mover.index_select(0, codes)).float()
    return torch.where(over, exact, value.index_select(0, rows).float())


@dataclass
class Nodes:
    """What a search needs to know of B nodes besides their visits, cells first."""

    logits: torch.Tensor  # (9, B) prior logits, -inf on illegal cells
    log_prior: torch.Tensor  # (9, B) log-softmax of them (-inf on illegal cells)
    prior: torch.Tensor  # (9, B) softmax of them (0 on illegal cells)
    legal: torch.Tensor  # (9, B) float 1 legal, 0 not
    barrier: torch.Tensor  # (9, B) 0 on legal cells, +inf on illegal ones
    value: torch.Tensor  # (B,) the network's value of the node (exact where finished)

    @staticmethod
    def of(logits: torch.Tensor, legal: torch.Tensor, value: torch.Tensor) -> Nodes:
        """From (9, B) logits, (9, B) bool legal cells and (B,) values."""
        masked = logits.float().masked_fill(~legal, NEG)
        log_prior = torch.log_softmax(masked, 0)
        return Nodes(masked, log_prior, log_prior.exp(), legal.float(),
                     torch.where(legal, 0.0, torch.inf), value.float())

    def columns(self, cols: slice) -> Nodes:
        """The nodes of the columns ``cols``, as views of these."""
        return Nodes(self.logits[:, cols], self.log_prior[:, cols], self.prior[:, cols],
                     self.legal[:, cols], self.barrier[:, cols], self.value[cols])

    def take(self, rows: torch.Tensor) -> Nodes:
        """The nodes at (B',) ``rows``."""
        return Nodes(self.logits.index_select(1, rows), self.log_prior.index_select(1, rows),
                     self.prior.index_select(1, rows),
                     self.legal.index_select(1, rows), self.barrier.index_select(1, rows),
                     self.value.index_select(0, rows))


def completed_q(node: Nodes, visits: torch.Tensor, value_sum: torch.Tensor, rescale: bool = True):
    """The completed q values of B nodes and sigma of them.

    (9, B) edge visits and value sums. q(a) = value_sum / visits on a visited move; an
    unvisited one takes the node's *mixed value*: (v + n * sum_visited p(a) q(a) /
    sum_visited p(a)) / (1 + n), n the node's visits, p the prior, v the network's value
    (just v before any visit). Rescaled, the legal q's are mapped onto [0, 1] by their
    min and max (a node's q's all equal: 0) before sigma scales them. Returns (completed q
    (9, B), sigma (9, B), mixed value (B,)); their illegal cells hold no meaning (the
    callers add sigma to -inf there and mask q).
    """
    seen = visits.clamp(max=1.0)  # (9, B) 1 visited, 0 not (visits are counts)
    q = value_sum / visits.clamp_min(1.0)  # 0 where unvisited
    n = visits.sum(0)  # (B,)
    weight = node.prior * seen
    mean_q = (weight * q).sum(0) / weight.sum(0).clamp_min(1e-12)
    mixed = (node.value + n * mean_q) / (1 + n)  # n = 0: the network's value
    completed = q + mixed * (1 - seen)
    scaled = completed
    if rescale:
        low = (completed + node.barrier).amin(0)
        high = (completed - node.barrier).amax(0)
        scaled = (completed - low) / (high - low).clamp_min(1e-8)
    # sigma on an illegal cell is left as it falls: every use adds it to -inf (the masked
    # logits or log-prior), so masking it would be one more pass for nothing.
    sigma = (C_VISIT + visits.amax(0)) * C_SCALE * scaled
    return completed, sigma, mixed


def first_argmax(x: torch.Tensor) -> torch.Tensor:
    """(cells, B) -> (B,) int64 the row of each column's maximum, the lowest on ties (torch's
    argmax over the first of two dims is slow on a CPU; this is a max, a compare, a max)."""
    hit = x == x.amax(0)
    cells = x.shape[0]
    return (cells - (hit * _on(x.device, cells)[0]).amax(0)).long()


@functools.cache
def halving_phases(simulations: int, max_considered: int = MOVES,
                   moves: int = MOVES) -> tuple[torch.Tensor, torch.Tensor]:
    """(moves + 1, J) int64 twice: row m (m moves considered), phase j keeps the best ``keep[m, j]``
    of the moves still in and gives each ``visits[m, j]`` more visits (keep 0: no phase).

    ``halving_schedule`` read by phases: each run of simulations that visit moves with the
    same count is a sub-round over ``keep`` moves, and sub-rounds over the same number of
    moves merge (the moves still in are all kept)."""
    sched = halving_schedule(simulations, max_considered, moves)
    rows = []
    for m in range(moves + 1):
        levels = sched[m, :simulations].tolist() if m else []
        runs: list[list[int]] = []  # [level, count]
        for level in levels:
            if runs and runs[-1][0] == level:
                runs[-1][1] += 1
            else:
                runs.append([level, 1])
        phases: list[list[int]] = []  # [keep, visits]
        for _, count in runs:
            if phases and phases[-1][0] == count:
                phases[-1][1] += 1
            else:
                phases.append([count, 1])
        rows.append(phases)
    J = max(1, max(len(r) for r in rows))
    keep = torch.zeros(moves + 1, J, dtype=torch.long)
    visits = torch.zeros(moves + 1, J, dtype=torch.long)
    for m, phases in enumerate(rows):
        for j, (k, v) in enumerate(phases):
            keep[m, j], visits[m, j] = k, v
    return keep, visits


@functools.cache
def visits_needed(simulations: int, max_considered: int = MOVES, moves: int = MOVES) -> int:
    """The most visits a search of ``simulations`` gives one move of its root: every node
    below gets fewer (a node's first visit stops there), so a position's subtree need be
    played no further. A root with one legal move has 8 pieces: its move ends the game, and
    a finished position needs no subtree."""
    keep, more = halving_phases(simulations, max_considered, moves)
    considered = {min(n, max_considered) for n in range(2, moves + 1)}
    return max(1, *(int(more[m][keep[m] > 0].sum()) for m in considered))


@functools.cache
def _constants(device: str, cells: int) -> tuple[torch.Tensor, ...]:
    """The constant tensors of a board of ``cells`` cells on ``device``, made once."""
    cell = torch.arange(cells, 0, -1, dtype=torch.float32)[:, None]  # (cells, 1): cells ... 1
    pairs = torch.triu_indices(cells, cells, 1)  # (2, P) the cell pairs b < a, as (b, a)
    P = pairs.shape[1]
    # rank(a) = #{b < a: s_b >= s_a} + #{b > a: s_b > s_a} = #{b > a} + sum over pairs (b, a) of
    # ge(b, a) for a, minus it for b, where ge(b, a) = [s_b >= s_a]: one (cells, P) matrix product.
    rank = (torch.zeros(cells, P).index_put_((pairs[1], torch.arange(P)), torch.ones(P))
            - torch.zeros(cells, P).index_put_((pairs[0], torch.arange(P)), torch.ones(P)))
    after = torch.arange(cells - 1, -1, -1, dtype=torch.float32)[:, None]  # (cells, 1) cells after each
    return tuple(x.to(device) for x in (cell, pairs, rank, after))


def _on(device: torch.device, cells: int) -> tuple[torch.Tensor, ...]:
    """The module's constant tensors for ``cells`` on ``device``, copied there once."""
    return _constants(str(device), cells)


# Cell pairs up to which ``best_of`` counts by pairs (faster there: 0.6 against 1.2 ms for 4,096
# columns of 9 cells, one thread); past it a sort (16 cells' 120 pairs: 235 against 280 ms for
# 2^18 columns, and a whole-tree search of 4,4,3 19 s against 24 s).
PAIRS_MAX = 64


def best_of(score: torch.Tensor, due: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """(cells, B) float 1 on the ``keep`` (B,) best-scored of the ``due`` (cells, B) cells of
    each column (ties: the lower cell first), 0 elsewhere.

    A cell's rank counts the cells before it with a score at least its own and those after it
    with a greater one: by every pair of cells on a small board, by its place in a stable
    descending sort of its column past ``PAIRS_MAX`` pairs (the same ranks)."""
    s = score.masked_fill(~due, NEG)
    _, pairs, to_rank, after = _on(s.device, s.shape[0])
    if pairs.shape[1] <= PAIRS_MAX:
        ge = (s.index_select(0, pairs[0]) >= s.index_select(0, pairs[1])).float()
        rank = to_rank @ ge + after  # (cells, B) how many come before each cell
    else:
        order = torch.sort(s, dim=0, descending=True, stable=True).indices  # (cells, B) the best first
        place = torch.arange(s.shape[0], device=s.device)[:, None].expand_as(order)
        rank = torch.empty_like(order).scatter_(0, order, place)
    return (due & (rank < keep)).float()


@dataclass
class Subtrees:
    """Every position's subtree under the deterministic rule, played out to ``visits``
    visits (what searches of up to ``simulations`` need: ``visits_needed``), for a
    network's tables.

    Rows: each member's 4,520 unfinished positions (member k's block at k * L), then the
    958 finished ones once (their values are exact, the same for every member). Row k of
    ``leaf``, ``total`` and ``reach`` is the k-th visit into a row's subtree (row 0: none
    yet): the value that visit backs up for the position's mover, the sum of the first k,
    and the deepest path the first k took below the position (0: they stopped there,
    expanding it or at the game's end)."""

    simulations: int  # the searches it serves (with ``max_considered``)
    max_considered: int
    visits: int  # K: visits played per position
    block: int  # L: unfinished positions, rows per member
    members: int
    index: torch.Tensor  # (3^9,) int64 a code's place among the unfinished or the finished positions
    nodes: Nodes  # (9, n * L) and (n * L,) the unfinished rows
    child: torch.Tensor  # (9, n * L) int32 the row after each move (illegal cells: the row itself)
    # (simulations + 1, rows): unfinished rows are played to K, finished ones to every visit
    # (a root with one legal move sends all its simulations into a finished position).
    leaf: torch.Tensor  # the value the k-th visit backs up
    total: torch.Tensor  # the sum of the first k
    reach: torch.Tensor  # int16 the deepest of their paths below the row
    game: Game = TIC_TAC_TOE  # the board: its tables' rows are the codes

    def rows(self, codes: torch.Tensor, offset: torch.Tensor | None = None) -> torch.Tensor:
        """(B,) codes (the tables' rows) and table offsets (multiples of the tables' rows: a
        member's block; None: 0) -> (B,) rows."""
        t = self.game.tables(codes.device)
        place = self.index.index_select(0, codes)
        member = 0 if offset is None else torch.div(offset.long(), t.states, rounding_mode="floor")
        done = t.done.index_select(0, codes)
        return torch.where(done, self.members * self.block + place, member * self.block + place)

    def after(self, child: torch.Tensor, visits: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """(cells, B) children's rows and visit counts -> ``table`` (``total`` or ``reach``) there."""
        return table.view(-1).take(visits.long() * table.shape[1] + child)


@functools.lru_cache(maxsize=4)
def _positions(game: Game, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(L,) the unfinished and (F,) the finished reachable codes (rows), and (rows,) each
    code's place among its kind (-1: unreachable)."""
    t = game.tables(device)
    live = (t.reachable & ~t.done).nonzero().squeeze(1)
    over = (t.reachable & t.done).nonzero().squeeze(1)
    index = torch.full((t.states,), -1, dtype=torch.long, device=live.device)
    index[live] = torch.arange(live.numel(), device=live.device)
    index[over] = torch.arange(over.numel(), device=live.device)
    return live, over, index


def subtrees(logits: torch.Tensor, value: torch.Tensor, simulations: int, rescale: bool = True,
             max_considered: int = MOVES, game: Game = TIC_TAC_TOE) -> Subtrees:
    """Play every position's subtree out to the visits searches of ``simulations`` need
    (``visits_needed``: 8 for 16 simulations over 9 moves), all positions at once.

    ``logits`` (n * rows, cells) and ``value`` (n * rows,): the tables of ``gumbel_search``, n
    members' blocks of ``game``'s rows. Visit 1 of a position expands it: it backs up the position's own
    value. Visit k > 1 picks, by the rule below the root, the move whose visits lag the
    improved policy the most, ``argmax(pi'(a) - N(a) / (1 + sum N))``, and backs up the
    negated value of its child's next visit, which an earlier step has already played (a
    child's j-th visit comes before its parent's (j+1)-th). A finished position backs up
    its exact value at every visit.
    """
    if simulations < 1:
        raise ValueError(f"a search needs at least one simulation, got {simulations}")
    dev = value.device
    t = game.tables(dev)
    C, R = t.cells, t.states
    live, over, index = _positions(game, str(dev))
    L, S, K = live.numel(), simulations, visits_needed(simulations, max_considered, C)
    n = value.numel() // R
    nL = n * L
    lg = logits.view(n, R, C).index_select(1, live).reshape(nL, C).t()  # (cells, nL)
    v = value.view(n, R).index_select(1, live).reshape(nL).float()
    nodes = Nodes.of(lg, t.legal.index_select(0, live).t().repeat(1, n), v)
    del lg  # (a copy the nodes no longer need: 0.6 GB on 4,4,4)
    # Children: an unfinished one in the parent's member's block, a finished one in the shared
    # block, an illegal cell's the row itself; a cell at a time, as a (cells, nL) int64
    # temporary is 1.2 GB on 4,4,4 (the same rows as whole, in integers).
    nxt = t.next2d.index_select(0, live)  # (L, cells) codes
    member = torch.arange(n, device=dev).repeat_interleave(L)  # (nL,)
    own = torch.arange(nL, device=dev)
    child = torch.empty(C, nL, dtype=torch.int32, device=dev)  # int32: 4,4,4's are 0.6 GB, not 1.2
    for c in range(C):
        place = index.index_select(0, nxt[:, c]).repeat(n)  # (nL,)
        ended = t.done.index_select(0, nxt[:, c]).repeat(n)
        child[c] = torch.where(nodes.legal[c] > 0, torch.where(ended, nL + place, member * L + place), own)
    del nxt
    rows = nL + over.numel()
    exact = leaf_values(over, value, over, game)  # (F,) finished: -1 the mover lost, 0 a tie
    leaf = torch.zeros(S + 1, rows, device=dev)
    leaf[1:, nL:] = exact
    leaf[1, :nL] = v
    total = torch.zeros(S + 1, rows, device=dev)
    total[1] = leaf[1]
    # Finished rows: k * exact, as exact as summing it k times.
    total[2:, nL:] = exact * torch.arange(2, S + 1, device=dev, dtype=torch.float32)[:, None]
    reach = torch.zeros(S + 1, rows, dtype=torch.int16, device=dev)  # depths: at most the cells
    visits = torch.zeros(C, nL, device=dev)
    value_sum = torch.zeros(C, nL, device=dev)
    # Visit k of a row reads its children's visits before k only: the rows of a step are
    # independent, so they are played COLUMNS at a time.
    for k in range(2, K + 1):
        for start in range(0, nL, COLUMNS):
            cols = slice(start, min(start + COLUMNS, nL))
            node, seen, summed = nodes.columns(cols), visits[:, cols], value_sum[:, cols]  # views
            _, sigma, _ = completed_q(node, seen, summed, rescale)
            improved = torch.softmax(node.logits + sigma, 0)
            lag = improved - seen / (1 + seen.sum(0))
            move = first_argmax(lag - node.barrier)[None]  # (1, columns)
            at = (seen.gather(0, move).long() + 1) * rows + child[:, cols].gather(0, move)  # the child's next visit
            back = -leaf.view(-1).take(at)  # (1, columns) its value, for this row's mover
            leaf[k, cols] = back[0]
            total[k, cols] = total[k - 1, cols] + leaf[k, cols]
            reach[k, cols] = torch.maximum(reach[k - 1, cols], 1 + reach.view(-1).take(at[0]))
            seen.scatter_add_(0, move, torch.ones_like(back))  # into visits and value_sum
            summed.scatter_add_(0, move, back)
    return Subtrees(simulations, max_considered, K, L, n, index, nodes, child, leaf, total, reach, game)


def gumbel_search(root: torch.Tensor, logits: torch.Tensor | None, value: torch.Tensor | None,
                  simulations: int, gumbel: torch.Tensor | None = None, offset: torch.Tensor | None = None,
                  max_considered: int = MOVES, rescale: bool = True, tree: Subtrees | None = None,
                  game: Game = TIC_TAC_TOE) -> Search:
    """Search B positions with ``simulations`` simulations each.

    ``root``: (B,) board codes, none finished. ``logits`` (R, 9) masked prior logits and
    ``value`` (R,) values of every position, row ``offset + code`` (``offset`` (B,): a
    population member's block; None: 0). ``tree``: their ``subtrees``, played for at least
    these simulations, built once and reused by every search with these tables (None:
    built here). ``gumbel``: (B, 9) Gumbel noise for the root's top-k sampling (self-play),
    or None: a deterministic search (test time), ties to the lowest cell. Returns a ``Search``.
    """
    dev = root.device
    game = tree.game if tree is not None else game
    t = game.tables(dev)
    C = t.cells
    B = root.shape[0]
    if simulations < 1:
        raise ValueError(f"a search needs at least one simulation, got {simulations}")
    if bool(t.done.index_select(0, root).any()):
        raise ValueError("a search starts from an unfinished position")
    if tree is None:
        tree = subtrees(logits, value, simulations, rescale, max_considered, game)
    elif tree.visits < visits_needed(simulations, max_considered, C):
        raise ValueError(f"subtrees played for {tree.simulations} simulations over {tree.max_considered} "
                         f"moves cannot serve {simulations} over {max_considered}")
    row = tree.rows(root, offset)  # (B,)
    node = tree.nodes.take(row)
    legal = node.legal > 0  # (9, B)
    # g + log p; -inf on illegal cells
    score0 = node.log_prior if gumbel is None else node.log_prior + gumbel.float().t()
    child = tree.child.index_select(1, row)  # (9, B) each move's row
    considered = t.n_legal.index_select(0, root).long().clamp(max=max_considered)  # (B,)
    keep, more = (x.to(dev).index_select(0, considered).t()
                  for x in halving_phases(simulations, max_considered, C))
    visits = torch.zeros(C, B, device=dev)
    value_sum = torch.zeros(C, B, device=dev)
    level = torch.zeros(B, device=dev)  # the visits every move still in has
    for j in range(int((keep > 0).any(1).sum())):  # the phases of sequential halving (a row's, then none)
        _, sigma, _ = completed_q(node, visits, value_sum, rescale)
        due = legal & (visits == level)
        if bool(((keep[j] > 0) & (keep[j] < due.sum(0))).any()):  # some keep fewer than are due: rank them
            kept = best_of(score0 + sigma, due, keep[j])  # (9, B)
        else:
            kept = due.float() * (keep[j] > 0)
        visits = visits + kept * more[j]
        value_sum = -tree.after(child, visits, tree.total)
        level = level + more[j] * (keep[j] > 0)

    q, sigma, mixed = completed_q(node, visits, value_sum, rescale)
    q = q * node.legal
    final = legal & (visits == visits.amax(0))  # the most visited
    action = first_argmax((score0 + sigma).masked_fill(~final, NEG))
    policy = torch.softmax(node.logits + sigma, 0)
    depth = ((1 + tree.after(child, visits, tree.reach).long()) * (visits > 0)).amax(0)
    return Search(action, policy.t().contiguous(), visits.t().contiguous(), q.t().contiguous(), mixed, depth,
                  node.prior.t().contiguous())
