"""The exact evaluation on another board (3,4,3: 3 rows, 4 columns, 3 in a row), against a
plain recursion over the game tree written here, and on 4,4,4 (slow).

The policy scored is "always the lowest empty cell", with logits that say so: every figure
of its report is a sum over the tree that the recursion below computes with Fractions,
knowing nothing of the tables, the solver or the evaluator."""

from fractions import Fraction
from functools import cache

import pytest
import torch

from ttt_research.contract import NASHCONV, OPTIMAL_ALL, greedy_nashconv
from ttt_research.env.board import Game
from ttt_research.env.reward import Reward
from ttt_research.evaluation import exact, exploit, softmax, values, window
from ttt_research.evaluation.tree import decision_codes
from ttt_research.models.nets import MLPStack

M, N, K = 3, 4, 3
CELLS = M * N
G = Game(M, N, K)


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


# --------------------------------------------------------------------------- the reference
#
#   0  1  2  3
#   4  5  6  7      3 in a row: 2 lines per row, 1 per column, 2 diagonals each way.
#   8  9 10 11

def _lines():
    out = []
    for r in range(M):
        for c in range(N):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + dr * i, c + dc * i) for i in range(K)]
                if all(0 <= a < M and 0 <= b < N for a, b in cells):
                    out.append(tuple(a * N + b for a, b in cells))
    return out


LINES = _lines()


def winner(b):
    for line in LINES:
        s = sum(b[i] for i in line)
        if abs(s) == K:
            return s // K
    return 0


def done(b):
    return winner(b) != 0 or 0 not in b


def mover(b):
    return 1 if sum(b) == 0 else -1


def play(b, cell):
    return b[:cell] + (mover(b),) + b[cell + 1:]


def empty(b):
    return [i for i, v in enumerate(b) if v == 0]


@cache
def minimax(b):
    if done(b):
        return winner(b)
    vals = [minimax(play(b, c)) for c in empty(b)]
    return max(vals) if mover(b) == 1 else min(vals)


def lowest(b):
    return {empty(b)[0]: Fraction(1)}


def uniform(b):
    cells = empty(b)
    return {c: Fraction(1, len(cells)) for c in cells}


def perfect(b):
    cells = [c for c in empty(b) if minimax(play(b, c)) == minimax(b)]
    return {c: Fraction(1, len(cells)) for c in cells}


def outcome(b, seat, agent, opponent):
    """(P X wins, P O wins, P tie) from ``b``: ``agent`` plays ``seat``, ``opponent`` the other."""
    if done(b):
        w = winner(b)
        return (Fraction(w == 1), Fraction(w == -1), Fraction(w == 0))
    total = [Fraction(0)] * 3
    for cell, p in (agent if mover(b) == seat else opponent)(b).items():
        total = [t + p * s for t, s in zip(total, outcome(play(b, cell), seat, agent, opponent), strict=True)]
    return tuple(total)


def worst(b, seat):
    """The lowest-cell agent's result as ``seat`` against every reply: +1 / 0 / -1."""
    if done(b):
        return winner(b) * seat
    if mover(b) == seat:
        return worst(play(b, empty(b)[0]), seat)
    return min(worst(play(b, c), seat) for c in empty(b))


def wlt(p, seat):
    x, o, tie = (float(v) for v in p)
    win, loss = (x, o) if seat == 1 else (o, x)
    return {"win": win, "loss": loss, "tie": tie}


# --------------------------------------------------------------------------- the tests


def lowest_logits(game: Game) -> torch.Tensor:
    """(M, cells) logits of "the lowest empty cell": cell 0 highest, every cell finite."""
    return -torch.arange(game.cells, dtype=torch.float32).expand(decision_codes(game).numel(), -1)


def test_the_lowest_cell_policy_is_scored_as_the_recursion_scores_it():
    report = exact.evaluate_policy(lambda view: lowest_logits(G)[: view.shape[0]], game=G)
    start = (0,) * CELLS
    names = {1: "win", 0: "draw", -1: "loss"}
    for key, seat in (("as_x", 1), ("as_o", -1)):
        block = report[key]
        vs_random, vs_perfect = (outcome(start, seat, lowest, opponent) for opponent in (uniform, perfect))
        assert block["vs_random"] == pytest.approx(wlt(vs_random, seat), abs=1e-12)
        assert block["vs_perfect"] == pytest.approx(wlt(vs_perfect, seat), abs=1e-12)
        assert block["worst_case"] == names[worst(start, seat)]
    # 3,4,3 is a win for X (docs/facts.md): a perfect X beats every O, this one included.
    assert report["as_o"]["vs_perfect"]["loss"] == 1.0


def test_the_share_of_optimal_moves_over_every_decision_point():
    t = G.tables()
    codes = decision_codes(G)
    assert codes.numel() == 79_563  # docs/facts.md: 3,4,3 has 79,563 positions with someone to move
    report = exact.evaluate_actions(exact.greedy_actions(lambda v: lowest_logits(G)[: v.shape[0]], G)[0], G)
    boards = [tuple(b) for b in t.board[codes[::97]].tolist()]  # a sample, checked by the recursion
    kept = [minimax(play(b, empty(b)[0])) == minimax(b) for b in boards]
    share = report[OPTIMAL_ALL]
    assert share == pytest.approx(sum(kept) / len(kept), abs=0.03)  # the sample's share, near
    # ... and exactly the solver-free count over every point: the lowest cell keeps the value there.
    first = t.legal[codes].to(torch.int8).argmax(-1)  # the lowest empty cell
    optimal_lowest = exact.tree("cpu", G).optimal[codes].gather(1, first[:, None]).squeeze(-1)
    assert share == float(optimal_lowest.double().mean())
    assert 0 < share < 1 and report["decision_points"] < codes.numel()


def test_the_policy_as_trained_and_values_take_the_board():
    logits = lowest_logits(G)
    greedy = exploit.trained_blocks(logits[None], exploit.Acting(0.0), game=G)[0]
    report = exact.evaluate_actions(exact._greedy(logits, G)[0], G)
    for key in ("as_x", "as_o"):  # the greedy policy as trained is the greedy report's policy
        assert greedy[key]["vs_random"] == report[key]["vs_random"]
        assert greedy[key]["vs_perfect"] == report[key]["vs_perfect"]
    softmax = exploit.evaluate_agent(lambda v: lowest_logits(G)[: v.shape[0]], exploit.Acting(1.0), game=G)
    assert softmax["as_trained"]["nashconv"] > 0
    # Exact values: the solver's own move values score sign agreement 1 and error 0.
    codes = values.decision_positions(("x", "o"), G)
    exact_values = values.move_outcomes(codes, G).double()
    block = values.value_accuracy(exact_values, Reward(1.0, 0.0, -1.0), ("x", "o"), game=G)
    assert block == {"sign_agreement": 1.0, "mae": 0.0, "decision_points": 79_563}


def test_big_board_chunks_give_the_figures_of_one_pass(monkeypatch):
    """4x4 is read ``ROWS`` positions at a time and its policy as trained made a ply at a time;
    on 3,4,3 with small chunks every figure must be the one-pass figure."""
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(CELLS, 16), torch.nn.ReLU(), torch.nn.Linear(16, CELLS))
    whole = exploit.evaluate_agent(net, exploit.Acting(0.7, 0.1), game=G)
    monkeypatch.setattr(exact, "ROWS", 5_000)
    monkeypatch.setattr(exploit, "ROWS", 5_000)
    chunked = exploit.evaluate_agent(net, exploit.Acting(0.7, 0.1), game=G)
    assert leaves(chunked) == pytest.approx(leaves(whole), abs=1e-12)


def test_a_population_in_chunks_bounded_by_bytes_gives_each_members_own_report(monkeypatch):
    """4,4,4 forwards one member at a time and runs four members' DPs at a time (the byte bounds
    on a chunk); on 3,4,3 with bounds that force one member a chunk, every member's report is
    the one of the default chunks and of its own evaluation."""
    torch.manual_seed(2)
    stack = MLPStack(3, (16,), "signed9", "uniform", cells=CELLS)
    whole = exact.evaluate_stack(stack, game=G)
    monkeypatch.setattr(exact, "FORWARD_CHUNK_BYTES", 1)
    monkeypatch.setattr(exact, "CHUNK_BYTES", 1)
    seen = []
    parts = exact.evaluate_stack(stack, game=G,
                                 each=lambda first, logits: seen.append((first, logits.shape[0])))
    assert seen == [(0, 1), (1, 1), (2, 1)]  # one member a forward
    assert parts == whole and len({str(r) for r in whole}) == 3  # the members differ
    assert whole[1] == exact.evaluate_policy(stack.member(1), game=G)


def leaves(tree, prefix=""):
    """A nested report as {dotted key: number or name}."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in leaves(sub, f"{prefix}.{key}").items()}
    return {prefix: tree}


def test_logits_without_a_move_are_refused_naming_the_board():
    logits = lowest_logits(G).clone()
    logits[0] = -torch.inf
    with pytest.raises(exact.IllegalMoveError, match=r"first at \.\.\.\./\.\.\.\./\.\.\.\. \(X to move\)"):
        exact.check_logits(logits, game=G)


@pytest.mark.slow
def test_4_4_4_one_agent_is_scored_whole():
    g = Game(4, 4, 4)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    report = exploit.evaluate_agent(net, exploit.Acting(1.0), game=g)
    assert report["decision_points"] > 0 and 0 <= report[OPTIMAL_ALL] <= 1
    assert report["as_trained"]["nashconv"] >= 0
    assert report["as_x"]["vs_random"]["win"] + report["as_x"]["vs_random"]["loss"] <= 1 + 1e-12
    codes = decision_codes(g)
    t = g.tables()
    lowest = exact.evaluate_actions(exact._greedy(lowest_logits(g), g)[0], g)
    first = t.legal[codes].to(torch.int8).argmax(-1)  # the lowest empty cell
    kept = exact.tree("cpu", g).optimal[codes].gather(1, first[:, None]).squeeze(-1)
    assert lowest[OPTIMAL_ALL] == float(kept.double().mean())


def test_the_one_pass_of_two_plies_gives_the_three_passes_figures():
    """Another board's policy as trained is scored in one backward pass that keeps two plies,
    both seats at once (``window.both_seats``); it must give, bit for bit, the three passes over
    every row of each seat, for one policy and for several (a member axis)."""
    c = exact.tree("cpu", G)
    torch.manual_seed(3)
    logits = torch.randn(3, decision_codes(G).numel(), CELLS)
    for pol, n in ((exploit._Acted(c, logits[:1], 0.8, 0.05), 1),
                   (exploit.by_ply(c, exploit.logits_to_probs(logits, 1.0, game=G)), 3)):
        together = window.both_seats(c, pol, n)  # (n, 2, 7)
        for i, seat in enumerate((1, -1)):
            three = torch.cat([exploit._best_response(c, pol, n, seat)[c.empty][:, None],
                               exploit._outcomes(c, pol, n, "random", seat),
                               exploit._outcomes(c, pol, n, "perfect", seat)], 1)  # (n, 7)
            assert torch.equal(together[:, i], three)


def reached_points(start, seat, agent):
    """Every position where ``seat`` is to move that ``agent`` (a cell per board) reaches
    against some opponent."""
    seen, todo, points = {start}, [start], set()
    while todo:
        b = todo.pop()
        if done(b):
            continue
        if mover(b) == seat:
            points.add(b)
        for child in ([play(b, agent(b))] if mover(b) == seat else [play(b, c) for c in empty(b)]):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return points


def test_each_seat_is_judged_by_the_value_the_game_allows_it():
    """3,4,3 is won by X: X holds the value by forcing the win, O by losing only to a perfect X
    (an optimal move wherever it can get to); each seat's share of optimal moves over its own
    reachable points, all against the recursion."""
    t = G.tables()
    codes = decision_codes(G)
    boards = [tuple(b) for b in t.board[codes].tolist()]  # (M, cells) in the tables' order

    def best(b):
        return next(c for c in empty(b) if minimax(play(b, c)) == minimax(b))

    for name, agent in (("lowest cell", lambda b: empty(b)[0]), ("lowest optimal cell", best)):
        # The policy reads the mover's view (the board times the mover: its pieces +1).
        cell_of = {tuple(v * mover(b) for v in b): agent(b) for b in boards}

        def policy(view, cell_of=cell_of):  # (B, cells) -> (B, cells): 1 on the agent's cell
            cells = torch.tensor([cell_of[tuple(int(v) for v in row)] for row in view.tolist()])
            return torch.nn.functional.one_hot(cells, CELLS).float()

        report = exact.evaluate_policy(policy, game=G)
        start = (0,) * CELLS
        for key, seat, value in (("as_x", 1, "win"), ("as_o", -1, "loss")):
            block, seen = report[key], reached_points(start, seat, agent)
            kept = [minimax(play(b, agent(b))) == minimax(b) for b in seen]
            assert block["game_value"] == value, name
            assert block["decision_points"] == len(seen), name
            assert block["optimal_move_rate"] == pytest.approx(sum(kept) / len(kept), abs=1e-15), name
            # X: its worst case is the win; O: every move it can be led to keeps the value.
            holds = all(kept) if seat == -1 else minimax(start) == 1 and _worst(start, seat, agent) == 1
            assert block["holds_value"] == holds, name
        if name == "lowest optimal cell":
            assert report["as_x"]["holds_value"] and report["as_o"]["holds_value"]
        else:
            assert not report["as_x"]["holds_value"] and not report["as_o"]["holds_value"]
        seats = report["as_x"]["decision_points"] + report["as_o"]["decision_points"]
        assert report["decision_points"] == seats


@cache
def _worst(b, seat, agent):
    """``agent``'s result as ``seat`` against every reply (+1 / 0 / -1)."""
    if done(b):
        return winner(b) * seat
    if mover(b) == seat:
        return _worst(play(b, agent(b)), seat, agent)
    return min(_worst(play(b, c), seat, agent) for c in empty(b))


def test_another_boards_softmax_is_over_the_empty_cells_alone():
    """Another board's policy as trained is a softmax over each row's empty cells alone
    (``softmax.softmax``, ``softmax_down``): equal to the whole row's softmax (taken cells at
    -inf) up to the last bits, exactly 0 at the taken cells, NaN where no cell is empty (as the
    whole row's); each row's numbers its own, whatever rows come with it and wherever it sits
    among them (the as-trained pass makes them a block at a time). Tic-tac-toe's stays the
    whole row's softmax, bit for bit."""
    torch.manual_seed(8)
    x = torch.randn(3, 200, CELLS, dtype=torch.float64) * 4
    legal = torch.rand(200, CELLS) < torch.linspace(0.05, 1.0, 200)[:, None]  # 0 to CELLS empty cells
    legal[torch.arange(1, 200), torch.arange(1, 200) % CELLS] = True  # an empty cell in all but row 0
    legal[0] = False
    scaled = torch.where(legal, x, -torch.inf)
    p = softmax.softmax(scaled, G)
    whole = torch.softmax(scaled, -1)
    assert p[:, 0].isnan().all() and whole[:, 0].isnan().all()
    assert torch.allclose(p[:, 1:], whole[:, 1:], rtol=1e-14, atol=0)
    assert (p[:, 1:][~legal[1:].expand(3, -1, -1)] == 0).all()
    assert torch.allclose(p[:, 1:].sum(-1), torch.ones(3, 199, dtype=torch.float64), rtol=1e-14, atol=0)
    counts = legal.sum(-1)
    for e in counts.unique().tolist()[1:]:  # one count of empty cells at a time: the rows' own numbers
        rows = (counts == e).nonzero().squeeze(-1)
        assert torch.equal(softmax.softmax(scaled[:, rows], G), p[:, rows])
        at = torch.stack([r.nonzero().squeeze(-1) for r in legal[rows]]).expand(3, -1, -1)  # ascending
        # the softmax of the empty cells' logits, a row a column (``_Acted.at_cells``' numbers)
        down = softmax.softmax_down(x[:, rows].gather(-1, at).reshape(-1, e).T.contiguous())
        assert torch.equal(p[:, rows].gather(-1, at).reshape(-1, e), down.T)
    y = torch.randn(7, 10_007, dtype=torch.float64) * 5  # a block's columns wherever they sit
    down = softmax.softmax_down(y.clone())
    for lo, width in ((0, 1), (1, 3), (3, 8), (5, 100), (8191, 1816), (2, 10_005)):
        assert torch.equal(softmax.softmax_down(y[:, lo:lo + width].clone()), down[:, lo:lo + width])
    ttt = Game(3, 3, 3)
    z = torch.where(legal[:, :ttt.cells], x[..., :ttt.cells], -torch.inf)
    assert torch.equal(softmax.softmax(z, ttt).nan_to_num(7.0),
                       torch.softmax(z, -1).nan_to_num(7.0))


def test_the_logits_kept_at_the_empty_cells_give_the_same_policy_as_trained():
    """``evaluate_agent`` keeps another board's logits at each ply's empty cells only
    (``window.at_empty_cells``); its as-trained block is, bit for bit, the whole table's."""
    c = exact.tree("cpu", G)
    torch.manual_seed(4)
    logits = torch.randn(decision_codes(G).numel(), CELLS)
    parts = window.at_empty_cells(c, logits)
    assert sum(p.numel() for p in parts) == int(c.legal[c.decision].sum())  # the empty cells, no more
    for acting in (exploit.Acting(1.0), exploit.Acting(0.5), exploit.Acting(0.7, 0.1)):
        whole = exploit.trained_blocks(logits[None], acting, game=G)[0]
        assert exploit.trained_blocks(parts, acting, game=G)[0] == whole
        t, e = acting.temperature, acting.epsilon
        assert torch.equal(window.both_seats(c, exploit._Acted(c, parts, t, e), 1),
                           window.both_seats(c, exploit._Acted(c, logits[None], t, e), 1))


def test_a_populations_policy_as_trained_past_rows_is_each_members_own(monkeypatch):
    """Past ``ROWS`` positions (4x4) a population's as-trained blocks are made a member at a
    time, each member's softmax at its rows' empty cells where the pass reads them
    (``_Acted.at_cells`` of (1, M, cells) logits): on 3,4,3 with a small ``ROWS``, bit for bit
    the whole table's blocks, and each member's from its logits kept at the empty cells."""
    c = exact.tree("cpu", G)
    torch.manual_seed(9)
    logits = torch.randn(3, decision_codes(G).numel(), CELLS)
    for acting in (exploit.Acting(1.0), exploit.Acting(torch.tensor([0.5, 1.0, 2.0]))):
        whole = exploit.trained_blocks(logits, acting, game=G)
        monkeypatch.setattr(exploit, "ROWS", 5_000)
        assert exploit.trained_blocks(logits, acting, game=G) == whole
        monkeypatch.undo()
        for k in range(3):
            own = exploit.trained_blocks(window.at_empty_cells(c, logits[k]), acting, first=k, game=G)
            assert own == [whole[k]]


def test_the_worst_lines_in_blocks_are_the_whole_plies(monkeypatch):
    """``worst_lines`` walks each ply in blocks of ``LINE_ROWS`` rows (4,4,4's whole-tree tables
    were 1.2 GB each): blocks of 97 rows give the lines of one block a ply, for a stochastic and
    a deterministic policy, from both seats; each line a mistake of the policy's, worst first."""
    torch.manual_seed(10)
    logits = torch.randn(decision_codes(G).numel(), CELLS) * 3
    for temperature in (1.0, 0.0):
        probs = exploit.logits_to_probs(logits, temperature, game=G)
        for seat in ("x", "o"):
            whole = exploit.worst_lines(probs, seat, 5, game=G)
            monkeypatch.setattr(exploit, "LINE_ROWS", 97)
            assert exploit.worst_lines(probs, seat, 5, game=G) == whole
            monkeypatch.undo()
            # X wins 3,4,3: X's random moves give the win up; O's cannot lose a lost game
            assert (len(whole) > 0) == (seat == "x")
            assert all(line["mistakes"] and line["cost"] > 0 for line in whole)
            assert [line["cost"] for line in whole] == sorted((line["cost"] for line in whole), reverse=True)


def test_the_greedy_outcomes_of_two_plies_are_the_whole_tables():
    """Another board's greedy report has both fixed opponents' outcomes in one pass over two
    plies' tables, adding the opponent's children from the first empty cell
    (``window.greedy_outcomes``): bit for bit the pass per opponent over (R, n, 3) tables that
    adds a term for every cell (``exact._outcomes``, tic-tac-toe's)."""
    c = exact.tree("cpu", G)
    torch.manual_seed(5)
    actions, _ = exact.greedy_actions_stack(torch.randn(3, decision_codes(G).numel(), CELLS), G)
    act = actions.T.contiguous()  # (R, 3) three agents
    for seat in (1, -1):
        plies = exact._live(c, exact._reach(c, act, seat))
        both = window.greedy_outcomes(c, act, seat, plies)  # (2, 3, 3)
        for k, opponent in enumerate(("random", "perfect")):
            assert torch.equal(both[k], exact._outcomes(c, act, opponent, seat, plies))
        assert torch.allclose(both.sum(-1), torch.ones(2, 3, dtype=torch.float64))


def test_an_agent_is_scored_alike_on_one_thread_and_two():
    """``evaluate_agent`` past ``ROWS`` positions reads each forward block as it comes and shares
    its work among the caller's threads (``forward.agent_pass``, ``tree.Workers``): the report is,
    bit for bit, the one made from the whole (M, cells) logits table, on one thread and on two."""
    torch.manual_seed(6)
    net = torch.nn.Sequential(torch.nn.Linear(CELLS, 16), torch.nn.ReLU(), torch.nn.Linear(16, CELLS))
    logits = exact.decision_logits(net, G)  # (M, cells)
    acting = exploit.Acting(0.5)
    expected = exact.evaluate_actions(exact.checked_greedy(logits, G), G)
    expected[NASHCONV] = greedy_nashconv(expected)
    expected["as_trained"] = exploit.trained_blocks(logits[None], acting, game=G)[0]
    threads = torch.get_num_threads()
    try:
        for k in (1, 2):
            torch.set_num_threads(k)
            assert exploit.evaluate_agent(net, acting, game=G) == expected
            assert torch.get_num_threads() == k  # given back as it was
    finally:
        torch.set_num_threads(threads)


def test_an_agent_without_a_move_somewhere_is_refused_naming_the_board():
    def policy(view):  # NaN on the empty board's cells, the lowest cell's logits elsewhere
        nan = (view == 0).all(-1, keepdim=True)
        return torch.where(nan, torch.nan, -torch.arange(CELLS, dtype=torch.float32))

    board = r"\.\.\.\./\.\.\.\./\.\.\.\. \(X to move\)"  # the empty board
    why = rf"at 1 of 79563 positions .*first at {board}: its logits are NaN"
    with pytest.raises(exact.IllegalMoveError, match=why):
        exploit.evaluate_agent(policy, exploit.Acting(1.0), game=G)
