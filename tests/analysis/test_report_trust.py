"""What ``report`` checks before it counts a run (issue 58): each run's figures against its
policy (an edited ``eval.json`` that calls a losing policy unbeatable is named and left out,
never averaged in), and each run once (a folder copied many times is one seed, said in one
short line). The runs here are real records of real policies: a fixed preference over the
cells, exported as ONNX, whose eval.json is what the project's exact evaluator gives it."""

import csv
import json
from pathlib import Path

import pytest
import yaml

from tests.helpers.onnx_models import preference_model
from ttt_research import report
from ttt_research.analysis.scan import scan_runs
from ttt_research.contract import NASHCONV, greedy_nashconv
from ttt_research.env.board import Game
from ttt_research.evaluation.exact import evaluate_policy
from ttt_research.evaluation.policy_file import load_policy

# Cell preferences: the policy plays the most preferred empty cell (each beatable, each different).
PREFERENCES = {0: [9, 8, 7, 6, 5, 4, 3, 2, 1], 1: [1, 2, 3, 4, 9, 5, 6, 7, 8], 2: [5, 9, 5, 8, 4, 8, 5, 9, 5]}


def honest(policy: Path) -> dict:  # a few ms a policy once the tables are built
    """The eval.json a run of this policy writes: the exact evaluation of its greedy policy."""
    found = evaluate_policy(load_policy(policy)[0])
    return {**found, NASHCONV: greedy_nashconv(found)}


def write_run(path: Path, seed: int, overrides: list[str] | None = None) -> Path:
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": seed, "seat": {"side": "o"}, "optimized_metric": "score", "progress": True}))
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([*(overrides or []), f"seed={seed}"]))
    preference_model(PREFERENCES[seed], path / "policy.onnx")
    (path / "eval.json").write_text(json.dumps(honest(path / "policy.onnx")))
    return path


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def no_figures(monkeypatch):
    for name in ("plot", "plot_profiles", "plot_safe"):
        monkeypatch.setattr(report, name, lambda *a, **k: None)


def test_an_edited_eval_json_is_named_and_left_out_not_averaged(tmp_path, capsys, no_figures):
    for seed in PREFERENCES:
        write_run(tmp_path / str(seed), seed)
    edited = json.loads((tmp_path / "1" / "eval.json").read_text())
    assert edited["as_o"]["worst_case"] == "loss"  # its policy can be beaten as O
    edited["as_o"]["vs_random"] = {"win": 0.9, "loss": 0.0, "tie": 0.1}
    edited["as_o"]["worst_case"] = "draw"  # ... and its record now says it cannot
    (tmp_path / "1" / "eval.json").write_text(json.dumps(edited))
    assert report.main([str(tmp_path), "--reps", "100"]) == 0
    err = capsys.readouterr().err
    assert (f"warning: skipped {tmp_path / '1'}: eval.json says as_o.worst_case is 'draw'; its policy.onnx "
            "scores 'loss' (and 3 more figure(s))") in err.splitlines()
    (row,) = rows(tmp_path / "report.csv")
    assert (row["seeds"], row["unbeatable"]) == ("2", "0")  # not 3 seeds, one of them unbeatable
    assert float(row["o_random_win_max"]) < 0.9
    assert [r["run"] for r in rows(tmp_path / "runs.csv")] == [str(tmp_path / "0"), str(tmp_path / "2")]
    md = (tmp_path / "report.md").read_text()
    assert "Figures re-checked from each seed's policy.onnx: 2 of 2." in md
    assert "1 contradicted by its policy.onnx" in md
    assert "- `1`: eval.json says as_o.worst_case is 'draw'" in md


def test_a_population_member_is_checked_against_its_own_policy(tmp_path):
    pop = tmp_path / "pop"
    (pop / ".hydra").mkdir(parents=True)
    (pop / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "seat": {"side": "o"}}))
    members = []
    for k in PREFERENCES:
        (pop / "members" / f"{k:03d}").mkdir(parents=True)
        policy = preference_model(PREFERENCES[k], pop / "members" / f"{k:03d}" / "policy.onnx")
        members.append({"index": k, "seed": k, "hparams": {}, "games": 2048, "eval": honest(policy)})
    members[2]["eval"]["optimal_move_rate"] = 1.0  # edited: the others' figures hold
    (pop / "population.json").write_text(json.dumps({"members": members}))
    (pop / "eval.json").write_text(json.dumps(members[0]["eval"]))
    runs, (s,) = scan_runs(tmp_path)
    assert [r.member for r in runs] == [0, 1] and all(r.checked for r in runs)
    assert (s.kind, s.name) == ("contradicted", "pop (member 2)")
    assert s.why.startswith("population.json (member 2) says optimal_move_rate is 1; its "
                            "members/002/policy.onnx scores 0.")


def test_a_policy_file_that_does_not_load_skips_its_run_and_none_is_not_checked(tmp_path):
    write_run(tmp_path / "0", 0)
    write_run(tmp_path / "1", 1)
    (tmp_path / "1" / "policy.onnx").write_bytes(b"not a model")
    write_run(tmp_path / "2", 2)
    (tmp_path / "2" / "policy.onnx").unlink()  # no policy: reported from its record, unchecked
    runs, (s,) = scan_runs(tmp_path)
    assert [(r.path.name, r.checked) for r in runs] == [("0", True), ("2", False)]
    assert (s.path, s.kind) == (tmp_path / "1", "malformed")
    assert "policy.onnx: not a valid ONNX model" in s.why


def test_a_run_copied_many_times_is_one_seed_in_one_short_warning(tmp_path, capsys, no_figures):
    import shutil

    write_run(tmp_path / "run", 0)
    for k in range(12):  # the same run, copied (run.json, metrics and all)
        shutil.copytree(tmp_path / "run", tmp_path / f"copy{k:02d}")
    write_run(tmp_path / "other", 1)
    write_run(tmp_path / "lr", 0, overrides=["algo.lr=0.5"])  # the same seed, another config: a run
    rerun = tmp_path / "rerun"  # the same seed and config run again, watched otherwise: the same seed
    shutil.copytree(tmp_path / "run", rerun)
    (rerun / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": 0, "seat": {"side": "o"}, "optimized_metric": "score", "progress": False}))
    assert report.main([str(tmp_path), "--reps", "100"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "counted once" in line]
    assert err[0] == ("warning: 14 run folders hold one run (the same seed and config): counted once, as "
                      "copy00; the copies: copy01, copy02, copy03 and 10 more")
    assert err[1] == "warning: report skipped 13 run folder(s): 13 duplicate(s) of another run (counted once)"
    assert len(err) == 2
    got = {r.get("algo.lr", ""): r["seeds"] for r in rows(tmp_path / "report.csv")}
    assert got == {"": "2", "0.5": "1"}  # not 15 seeds: seed 0 once, seed 1
    md = (tmp_path / "report.md").read_text()
    assert "- 14 run folders hold one run (the same seed and config): counted once, as copy00" in md


def test_a_figure_that_is_no_number_is_described_never_echoed():
    from ttt_research.analysis.recheck import contradiction, differences
    from ttt_research.analysis.runs import RunRecord

    scored = {"as_o": {"worst_case": "loss"}, "decision_points": 296, "nashconv": 2.0}
    record = {"as_o": {"worst_case": "loss"}, "decision_points": "${oc.env:SECRET}", "nashconv": float("nan")}
    found = differences(record, scored)
    assert [f[0] for f in found] == ["decision_points", "nashconv"]
    why = contradiction(RunRecord(Path("run"), {}, 0, "o", "score", record), found)
    assert why == ("eval.json says decision_points is an interpolation (report resolves none); its "
                   "policy.onnx scores 296 (and 1 more figure(s))")


def test_a_run_of_another_board_is_checked_on_its_own_board(tmp_path, monkeypatch, no_figures):
    """A 3,4,3 policy (its file names its board) is scored on 3,4,3: an honest record is
    checked, an edited one contradicted, never a model refused for its width."""
    monkeypatch.setenv("TTT_RESEARCH_CACHE", str(tmp_path / "cache"))
    g = Game(3, 4, 3)
    for seed, pref in ((0, list(range(12, 0, -1))), (1, list(range(1, 13)))):
        run = tmp_path / "runs" / str(seed)
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "seat": {"side": "both"}}))
        (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={seed}", "game=mnk343"]))
        preference_model(pref, run / "policy.onnx", game="3,4,3")
        found = evaluate_policy(load_policy(run / "policy.onnx", game=g)[0], g)
        (run / "eval.json").write_text(json.dumps({**found, NASHCONV: greedy_nashconv(found)}))
    edited = json.loads((tmp_path / "runs" / "1" / "eval.json").read_text())
    edited["as_x"]["worst_case"] = "win"  # the highest-cell X can be beaten; its record now says not
    (tmp_path / "runs" / "1" / "eval.json").write_text(json.dumps(edited))
    assert report.main([str(tmp_path / "runs"), "--reps", "100"]) == 0
    md = (tmp_path / "runs" / "report.md").read_text()
    assert "Figures re-checked from each seed's policy.onnx: 1 of 1." in md
    assert "- `1`: eval.json says as_x.worst_case is 'win'" in md
