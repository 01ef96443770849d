"""Exactness at the edges: a policy without a legal greedy move somewhere (NaN or all -inf
logits, logits that prefer an occupied cell) is refused by ``evaluate``, ``export`` and
``play`` with one line naming the board, never scored; a checkpoint's ``net_spec`` is
checked before its network is built; ``export`` agrees with its help, writes atomically and
stores the exact evaluation; "play again?" takes only its answers; the final table says
whether the agent is unbeatable.

Boards in messages are written row by row, rows split by '/', e.g. ``X../.../...`` is
    X . .
    . . .
    . . .
"""

import json
import math
import subprocess
import sys

import onnx
import pytest
import torch

from tests.helpers.onnx_models import preference_model
from ttt_research import evaluate as evaluate_cli
from ttt_research.contract import NASHCONV, greedy_nashconv, unbeatable
from ttt_research.env import game
from ttt_research.env.board import Game
from ttt_research.env.solver import solve
from ttt_research.evaluation import exact as ev
from ttt_research.evaluation import text
from ttt_research.evaluation.onnx import ExportError, export
from ttt_research.evaluation.policy_file import PolicyFileError, load_checkpoint, load_policy
from ttt_research.export import main as export_main
from ttt_research.models import nets
from ttt_research.play import decide, play_session

INF = math.inf
HIGHEST_FIRST = list(range(9))  # the agent plays the highest-numbered empty cell
MLP = nets.MLP  # the real class, for tests that watch nets.MLP being built


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def fake_checkpoint(path, net: nets.MLP, spec=None, state=None):
    """A checkpoint as training writes it, as far as the policy loader reads one."""
    torch.save({"net_spec": spec if spec is not None else net.spec(),
                "state_dict": state if state is not None else
                {f"net.{k}": v for k, v in net.state_dict().items()},
                "algo": "reinforce", "games_played": 7, "hyper_parameters": {"seed": 3}}, path)
    return path


def below_the_mask(hidden=(4,)) -> nets.MLP:
    """Finite weights whose logits on empty cells are -1e10, below the net's -1e9 mask:
    the masked output's argmax is then an occupied cell wherever one exists."""
    net = nets.MLP(list(hidden), "signed9")
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.body[-1].bias.fill_(-1e10)
    return net


# --------------------------------------------------------------------------- evaluate


def test_evaluate_refuses_all_minus_inf_logits_instead_of_scoring_them(tmp_path, capsys):
    # Before: win/loss/tie 0 from both seats, "worst case draw", exit 0.
    model = preference_model([-INF] * 9, tmp_path / "inf.onnx")
    assert evaluate_cli.main([str(model)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert one_error_line(err) == (
        f"error: {model}: the policy has no legal greedy move at 4520 of 4520 positions where "
        "it moves, first at .../.../... (X to move): every empty cell's logit is -inf "
        "(1 2 3 4 5 6 7 8 9): it prefers none of them; refused, not scored")


HUGE = [3e38 - k * 1e37 for k in range(9)]  # finite float32 logits, near its largest


@pytest.mark.parametrize("command", ["evaluate", "export-table", "tournament-as-trained"])
def test_a_temperature_that_overflows_is_refused_not_scored_as_nan(tmp_path, capsys, command):
    # Issue 42 item 8: 3e38 / 1e-300 leaves float64, the softmax is NaN; before: "NashConv nan",
    # NaN rows in a written table, exit 0.
    from ttt_research import tournament

    model = preference_model(HUGE, tmp_path / "huge.onnx", occupied=-3.3e38)
    if command == "tournament-as-trained":  # the temperature from the file's acting metadata
        m = onnx.load(str(model))
        onnx.helper.set_model_props(m, {"acting": json.dumps({"temperature": 1e-300, "epsilon": 0})})
        onnx.save(m, str(model))
    table = tmp_path / "t.csv"
    main, argv = {"evaluate": (evaluate_cli.main, [model, "--temperature", "1e-300"]),
                  "export-table": (export_main, [model, "--table", table, "--temperature", "1e-300"]),
                  "tournament-as-trained": (tournament.main, [model, "random", "--as-trained"])}[command]
    assert main([str(a) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and not table.exists()
    assert one_error_line(err) == (
        f"error: {model}: temperature 1e-300 overflows: the logits (largest 3e+38) divided by it leave "
        "float64's range, so the policy would be NaN; use a temperature above 1.67e-270, or 0 for greedy")
    assert evaluate_cli.main([str(model), "--temperature", "1e-269"]) == 0  # just above: scored
    assert "nan" not in capsys.readouterr().out


def test_evaluate_prints_no_nan_figure(tmp_path, capsys, monkeypatch):
    # The last guard of item 8: whatever made a figure NaN, it is refused, never printed.
    model = preference_model(HIGHEST_FIRST, tmp_path / "h.onnx")
    from ttt_research.evaluation import exploit  # evaluate imports it once the options passed

    real = exploit.policy_report
    monkeypatch.setattr(exploit, "policy_report", lambda probs: {**real(probs), "nashconv": math.nan})
    assert evaluate_cli.main([str(model), "--temperature", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and one_error_line(err) == (
        f"error: {model}: the figure policy.nashconv is nan, not a number; nothing is printed")


def test_evaluate_refuses_nan_logits_and_names_the_board(tmp_path, capsys):
    # NaN on cell 5's logit only: a NaN anywhere has no argmax, taken cell or not. Before:
    # "the model returns NaN logits", with no board.
    model = preference_model([0, 0, 0, 0, math.nan, 0, 0, 0, 0], tmp_path / "nan.onnx")
    assert evaluate_cli.main([str(model), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and one_error_line(err).endswith(
        "no legal greedy move at 4520 of 4520 positions where it moves, first at .../.../... "
        "(X to move): its logits are NaN at cell(s) 5; refused, not scored")


def test_a_model_that_prefers_an_occupied_cell_is_refused(tmp_path, capsys):
    # logits = cell + 1e9 on taken cells: its argmax is a taken cell as soon as one exists.
    # The first such position in code order: X in cell 1, O to move.
    model = preference_model(HIGHEST_FIRST, tmp_path / "taken.onnx", occupied=1e9)
    assert evaluate_cli.main([str(model)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert ("first at X../.../... (O to move): it picks the occupied cell 1 (logit 1e+09; "
            "the best empty cell, 9, has 8)") in line
    assert "at 4519 of 4520 positions" in line  # every position but the empty board


def test_the_evaluator_refuses_a_policy_function_with_nothing_to_choose():
    # The evaluator masks taken cells itself; -inf on every empty cell leaves nothing.
    def broken(view):  # -inf on the empty cells of boards with a piece in the centre
        logits = torch.zeros(view.shape)
        logits[(view[:, 4] != 0)] = -INF
        return logits

    with pytest.raises(ev.IllegalMoveError, match=r"first at \.\.\./\.X\./\.\.\. \(O to move\): every "
                                                 r"empty cell's logit is -inf \(1 2 3 4 6 7 8 9\)"):
        ev.evaluate_policy(broken)
    # Unmasked logits that prefer a taken cell are still the evaluator's to mask (PPO without
    # masking counts them with greedy_actions): scored as the masked argmax.
    pref = torch.tensor([2.0, 1, 2, 1, 9, 1, 2, 1, 2])
    actions = torch.where(game.tables().legal, pref, -INF).argmax(-1)
    assert ev.evaluate_policy(lambda v: pref.expand(v.shape[0], 9)) == ev.evaluate_actions(actions)


def test_a_population_member_without_a_legal_move_is_named():
    logits = torch.zeros(3, ev.decision_codes().numel(), 9)
    logits[2, 7] = torch.tensor([-INF] * 8 + [INF])  # member 2, 8th decision position: +inf
    with pytest.raises(ev.IllegalMoveError, match=r"^member 2: the policy has no legal greedy move at 1 "
                                                 r"of 4520 positions .*its largest logit is inf \(cell "):
        ev.evaluate_stack(logits)


# --------------------------------------------------------------------------- play


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_play_refuses_all_minus_inf_logits_in_one_line_instead_of_looping(tmp_path):
    # Before: "agent (X) plays 1" printed forever (the occupied cell 1 leaves the board as it is).
    model = preference_model([-INF] * 9, tmp_path / "inf.onnx")
    out = subprocess.run([sys.executable, "-m", "ttt_research.play", str(model), "--seat", "o"],
                         input="5\n" * 5, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert "no legal greedy move at 4520 of 4520 positions" in one_error_line(out.stderr)


def test_decide_refuses_a_move_on_a_taken_cell():
    code = int(game.encode(torch.tensor([[1, -1, 0, 0, 0, 0, 0, 0, 0]]))[0])  # XO./.../..., X to move
    with pytest.raises(ev.IllegalMoveError, match=r"at 1 of 1 positions where it moves, first at XO\./\.\.\./"
                                                 r"\.\.\. \(X to move\): it picks the occupied cell 2"):
        decide(lambda v: torch.tensor([[0.0, 5, 1, 0, 0, 0, 0, 0, 0]]), code)


def _read(answers):
    feed = iter(answers)

    def read(prompt):
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return read


def test_play_again_takes_only_its_answers():
    # The person (X) wins the top row: 1, 2, 3 (the agent plays 9 and 8). Then "9" at "play
    # again?" is not a yes (before: a new game started): it asks again, and "no" stops.
    policy = policy_file_free_highest()
    said = []
    tally = play_session(policy, game.X, _read(["1", "2", "3", "9", "maybe", "no", "5"]), said.append)
    assert tally == {"win": 1, "loss": 0, "draw": 0}
    assert sum("You are" in s for s in said) == 1
    assert "'9' is not an answer: type y (or Enter) to play again, s to switch sides, n to stop" in said
    assert "'maybe' is not an answer: type y (or Enter) to play again, s to switch sides, n to stop" in said


def test_end_of_input_at_play_again_ends_the_session():
    said = []
    tally = play_session(policy_file_free_highest(), game.X, _read(["1", "2", "3"]), said.append)
    assert tally == {"win": 1, "loss": 0, "draw": 0} and said[-1] == ""


def policy_file_free_highest():
    """The highest-empty-cell policy as masked logits (no ONNX file)."""
    def policy(view):
        return torch.arange(9.0).expand(view.shape[0], 9).masked_fill(view != 0, nets.MASKED)

    return policy


# --------------------------------------------------------------------------- checkpoints


@pytest.fixture
def no_network_built(monkeypatch):
    """nets.MLP that records being built: a refused spec must be refused before it."""
    built = []
    real = nets.MLP

    def spy(hidden=(100,), *args, **kwargs):
        built.append(hidden)
        if any(float(h) > 1e6 for h in hidden):  # never allocate it, even on code that would
            raise MemoryError(f"the test refused to build hidden={hidden}")
        return real(hidden, *args, **kwargs)

    monkeypatch.setattr(nets, "MLP", spy)
    return built


@pytest.mark.parametrize("spec,needle", [
    ({"hidden": [200_000_000], "encoding": "planes18"}, "net_spec hidden is [200000000]; expected 1 to 16 "
                                                        "layer sizes, each an integer from 1 to 16,384"),
    ({"hidden": [2e8], "encoding": "planes18"}, "net_spec hidden is [200000000.0]"),
    ({"hidden": [8] * 17, "encoding": "planes18"}, "expected 1 to 16 layer sizes"),
    ({"hidden": [], "encoding": "planes18"}, "net_spec hidden is []"),
    ({"hidden": [4], "encoding": "bogus"}, "net_spec encoding is 'bogus'; expected one of planes18, signed9"),
    ({"hidden": [25], "encoding": "planes18"},
     "do not fit its network (body.0.weight is [4, 18], net_spec says [25, 18])"),
])
def test_a_checkpoint_spec_is_checked_before_its_network_is_built(tmp_path, no_network_built, spec, needle):
    # Tensors of a [4] network under a spec that asks for something else. Before: MLP(...)
    # was built first (hidden=[2e8]: 14 GB allocated before the shapes were compared).
    path = fake_checkpoint(tmp_path / "odd.ckpt", MLP([4], "planes18"), spec=spec)
    with pytest.raises(PolicyFileError) as e:
        load_checkpoint(path)
    assert needle in str(e.value) and str(e.value).startswith(f"{path}: ")
    assert no_network_built == []


def test_a_checkpoint_missing_a_layer_is_refused_before_building(tmp_path, no_network_built):
    net = MLP([4, 4], "signed9")
    state = {f"net.{k}": v for k, v in net.state_dict().items() if not k.startswith("body.4")}
    with pytest.raises(PolicyFileError, match=r"do not fit its network \(net_spec; missing or unexpected: "
                                              r"body\.4\.bias, body\.4\.weight\)"):
        load_checkpoint(fake_checkpoint(tmp_path / "short.ckpt", net, state=state))
    assert no_network_built == []


def test_a_checkpoint_whose_logits_fall_below_the_mask_is_refused(tmp_path, capsys):
    path = fake_checkpoint(tmp_path / "low.ckpt", below_the_mask())
    with pytest.raises(PolicyFileError, match=r"first at X\.\./\.\.\./\.\.\. \(O to move\): it picks the "
                                              r"occupied cell 1 \(logit -1e\+09; the best empty cell, 2"):
        load_policy(path)
    assert evaluate_cli.main([str(path)]) == 2 and "refused, not scored" in capsys.readouterr().err


# --------------------------------------------------------------------------- export


@pytest.fixture
def good_checkpoint(tmp_path):
    torch.manual_seed(0)
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    return fake_checkpoint(folder / "last.ckpt", nets.MLP([16], "planes18"))


def test_export_writes_where_its_help_says_with_the_eval_metadata(good_checkpoint, capsys):
    with pytest.raises(SystemExit):
        export_main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "default: the checkpoint's path with .onnx, e.g. checkpoints/last.onnx" in help_text
    assert export_main([str(good_checkpoint)]) == 0
    out = good_checkpoint.with_suffix(".onnx")
    printed = capsys.readouterr().out
    assert printed.startswith(f"wrote {out}: parity on 4520 positions")
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    policy, _ = load_policy(out)
    report = ev.evaluate_policy(policy)
    # Before: no "eval" property, unlike a run's policy.onnx.
    assert json.loads(meta["eval"]) == report
    assert meta["seed"] == "3" and meta["games_trained"] == "7" and meta["algo"] == "reinforce"
    assert printed.rstrip().endswith(text.unbeatable_line(report))
    assert sorted(p.name for p in out.parent.iterdir()) == ["last.ckpt", "last.onnx"]  # no temporary file


def test_export_refuses_to_overwrite_its_own_checkpoint(good_checkpoint, capsys):
    before = good_checkpoint.read_bytes()
    assert export_main([str(good_checkpoint), "-o", str(good_checkpoint)]) == 2
    assert "that is the checkpoint itself" in one_error_line(capsys.readouterr().err)
    assert good_checkpoint.read_bytes() == before


def test_export_never_writes_over_a_run_folders_files(good_checkpoint, capsys):
    # Issue 58 item 7: `-o RUN/policy.onnx` replaced the run's policy with another, exit 0.
    run_dir = good_checkpoint.parents[1]  # it holds checkpoints/last.ckpt: a run's folder
    (run_dir / "policy.onnx").write_bytes(b"the run's policy")
    (run_dir / "eval.json").write_text("{}")
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    for name in ("policy.onnx", "eval.json", "agent.onnx"):
        assert export_main([str(good_checkpoint), "-o", str(run_dir / name)]) == 2
        assert one_error_line(capsys.readouterr().err) == (
            f"error: {run_dir / name}: a file of the run folder {run_dir}, whose files are its run's record; "
            "choose another -o outside it")
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_export_says_what_it_was_given_when_that_is_no_checkpoint(tmp_path, capsys):
    """An ONNX file (even a missing or broken one) and a folder used to be refused as "that is the
    checkpoint itself" (the default output, its name with .onnx, is the file itself)."""
    assert export_main([str(tmp_path / "nope.onnx")]) == 2
    assert one_error_line(capsys.readouterr().err) == f"error: {tmp_path / 'nope.onnx'}: no such file"
    (tmp_path / "broken.onnx").write_bytes(b"\x08\x07" * 50)
    for given, what in ((tmp_path / "broken.onnx", "an ONNX model already"), (tmp_path, "a folder")):
        assert export_main([str(given)]) == 2
        assert one_error_line(capsys.readouterr().err).startswith(
            f"error: {given}: {what}; export takes a checkpoint (.ckpt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.onnx"]


def test_a_refused_export_leaves_the_old_file_as_it_was(tmp_path):
    # export() itself (as training calls it): the parity check refuses logits below the
    # mask, and the previous file stays byte for byte, with no temporary file beside it.
    # Before: the file was overwritten first (and this one was not even refused).
    out = tmp_path / "policy.onnx"
    preference_model(HIGHEST_FIRST, out)
    before = out.read_bytes()
    with pytest.raises(ExportError, match=r"policy\.onnx: not written, the network: the policy has no "
                                          r"legal greedy move at 4519 of 4520"):
        export(below_the_mask(), out, {"seed": "1"})
    assert out.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["policy.onnx"]


def test_export_cli_refuses_a_checkpoint_without_legal_moves_and_writes_nothing(tmp_path, capsys):
    path = fake_checkpoint(tmp_path / "low.ckpt", below_the_mask())
    assert export_main([str(path)]) == 2
    assert "it picks the occupied cell" in one_error_line(capsys.readouterr().err)
    assert [p.name for p in tmp_path.iterdir()] == ["low.ckpt"]


# --------------------------------------------------------------------------- the table


def test_the_final_table_says_whether_the_agent_is_unbeatable_from_each_seat():
    t = game.tables()
    perfect = solve().optimal.to(torch.int8).argmax(-1)  # the lowest minimax-optimal cell
    lowest = torch.where(t.legal, -torch.arange(9.0), -INF).argmax(-1)  # the lowest empty cell
    mixed = torch.where(t.mover == game.X, perfect, lowest)  # perfect as X, naive as O
    report = ev.evaluate_actions(mixed)
    assert unbeatable(report, "x") and not unbeatable(report, "o")
    table = text.eval_table(report)
    assert table.splitlines()[-1] == "unbeatable as X: yes; as O: no (some opponent beats it)"
    assert text.eval_table(report, "o").splitlines()[-1] == "unbeatable as O: no (some opponent beats it)"
    assert text.eval_table(ev.evaluate_actions(perfect)).endswith("unbeatable as X: yes; as O: yes")


def test_on_a_won_game_the_table_says_what_each_seat_can_hold(tmp_path, monkeypatch):
    """3,4,3 (X wins): perfect as X and as O, the line says X forces the win and O loses only
    to a perfect X; the lowest-cell player holds neither, and NashConv's gloss names the value."""
    monkeypatch.setenv("TTT_RESEARCH_CACHE", str(tmp_path))
    g = Game(3, 4, 3)
    t, sol = g.tables(), solve(g=g)
    perfect = sol.optimal.to(torch.int8).argmax(-1)  # (R,) the lowest minimax-optimal cell
    lowest = t.legal.to(torch.int8).argmax(-1)  # (R,) the lowest empty cell
    table = text.eval_table(exploit_report(perfect, g)).splitlines()
    assert table[-1] == "X wins this game: as X forces the win: yes; as O loses only to a perfect X: yes"
    assert any(row.startswith("  as X 1.0000 of ") and "as O 1.0000 of" in row for row in table)
    worse = text.eval_table(exploit_report(lowest, g), "o").splitlines()
    assert worse[-1] == ("X wins this game: as O loses only to a perfect X: no "
                         "(an imperfect X can still beat it)")
    assert "(0: no opponent gets more than the game's value against it from either seat)" in "\n".join(worse)


def exploit_report(actions, g):
    """The greedy report with its NashConv line, as a run's eval.json has them."""
    report = ev.evaluate_actions(actions, g)
    report[NASHCONV] = greedy_nashconv(report)
    return report


def test_evaluate_prints_the_unbeatable_line(tmp_path, capsys):
    model = preference_model(HIGHEST_FIRST, tmp_path / "highest.onnx")
    assert evaluate_cli.main([str(model)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(
        "unbeatable as X: no (some opponent beats it); as O: no (some opponent beats it)")

