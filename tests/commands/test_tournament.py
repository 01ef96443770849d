"""``python -m ttt_research.tournament``: participants of every kind, the files it writes (whose
numbers must be ``cross_play``'s), and one-line refusals with exit code 2. In-process ``main``."""

from __future__ import annotations

import csv
import json

import onnx
import pytest
import torch

from tests.helpers.onnx_models import preference_model
from ttt_research.env import game, opponents, solver
from ttt_research.evaluation.crossplay import cross_play
from ttt_research.evaluation.exact import decision_codes
from ttt_research.tournament import main

CODES = decision_codes()
BUILTINS = ["random", "rules", "perfect"]
CENTRE_FIRST = [5, 1, 5, 1, 9, 1, 5, 1, 5]  # centre, then corners, then sides
LAST_CELL_FIRST = list(range(9))  # cell 9 (index 8) most preferred


def builtin_probs() -> torch.Tensor:
    return torch.stack([solver.random_probs()[CODES], opponents.rules_probs()[CODES],
                        solver.perfect_probs()[CODES]])


def greedy(preference) -> torch.Tensor:
    """(M, 9) one-hot: the most preferred empty cell (ties to the lowest)."""
    legal = game.tables().legal[CODES]
    pref = torch.tensor(preference, dtype=torch.float64).expand(CODES.numel(), 9)
    return torch.nn.functional.one_hot(torch.where(legal, pref, -torch.inf).argmax(-1), 9).double()


def with_acting(path, acting: dict | None):
    """Add an ``acting`` metadata entry to an ONNX file (as ``export`` writes it)."""
    model = onnx.load(str(path))
    if acting is not None:
        prop = model.metadata_props.add()
        prop.key, prop.value = "acting", json.dumps(acting)
    onnx.save(model, str(path))
    return path


def test_builtins_files_hold_cross_plays_numbers(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*BUILTINS, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0].startswith("who can be beaten") and lines[5] == ""  # first: who can be beaten
    assert [line.split()[1] for line in lines[7:10]] == ["perfect", "rules", "random"]  # sorted
    assert "X (row) vs O (column)" in printed and "exact cross-play" in printed  # matrix, seconds
    expected = cross_play(builtin_probs())
    with open(out / "crossplay.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 9
    for row in rows:
        i, j = BUILTINS.index(row["x"]), BUILTINS.index(row["o"])
        got = [float(row[k]) for k in ("p_x_win", "p_o_win", "p_tie")]
        assert got == expected[i, j].tolist()  # repr floats: equal, not close
        assert float(row["score"]) == float(expected[i, j, 0] - expected[i, j, 1])
    with open(out / "ratings.csv") as f:
        ratings = list(csv.DictReader(f))
    assert [r["player"] for r in ratings] == ["perfect", "rules", "random"]
    assert float(ratings[2]["elo"]) == 0.0 and float(ratings[0]["elo"]) > float(ratings[1]["elo"]) > 0
    md = (out / "crossplay.md").read_text()
    # random vs random as X: 737/1260 - 121/420 (docs/facts.md) = 0.2968
    assert "| random | +0.2968 | -0.8474 | -0.7775 |" in md and "Davidson" in md
    assert "## Standings" in md and md.index("| 1 | perfect |", md.index("## Standings")) > 0
    assert (out / "crossplay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_json_gives_the_exact_table(capsys):
    assert main([*BUILTINS, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert torch.tensor(res["results"], dtype=torch.float64).equal(cross_play(builtin_probs()))
    assert res["anchor"] == "random" and res["ratings"]["random"] == 0.0
    assert list(res["ratings"]) == ["perfect", "rules", "random"]
    assert set(res["seconds"]) == {"cross_play", "best_response", "ratings"}
    table = res["standings"]
    assert table["perfect"]["lost"] == 0.0 and table["random"]["won"] == pytest.approx(0.0053, abs=1e-4)
    assert sum(row["points"] for row in table.values()) == pytest.approx(6.0)  # 6 games, a point each


WEAK = [5, 6, 7, 0, 3, 4, 2, 8, 1]  # a greedy agent that rules beats from both seats, perfect less often


def unbeatable_greedy() -> torch.Tensor:
    """(M, 9) one-hot: the lowest minimax-optimal cell everywhere (never loses)."""
    return torch.nn.functional.one_hot(solver.solve().optimal[CODES].double().argmax(-1), 9).double()


def issue_58_players(tmp_path) -> list[str]:
    """Issue 58 item 14's tournament: the built-ins, an unbeatable greedy agent (the lowest
    minimax-optimal cell, as a policy table) and a weak greedy network."""
    from ttt_research.evaluation.policy_table import write_table

    write_table(tmp_path / "unbeatable.csv", unbeatable_greedy())
    preference_model(WEAK, tmp_path / "weak.onnx")
    return [*BUILTINS, str(tmp_path / "unbeatable.csv"), str(tmp_path / "weak.onnx")]


def test_who_can_be_beaten_leads_and_a_poor_fit_is_said(tmp_path, capsys):
    # Issue 58 item 14: rules was rated above perfect and the unbeatable agent, with nothing to
    # say that the ratings fit badly or that rules, unlike them, can be beaten.
    players = issue_58_players(tmp_path)
    assert main(players) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("who can be beaten: each player against its own exact best response")
    table = {line.split()[0]: line.split(None, 3)[1:] for line in lines[2:7]}
    assert table["perfect"] == ["0.0000", "0.0000", "unbeatable"]
    assert table[players[3]] == ["0.0000", "0.0000", "unbeatable"]
    assert table["rules"] == ["0.0000", "1.0000", "can be beaten (loses 100.0% as O)"]
    assert table[players[4]][2] == "can be beaten (loses 100.0% as X, loses 100.0% as O)"
    assert [line.split()[0] for line in lines[2:4]] == ["perfect", players[3]]  # the unbeatable lead
    ratings = next(k for k, line in enumerate(lines) if line.startswith("rank  player"))
    assert ratings > 7 and lines[ratings + 1].split()[1] == "rules"  # the ratings still put rules first
    warning = lines[ratings + 8]
    assert warning.startswith("warning: poor fit, read who can be beaten and the matrix, not the ratings: "
                              "a pair missed by 0.55") and "rules above perfect (+0.071)" in warning


def test_the_best_response_participant_meets_each_with_its_best_response(tmp_path, capsys):
    from ttt_research.evaluation.exploit import best_response_outcomes

    players = issue_58_players(tmp_path)
    out = tmp_path / "out"
    assert main([*players, "best-response", "--json", "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["participants"][5] == {"name": "best-response",
                                      "plays": "built-in: each opponent's exact best response"}
    results = torch.tensor(res["results"], dtype=torch.float64)  # (6, 6, 3)
    probs = torch.cat([builtin_probs(), unbeatable_greedy()[None], greedy(WEAK)[None]])
    against = best_response_outcomes(probs)
    assert results[:5, :5].equal(cross_play(probs))
    assert results[5, :5].equal(against[:, 1]) and results[:5, 5].equal(against[:, 0])
    assert list(res["ratings"])[:2] == ["best-response", "perfect"]  # with it playing, rules falls
    cases = res["worst_case"]
    assert list(cases) == [p["name"] for p in res["participants"][:5]]  # not the responder itself
    assert [cases[n]["unbeatable"] for n in cases] == [False, False, True, True, False]
    assert cases["rules"]["as_o"] == {"best_response": 1.0, "win": 0.0, "loss": 1.0, "tie": 0.0}
    model = res["model"]
    assert model["fit_warn_max_abs"] == 0.1 and model["fit_warning"].startswith("warning: poor fit")
    with open(out / "worst_case.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["player"] for r in rows] == list(cases)
    assert [float(r["o_best_response"]) for r in rows] == [cases[n]["as_o"]["best_response"] for n in cases]
    with open(out / "ratings.csv") as f:
        assert f.readline() == "rank,player,elo,bounded_only_by_prior\n"  # unchanged
    md = (out / "crossplay.md").read_text()
    assert md.index("## Who can be beaten") < md.index("## Expected results") < md.index("## Ratings")
    assert "| rules | 0.0000 | 1.0000 | 1.0000 | can be beaten (loses 100.0% as O) |" in md


def test_run_population_and_onnx_participants(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    preference_model(CENTRE_FIRST, run / "policy.onnx")
    pop = tmp_path / "pop"
    for k, pref in enumerate([CENTRE_FIRST, LAST_CELL_FIRST]):
        (pop / "members" / f"{k:03d}").mkdir(parents=True)
        preference_model(pref, pop / "members" / f"{k:03d}" / "policy.onnx")
    (pop / "members" / "002").mkdir()  # a member folder without a policy is not a participant
    preference_model(CENTRE_FIRST, pop / "policy.onnx")  # the best member's, again: not played twice
    single = preference_model(LAST_CELL_FIRST, tmp_path / "last.onnx")
    assert main([str(run), str(pop), str(single), "random", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    names = [p["name"] for p in res["participants"]]
    assert names == [str(run), f"{pop}/000", f"{pop}/001", str(single), "random"]
    probs = torch.stack([greedy(CENTRE_FIRST), greedy(CENTRE_FIRST), greedy(LAST_CELL_FIRST),
                         greedy(LAST_CELL_FIRST), solver.random_probs()[CODES]])
    assert torch.tensor(res["results"], dtype=torch.float64).equal(cross_play(probs))
    assert res["participants"][0]["plays"] == "greedy (argmax)"


def test_as_trained_reads_the_acting_metadata(tmp_path, capsys):
    soft = with_acting(preference_model(CENTRE_FIRST, tmp_path / "soft.onnx"),
                       {"temperature": 2.0, "epsilon": 0.1})
    plain = preference_model(LAST_CELL_FIRST, tmp_path / "plain.onnx")
    assert main([str(soft), str(plain), "--as-trained"]) == 0
    printed = capsys.readouterr().out
    assert f"note: {plain}: no 'acting' metadata in plain.onnx; played greedy" in printed
    assert main([str(soft), str(plain), "--as-trained", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["participants"][0]["plays"] == "softmax at temperature 2, epsilon 0.1 uniform"
    assert "note" not in res["participants"][0] and "played greedy" in res["participants"][1]["note"]
    legal = game.tables().legal[CODES]
    logits = torch.where(legal, torch.tensor(CENTRE_FIRST, dtype=torch.float64), -torch.inf)
    uniform = legal.double() / legal.sum(-1, keepdim=True)
    soft_probs = 0.9 * torch.softmax(logits / 2.0, -1) + 0.1 * uniform
    expected = cross_play(torch.stack([soft_probs, greedy(LAST_CELL_FIRST)]))
    assert torch.allclose(torch.tensor(res["results"], dtype=torch.float64), expected, rtol=0, atol=1e-7)
    # Without --as-trained the same file plays greedy.
    assert main([str(soft), str(plain), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["participants"][0]["plays"] == "greedy (argmax)"


def test_checkpoint_participant_plays_its_networks_greedy_move(tmp_path, capsys):
    from ttt_research.evaluation.exploit import logits_to_probs
    from ttt_research.models.nets import MLP

    torch.manual_seed(0)
    net = MLP([8], "planes18").eval()
    path = tmp_path / "last.ckpt"  # what the policy loader reads of a training checkpoint
    torch.save({"net_spec": net.spec(), "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()},
                "algo": "reinforce", "games_played": 7, "hyper_parameters": {"seed": 3}}, path)
    assert main([str(path), "perfect", "--as-trained", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    with torch.no_grad():
        mine = logits_to_probs(net(game.tables().view[CODES].float()))
    expected = cross_play(torch.stack([mine, solver.perfect_probs()[CODES]]))
    assert torch.tensor(res["results"], dtype=torch.float64).equal(expected)
    assert res["participants"][0]["plays"] == "greedy (argmax)"  # no acting metadata in a .ckpt


def test_policy_table_participant(tmp_path, capsys):
    table = pytest.importorskip("ttt_research.evaluation.policy_table")
    path = tmp_path / "t.json"
    if not hasattr(table, "write_table"):
        pytest.skip("no writer in policy_table to make a table file with")
    table.write_table(path, greedy(CENTRE_FIRST))
    assert main([str(path), "random", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    expected = cross_play(torch.stack([greedy(CENTRE_FIRST), solver.random_probs()[CODES]]))
    assert torch.allclose(torch.tensor(res["results"], dtype=torch.float64), expected, atol=1e-12)
    short = tmp_path / "short.csv"  # one position answered of 4,520: refused, not filled in
    short.write_text("board,move\n.........,4\n")
    assert main([str(short), "random"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(short) in err, err
    assert main([str(short), "random", "--fill", "first"]) == 0
    assert f"note: {short}: 4,519 position(s) filled, first (--fill)" in capsys.readouterr().out


@pytest.mark.parametrize("args, says", [
    (["random", "/no/such/policy.onnx"], "/no/such/policy.onnx: no such file or folder"),
    (["random", "rnadom"],
     "rnadom: no such file or folder; built-in players: random, perfect, rules, best-response"),
    (["random"], "a tournament needs at least 2 participants, got 1"),
    (["random", "perfect", "random"], "random: named twice"),
])
def test_bad_input_is_one_line_and_exit_2(args, says, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and says in err, err


@pytest.mark.parametrize("name,text,says", [
    ("deep.json", "[" * 100_000 + "]" * 100_000, "not valid JSON (nested too deep)"),
    ("big.json", '{"format": "ttt-policy-table/1", "rows": [{"board": ".........", "probs": ['
     + "9" * 400 + ",0,0,0,0,0,0,0,0]}]}", "rows[0]: probability 99999999999999999999... is not finite"),
    ("sup.csv", "board,move\n.........,\u00b2\n", "line 2: move '\u00b2' is not an integer cell 0-8"),
], ids=["nested-100000", "probability-400-digits", "move-superscript-two"])
def test_a_hostile_table_is_one_line_not_a_traceback(tmp_path, capsys, name, text, says):
    # Issue 42 item 10: RecursionError, OverflowError and ValueError once escaped as tracebacks.
    path = tmp_path / name
    path.write_text(text)
    assert main([str(path), "random", "--fill", "uniform"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}: {says}"), err


def test_folder_without_a_policy_and_foreign_files_are_refused(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["random", str(empty)]) == 2
    assert "no policy.onnx (not a run folder)" in capsys.readouterr().err
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    assert main(["random", str(bad)]) == 2
    assert "not a policy" in capsys.readouterr().err
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not onnx")
    assert main(["random", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a valid ONNX model" in err
    (tmp_path / "run").mkdir()  # the same file twice by two names is two participants: allowed
    preference_model(CENTRE_FIRST, tmp_path / "run" / "policy.onnx")
    assert main([str(tmp_path / "run"), str(tmp_path / "run") + "/", "--json"]) == 2  # same name
    assert "named twice" in capsys.readouterr().err


def test_a_population_with_its_best_member_only_says_how_to_enter_every_member(tmp_path, capsys):
    """``population.export=best`` (the default) writes one member's policy: a tournament of that
    folder alone has one participant, and the refusal says which setting exports them all."""
    pop = tmp_path / "pop"
    (pop / "members" / "001").mkdir(parents=True)
    preference_model(CENTRE_FIRST, pop / "members" / "001" / "policy.onnx")
    preference_model(CENTRE_FIRST, pop / "policy.onnx")
    (pop / "population.json").write_text(json.dumps({"members": [{}, {}, {}, {}], "aggregate": {}}))
    assert main([str(pop)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: a tournament needs at least 2 participants, got 1 ({pop} exported 1 of its 4 "
                   "members' policies: train it with population.export=all to enter every member)\n")
