"""``report`` on folders it did not write: no interpolation is ever resolved (no environment
value reaches a report), a malformed run is skipped with one warning naming the file and the
field (never a traceback, never a "nan" row), and a run without ``eval.json`` (still running,
or killed) is skipped and counted. Run folders are written here as training leaves them
(the eval.json below is a real tiny run's), then spoiled one file at a time."""

import copy
import csv
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from ttt_research import report
from ttt_research.analysis.runs import ReportError
from ttt_research.analysis.scan import scan_runs

SECRET = "tok-9f3e71c2-do-not-leak"
# A tiny run's eval.json (debug=tiny, seed 0), as train.py writes it.
EVAL = {"as_x": {"vs_random": {"win": 0.958333333333, "loss": 0.03125, "tie": 0.010416666667},
                 "vs_perfect": {"win": 0.0, "loss": 0.5, "tie": 0.5}, "worst_case": "loss"},
        "as_o": {"vs_random": {"win": 0.795767195767, "loss": 0.161904761905, "tie": 0.042328042328},
                 "vs_perfect": {"win": 0.0, "loss": 0.776014109347, "tie": 0.223985890653},
                 "worst_case": "loss"},
        "optimal_move_rate": 0.8412162162162162, "decision_points": 296}


def write_run(path: Path, seed: int, eval_report=None, config: dict | None = None,
              overrides: list[str] | None = None) -> Path:
    (path / ".hydra").mkdir(parents=True)
    cfg = {"seed": seed, "seat": {"side": "o"}, "optimized_metric": "score", "net": {"encoding": "planes18"}}
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config if config is not None else cfg))
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides or [f"seed={seed}"]))
    # Hydra's own record holds interpolations of its own: read as text, they are harmless.
    (path / ".hydra" / "hydra.yaml").write_text(
        "hydra:\n  run:\n    dir: outputs/${now:%Y-%m-%d}\n  runtime:\n    choices:\n      net: mlp100\n")
    (path / "eval.json").write_text(json.dumps(EVAL if eval_report is None else eval_report))
    with open(path / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "train/games", "eval/o_random_win", "eval/o_worst_case"])
        w.writerows([[0, 1024, 0.7, -1.0], [1, 2048, 0.795767195767, -1.0]])
    return path


def spoiled(**changes) -> dict:
    """EVAL with ``{"as_o.vs_random.win": value}`` set (``None``: the key removed)."""
    out = copy.deepcopy(EVAL)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = out
        for p in parents:
            node = node[p]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return out


def everything_written(root: Path, out: str = "", err: str = "") -> str:
    return out + err + "".join(p.read_text(errors="replace") for p in root.rglob("*")
                               if p.is_file() and p.suffix in (".md", ".csv", ".json", ".yaml"))


def test_an_interpolation_is_shown_as_its_text_and_never_resolved(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MY_SECRET_TOKEN", SECRET)
    token = "${oc.env:MY_SECRET_TOKEN}"
    for seed in (0, 1):  # a configuration column whose value is an interpolation: shown as its text
        write_run(tmp_path / f"a{seed}", seed, overrides=[f"seed={seed}", f"net.encoding={token}"])
        write_run(tmp_path / f"b{seed}", seed, overrides=[f"seed={seed}", "net.encoding=signed9"])
    # The seed report computes with: an interpolation there skips the run, named.
    cfg = {"seed": token, "seat": {"side": "o"}, "optimized_metric": "score"}
    write_run(tmp_path / "c", 0, config=cfg)
    assert report.main([str(tmp_path), "--reps", "100"]) == 0
    cap = capsys.readouterr()
    assert SECRET not in everything_written(tmp_path, cap.out, cap.err)
    md = (tmp_path / "report.md").read_text()
    assert f"| {token} | 0, 1 |" in md and "| signed9 | 0, 1 |" in md
    with open(tmp_path / "runs.csv", newline="") as f:
        assert sorted(r["net.encoding"] for r in csv.DictReader(f)) == [token, token, "signed9", "signed9"]
    assert (f"warning: skipped {tmp_path / 'c'}: .hydra/config.yaml: seed is an interpolation "
            "(report resolves none), not an integer") in cap.err.splitlines()


@pytest.mark.parametrize("bad,message", [
    (spoiled(**{"as_o.vs_random.win": float("nan")}),
     "eval.json: as_o.vs_random.win is nan, not a rate in [0, 1]"),
    (spoiled(**{"as_o.vs_random.win": "0.79"}),
     "eval.json: as_o.vs_random.win is a string, not a rate in [0, 1]"),
    (spoiled(**{"as_x": None}), "eval.json: as_x is missing (a report has both seats)"),
    (spoiled(**{"as_o.worst_case": 5}), "eval.json: as_o.worst_case is 5, not one of win, draw, loss"),
    (spoiled(**{"as_o.vs_perfect.loss": float("inf")}), "eval.json: as_o.vs_perfect.loss is inf, not a rate"),
    (spoiled(**{"optimal_move_rate": -0.5}), "eval.json: optimal_move_rate is -0.5, not a rate in [0, 1]"),
    (spoiled(**{"as_o.vs_random.loss": 0.9}), "eval.json: as_o.vs_random: win + loss + tie is 1.7381, not 1"),
    (spoiled(**{"as_o.vs_random.win": True}), "eval.json: as_o.vs_random.win is a boolean"),
    ("[" * 100_000, "eval.json: not JSON (nested too deep)"),
    ('{"as_x": ', "eval.json: not JSON (Expecting value at line 1 column 10)"),
    ([1, 2], "eval.json is a list, not a mapping"),
])
def test_a_malformed_eval_json_skips_its_run_naming_the_field(tmp_path, bad, message):
    for seed in (0, 1):
        write_run(tmp_path / str(seed), seed)
    write_run(tmp_path / "bad", 7)
    (tmp_path / "bad" / "eval.json").write_text(bad if isinstance(bad, str) else json.dumps(bad))
    runs, skipped = scan_runs(tmp_path)
    assert [r.seed for r in runs] == [0, 1]
    (s,) = skipped
    assert s.path == tmp_path / "bad" and not s.incomplete and s.why.startswith(message), s.why


@pytest.mark.parametrize("file,text,message", [
    (".hydra/config.yaml", "seed: [0\n", ".hydra/config.yaml: not YAML ("),
    (".hydra/config.yaml", "- 1\n- 2\n", ".hydra/config.yaml is a list, not a mapping"),
    (".hydra/config.yaml", "seed: 3\nseat: {side: sideways}\n",
     ".hydra/config.yaml: seat.side is a string, not one of"),
    (".hydra/config.yaml", "seed: 3\noptimized_metric: 7\n",
     ".hydra/config.yaml: optimized_metric is an integer, not an objective"),
    (".hydra/config.yaml", "seed: 1.5\n", ".hydra/config.yaml: seed is 1.5, not an integer"),
    (".hydra/overrides.yaml", "seed: 3\n",
     ".hydra/overrides.yaml is a mapping, not a list of key=value strings"),
    (".hydra/hydra.yaml", "hydra: !!python/object/apply:os.system ['touch PWNED']\n",
     ".hydra/hydra.yaml: not YAML ("),
    ("metrics.csv", "step,train/games,eval/o_random_win\n0,1024,abc\n",
     "metrics.csv: line 2: eval/o_random_win is not a number"),
    ("metrics.csv", "step,train/games,eval/o_random_win\n0,1024,nan\n",
     "metrics.csv: eval/o_random_win is nan at 1024 games, not a rate in [0, 1]"),
    ("metrics.csv", "step,train/games,eval/o_worst_case\n0,1024,2\n",
     "metrics.csv: eval/o_worst_case is 2.0 at 1024 games, not within [-1, 1]"),
    ("metrics.csv", b"step,train/games\n\xff\xfe\n", "metrics.csv: not UTF-8 text (byte 17)"),
])
def test_a_malformed_config_or_metrics_file_skips_its_run(tmp_path, monkeypatch, file, text, message):
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / "0", 0)
    write_run(tmp_path / "bad", 7)
    path = tmp_path / "bad" / file
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    runs, (s,) = scan_runs(tmp_path)
    assert [r.seed for r in runs] == [0] and s.why.startswith(message), s.why
    assert not (tmp_path / "PWNED").exists()


def write_population(path: Path, members: int = 3) -> Path:
    write_run(path, 100)
    rows = [{"index": i, "seed": 100 + i, "hparams": {"algo.lr": 0.5}, "games": 2048, "eval": EVAL,
             "first_unbeatable_games": None, "stopped": None} for i in range(members)]
    (path / "population.json").write_text(json.dumps({"members": rows, "aggregate": {}}))
    with open(path / "population_evals.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["games", "member", "seed", "eval/o_random_win", "eval/o_worst_case"])
        w.writerows([[2048, i, 100 + i, 0.795767195767, -1.0] for i in range(members)])
    return path


@pytest.mark.parametrize("spoil,message", [
    (lambda p: p.update(members={"0": 1}), "population.json: members is a mapping, not a list of members"),
    (lambda p: p["members"][1].update(seed="${oc.env:HOME}"),
     "population.json: members[1].seed is an interpolation (report resolves none), not an integer"),
    (lambda p: p["members"][2].update(eval=spoiled(**{"as_o.vs_random.tie": float("nan")})),
     "population.json: members[2].eval: as_o.vs_random.tie is nan"),
    (lambda p: p["members"][2].update(index=0), "population.json: members[2].index 0 appears twice"),
    (lambda p: p["members"][0]["hparams"].update(lr=[1]), "population.json: members[0].hparams.lr is a list"),
])
def test_a_broken_population_is_skipped_whole(tmp_path, spoil, message):
    write_run(tmp_path / "single", 0)
    pop = write_population(tmp_path / "pop")
    data = json.loads((pop / "population.json").read_text())
    spoil(data)
    (pop / "population.json").write_text(json.dumps(data))
    runs, (s,) = scan_runs(tmp_path)
    assert [(r.seed, r.member) for r in runs] == [(0, None)] and s.why.startswith(message), s.why


def test_a_population_evals_csv_with_a_nan_is_named_by_its_line(tmp_path):
    pop = write_population(tmp_path / "pop")
    assert [r.member for r in scan_runs(tmp_path)[0]] == [0, 1, 2]
    with open(pop / "population_evals.csv", "a", newline="") as f:
        csv.writer(f).writerow([4096, 1, 101, "nan", 0.0])
    with pytest.raises(ReportError, match="no complete run under .*: 1 malformed"):
        scan_runs(tmp_path)
    write_run(tmp_path / "single", 0)
    _, (s,) = scan_runs(tmp_path)
    assert s.why == ("population_evals.csv: line 5: eval/o_random_win is nan at 4096 games, "
                     "not a rate in [0, 1]")


def test_incomplete_and_malformed_runs_are_counted_on_stderr_and_in_report_md(tmp_path, capsys):
    for seed in (0, 1, 2):
        write_run(tmp_path / str(seed), seed)
    (tmp_path / "3" / ".hydra").mkdir(parents=True)  # still running: Hydra's record, no eval.json
    (tmp_path / "3" / ".hydra" / "config.yaml").write_text("seed: 3\n")
    (tmp_path / "4" / "checkpoints").mkdir(parents=True)  # killed: a checkpoint, no eval.json
    write_run(tmp_path / "5", 5, eval_report=spoiled(**{"as_o.vs_random.win": float("nan")}))
    assert report.main([str(tmp_path), "--reps", "100"]) == 0
    cap = capsys.readouterr()
    err = cap.err.splitlines()
    assert err == [
        f"warning: skipped {tmp_path / '5'}: eval.json: as_o.vs_random.win is nan, not a rate in [0, 1]",
        "warning: skipped 2 incomplete run folder(s) (no eval.json: still running, or stopped before "
        "the end; resume=true finishes one): 3, 4",
        "warning: report skipped 3 run folder(s): 2 incomplete (no eval.json), 1 malformed"]
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("3 seeds under ")
    assert "Skipped 3 run folder(s): 2 incomplete (no eval.json), 1 malformed." in md
    assert "- `5`: eval.json: as_o.vs_random.win is nan" in md
    with open(tmp_path / "report.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["seeds"] == "3" and "nan" not in json.dumps(row).lower()
    assert "nan" not in (tmp_path / "runs.csv").read_text().lower()
    assert not list(tmp_path.rglob("*.tmp"))  # the report's own files: each written whole, then renamed


def test_no_complete_run_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "0" / "checkpoints").mkdir(parents=True)
    write_run(tmp_path / "1", 1, eval_report=spoiled(**{"as_o.worst_case": "maybe"}))
    res = subprocess.run([sys.executable, "-m", "ttt_research.report", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == (f"error: no complete run under {tmp_path}: "
                                           "1 incomplete (no eval.json), 1 malformed")
    assert "Traceback" not in res.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_or_a_device_behind_a_run_file_is_refused_not_read(tmp_path):
    write_run(tmp_path / "0", 0)
    write_run(tmp_path / "fifo", 1)
    (tmp_path / "fifo" / "eval.json").unlink()
    os.mkfifo(tmp_path / "fifo" / "eval.json")  # open() would wait for a writer forever
    write_run(tmp_path / "zero", 2)
    (tmp_path / "zero" / "metrics.csv").unlink()
    (tmp_path / "zero" / "metrics.csv").symlink_to("/dev/zero")  # a read that never ends
    found = []  # in a thread: a report that opens the FIFO would hang the suite, not fail it
    reader = threading.Thread(target=lambda: found.append(scan_runs(tmp_path)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert found, "scan_runs still reading after 30 s"
    ((runs, skipped),) = found
    assert [r.seed for r in runs] == [0]
    assert [(s.path.name, s.why) for s in skipped] == [("fifo", "eval.json: not a regular file"),
                                                      ("zero", "metrics.csv: not a regular file")]


def test_a_real_run_folder_passes_every_check(tmp_path):
    """The checks refuse nothing training writes: a real tiny run (2,048 games), with the
    config Hydra would record (saved by OmegaConf, as Hydra does), is read whole."""
    from omegaconf import OmegaConf

    from tests.helpers.configs import make_cfg
    from ttt_research.train.run import train

    overrides = ["threads=1", "seat=o", "seed=3"]
    cfg = make_cfg(*overrides)
    written = train(cfg, tmp_path / "run")
    (tmp_path / "run" / ".hydra").mkdir()
    OmegaConf.save(cfg, tmp_path / "run" / ".hydra" / "config.yaml")
    (tmp_path / "run" / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    runs, skipped = scan_runs(tmp_path)
    assert skipped == [] and [(r.seed, r.seat) for r in runs] == [(3, "o")]
    assert runs[0].report == written and runs[0].value("net.encoding") == "signed9"
    assert [g for g, _ in runs[0].series["eval/o_random_win"]] == [1024.0, 2048.0]
