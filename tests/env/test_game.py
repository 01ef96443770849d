"""The batched engine: scripted games, edge-case rules, the exact position counts
(docs/facts.md), and agreement with the plain one-board reference on many random games."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference as ref
from ttt_research.env import game

T = game.tables()


def play_script(moves, batch=1):
    """Play ``moves`` in ``batch`` identical games without reset; return the code and steps."""
    code = torch.zeros(batch, dtype=torch.long)
    steps = []
    for m in moves:
        s = game.step(code, torch.full((batch,), m))
        steps.append(s)
        code = s.code
    return code, steps


def board(code):
    return T.board[code].tolist()


def test_reachable_and_terminal_counts_match_facts():
    assert int(T.reachable.sum()) == 5478
    assert int((T.reachable & T.done).sum()) == 958


def test_number_of_complete_games_is_255168():
    # Paths from each code to the end of the game, counted backwards over plies.
    paths = T.done.long().clone()
    nxt = T.next2d
    for ply in range(8, -1, -1):
        rows = ((T.ply == ply) & ~T.done).nonzero().squeeze(-1)
        paths[rows] = (paths[nxt[rows]] * T.legal[rows]).sum(-1)
    assert int(paths[game.EMPTY_CODE]) == 255168


def test_x_wins_on_the_top_row():
    code, steps = play_script([0, 3, 1, 4, 2])
    #  X X X
    #  O O .
    #  . . .
    assert board(code)[0] == [1, 1, 1, -1, -1, 0, 0, 0, 0]
    assert [bool(s.ended) for s in steps] == [False] * 4 + [True]
    assert int(steps[-1].winner) == game.X


def test_o_wins_on_the_anti_diagonal():
    code, steps = play_script([0, 2, 1, 4, 8, 6])
    #  X X O
    #  . O .
    #  O . X
    assert board(code)[0] == [1, 1, -1, 0, -1, 0, -1, 0, 1]
    assert bool(steps[-1].ended) and int(steps[-1].winner) == game.O


def test_full_board_without_a_line_is_a_tie():
    code, steps = play_script([0, 4, 8, 1, 7, 6, 2, 5, 3])
    #  X O X
    #  X O O
    #  O X X
    assert board(code)[0] == [1, -1, 1, 1, -1, -1, -1, 1, 1]
    assert bool(steps[-1].ended) and int(steps[-1].winner) == 0
    assert not any(bool(s.ended) for s in steps[:-1])


def test_move_on_occupied_cell_forfeits_and_leaves_the_board():
    code, steps = play_script([4, 4])
    #  . . .
    #  . X .     O plays 4 again: O forfeits, X wins, the board keeps one piece.
    #  . . .
    assert board(code)[0] == [0, 0, 0, 0, 1, 0, 0, 0, 0]
    assert bool(steps[1].illegal) and bool(steps[1].ended)
    assert int(steps[1].winner) == game.X


def test_out_of_range_move_forfeits():
    for bad in (-1, 9, 100):
        s = game.step(torch.tensor([0]), torch.tensor([bad]))
        assert bool(s.illegal) and bool(s.ended) and int(s.winner) == game.O
        assert int(s.code) == game.EMPTY_CODE


def test_move_on_finished_board_changes_nothing():
    code, _ = play_script([0, 3, 1, 4, 2])  # X has won
    for cell in range(-1, 10):
        s = game.step(code, torch.tensor([cell]))
        assert int(s.code) == int(code)
        assert not bool(s.ended) and not bool(s.illegal) and int(s.winner) == 0


def test_encode_decode_round_trip_and_turns():
    codes = torch.arange(game.N_CODES)
    boards = game.decode(codes)
    assert torch.equal(game.encode(boards), codes)
    # X to move when pieces are level; the mover's view flips O's boards.
    b = game.decode(torch.tensor([ref.code((1, 0, 0, 0, 0, 0, 0, 0, 0))]))
    assert int(game.to_move(b)) == game.O
    assert T.view[ref.code((1, -1, 1, 0, 0, 0, 0, 0, 0))].tolist() == [-1, 1, -1, 0, 0, 0, 0, 0, 0]


def test_games_auto_reset_and_keep_playing():
    g = game.Games(4)
    # X wins on the first column in all four games after 5 moves, then they restart.
    for cell in [0, 1, 3, 4]:
        s = g.step(torch.full((4,), cell))
        assert not s.ended.any()
    s = g.step(torch.full((4,), 6))
    assert s.ended.all() and (s.winner == game.X).all()
    assert (g.code == game.EMPTY_CODE).all()
    assert (g.mover() == game.X).all() and g.legal().all()


def test_random_moves_are_legal_and_uniform():
    gen = torch.Generator().manual_seed(0)
    b = (1, -1, 0, 0, 1, 0, -1, 0, 0)  # 5 empty cells: 2, 3, 5, 7, 8
    code = torch.full((50_000,), ref.code(b))
    moves = game.random_moves(code, gen)
    counts = torch.bincount(moves, minlength=9).double()
    assert counts[[0, 1, 4, 6]].sum() == 0
    freq = counts[[2, 3, 5, 7, 8]] / counts.sum()
    assert (freq - 0.2).abs().max() < 0.01  # 5 sigma is about 0.009


def test_random_vs_random_frequencies_match_the_exact_odds():
    g = game.Games(100_000)
    gen = torch.Generator().manual_seed(1)
    wins = torch.zeros(3)
    for _ in range(60):
        s = g.step(game.random_moves(g.code, gen))
        w = s.winner[s.ended]
        wins += torch.stack([(w == 1).sum(), (w == -1).sum(), (w == 0).sum()])
    freq = wins / wins.sum()
    exact = torch.tensor([737 / 1260, 121 / 420, 8 / 63])
    assert (freq - exact).abs().max() < 0.005


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=-2, max_value=10), min_size=1, max_size=14))
def test_batched_engine_matches_the_reference_on_any_move_sequence(moves):
    """Arbitrary moves (occupied cells, moves after the end, out-of-range cells): the batched
    step follows the documented rules exactly as the one-board reference does."""
    code = torch.zeros(1, dtype=torch.long)
    b, over = ref.EMPTY_BOARD, False
    for m in moves:
        s = game.step(code, torch.tensor([m]))
        if over:  # a finished board changes nothing
            assert int(s.code) == int(code) and not bool(s.ended) and not bool(s.illegal)
        elif m not in ref.legal(b):  # forfeit: board unchanged, mover loses
            assert bool(s.illegal) and bool(s.ended) and int(s.winner) == -ref.mover(b)
            assert int(s.code) == ref.code(b)
            break  # the forfeit lives in the step's result, not in the code: the game is over
        else:
            b = ref.play(b, m)
            assert board(s.code)[0] == list(b)
            assert bool(s.ended) == ref.done(b)
            assert int(s.winner) == (ref.winner(b) if ref.done(b) else 0)
            over = ref.done(b)
        code = s.code


def test_batched_engine_matches_reference_on_many_random_games():
    """Ten thousand random games at once, checked move by move against the reference."""
    gen = torch.Generator().manual_seed(2)
    B = 10_000
    code = torch.zeros(B, dtype=torch.long)
    boards = [ref.EMPTY_BOARD] * B
    for _ in range(9):
        a = game.random_moves(code, gen)
        s = game.step(code, a)
        for i in range(0, B, 97):  # a spread-out sample keeps the Python side quick
            if ref.done(boards[i]):
                continue
            boards[i] = ref.play(boards[i], int(a[i]))
            assert int(s.code[i]) == ref.code(boards[i])
            assert bool(s.ended[i]) == ref.done(boards[i])
        code = s.code
    assert T.done[code].all()  # every game ends within 9 moves


def test_tables_agree_with_pure_rules_on_every_code():
    assert torch.equal(T.winner, game.winner(T.board))
    assert torch.equal(T.legal, game.legal_mask(T.board) & ~T.done[:, None])
    assert torch.equal(T.mover, game.to_move(T.board))


def test_outside_boards_pass_exactly_at_the_positions_where_somebody_is_to_move():
    # The verdict for boards from files and requests (issue 42 item 5): its TO_MOVE codes are
    # the 4,520 reachable unfinished positions, its finished ones the 958 reachable ends, and
    # every other code is impossible for a reason the rules name (none is left unexplained).
    t, v = game.tables(), game.verdicts()
    assert torch.equal(v == game.TO_MOVE, t.reachable & ~t.done)
    assert torch.equal((v == game.WON) | (v == game.FULL), t.reachable & t.done)
    assert int((v == game.UNREACHABLE).sum()) == 0
    code = int(game.encode(torch.tensor([[1, 1, 1, -1, -1, -1, 0, 0, 0]]))[0])
    assert int(t.winner[code]) == 0 and not t.done[code]  # what the hot path's rules say, unchanged
    assert game.outside_problem(code).startswith("impossible: both x and o have three in a row")


def test_view_code_is_the_base3_code_of_the_view_and_tells_views_apart():
    t = game.tables()
    views = t.view[t.reachable]  # (5478, 9)
    digits = (views.long() + 1)  # 0 opponent, 1 empty, 2 own
    assert torch.equal(game.view_code(views), (digits * game.POW3).sum(-1))
    assert torch.equal(game.view_code(views.float()), game.view_code(views))
    # Positions with the same view are the same position (the mover follows from the counts).
    assert torch.unique(game.view_code(views)).numel() == views.shape[0]


def test_the_eight_symmetries_are_a_group_that_keeps_the_winning_lines():
    sym = game.symmetries()
    assert sym.shape == (8, 9) and len({tuple(r) for r in sym.tolist()}) == 8
    assert sym[0].tolist() == list(range(9))
    rows = {tuple(r) for r in sym.tolist()}
    for a in sym:  # closed under composition
        for b in sym:
            assert tuple(a[b].tolist()) in rows
    lines = {frozenset(line) for line in game.LINES.tolist()}
    for perm in sym:  # a line's cells, turned, are a line
        inverse = torch.argsort(perm)
        assert {frozenset(inverse[line].tolist()) for line in game.LINES} == lines
    boards = game.tables().board[game.tables().reachable]
    for perm in sym:
        assert torch.equal(game.winner(boards[:, perm]), game.winner(boards))


def test_the_step_tables_agree_with_the_rules_for_every_code_and_cell():
    """``step`` reads a move from the flat tables (``ends``, ``wins``, ``forfeits``) and patches
    a move outside 0..8: both agree with the module's rules, written out here from the per-code
    tables, on every one of the 19,683 codes x the moves -2..10, finished and unreachable boards
    included, alone (a batch of moves in 0..8 only) and mixed."""
    codes = torch.arange(game.N_CODES).repeat_interleave(13)
    moves = torch.arange(-2, 11).repeat(game.N_CODES)
    cell = moves.clamp(0, 8)
    flat = codes * 9 + cell
    was_done = T.done[codes]
    illegal = ~(T.legal.view(-1)[flat] | was_done) | (cell != moves) & ~was_done
    new = torch.where(illegal, codes, T.next[flat])
    ended = (T.done[new] & ~was_done) | illegal
    won = torch.where(ended, torch.where(illegal, -T.mover[codes], T.winner[new]), 0).to(torch.int8)
    rules = game.Step(new, ended, won, illegal)
    inside = (moves >= 0) & (moves <= 8)
    for batch in (inside, torch.ones_like(inside)):
        s = game.step(codes[batch], moves[batch])
        for name, a, b in zip(game.Step._fields, s, rules, strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b[batch]), name
    assert int(illegal.sum()) > int((illegal & inside).sum()) > 0  # forfeits of both kinds were tried
