"""Policy tables (evaluation/policy_table.py): the format round-trips, a greedy table scores
as the action table it holds, every malformed row is refused in one line naming file, line
and problem, missing positions and illegal answers are filled only when asked and counted,
and the example rule-based player scores what the solver says it should."""

import json
from pathlib import Path

import pytest
import torch

from ttt_research.env import game
from ttt_research.env.opponents import rules_probs, rules_record
from ttt_research.env.solver import best_response, outcome_probs, random_probs, solve
from ttt_research.evaluation import exploit
from ttt_research.evaluation import policy_table as pt
from ttt_research.evaluation.exact import decision_codes, evaluate_actions

torch.set_num_threads(1)
CODES = decision_codes()
LEGAL = game.tables().legal[CODES]  # (M, 9)
EXAMPLE = Path(__file__).parents[2] / "examples" / "rules_bot.csv"


def rules() -> torch.Tensor:
    """(M, 9) the rule-based player at the decision positions (stochastic: ties are uniform)."""
    return rules_probs()[CODES]


def first_legal() -> torch.Tensor:
    """(19,683,) the player that always takes the first empty cell."""
    return game.tables().legal.to(torch.int8).argmax(-1)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def move_table(moves: dict[str, int | str]) -> str:
    return "board,move\n" + "".join(f"{b},{m}\n" for b, m in moves.items())


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_stochastic_table_reads_back_bit_for_bit(tmp_path, suffix):
    probs = exploit.logits_to_probs(torch.randn(CODES.numel(), 9, generator=torch.Generator().manual_seed(0)),
                                    temperature=0.7, epsilon=0.1)
    pt.write_table(tmp_path / f"t{suffix}", probs)
    back, info = pt.read_table(tmp_path / f"t{suffix}")
    assert torch.equal(back, probs)  # repr keeps every float64 bit: the scores are equal too
    assert info["distributions"] == info["rows"] == 4520 and info["filled"] == info["moves"] == 0


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_greedy_table_scores_as_evaluate_actions_of_its_moves(tmp_path, suffix):
    actions = first_legal()
    pt.write_table(tmp_path / f"g{suffix}", exploit.actions_to_probs(actions))
    assert (tmp_path / f"g{suffix}").read_text().count("move") >= 1  # one move a row, not nine numbers
    probs, info = pt.read_table(tmp_path / f"g{suffix}")
    expected = torch.zeros(game.N_CODES, dtype=torch.long)  # 0 where nobody moves
    expected[CODES] = actions[CODES]
    assert torch.equal(pt.deterministic_actions(probs), expected)
    assert evaluate_actions(pt.deterministic_actions(probs)) == evaluate_actions(actions)
    assert info["moves"] == info["legal_answers"] == 4520
    assert info["optimal_move_rate"] == float(solve().optimal[CODES, actions[CODES]].double().mean())


def test_forcing_moves_writes_the_argmax_and_the_file_is_commented_csv(tmp_path):
    pt.write_table(tmp_path / "r.csv", rules(), deterministic=True)
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert lines[0].startswith("#") and lines[1] == "board,move" and lines[2] == ".........,4"
    probs, _ = pt.read_table(tmp_path / "r.csv")
    assert torch.equal(probs.argmax(-1), rules().argmax(-1))


# --------------------------------------------------------------------------- malformed files

GOOD = move_table({".........": 4})
P = "board,p0,p1,p2,p3,p4,p5,p6,p7,p8\n"  # the header of a table of probabilities
ROW = '{"format": "ttt-policy-table/1", "rows": [{"board": ".........", '  # a JSON table's first row, begun
BAD_ROWS = [  # (table text, where, what the one line says)
    ("board,move\nx..,4\n", "line 2", "board 'x..' is not 9 characters of x, o and ."),
    ("board,move\nX........,4\n", "line 2", "is not 9 characters of x, o and ."),
    ("board,move\nxx.......,4\n", "line 2", "board xx....... is impossible: 2 x and 0 o"),
    ("board,move\no........,4\n", "line 2", "impossible: 0 x and 1 o"),
    ("board,move\nxxxoo....,5\n", "line 2", "is a finished game (x has three in a row)"),
    ("board,move\nxoxxoooxx,4\n", "line 2", "is a finished game (the board is full)"),
    # Impossible boards (issue 42 item 5): game.winner says 0 when both sides have a line, so
    # these were once scored as unfinished positions, or refused for an "occupied" cell.
    ("board,move\nxxxooo...,0\n", "line 2",
     "board xxxooo... is impossible: both x and o have three in a row"),
    ("board,move\nxxxooo...,6\n", "line 2", "impossible: both x and o have three in a row"),
    ("board,move\nooo...xxx,0\n", "line 2", "impossible: both x and o have three in a row"),
    ("board,move\nxxxoo.o..,5\n", "line 2", "impossible: x has three in a row, yet o moved after"),
    ("board,move\nooox.xx.x,4\n", "line 2", "impossible: o has three in a row, yet x moved after"),
    ('{"format": "ttt-policy-table/1", "rows": [{"board": "xxxooo...", "probs": [0,0,0,0,0,0,1,0,0]}]}',
     "rows[0]", "board xxxooo... is impossible: both x and o have three in a row"),
    ("# c\nboard,move\n.........,4\n.........,0\n", "line 4", "board ......... again (first at line 3)"),
    ("board,move\n.........,9\n", "line 2", "move 9 is outside 0-8"),
    ("board,move\n.........,-1\n", "line 2", "move -1 is outside 0-8"),
    ("board,move\n.........,a\n", "line 2", "move 'a' is not an integer cell 0-8"),
    ("board,move\n.........,4.5\n", "line 2", "move '4.5' is not an integer cell 0-8"),
    ("board,move\nx........,0\n", "line 2", "move 0 is on an occupied cell of x........ (an illegal answer"),
    ("board,move\n.........,4,5\n", "line 2", "3 fields, the header has 2"),
    (P + ".........,1,0,0,0,0,0,0,0\n", "line 2", "9 fields, the header has 10"),
    (P + ".........,1.5,-0.5,0,0,0,0,0,0,0\n", "line 2",
     "probability -0.5 is negative"),
    (P + ".........,nan,0,0,0,0,0,0,0,1\n", "line 2", "probability nan is not finite"),
    (P + ".........,inf,0,0,0,0,0,0,0,1\n", "line 2", "probability inf is not finite"),
    (P + ".........,x,0,0,0,0,0,0,0,1\n", "line 2", "probability 'x' is not a number"),
    (P + ".........,0.5,0,0,0,0,0,0,0,0.4\n", "line 2",
     "probabilities sum to 0.9, not 1"),
    (P + "x........,0.5,0,0,0,0.5,0,0,0,0\n", "line 2",
     "probability 0.5 on the occupied cell 0"),
    ("board,cell\n.........,4\n", "line 1", "header 'board,cell' is neither 'board,move' nor"),
    ("# only a comment\n", None, "empty file (only comments)"),
    ("", None, "empty file; expected a header"),
    ('{"format": "ttt-policy-table/1", "rows": [{"board": ".........", "move": 4}, '
     '{"board": ".........", "probs": [0,0,0,0,1,0,0,0,0]}]}', "rows[1]",
     "board ......... again (first at rows[0])"),
    ('{"format": "ttt-policy-table/1", "rows": [{"board": ".........", "probs": [1, 0]}]}', "rows[0]",
     "expected 9 probabilities, got 2"),
    ('{"format": "ttt-policy-table/1", "rows": [{"board": ".........", "probs": [true,0,0,0,0,0,0,0,0]}]}',
     "rows[0]", "probability 'True' is not a number"),
    ('{"format": "ttt-policy-table/1", "rows": [{"board": ".........", "move": 4, "probs": []}]}', "rows[0]",
     'expected {"board": "...", "move": cell} or'),
    ('{"format": "ttt-policy-table/1", "rows": [{"board": ".........", "move": true}]}', "rows[0]",
     "move 'True' is not an integer cell 0-8"),
    ('{"format": "other", "rows": []}', None, 'not a policy table: expected a JSON object with "format"'),
    # Once tracebacks (issue 42 item 10): int() of '²' (a digit to str.isdigit), '+-3', '--4'
    # (signs that lstrip passed) or 5,000 digits; float() of a 400-digit JSON integer; json's
    # recursion through 100,000 brackets; a JSON integer of over 4,300 digits.
    ("board,move\n.........,\u00b2\n", "line 2", "move '\u00b2' is not an integer cell 0-8"),
    ("board,move\n.........,+-3\n", "line 2", "move '+-3' is not an integer cell 0-8"),
    ("board,move\n.........,--4\n", "line 2", "move '--4' is not an integer cell 0-8"),
    pytest.param("board,move\n.........," + "1" * 5000 + "\n", "line 2",
                 "move 11111111111111111111... (5,000 digits) is outside 0-8", id="csv-move-5000-digits"),
    pytest.param(ROW + '"probs": [' + "9" * 400 + ",0,0,0,0,0,0,0,0]}]}", "rows[0]",
                 "probability 99999999999999999999... is not finite (an integer of 400 digits)",
                 id="json-prob-400-digits"),
    pytest.param(ROW + '"move": ' + "1" * 4000 + "}]}", "rows[0]",
                 "move 11111111111111111111... (4,000 digits) is outside 0-8", id="json-move-4000-digits"),
    pytest.param(ROW + '"move": ' + "1" * 5000 + "}]}", None,
                 "not valid JSON (exceeds the limit (4300 digits)", id="json-move-5000-digits"),
    pytest.param('{"rows": ' + "[" * 100_000 + "]" * 100_000 + "}", None, "not valid JSON (nested too deep)",
                 id="json-nested-100000"),
    ('{"format": "ttt-policy-table/1",\n "rows": [}', "line 2", "not valid JSON"),
]


@pytest.mark.parametrize("text,where,needle", BAD_ROWS)
def test_every_malformed_table_is_refused_in_one_line_naming_file_line_and_problem(tmp_path, text, where,
                                                                                   needle):
    path = write(tmp_path, "bad.json" if text.startswith("{") else "bad.csv", text)
    with pytest.raises(pt.PolicyTableError) as e:
        pt.read_table(path, fill="uniform")
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{path}: " + (f"{where}: " if where else ""))
    assert needle in message, message


def test_a_complete_table_with_one_impossible_board_more_is_refused(tmp_path):
    # Once "4,521 legal (100.02% of positions)": the extra row landed on another position.
    text = pt.table_text(torch.nn.functional.one_hot(LEGAL.to(torch.int8).argmax(-1), 9).double(), ".csv")
    path = write(tmp_path, "t.csv", text + "ooo...xxx,0\n")
    with pytest.raises(pt.PolicyTableError, match="line 4523: board ooo...xxx is impossible: both x and o"):
        pt.read_table(path)


@pytest.mark.parametrize("move,cell", [("0" * 5000 + "4", 4), ("+4", 4), ("-0", 0), (" 007 ", 7)])
def test_a_csv_move_may_have_a_sign_and_leading_zeros(tmp_path, move, cell):
    probs, _ = pt.read_table(write(tmp_path, "m.csv", f"board,move\n.........,{move}\n"), fill="first")
    assert int(probs[0].argmax()) == cell and float(probs[0].max()) == 1.0


def test_a_missing_file_and_bytes_that_are_not_utf8_are_refused(tmp_path):
    with pytest.raises(pt.PolicyTableError, match="no such file"):
        pt.read_table(tmp_path / "none.csv")
    path = tmp_path / "latin.csv"
    path.write_bytes(b"board,move\n\xe9........,4\n")
    with pytest.raises(pt.PolicyTableError, match=r"latin.csv: not UTF-8 text \(byte 11 is 0xe9\)"):
        pt.read_table(path)


def test_a_table_larger_than_the_cap_is_refused_before_it_is_parsed(tmp_path):
    # Issue 42 item 9: a 218 MB table once took 39 s and 7.4 GB before its one-line error.
    limit = 8 * 2**20
    path = write(tmp_path, "big.csv", "board,move\n# " + "x" * limit + "\n.........,4\n")
    with pytest.raises(pt.PolicyTableError) as e:
        pt.read_table(path, fill="uniform")
    assert str(e.value) == f"{path}: larger than 8 MiB"
    path.write_text("board,move\n# " + "x" * (limit - 40) + "\n.........,4\n")  # just under: read
    assert pt.read_table(path, fill="uniform")[1]["rows"] == 1


def test_probabilities_within_the_tolerance_are_renormalised(tmp_path):
    path = write(tmp_path, "p.csv", P + ".........,0.5000004,0,0,0,0.5,0,0,0,0\n")
    probs, _ = pt.read_table(path, fill="first")
    assert probs[0].sum().item() == pytest.approx(1.0, abs=1e-15)
    assert probs[0, 0].item() == pytest.approx(0.5000004 / 1.0000004, abs=1e-15)


# --------------------------------------------------------------------------- missing and illegal


def test_missing_positions_are_refused_naming_how_many_and_the_first(tmp_path):
    path = write(tmp_path, "one.csv", GOOD)
    with pytest.raises(pt.PolicyTableError) as e:
        pt.read_table(path)
    assert str(e.value) == (f"{path}: 4,519 of 4,520 positions have no row, the first x........; "
                            "--fill uniform or --fill first fills them")


@pytest.mark.parametrize("fill", ["uniform", "first"])
def test_fill_rules_fill_the_missing_positions_and_say_how_many(tmp_path, fill):
    probs, info = pt.read_table(write(tmp_path, "one.csv", GOOD), fill=fill)
    expected = exploit.logits_to_probs(torch.zeros(CODES.numel(), 9), temperature=1.0) if fill == "uniform" \
        else exploit.actions_to_probs(first_legal())
    expected[0] = torch.nn.functional.one_hot(torch.tensor(4), 9).double()  # the given row
    assert torch.equal(probs, expected)
    assert info == {"rows": 1, "positions": 4520, "moves": 1, "distributions": 0, "illegal": 0,
                    "missing": 4519, "filled": 4519, "fill": fill, "legal_answers": 1,
                    "optimal_move_rate": 1.0}


def test_illegal_answers_are_filled_only_when_asked_and_counted(tmp_path):
    # x........ answered 0 (taken): illegal; .x....... answered 4: legal and optimal;
    # ....x.... answered 1 (a side): legal, but O loses with it.
    answers = {".........": 0, "x........": 0, ".x.......": 4, "....x....": 1}
    path = write(tmp_path, "llm.csv", move_table(answers))
    with pytest.raises(pt.PolicyTableError, match="line 3: move 0 is on an occupied cell"):
        pt.read_table(path, fill="first")
    probs, info = pt.read_table(path, fill="first", illegal="fill")
    actions = first_legal().clone()  # missing and illegal: the first empty cell (x........: 1)
    for board, move in ((".........", 0), (".x.......", 4), ("....x....", 1)):
        actions[pt.board_code(board)] = move
    assert torch.equal(probs, exploit.actions_to_probs(actions))
    assert (info["illegal"], info["missing"], info["filled"], info["legal_answers"]) == (1, 4516, 4517, 3)
    assert info["optimal_move_rate"] == pytest.approx(2 / 3)  # the side reply to a centre opening loses


# --------------------------------------------------------------------------- the example


def test_the_rules_bot_example_is_the_rule_based_player_and_scores_what_the_solver_says():
    probs, info = pt.read_table(EXAMPLE)
    assert torch.equal(probs, rules()) and info["distributions"] == 4520
    report = exploit.policy_report(probs)
    # Recomputed apart from exploit.py: the solver's best response to the full rules table,
    # and the plain outcome sums against the random and the perfect player.
    full = rules_probs()
    for side, seat in (("x", game.X), ("o", game.O)):
        mine = report[f"as_{side}"]
        _, value = best_response(full, -seat, (1.0, 0.0, -1.0))  # the opponent's best, from its side
        assert mine["best_response"] == pytest.approx(float(value[game.EMPTY_CODE]), abs=1e-12)
        x, o, tie = (outcome_probs(full, random_probs()) if seat == game.X
                     else outcome_probs(random_probs(), full))[game.EMPTY_CODE].tolist()
        win, loss = (x, o) if seat == game.X else (o, x)
        assert mine["vs_random"] == pytest.approx({"win": win, "loss": loss, "tie": tie}, abs=1e-11)
        assert mine["vs_perfect"] == pytest.approx(rules_record()[f"as_{side}"], abs=1e-11)
    assert report["nashconv"] == report["as_x"]["best_response"] + report["as_o"]["best_response"]
    # It never loses as X; as O a best response wins for sure (a corner reply to the fork).
    assert (report["as_x"]["best_response"], report["as_o"]["best_response"]) == (0.0, 1.0)


def test_boards_lists_every_position_once_in_table_order():
    listed = pt.boards()
    assert len(listed) == len(set(listed)) == 4520 and listed[:2] == [".........", "x........"]
    assert [pt.board_code(b) for b in listed] == CODES.tolist()


def test_the_json_schema_accepts_what_the_writer_writes_and_rejects_a_malformed_row(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "docs" / "policy-table.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for probs in (rules(), exploit.actions_to_probs(first_legal())):  # nine probabilities; moves
        pt.write_table(tmp_path / "t.json", probs)
        doc = json.loads((tmp_path / "t.json").read_text())
        jsonschema.validate(doc | {"rows": doc["rows"][::40]}, schema)  # every 40th row: the check is slow
    empty = "........."
    for row in ({"board": "x..", "move": 4}, {"board": empty, "move": 9}, {"board": empty, "probs": [1]},
                {"board": empty, "move": 4, "probs": [1] + [0] * 8}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"format": pt.FORMAT, "rows": [row]}, schema)
