"""The solved positions of an m,n,k board kept on disk, built once per board and format.

Where: ``$TTT_RESEARCH_CACHE`` when set (the tests point it at a temporary folder), else
``$XDG_CACHE_HOME/ttt_research``, else ``~/.cache/ttt_research``; one file per board and
format version, ``mnk-M-N-K.vV.positions``, written whole to a temporary file and renamed
(``files/atomic.py``), so a reader meets the old file or the complete new one.

The file: ``MAGIC``, a line ``version V``, the header's length (8 bytes, little-endian), the
header (JSON: the board, each array's dtype and length, the facts), the arrays' bytes, then
the BLAKE2b digest of everything before it. A file read is untrusted: anything but the
magic, this version, the digest of its bytes and this board (a truncated file, one of another
format version or of another board, bytes changed) is rebuilt and written anew, with one line
on stderr saying why; it is never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from ttt_research.env.mnk import MNK
from ttt_research.env.positions import Positions, build
from ttt_research.files.atomic import OutputError, atomic_path

VERSION = 2  # raise it whenever the file's layout or the meaning of an array changes
MAGIC = b"ttt_research m,n,k positions\n"
DIGEST = 32  # bytes of the BLAKE2b digest at the end
ARRAYS = ("codes", "offsets", "winner", "done", "value", "next")
ENV = "TTT_RESEARCH_CACHE"


class Damaged(ValueError):
    """A cache file that cannot be used; the message says why, in a few words."""


def folder() -> Path:
    """The cache folder (see the module); not made until a file is written."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ttt_research"


def path(game: MNK) -> Path:
    return folder() / f"mnk-{game.m}-{game.n}-{game.k}.v{VERSION}.positions"


def positions(game: MNK) -> Positions:
    """``game``'s solved positions: from the cache when its file is sound, else built (and
    the cache written; a folder that cannot be written is said on stderr, not fatal)."""
    file = path(game)
    if file.exists():
        try:
            return read(file, game)
        except Damaged as e:
            print(f"note: the cache {file} {e}: rebuilt", file=sys.stderr)
    built = build(game)
    try:
        write(file, built)
    except OutputError as e:
        print(f"note: the positions are not kept for next time: {e}", file=sys.stderr)
    return built


def _header(p: Positions) -> dict:
    return {"m": p.game.m, "n": p.game.n, "k": p.game.k, "facts": p.facts,
            "arrays": [[name, str(getattr(p, name).dtype), int(getattr(p, name).size)] for name in ARRAYS]}


def write(file: Path, p: Positions) -> None:
    """``p`` to ``file``, whole or not at all (``atomic_path``)."""
    header = json.dumps(_header(p)).encode()
    digest = hashlib.blake2b(digest_size=DIGEST)
    with atomic_path(file) as tmp, open(tmp, "wb") as f:
        for chunk in (MAGIC, f"version {VERSION}\n".encode(), len(header).to_bytes(8, "little"), header,
                      *(memoryview(np.ascontiguousarray(getattr(p, name))).cast("B") for name in ARRAYS)):
            digest.update(chunk)
            f.write(chunk)
        f.write(digest.digest())


def read(file: Path, game: MNK) -> Positions:
    """The positions in ``file``, checked (see the module); ``Damaged`` says why not."""
    try:
        data = file.read_bytes()
    except OSError as e:
        raise Damaged(f"cannot be read ({e.strerror or e})") from e
    if not data.startswith(MAGIC):
        raise Damaged("is not a positions file of this project")
    line_end = data.find(b"\n", len(MAGIC))
    version = data[len(MAGIC):line_end]
    if version != f"version {VERSION}".encode():
        raise Damaged(f"is of another format ({version[:40].decode(errors='replace')!r}, "
                      f"this reads version {VERSION})")
    body = memoryview(data)[:-DIGEST]
    whole = len(data) >= line_end + 9 + DIGEST
    if not whole or hashlib.blake2b(body, digest_size=DIGEST).digest() != data[-DIGEST:]:
        raise Damaged("is damaged (truncated or altered: its digest does not match)")
    start = line_end + 9
    size = int.from_bytes(data[line_end + 1:start], "little")
    try:
        header = json.loads(bytes(body[start:start + size]))
        board = (header["m"], header["n"], header["k"])
        arrays = header["arrays"]
    except (ValueError, KeyError, TypeError) as e:
        raise Damaged(f"has a header that cannot be read ({e})") from e
    if board != (game.m, game.n, game.k):
        raise Damaged(f"holds the {','.join(map(str, board))} board, not {game.name}")
    at, got = start + size, {}
    try:  # the digest vouches for the bytes; a header that does not fit them is no cache of ours
        for name, dtype, length in arrays:
            got[name] = np.frombuffer(body, dtype=dtype, count=length, offset=at)
            at += got[name].nbytes
        if sorted(got) != sorted(ARRAYS) or at != len(body):
            raise ValueError("its arrays do not fill the file")
        return Positions(game, facts=header["facts"], **got)
    except (ValueError, TypeError) as e:
        raise Damaged(f"has a header that does not fit its bytes ({e})") from e
