"""A helper process that draws a run's ``curves.png`` while the run does its last work.

Importing matplotlib and drawing the curves took ~0.6 s of a 1-game run's whole command, all
on the critical path before ``eval.json``. The training command starts this helper
(``Plotter.start``) as soon as its config is valid (``train`` starts one itself when called
without): the helper imports matplotlib at once, on the other core while the run loads torch
and Lightning, then waits. After training the run asks for a figure (``request``) and goes on
with its exact evaluation and ONNX export while the helper draws; ``Drawing.png`` returns the
PNG's bytes, which the run writes into its folder itself (atomically, in its order: the
helper never touches the run folder, so a killed run leaves nothing of it there).

Anything wrong with the helper (it could not start, died, answered garbage) costs nothing
but time: the figure is then drawn in the run's own process, as before, with the same code
and the same bytes. The helper ignores Ctrl-C (the terminal sends it to the whole process
group: the run decides how to stop) and exits when its input closes, which is also what
happens when the run ends or is killed.

Protocol, one request at a time: a JSON line ``{"kind": "curves" | "population", "args":
[...]}`` on stdin; the answer is ``ok N`` and N bytes of PNG, or ``error MESSAGE``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from ttt_research.analysis import curves

KINDS = ("curves", "population")


def _draw(kind: str, args: list) -> bytes:
    return (curves.curves_png if kind == "curves" else curves.population_png)(*args)


class Drawing:
    """One requested figure: ``png()`` waits for the helper's bytes, or draws it here."""

    def __init__(self, plotter: Plotter | None, kind: str, args: list):
        self.plotter, self.kind, self.args = plotter, kind, args

    def png(self) -> bytes:
        got = self.plotter.answer() if self.plotter is not None else None
        return got if got is not None else _draw(self.kind, self.args)


class Plotter:
    """The helper process (``start``), or None in its place where it could not start."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    @classmethod
    def start(cls) -> Plotter | None:
        root = str(Path(__file__).resolve().parents[2])  # the folder that holds the package
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            process = subprocess.Popen([sys.executable, "-m", "ttt_research.analysis.plotter"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, env=env)
        except OSError:
            return None
        return cls(process)

    def request(self, kind: str, *args) -> Drawing:
        """Ask for a figure (``KINDS``); paths and titles as ``curves_png`` / ``population_png``."""
        args = [str(a) if isinstance(a, Path) else a for a in args]
        try:
            self.process.stdin.write((json.dumps({"kind": kind, "args": args}) + "\n").encode())
            self.process.stdin.flush()
        except (OSError, ValueError):  # gone already
            return Drawing(None, kind, args)
        return Drawing(self, kind, args)

    def answer(self) -> bytes | None:
        """The bytes of the figure requested last, or None if the helper failed it."""
        try:
            head = self.process.stdout.readline().decode(errors="replace").split()
            if len(head) == 2 and head[0] == "ok" and head[1].isdigit():
                data = self.process.stdout.read(int(head[1]))
                if len(data) == int(head[1]):
                    return data
        except (OSError, ValueError):
            pass
        return None

    def close(self) -> None:
        """End the helper: its input closes and it exits on its own (its interpreter's ~0.2 s
        of teardown is not waited for; ``subprocess`` reaps it later, or init does)."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        self.process.poll()


def serve(stdin=None, stdout=None) -> None:
    """The helper's loop: import matplotlib first, then answer each request line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin, stdout = stdin or sys.stdin.buffer, stdout or sys.stdout.buffer
    curves.figure()  # matplotlib, its Agg canvas and its fonts loaded before anything is asked
    for line in stdin:
        try:
            request = json.loads(line)
            if request.get("kind") not in KINDS:
                raise ValueError(f"no such figure: {request.get('kind')!r}")
            data = _draw(request["kind"], request["args"])
        except Exception as e:  # noqa: BLE001  the run draws it itself and meets the error there
            stdout.write(f"error {type(e).__name__}\n".encode())
        else:
            stdout.write(f"ok {len(data)}\n".encode() + data)
        stdout.flush()


if __name__ == "__main__":
    serve()
