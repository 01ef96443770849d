"""One way for every command line to answer a user's mistake (``cli.py``): one ``error:``
line on stderr, exit code 2, no traceback; and the evaluator stays free of the CLI's imports."""

import subprocess
import sys
import threading

import pytest

from tests.helpers.onnx_models import allocating_model, batch_switch_model, looping_model, preference_model
from ttt_research import bench, export, play, report, tournament
from ttt_research import errors as cli
from ttt_research import evaluate as evaluate_cli
from ttt_research.baselines import sb3 as compare_sb3


def test_a_user_error_becomes_one_line_and_exit_2(capsys):
    @cli.command(OSError)
    def main(argv=None):
        if argv == ["os"]:
            raise FileNotFoundError(2, "No such file or directory", "x.onnx")
        raise cli.UserError("--steps must be a positive integer")

    assert main.__name__ == "main"
    assert main([]) == cli.USER_ERROR == 2
    assert capsys.readouterr().err == "error: --steps must be a positive integer\n"
    assert main(["os"]) == 2
    assert capsys.readouterr().err == "error: [Errno 2] No such file or directory: 'x.onnx'\n"


def test_a_ctrl_c_is_one_line_and_exit_130(capsys):
    @cli.command()
    def main(argv=None):
        raise KeyboardInterrupt

    assert main([]) == cli.INTERRUPTED == 130
    assert capsys.readouterr().err == "stopped by SIGINT\n"


def test_anything_else_is_a_bug_and_keeps_its_traceback():
    @cli.command()
    def main(argv=None):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        main([])


@pytest.mark.parametrize("main,argv,needle", [
    (evaluate_cli.main, ["missing.onnx"], "missing.onnx: no such file"),
    (play.main, ["missing.ckpt"], "missing.ckpt: no such file"),
    (export.main, ["missing.ckpt"], "missing.ckpt: no such file"),
    (report.main, ["no/such/dir"], "no such directory: no/such/dir"),
    (compare_sb3.main, ["--steps", "0"], "--steps, --eval-every and --threads must be positive integers"),
    (bench.main, ["--threads", "0"], "--threads must be a positive integer, got 0"),
])
def test_each_command_answers_bad_input_through_the_helper(capsys, tmp_path, monkeypatch, main, argv, needle):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {needle}\n" and captured.out == ""


@pytest.mark.parametrize("main,argv", [
    (evaluate_cli.main, ["{loop}"]), (play.main, ["{loop}"]), (tournament.main, ["{loop}", "{ok}"]),
    (export.main, ["{loop}", "--table", "{tmp}/t.csv"]),
], ids=["evaluate", "play", "tournament", "export-table"])
def test_a_model_that_loops_forever_is_refused_by_every_command(capsys, tmp_path, main, argv):
    # Issue 42 item 7: a Loop of 2^62 turns once made each of these never return.
    loop = looping_model(tmp_path / "loop.onnx")
    ok = preference_model(list(range(9)), tmp_path / "ok.onnx")
    argv = [a.format(loop=loop, ok=ok, tmp=tmp_path) for a in argv]
    codes = []
    worker = threading.Thread(target=lambda: codes.append(main(argv)), daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert codes == [2], "the command did not return (or not with exit 2)"
    err = capsys.readouterr().err
    assert err == f"error: {loop}: the model uses the ONNX operator 'Loop'; refused: a policy may not use " \
                  "control flow (Loop, If, Scan: it could run without end) or a custom domain's operators\n"


COMMANDS = [(evaluate_cli.main, ["{bad}", "--json"]), (play.main, ["{bad}"]),
            (tournament.main, ["{bad}", "{ok}"]), (export.main, ["{bad}", "--table", "{tmp}/t.csv"])]
IDS = ["evaluate", "play", "tournament", "export-table"]


@pytest.mark.parametrize("main,argv", COMMANDS, ids=IDS)
def test_a_model_that_plays_another_policy_alone_is_refused_by_every_command(capsys, tmp_path, main, argv):
    # Issue 58 item 2: evaluate --json scored the batched policy (the highest empty cell),
    # play and the page played the other (the lowest).
    bad = batch_switch_model(tmp_path / "switch.onnx", list(range(9)), list(range(9))[::-1])
    ok = preference_model(list(range(9)), tmp_path / "ok.onnx")
    assert main([a.format(bad=bad, ok=ok, tmp=tmp_path) for a in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not (tmp_path / "t.csv").exists()
    assert captured.err.startswith(f"error: {bad}: the model plays differently by batch: ")
    assert captured.err.endswith("describe another policy than the one that plays\n")
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize("main,argv", COMMANDS, ids=IDS)
def test_a_model_that_asks_for_gigabytes_is_one_line_from_every_command(capsys, tmp_path, main, argv):
    # Issue 58 item 1: an Expand's shape computed at run time asks for 2 GiB.
    bad = allocating_model(tmp_path / "big.onnx", 2 << 30, "Expand")
    ok = preference_model(list(range(9)), tmp_path / "ok.onnx")
    assert main([a.format(bad=bad, ok=ok, tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {bad}: the model asked for 2.0 GiB in its Expand node, beyond the 1 GiB a policy "
                   "may use while it runs; refused\n")


def test_importing_the_evaluator_loads_neither_policy_files_nor_onnxruntime():
    code = ("import sys, ttt_research.evaluation.exact; "
            "print(sorted(m for m in ('onnxruntime', 'onnx', 'ttt_research.evaluation.policy_file', "
            "'ttt_research.evaluate') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_python_m_evaluate_still_runs_the_command_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ttt_research.evaluate", str(tmp_path / "none.onnx"),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"error: {tmp_path / 'none.onnx'}: no such file\n"
    helped = subprocess.run([sys.executable, "-m", "ttt_research.evaluate", "--help"],
                            capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "python -m ttt_research.evaluate" in helped.stdout


def test_a_reader_gone_ends_quietly_even_where_oserror_is_a_users_mistake(capsys, monkeypatch):
    """``command(OSError)`` (export, evaluate) once caught BrokenPipeError as an OSError and
    printed 'error: Broken pipe': the reader's leaving comes first."""
    from ttt_research import errors as cli

    gone = []
    monkeypatch.setattr(cli, "reader_gone", lambda: gone.append(1) or 141)  # keep pytest's stdout
    command = cli.command

    @command(OSError)
    def main(argv=None) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    assert main([]) == 141
    assert gone == [1] and capsys.readouterr().err == ""
