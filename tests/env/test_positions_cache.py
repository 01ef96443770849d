"""The solved positions kept on disk (env/cache.py): read back equal, never trusted when damaged
(truncated, altered, of another format version or of another board: rebuilt, one line on
stderr, the other files of the folder untouched), and a build's progress on stderr when slow."""

from __future__ import annotations

import numpy as np
import pytest

from ttt_research.env import cache, positions
from ttt_research.env.mnk import MNK

GAME = MNK(3, 3, 3)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def same(a: positions.Positions, b: positions.Positions) -> bool:
    return a.facts == b.facts and all(np.array_equal(getattr(a, name), getattr(b, name))
                                      for name in cache.ARRAYS)


def test_the_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.folder() == tmp_path / "xdg" / "ttt_research"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.folder() == tmp_path / "home" / ".cache" / "ttt_research"
    monkeypatch.setenv(cache.ENV, str(tmp_path / "mine"))
    assert cache.path(MNK(4, 3, 3)) == tmp_path / "mine" / f"mnk-4-3-3.v{cache.VERSION}.positions"


def test_built_once_then_read(folder, monkeypatch, capsys):
    first = cache.positions(GAME)
    assert [p.name for p in folder.iterdir()] == [cache.path(GAME).name]  # no temporary file left

    def no_build(game):
        raise AssertionError("built again")

    monkeypatch.setattr(cache, "build", no_build)
    again = cache.positions(GAME)
    assert same(first, again) and capsys.readouterr().err == ""


def damage(file, how: str, folder):
    data = file.read_bytes()
    if how == "truncated":
        file.write_bytes(data[: len(data) // 2])
    elif how == "altered":
        file.write_bytes(data[:-100] + bytes([data[-100] ^ 1]) + data[-99:])
    elif how == "another version":
        ours, theirs = (f"version {v}\n".encode() for v in (cache.VERSION, cache.VERSION + 1))
        file.write_bytes(data.replace(ours, theirs, 1))
    elif how == "another board":  # a sound file of 3,4,3 under 3,3,3's name
        file.write_bytes(cache.path(MNK(3, 4, 3)).read_bytes())
    elif how == "not ours":
        file.write_bytes(b"PK\x03\x04 something else")
    elif how == "empty":
        file.write_bytes(b"")


@pytest.mark.parametrize("how, said", [
    ("truncated", "is damaged (truncated or altered: its digest does not match): rebuilt"),
    ("altered", "is damaged (truncated or altered: its digest does not match): rebuilt"),
    ("another version", f"is of another format ('version {cache.VERSION + 1}', this reads version "
                        f"{cache.VERSION}): rebuilt"),
    ("another board", "holds the 3,4,3 board, not 3,3,3: rebuilt"),
    ("not ours", "is not a positions file of this project: rebuilt"),
    ("empty", "is not a positions file of this project: rebuilt"),
])
def test_a_damaged_cache_is_rebuilt_never_trusted(folder, capsys, how, said):
    good = cache.positions(GAME)
    cache.positions(MNK(3, 4, 3))
    other = cache.path(MNK(3, 4, 3))
    kept = other.read_bytes()
    file = cache.path(GAME)
    sound = file.read_bytes()
    capsys.readouterr()
    damage(file, how, folder)
    again = cache.positions(GAME)
    assert same(good, again)
    assert capsys.readouterr().err.splitlines() == [f"note: the cache {file} {said}"]
    assert file.read_bytes() == sound and other.read_bytes() == kept  # written anew; the other untouched
    assert sorted(p.name for p in folder.iterdir()) == sorted([file.name, other.name])


def test_a_folder_that_cannot_be_written_is_said_not_fatal(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    monkeypatch.setenv(cache.ENV, str(blocker / "cache"))  # below a file: no folder can be made
    p = cache.positions(GAME)
    assert p.facts["reachable"] == 5_478
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("note: the positions are not kept for next time: cannot write ")
    assert blocker.read_text() == "mine"


def test_a_slow_build_shows_its_progress(monkeypatch, capsys):
    monkeypatch.setattr(positions, "SHOW_AFTER_S", 0.0)
    positions.build(MNK(3, 3, 2))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("positions of 3,3,2: ply 1, 9 positions (1/18, ")
    assert lines[-1].startswith("positions of 3,3,2: solved ply 0 (18/18, ")
    monkeypatch.setattr(positions, "SHOW_AFTER_S", 60.0)
    positions.build(MNK(3, 3, 2))
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_4_4_4_is_built_once_and_read_back_whole(folder):
    """Issue 59's 4,4,4: built the first time, read back the same from the cache after (its
    times, <= 60 s and <= 2 s, are the bench's: ``bench/boards.py``, BENCHMARKS.md)."""
    game = MNK(4, 4, 4)
    built = cache.positions(game)
    read = cache.positions(game)
    assert same(built, read) and read.facts["reachable"] == 9_722_011
    assert int(read.next.size) == 9_722_011 * 16
