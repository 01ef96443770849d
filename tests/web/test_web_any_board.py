"""The browser game on another board than tic-tac-toe: the server judges a 3,4,3 board from the
game's lines (``web/position.py``) and finds its row, ``/logits`` answers 12 cells, and complete
games in Chromium (3,4,3 in the fast suite, 4,4,4 under ``slow``) draw the model's board from
its ``game`` metadata, play the Python evaluator's greedy moves and declare the winner the
game's tables name."""

import json
import random
import urllib.error
import urllib.request

import pytest
import torch

from tests.helpers.onnx_models import preference_model
from tests.helpers.web import in_thread, open_game
from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.play import decide
from ttt_research.web import position

G = Game(3, 4, 3)
SYMBOLS = {"X": 1, "O": -1, "": 0}
RESULT = {"human": "You win!", "agent": "The agent wins.", "draw": "Draw."}


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


@pytest.fixture(scope="module")
def highest(tmp_path_factory):
    """A 3,4,3 model that plays the highest-numbered empty cell (logits = cell index)."""
    return preference_model(list(range(G.cells)), tmp_path_factory.mktemp("m") / "highest.onnx", game=G.name)


def post(url, body: bytes):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, json.loads(r.read())


# --------------------------------------------------------------------------- the server


def test_every_board_the_lines_call_open_is_a_row_of_the_tables_where_somebody_moves():
    """``position.problem`` (from the lines) against the 3,4,3 tables (from the solver's
    positions): on every 7th of its 111,973 reachable positions, None exactly where the game is
    not over, and ``row_of`` finds the position's own row."""
    t = G.tables()
    rows = list(range(0, t.states, 7))
    boards = t.board[rows].tolist()
    said = [position.problem(G, b) is None for b in boards]
    assert said == (~t.done[rows]).tolist() and sum(said) > 10_000
    assert [position.row_of(G, b) for b, ok in zip(boards, said, strict=True) if ok][::50] == \
        [r for r, ok in zip(rows, said, strict=True) if ok][::50]


@pytest.mark.parametrize("board,needle", [
    ([1, 1, 1, 0, -1, -1, 0, 0, 0, 0, 0, 0], "a finished game (x has 3 in a row): nobody is to move"),
    ([1, 1, 1, 0, -1, -1, -1, 0, 0, 0, 0, 0], "impossible: both x and o have 3 in a row"),
    ([1, 1, 1, -1, 0, 0, -1, 0, 0, -1, 0, 0], "impossible: both x and o have 3 in a row"),  # O: 4-7-10
    ([1, 1, 1, 0, -1, -1, 0, -1, 0, 0, 0, 0], "impossible: x has 3 in a row, yet o moved after the game"),
    ([-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "impossible: 0 x and 1 o (X moves first"),
    # O X O X / O X O O / X O X X: a draw, one of 3,4,3's 28 full boards without a line
    ([-1, 1, -1, 1, -1, 1, -1, -1, 1, -1, 1, 1], "a finished game (the board is full)"),
])
def test_a_3_4_3_board_nobody_moves_on_is_refused_with_its_reason(board, needle):
    assert needle in position.problem(G, board)


def test_logits_answer_the_models_12_cells_and_refuse_a_board_of_9(highest):
    board = [1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0]  # X 1, O 6: X to move
    with in_thread(highest, node_modules=None) as url:
        info = json.loads(urllib.request.urlopen(url + "model.json", timeout=30).read())
        status, body = post(url + "logits", json.dumps({"board": board}).encode())
        with pytest.raises(urllib.error.HTTPError) as nine:
            post(url + "logits", json.dumps({"board": [0] * 9}).encode())
        with pytest.raises(urllib.error.HTTPError) as won:
            post(url + "logits", json.dumps({"board": [1, 1, 1, 0, -1, -1] + [0] * 6}).encode())
    assert info["meta"]["game"] == "3,4,3" and info["error"] is None
    assert status == 200 and body["logits"] == [None, 1, 2, 3, 4, None, 6, 7, 8, 9, 10, 11]
    assert nine.value.code == 400 and "a board is 12 cells" in nine.value.read().decode()
    assert won.value.code == 400 and "x has 3 in a row" in won.value.read().decode()


# --------------------------------------------------------------------------- the browser


def read_board(page) -> list[int]:
    script = "cells => cells.map(c => c.querySelector('.piece')?.textContent ?? '')"
    return [SYMBOLS[t] for t in page.eval_on_selector_all(".cell", script)]


def play_one_game(page, game: Game, seat: str, policy, rng) -> str:
    """One game by clicking random empty cells, every agent move checked against the Python
    greedy move (``play.decide`` on the game's tables); returns what the page declared
    (human, agent, draw), once checked against the winner the tables name."""
    t = game.tables()
    human = 1 if seat == "x" else -1
    page.click(f"#play-{seat}")
    before, row = [0] * game.cells, 0  # the board the agent moves from next, and its row
    while True:
        due = sum(v != 0 for v in before) + (int(t.mover[row]) != human)
        page.wait_for_function(f"(b => b.dataset.state === 'over' || b.dataset.state === 'human' && "
                               f"Number(b.dataset.ply) >= {due})(document.getElementById('board'))",
                               timeout=60_000)
        board = read_board(page)
        new = [i for i in range(game.cells) if board[i] != before[i]]
        if board.count(-human) > before.count(-human):  # the agent moved since `before`
            move, _ = decide(policy, row, game)
            assert new == [move], f"position {before}: page {new}, python {move}"
            row = int(t.next2d[row, move])
        assert t.board[row].tolist() == board  # the page's board is the game's, move for move
        if page.eval_on_selector("#board", "b => b.dataset.state") == "over":
            break
        cell = rng.choice([i for i in range(game.cells) if board[i] == 0])
        page.click(f'.cell[data-cell="{cell}"]')
        before = board.copy()
        before[cell] = human
        row = int(t.next2d[row, cell])
    assert bool(t.done[row])
    expected = {0: "draw", human: "human", -human: "agent"}[int(t.winner[row])]
    banner = page.locator("#result")
    assert banner.get_attribute("data-result") == expected and banner.inner_text() == RESULT[expected]
    return expected


def play_games(page, url, policy, game: Game, seats: str) -> list[str]:
    """Games from ``seats`` (x, o) on the page at ``url``, which must draw ``game``'s board."""
    open_game(page, url)
    assert page.eval_on_selector("#board", "b => b.dataset.state") == "ready"
    assert page.locator(".cell").count() == game.cells
    assert page.evaluate("window.ttt.game()") == game.name
    assert f"The {game.name} game ({game.k} in a row on {game.m}x{game.n})" in page.inner_text("h1")
    rng = random.Random(0)
    return [play_one_game(page, game, seat, policy, rng) for seat in seats]


def preferring(preference: list[float]):
    """The logits of ``preference_model(preference)`` in torch: the most preferred empty cell."""
    pref = torch.tensor(preference, dtype=torch.float32)
    return lambda view: pref - 1e9 * view.abs()


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_3_4_3_model_plays_on_a_board_of_3_rows_of_4_and_the_page_declares_its_wins(highest, page):
    """The highest-cell agent: as X it lays 12, 11, 10 (three in the bottom row) unless the
    person blocks; the page's banner is the tables' winner every game, from both seats."""
    with in_thread(highest, node_modules=None) as url:
        results = play_games(page, url, preferring(list(range(G.cells))), G, "xoxo")
        # the person as O clicks 1 then 2: the agent's 12, 11, 10 win in the bottom row
        page.click("#play-o")
        for cell, ply in ((0, 2), (1, 4)):
            page.wait_for_function(f"document.getElementById('board').dataset.ply === '{ply - 1}'")
            page.click(f'.cell[data-cell="{cell}"]')
        page.wait_for_function("document.getElementById('board').dataset.state === 'over'")
        assert read_board(page) == [-1, -1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1]
        assert page.locator("#result").get_attribute("data-result") == "agent"
    assert set(results) <= {"human", "agent", "draw"}


@pytest.mark.slow  # over 3 s on the 2-core host
def test_the_3_4_3_page_runs_the_model_in_the_browser_after_checking_every_position(highest, ort_installed,
                                                                                     page):
    """With onnxruntime-web the page checks the model on 3,4,3's 79,563 positions (one batch of
    [79563, 12]) before it plays, then plays the same moves as the Python evaluator."""
    with in_thread(highest) as url:
        play_games(page, url, preferring(list(range(G.cells))), G, "xo")
        assert page.eval_on_selector("#board", "b => b.dataset.engine") == "browser"


@pytest.mark.slow  # 4,4,4's positions built (~45 s, 3.5 GB) and the model checked on its 9.1M (~75 s)
def test_a_4x4_model_plays_complete_games_in_the_browser(page, tmp_path):
    """A 4,4,4 model (a fixed preference over the 16 cells, shuffled) with its ``game``
    metadata: the page draws 4 rows of 4, plays its moves and declares the tables' result."""
    game = Game(4, 4, 4)
    preference = random.Random(4).sample(range(game.cells), game.cells)
    path = preference_model(preference, tmp_path / "444.onnx", game=game.name)
    with in_thread(path, node_modules=None) as url:
        results = play_games(page, url, preferring(preference), game, "xo")
    assert game != TIC_TAC_TOE and len(results) == 2
