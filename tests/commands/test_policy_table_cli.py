"""``evaluate`` on policy tables and stochastic policies, ``export --table``: in-process
through ``main([...])``. Export then evaluate gives the same numbers; every refusal is one
``error:`` line and exit 2; the committed example output is what evaluate prints today."""

import json
import shutil
from pathlib import Path

import onnx
import pytest
import torch

from tests.evaluation.test_policy_table import BAD_ROWS, move_table
from tests.helpers.onnx_models import preference_model
from ttt_research import evaluate, export
from ttt_research.errors import UserError
from ttt_research.files.outputs import check_output

torch.set_num_threads(1)
EXAMPLES = Path(__file__).parents[2] / "examples"
CENTRE_FIRST = [3, 1, 3, 1, 5, 1, 3, 1, 3]  # centre, then corners, then sides: beatable from both seats


def run(main, argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def figures(report: dict) -> dict:
    """A report without what says where the policy came from (a file's acting, a table's counts)."""
    policy = {k: v for k, v in report["policy"].items() if k not in ("acting", "table")}
    return {**report, "policy": policy}


@pytest.fixture
def model(tmp_path) -> Path:
    return preference_model(CENTRE_FIRST, tmp_path / "centre_first.onnx")


def with_acting(path: Path, acting: str) -> Path:
    """The model at ``path`` with an ``acting`` metadata value, as training writes it."""
    m = onnx.load(str(path))
    prop = m.metadata_props.add()
    prop.key, prop.value = "acting", acting
    out = path.with_name("trained.onnx")
    onnx.save(m, str(out))
    return out


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("suffix,options", [(".csv", []), (".json", []),
                                            (".csv", ["--temperature", "0.5", "--epsilon", "0.1"]),
                                            (".json", ["--temperature", "2"])])
def test_export_table_then_evaluate_gives_the_numbers_of_the_model(tmp_path, capsys, model, suffix, options):
    table = tmp_path / f"policy{suffix}"
    code, out, _ = run(export.main, [model, "--table", table, *options], capsys)
    assert code == 0 and out.startswith(f"wrote {table}: 4,520 positions")
    from_model = json.loads(run_json(model, options, capsys))
    from_table = json.loads(run_json(table, [], capsys))
    assert figures(from_table) == figures(from_model)
    assert ("as_x" in from_table) == (not options)  # greedy: eval.json's keys too
    if not options:
        assert from_table["policy"]["table"]["optimal_move_rate"] is not None


def run_json(path, options, capsys) -> str:
    code, out, err = run(evaluate.main, [path, "--json", *options], capsys)
    assert code == 0, err
    return out


def test_a_greedy_model_keeps_eval_json_keys_and_adds_the_policy_block(capsys, model):
    report = json.loads(run_json(model, [], capsys))
    assert set(report) == {"as_x", "as_o", "optimal_move_rate", "decision_points", "optimal_move_rate_all",
                           "nashconv", "policy"}
    assert report["nashconv"] == report["policy"]["nashconv"] == 2.0  # a best response wins from both seats
    assert report["policy"]["acting"] == {"temperature": 0.0, "epsilon": 0.0, "describe": "greedy (argmax)"}
    assert set(report["policy"]["worst_lines"]) == {"x", "o"}
    assert "worst_lines" not in json.loads(run_json(model, ["--lines", "0"], capsys))["policy"]


def test_as_trained_reads_the_acting_metadata_and_a_run_folder_means_its_policy_onnx(tmp_path, capsys, model):
    trained = with_acting(model, json.dumps({"temperature": 1.0, "epsilon": 0.05}))
    folder = tmp_path / "outputs" / "DATE" / "TIME"
    folder.mkdir(parents=True)
    shutil.copy(trained, folder / "policy.onnx")
    as_trained = json.loads(run_json(folder, ["--as-trained"], capsys))
    same = json.loads(run_json(model, ["--temperature", "1", "--epsilon", "0.05"], capsys))
    assert figures(as_trained) == figures(same)
    code, out, _ = run(evaluate.main, [folder, "--as-trained", "--lines", "1"], capsys)
    assert code == 0 and out.startswith("policy: softmax at temperature 1, epsilon 0.05 uniform")
    assert "NashConv" in out and "where a best response gains most" in out


# --------------------------------------------------------------------------- one-line refusals


@pytest.mark.parametrize("text,where,needle", BAD_ROWS)
def test_each_malformed_table_is_one_error_line_and_exit_2(tmp_path, capsys, text, where, needle):
    path = tmp_path / ("bad.json" if text.startswith("{") else "bad.csv")
    path.write_text(text)
    code, out, err = run(evaluate.main, [path, "--fill", "uniform"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err
    assert err.startswith(f"error: {path}: " + (f"{where}: " if where else ""))


def test_a_table_over_the_size_cap_is_one_error_line(tmp_path, capsys):
    # Issue 42 item 9: rows repeated to 9 MiB; before, every line was parsed before the
    # first duplicate was named (a 218 MB table: 39 s, 7.4 GB).
    path = tmp_path / "rows.csv"
    path.write_text("board,move\n" + ".........,4\n" * (9 * 2**20 // 12))
    code, out, err = run(evaluate.main, [path, "--fill", "uniform"], capsys)
    assert (code, out, err) == (2, "", f"error: {path}: larger than 8 MiB\n")


def test_option_mistakes_are_one_error_line(tmp_path, capsys, model):
    table = tmp_path / "one.csv"
    table.write_text(move_table({".........": 4}))
    (tmp_path / "empty_run").mkdir()
    cases = [
        (evaluate.main, [table], "4,519 of 4,520 positions have no row, the first x........; --fill"),
        (evaluate.main, [tmp_path / "none.csv"], "none.csv: no such file"),
        (evaluate.main, [tmp_path / "empty_run"], "empty_run: a folder without policy.onnx"),
        (evaluate.main, [model, "--as-trained"], "centre_first.onnx: no 'acting' metadata"),
        (evaluate.main, [with_acting(model, "{oops"), "--as-trained"],
         "trained.onnx: malformed 'acting' metadata"),
        (evaluate.main, [model, "--as-trained", "--epsilon", "0.1"], "--as-trained reads the temperature"),
        (evaluate.main, [model, "--fill", "first"], "--fill and --illegal apply to policy tables"),
        (evaluate.main, [table, "--temperature", "1"], "a policy table gives its moves itself"),
        (evaluate.main, [model, "--temperature", "-1"], "--temperature must be a finite number >= 0"),
        (evaluate.main, [model, "--epsilon", "2"], "--epsilon must be a number from 0 to 1"),
        (evaluate.main, [model, "--lines", "-1"], "--lines must be 0 or more"),
        (export.main, [model, "--table", tmp_path / "t.txt"], "t.txt: a policy table is a .csv or .json"),
        (export.main, [model, "--table", tmp_path / "t.csv", "-o", tmp_path / "x.onnx"], "leave out -o"),
        (export.main, [model, "--temperature", "1"], "apply to --table"),
    ]
    for main, argv, needle in cases:
        code, out, err = run(main, argv, capsys)
        assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, (argv, err)
    assert not (tmp_path / "t.csv").exists()


def snapshot(folder: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["eval.json", "metrics.csv", "agent.json"])
def test_export_table_never_writes_over_a_run_folders_files(tmp_path, capsys, model, name):
    # Issue 58 item 7: `export RUN --table RUN/eval.json` replaced the run's report, exit 0.
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    shutil.copy(model, run_dir / "policy.onnx")
    (run_dir / "eval.json").write_text('{"as_x": {}}\n')
    (run_dir / "metrics.csv").write_text("step,loss\n1,0.5\n")
    before = snapshot(run_dir)
    for source in (run_dir, run_dir / "policy.onnx", model):
        code, out, err = run(export.main, [source, "--table", run_dir / name], capsys)
        assert (code, out) == (2, "") and err == (
            f"error: {run_dir / name}: a file of the run folder {run_dir}, whose files are its run's "
            "record; choose another --table outside it\n")
    assert snapshot(run_dir) == before  # nothing written, nothing left beside


# --------------------------------------------------------------------------- answer lists


def test_a_move_list_with_illegal_and_missing_answers_is_scored_when_asked(tmp_path, capsys):
    table = tmp_path / "llm.csv"
    table.write_text("# an LLM's answers\n" + move_table({".........": 4, "x........": 0, "....x....": 1}))
    code, _, err = run(evaluate.main, [table, "--fill", "first"], capsys)
    assert code == 2 and "line 4: move 0 is on an occupied cell of x........ (an illegal answer" in err
    report = json.loads(run_json(table, ["--fill", "first", "--illegal", "fill"], capsys))
    info = report["policy"]["table"]
    assert (info["legal_answers"], info["illegal"], info["missing"], info["filled"]) == (2, 1, 4517, 4518)
    assert info["optimal_move_rate"] == 0.5  # the centre opening keeps the draw; a side reply to it loses
    code, out, _ = run(evaluate.main, [table, "--fill", "first", "--illegal", "fill", "--lines", "0"], capsys)
    assert "answers: 2 legal (0.04% of positions), 1 illegal (0.02%), 4,517 missing (99.93%); " \
           "optimal moves 0.5000 of the 2 legal answers" in out
    assert "filled: 4,518 positions (4,517 missing, 1 illegal) by the rule 'first'" in out


def test_the_committed_rules_bot_output_is_what_evaluate_prints(capsys):
    code, out, _ = run(evaluate.main, [EXAMPLES / "rules_bot.csv"], capsys)
    assert code == 0 and out == (EXAMPLES / "rules_bot.txt").read_text()


@pytest.mark.slow  # a real (tiny) training run: over 3 s on the 2-core host
def test_a_trained_checkpoint_exports_to_a_table_and_its_run_folder_scores_as_trained(tmp_path, capsys):
    from tests.helpers.trained import tiny_run

    tiny_run(tmp_path / "run")
    ckpt, table = tmp_path / "run" / "checkpoints" / "last.ckpt", tmp_path / "agent.json"
    assert run(export.main, [ckpt, "--table", table], capsys)[0] == 0
    # No file a real run writes may be an export's output (the guard's names are the run's).
    for path in (p for p in (tmp_path / "run").rglob("*") if p.is_file()):
        with pytest.raises(UserError, match="a file of the run folder|the checkpoint itself"):
            check_output(path, ckpt, "-o", "the checkpoint")
    assert figures(json.loads(run_json(table, [], capsys))) == figures(json.loads(run_json(ckpt, [], capsys)))
    # The run's policy.onnx says how training acted; the folder stands for it.
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "run" / "policy.onnx")).metadata_props}
    acting = json.loads(meta["acting"])
    as_trained = json.loads(run_json(tmp_path / "run", ["--as-trained"], capsys))
    options = ["--temperature", str(acting["temperature"]), "--epsilon", str(acting["epsilon"])]
    same = json.loads(run_json(tmp_path / "run" / "policy.onnx", options, capsys))
    assert figures(as_trained) == figures(same)
