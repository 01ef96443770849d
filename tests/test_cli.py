"""Command lines: evaluate on ONNX files (good and bad), the main job, the benchmark."""

import json
import subprocess
import sys

import pytest

from onnx_models import preference_model
from ttt_research import evaluate as ev


def run(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=120)


def test_evaluate_json_on_a_contract_onnx_policy(tmp_path):
    pref = [3, 1, 3, 1, 5, 1, 3, 1, 3]
    path = preference_model(pref, tmp_path / "centre_first.onnx")
    out = run("ttt_research.evaluate", str(path), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"as_x", "as_o", "optimal_move_rate", "decision_points"}
    # The same preferences as a torch function give the same exact report.
    import torch

    p = torch.tensor(pref, dtype=torch.float32)
    assert report == ev.evaluate_policy(lambda v: p.expand(v.shape[0], 9) - 1e9 * v.abs())
    # Centre-then-corners is beatable from both seats: a best response finds the fork.
    assert report["as_x"]["worst_case"] == "loss" or report["as_o"]["worst_case"] == "loss"
    # The table form prints the same figures.
    table = run("ttt_research.evaluate", str(path))
    assert table.returncode == 0
    assert f"{report['as_o']['vs_random']['win']:.4f}" in table.stdout


def test_evaluate_in_process_matches_cli(tmp_path):
    path = preference_model([0, 1, 2, 3, 4, 5, 6, 7, 8], tmp_path / "high.onnx")
    from ttt_research.policy_file import load_policy

    policy, _ = load_policy(path)
    out = run("ttt_research.evaluate", str(path), "--json")
    assert json.loads(out.stdout) == json.loads(json.dumps(ev.evaluate_policy(policy)))


@pytest.mark.parametrize("make,needle", [
    (lambda d: d / "missing.onnx", "no such file"),
    (lambda d: (d / "junk.onnx").write_bytes(b"\x00not a model at all") and d / "junk.onnx",
     "not a valid ONNX model"),
    (lambda d: preference_model([0] * 10, d / "wide.onnx", in_width=10), "float32 [N, 9]"),
])
def test_evaluate_bad_files_get_one_line_and_exit_2(tmp_path, make, needle):
    path = make(tmp_path)
    out = run("ttt_research.evaluate", str(path))
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in out.stderr


def test_main_job_trains_and_writes_the_run_folder(tmp_path):
    out = run("ttt_research", "budget.games=4096", "algo.games_per_update=1024", "progress=false",
              f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    assert "Exact evaluation after 4,096 games" in out.stdout
    report = json.loads((tmp_path / "eval.json").read_text())
    assert f"{report['as_o']['vs_random']['win']:.4f}" in out.stdout
    assert "budget" in (tmp_path / ".hydra" / "config.yaml").read_text()
    assert "Traceback" not in out.stderr


def test_readme_python_example_runs_and_random_x_never_beats_minimax():
    import re
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "docs" / "design.md").read_text()  # the engine example
    code = re.findall(r"```python\n(.*?)```", readme, re.S)[0].replace("print(", "result = (")
    scope: dict = {}
    exec(code, scope)
    assert scope["result"][0] == 0 and scope["result"][1] > 0.5


@pytest.mark.parametrize("content,needle", [
    (b"PK\x03\x04 truncated zip", "not a readable checkpoint"),
    (None, "not a ttt_research checkpoint"),
])
def test_evaluate_bad_checkpoints_get_one_line_and_exit_2(tmp_path, content, needle):
    import torch

    path = tmp_path / "model.ckpt"
    if content is None:
        torch.save({"state_dict": {}, "something": 1}, path)  # a torch file, but not ours
    else:
        path.write_bytes(content)
    out = run("ttt_research.evaluate", str(path))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
