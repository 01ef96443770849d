"""``python -m ttt_research.solve``: the facts of a board as text and JSON, presets and
``game.m/n/k`` alike, and every bad board or override one line with exit code 2, nothing
written (no cache file, no run folder). In-process ``main``, one subprocess for ``-m``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ttt_research.env import cache
from ttt_research.solve import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cache"


def test_tic_tac_toe_by_default(folder, capsys):
    assert main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("the 3,3,3 game: 3 rows, 3 columns, 3 in a line wins, X moves first "
                      "(8 lines, 8 symmetries)")
    assert out[1].split() == ["positions", "reachable", "from", "the", "empty", "board", "5,478"]
    assert out[4].endswith("  draw") and out[5].endswith("  0.584921 / 0.126984 / 0.288095")
    assert out[6].endswith("  255,168")
    assert [p.name for p in folder.iterdir()] == [cache.path(cache.MNK(3, 3, 3)).name]


@pytest.mark.parametrize("args", [["game=mnk343", "--json"], ["game=mnk", "game.m=3", "game.n=4", "--json"],
                                  ["--json", "game=mnk", "game.m=4", "game.n=3", "game.k=3"]])
def test_a_preset_and_its_keys_give_the_same_facts(folder, capsys, args):
    assert main(args) == 0
    f = json.loads(capsys.readouterr().out)
    assert (f["reachable"], f["terminal"], f["to_move"], f["value"], f["complete_games"]) == \
        (111_973, 32_410, 79_563, "X wins", 151_188_768)
    assert f["m"] * f["n"] == 12 and f["k"] == 3


@pytest.mark.parametrize("args, said", [
    (["game=mnk", "game.m=5", "game.n=4"],
     "error: game.m=5 game.n=4: a board of 20 cells; at most 16 "
     "(m * n <= 16: the positions of a larger board do not fit in memory)"),
    (["game=mnk", "game.k=1"], "error: game.k=1: k must be in 2..3 on a 3x3 board (1 < k <= max(m, n): "
                               "one piece is no line)"),
    (["game=mnk444", "game.k=5"], "error: game.k=5: k must be in 2..4 on a 4x4 board (1 < k <= max(m, n): "
                                  "no line of 5 fits on the board)"),
    (["game=mnk", "game.m=four"], "error: game.m must be a positive integer, got 'four'"),
    (["game.m=4"], "error: game=ttt is the 3,3,3 board, got game.m=4 game.n=3 game.k=3; choose game=mnk "
                   "for another board"),
    (["game=go"], "error: game=go: game has no option go (named in solve); choose one of mnk, mnk343, "
                  "mnk443, mnk444, ttt"),
    (["game.size=4"], "error: game.size is not a key of the config; game has name, m, n, k"),
])
def test_a_bad_board_is_one_line_and_nothing_written(folder, tmp_path, capsys, args, said):
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(args) == 2
    got = capsys.readouterr()
    assert (got.out, got.err.splitlines()) == ("", [said])
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not folder.exists()


def test_the_module_runs_and_makes_no_folder(folder, tmp_path):
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    got = subprocess.run([sys.executable, "-m", "ttt_research.solve", "game=mnk", "game.m=2", "game.n=2",
                          "game.k=2", "--json"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["value"] == "X wins" and got.stderr == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no outputs/ of Hydra's
    bad = subprocess.run([sys.executable, "-m", "ttt_research.solve", "game=mnk", "game.m=5", "game.n=4"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert (bad.returncode, bad.stdout, len(bad.stderr.splitlines())) == (2, "", 1)
