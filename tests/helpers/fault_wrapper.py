"""Fault injection for tests/system/test_fault_injection.py: training runs killed (SIGKILL, as a crash
kills) at a chosen file event, then resumed, with nothing added to the production code.

``python tests/helpers/fault_wrapper.py PLAN.json RESULT.json`` imports the project once, then runs each
job of the plan in a forked child (``python -m ttt_research`` as the user runs it, Hydra
included), so that a job costs its training, not the ~10 s of imports. A job is a list of
runs in one folder, each ``{"args": [overrides], "kill": spec or null, "resume": "auto"}``
(``auto``: the user's next step after a kill: ``resume=true`` if a checkpoint is there, the
same command if none is, nothing if ``eval.json`` says the run is complete); a kill spec is

* ``{"event": "replace", "name": "checkpoints/last.ckpt", "n": 2, "when": "before"|"after"}``:
  at the n-th ``os.replace`` onto that file of the run folder (every output's rename, the
  checkpoint's, metrics.csv's header widening), just before it or just after it;
* ``{"event": "row", "n": 3, "when": "before"|"after"|"torn"}``: at the n-th row of
  ``metrics.csv`` (``csvlog.MetricsCSV.append``), before it, after it (written and flushed),
  or in the middle of its line (half written, flushed: what a full disk leaves);
* ``{"event": "random", "fraction": 0.4}``: on a timer, at that fraction of the time the
  plan's first run (uninterrupted) took.

A run without a kill records its file events in order (the tests pick kills from them). After
each run the folder's state is checked at once (``check_folder``: no torn output, and
``eval.json``, the mark of a complete run, only beside the run's other outputs); the result
file says, per run, whether it was killed, its exit status and what the check found.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path


def check_folder(run_dir: Path) -> list[str]:
    """What is wrong with the folder as a kill left it (empty: nothing)."""
    problems = []
    csv_path = run_dir / "metrics.csv"
    if csv_path.exists():
        text = csv_path.read_text()
        if not text:
            problems.append("metrics.csv is empty")
        elif not text.startswith("epoch,") and "train/games" not in text.split("\n", 1)[0]:
            problems.append("metrics.csv has no header")
    done = run_dir / "eval.json"
    if done.exists():
        try:
            json.loads(done.read_text())
        except ValueError:
            problems.append("eval.json is torn")
        needed = ["policy.onnx", "curves.png", "checkpoints/last.ckpt"]
        if (run_dir / "population.json").exists() or "population" in done.read_text():
            needed += ["population.json", "population.csv", "population_evals.csv"]
        for name in needed:
            if not (run_dir / name).is_file():
                problems.append(f"eval.json (complete) without {name}")
        import onnx

        try:
            onnx.load(str(run_dir / "policy.onnx"))
        except Exception as e:  # noqa: BLE001 - any failure to load is a torn model
            problems.append(f"policy.onnx does not load: {e}")
        png = run_dir / "curves.png"
        if png.is_file() and not png.read_bytes().endswith(b"IEND\xaeB`\x82"):
            problems.append("curves.png is torn")
    for name in ("policy.onnx", "population.json"):
        path = run_dir / name
        if path.is_file() and path.stat().st_size == 0:
            problems.append(f"{name} is empty")
    return problems


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _install(run_dir: Path, kill: dict | None, events: list) -> None:
    """Patch the child so that it records its file events and dies at the chosen one."""
    from ttt_research.train import csvlog

    counts: dict[str, int] = {}
    real_replace = os.replace
    root = os.path.realpath(run_dir)

    def replace(src, dst, *a, **k):
        full = os.path.realpath(os.fspath(dst))
        if not full.startswith(root + os.sep):
            return real_replace(src, dst, *a, **k)
        name = os.path.relpath(full, root)
        counts[name] = counts.get(name, 0) + 1
        events.append(["replace", name])
        hit = (kill is not None and kill["event"] == "replace" and kill["name"] == name
               and kill["n"] == counts[name])
        if hit and kill["when"] == "before":
            _die()
        out = real_replace(src, dst, *a, **k)
        if hit:
            _die()
        return out

    os.replace = replace

    real_append = csvlog.MetricsCSV.append

    def append(self, row):
        counts["row"] = counts.get("row", 0) + 1
        events.append(["row", int(float(row.get("train/games", 0)))])
        hit = kill is not None and kill["event"] == "row" and kill["n"] == counts["row"]
        if hit and kill["when"] == "before":
            _die()
        if hit and kill["when"] == "torn":  # the row's line half written, as a full disk leaves it
            if self._file is None and not self.header:
                self._open()
            if self._file is None or not set(row) <= set(self.header):
                self._widen(row)
            line = csvlog.format_rows(self.header, [row])
            self._file.write(line[: len(line) // 2])
            self._file.flush()
            _die()
        real_append(self, row)
        if hit:
            _die()

    csvlog.MetricsCSV.append = append

    if kill is not None and kill["event"] == "random":
        timer = threading.Timer(kill["seconds"], _die)
        timer.daemon = True
        timer.start()


def run_child(run_dir: Path, args: list[str], kill: dict | None, log: Path) -> dict:
    """One ``python -m ttt_research`` in a forked child; its exit status and file events."""
    events_file = log.with_suffix(".events.json")
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            fd = os.open(str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            events: list = []
            _install(run_dir, kill, events)
            sys.argv = ["ttt_research", *args, f"hydra.run.dir={run_dir}"]
            from ttt_research.__main__ import main

            try:
                main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            events_file.write_text(json.dumps(events))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    out = {"killed": killed, "exit": os.waitstatus_to_exitcode(status),
           "seconds": time.perf_counter() - start, "problems": check_folder(run_dir)}
    if events_file.exists():
        out["events"] = json.loads(events_file.read_text())
    return out


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    # Everything a run imports, once, before the first fork (torch runs no op here, so no
    # thread pool exists that a fork could break).
    import lightning  # noqa: F401
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401

    import ttt_research.__main__  # noqa: F401
    import ttt_research.train  # noqa: F401

    results = []
    reference = None  # the first job's first run (uninterrupted): random kills are fractions of it
    for k, job in enumerate(plan["jobs"]):
        run_dir = Path(job["dir"])
        done = []
        for i, run in enumerate(job["runs"]):
            args = list(run["args"])
            if run.get("resume") == "auto":  # the user's next step after a kill:
                if (run_dir / "eval.json").is_file():  # complete: nothing to do
                    done.append({"skipped": "complete"})
                    continue
                if (run_dir / "checkpoints" / "last.ckpt").is_file() or (run_dir / ".hydra").is_dir():
                    args.append("resume=true")  # continue from the checkpoint, or start again
                # else killed before the run wrote anything: the same command starts it
            kill = run.get("kill")
            if kill and kill["event"] == "random":
                kill = {**kill, "seconds": kill["fraction"] * reference}
            log = Path(plan["logs"]) / f"job{k:02d}-run{i}.log"
            done.append({**run_child(run_dir, args, kill, log), "args": args})
            reference = reference or done[-1]["seconds"]
        results.append(done)
    Path(sys.argv[2]).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
