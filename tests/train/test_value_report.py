"""What a run does with an algorithm's action values (``eval.json``'s ``value_accuracy``,
``population.json``, ``metrics.csv``) and with the training clock (``train/elapsed_s``,
``population_evals.csv``'s ``elapsed_s``, continued across a resume). The algorithm with
values is tests/helpers/valued.py's: REINFORCE claiming the exact values, plus a shift."""

import csv
import json
import shutil

import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.resume import train_killed
from tests.helpers.valued import TARGET
from ttt_research.train.run import train

O_LEGAL, O_TIE_MOVES = 7536, 1216  # legal moves at O's 2,097 decision positions; those that draw


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_a_single_run_with_values_reports_their_accuracy_and_its_clock(tmp_path):
    report = train(make_cfg(f"algo._target_={TARGET}", "+algo.shift=0.25"), tmp_path)
    # exact values + 0.25 under antirez's table: every reading right, every move 0.25 off
    assert report["value_accuracy"] == {"sign_agreement": 1.0, "mae": pytest.approx(0.25, abs=1e-7),
                                        "decision_points": 2097}
    assert json.loads((tmp_path / "eval.json").read_text()) == report
    evals = [r for r in rows(tmp_path / "metrics.csv") if r["eval/o_random_win"]]
    assert len(evals) == 2  # debug=tiny: an exact evaluation every 2 of 4 updates
    assert [float(r["eval/value_mae"]) for r in evals] == pytest.approx([0.25, 0.25], abs=1e-7)
    assert [float(r["eval/value_sign_agreement"]) for r in evals] == [1.0, 1.0]
    elapsed = [float(r["train/elapsed_s"]) for r in evals]
    assert 0 < elapsed[0] < elapsed[1]


def test_a_population_reports_each_members_values_under_its_own_table(tmp_path):
    report = train(make_cfg(f"algo._target_={TARGET}", "population.vary.reward.tie=[0.3,0.1]"), tmp_path)
    members = json.loads((tmp_path / "population.json").read_text())["members"]
    blocks = [m["eval"]["value_accuracy"] for m in members]
    # the values are antirez's (tie 0.3): exact for member 0; for member 1 (tie 0.1) every
    # drawing move is 0.2 off, still read as a draw (0.3 < halfway to the win, 0.55)
    assert [b["mae"] for b in blocks] == pytest.approx([0.0, 0.2 * O_TIE_MOVES / O_LEGAL], abs=1e-7)
    assert [b["sign_agreement"] for b in blocks] == [1.0, 1.0]
    assert report["value_accuracy"] == blocks[report["population"]["best_member"]]
    evals = rows(tmp_path / "population_evals.csv")
    assert list(evals[0])[-1] == "elapsed_s"
    for k in (0, 1):
        seconds = [float(r["elapsed_s"]) for r in evals if r["member"] == str(k)]
        assert len(seconds) == 2 and 0 < seconds[0] < seconds[1]
    last = [r for r in rows(tmp_path / "metrics.csv") if r.get("eval/value_mae")][-1]
    assert float(last["eval/value_mae_max"]) == pytest.approx(blocks[1]["mae"], abs=1e-7)
    assert float(last["train/elapsed_s"]) == float(evals[-1]["elapsed_s"])


def _clock_state(path):
    """The checkpoint's state of the population's exact evaluation (its history and clock)."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    (key,) = [k for k in ckpt["callbacks"] if "Evaluation" in k]
    return ckpt, key


@pytest.mark.slow  # three tiny trainings: the fast subset (-m "not slow") skips it
def test_a_resumed_population_continues_its_clock_and_reads_older_checkpoints(tmp_path, monkeypatch):
    overrides = ["population.size=2", "checkpoint_every=2"]
    train_killed(make_cfg(*overrides), tmp_path / "later", monkeypatch)
    shutil.copytree(tmp_path / "later", tmp_path / "older")
    # "later": as if the session before the kill had trained for 10^6 s; "older": a checkpoint
    # written before the clock was kept (no elapsed times, no clock)
    path = tmp_path / "later" / "checkpoints" / "last.ckpt"
    ckpt, key = _clock_state(path)
    before = ckpt["callbacks"][key]["elapsed"]
    assert len(before) == 1 and 0 < before[0] <= ckpt["callbacks"][key]["elapsed_s"]
    ckpt["callbacks"][key]["elapsed_s"] = 1e6
    torch.save(ckpt, path)
    path = tmp_path / "older" / "checkpoints" / "last.ckpt"
    ckpt, key = _clock_state(path)
    del ckpt["callbacks"][key]["elapsed"], ckpt["callbacks"][key]["elapsed_s"]
    torch.save(ckpt, path)
    for name in ("later", "older"):
        train(make_cfg(*overrides, "resume=true"), tmp_path / name)
    later = [(r["games"], r["elapsed_s"]) for r in rows(tmp_path / "later" / "population_evals.csv")]
    assert [g for g, _ in later] == ["1024", "1024", "2048", "2048"]
    assert [float(s) for _, s in later[:2]] == [before[0]] * 2  # kept from before the kill
    assert all(1e6 < float(s) < 1e6 + 600 for _, s in later[2:])  # continued from the checkpoint's
    older = [r["elapsed_s"] for r in rows(tmp_path / "older" / "population_evals.csv")]
    assert older[:2] == ["", ""] and all(0 < float(s) < 600 for s in older[2:])
    logged = [r["train/elapsed_s"] for r in rows(tmp_path / "later" / "metrics.csv") if r["train/elapsed_s"]]
    assert [float(s) for s in logged] == [float(s) for _, s in later[::2]]
