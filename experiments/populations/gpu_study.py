"""Issue 48's GPU item as one command, for a session that is lent a GPU: the leaderboard's two
100-seed studies (the default REINFORCE, the flagship PPO) and a population of 1,024 flagship PPO
agents, each the whole command a user types, with ``trainer=gpu``, under a time limit.

Each part writes one row file, ``OUT/PART.json``, when its command ends: the wall seconds of each
session, the training seconds (``train/elapsed_s``), the members unbeatable from their seat
(``population.json``), the process's peak resident memory and the GPU's peak memory in use
(``nvidia-smi``, twice a second, less what was in use before the part started). A part still
training at ``--limit-s`` is stopped as a user's ``kill`` stops it (SIGTERM: a checkpoint after
its update) and its row says so (``finished: false``); the same command later resumes it
(``resume=true`` in its run folder, ``--runs/PART``) and adds the session to its row. A finished
part is skipped. A part whose command is refused (exit 2: a bad override; the run folder is
left as it was) writes no row: its line is printed, the row and the run folder stay as they
were, and the script exits 2, as it does for its own bad arguments (one ``error:`` line each).

    python experiments/populations/gpu_study.py --out outputs/gpu_rows --mirror "$OUT/gpu" --limit-s 120
    python experiments/populations/gpu_study.py --out /tmp/g --trainer cpu --parts reinforce100 \\
        debug=tiny population.size=4       # the pipeline on a CPU, in seconds

Extra arguments are overrides added to every part's command. On the device machine (its image
has torch, Lightning, ONNX, onnxruntime, matplotlib and rich; Hydra and OmegaConf travel as
wheels), see ``experiments/populations/README.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from omegaconf import OmegaConf

PARTS = {  # each part: the overrides of its command
    "reinforce100": ["experiment=leaderboard/reinforce"],  # seeds 5000-5099, 4M games each
    "ppo100": ["experiment=leaderboard/ppo"],  # seeds 5000-5099, both seats
    "ppo1024": ["experiment=flagship", "population.size=1024", "seed=6000"],  # seeds 6000-7023
}
GRACE_S = 180  # after SIGTERM: time for the update in flight and its checkpoint
REFUSED = 2  # a command's exit status for a user's mistake (ttt_research.errors.USER_ERROR)


class GpuMemory:
    """The GPU's peak memory in use (MiB) while a part runs, from ``nvidia-smi`` twice a second,
    less what was in use before (0 where there is no ``nvidia-smi``: a CPU host)."""

    def __init__(self):
        self.base = self.read()
        self.peak = self.base
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    @staticmethod
    def read() -> int:
        if shutil.which("nvidia-smi") is None:
            return 0
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout.split()
        return sum(int(v) for v in out if v.isdigit())

    def _watch(self) -> None:
        while not self._done.wait(0.5):
            self.peak = max(self.peak, self.read())

    def __enter__(self) -> GpuMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    @property
    def used_mib(self) -> int:
        return self.peak - self.base


def device_name() -> str:
    """The GPU's name (``nvidia-smi``), or ``cpu``."""
    if shutil.which("nvidia-smi") is None:
        return "cpu"
    return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip().splitlines()[0]


def run_part(cmd: list[str], limit_s: float, err_path: Path) -> tuple[int, float, float, int, bool]:
    """Run ``cmd`` (its stderr into ``err_path``); at ``limit_s`` stop it with SIGTERM, and kill it
    after ``GRACE_S`` more. Ctrl-C or SIGTERM to this script stops the part the same way (the
    terminal's Ctrl-C reaches it too) and is reported, not raised. Returns its exit status, wall
    seconds, peak resident MiB (its own, from ``wait4``), the GPU's peak MiB and whether this
    script was stopped."""
    stopped: list[int] = []
    with err_path.open("w") as err, GpuMemory() as gpu:
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})

        def stop(signum, frame) -> None:  # the part checkpoints after its update, then we report
            stopped.append(signum)
            os.kill(proc.pid, signal.SIGTERM)  # not reaped yet: the pid is still the part's

        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            stop_at, kill_at = limit_s, None
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    break
                waited = time.perf_counter() - began
                if kill_at is None and (waited > stop_at or stopped):
                    if not stopped:
                        proc.send_signal(signal.SIGTERM)  # a user's kill: a checkpoint after the update
                    kill_at = waited + GRACE_S
                elif kill_at is not None and waited > kill_at:
                    proc.kill()
                time.sleep(0.2)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        wall = time.perf_counter() - began
    return proc.returncode, wall, usage.ru_maxrss / 1024, gpu.used_mib, bool(stopped)


def results(folder: Path) -> dict:
    """What the run folder says: training seconds and games (the last logged update), the budget
    and the training seconds it projects to, and with the run finished, its members and how many
    are unbeatable from their seat."""
    out: dict = {}
    metrics = folder / "metrics.csv"
    if metrics.exists():
        rows = [r for r in csv.DictReader(metrics.open()) if r.get("train/elapsed_s")]
        if rows:
            out["train_s"] = float(rows[-1]["train/elapsed_s"])
            out["games"] = int(float(rows[-1]["train/games"]))
    config = folder / ".hydra" / "config.yaml"
    if config.exists():
        out["budget_games"] = int(OmegaConf.load(config).budget.games)
        if out.get("games"):  # where a stopped part would be at its budget, at the rate it trained
            out["projected_train_s"] = round(out["train_s"] * out["budget_games"] / out["games"], 1)
    if (pop := folder / "population.json").exists():  # every part is a population
        agg = json.loads(pop.read_text())["aggregate"]
        out["members"], out["unbeatable"] = agg["members"], agg["unbeatable"]
    return out


def write_row(path: Path, row: dict) -> None:
    """Whole or absent: written beside, then renamed."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(row, indent=1) + "\n")
    os.replace(part, path)


def refuse(message: str) -> None:
    """One ``error:`` line on stderr and exit status 2, as the project's commands refuse."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(REFUSED)


class Parser(argparse.ArgumentParser):
    """argparse's refusals as one ``error:`` line (its usage lines left out)."""

    def error(self, message: str):
        refuse(f"{self.prog}: {message}")


def seconds(text: str) -> float:
    """A finite positive number of seconds (``nan`` passed ``float`` and never fired)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite positive number of seconds, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> None:
    ap = Parser(prog="gpu_study.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="folder of the row files (one per part)")
    ap.add_argument("--runs", type=Path, default=Path("outputs/gpu_study"),
                    help="the parts' run folders, kept for resuming (default outputs/gpu_study)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--limit-s", type=seconds, default=480,
                    help="seconds a part runs in one invocation (its start-up included)")
    ap.add_argument("--trainer", default="gpu", help="the trainer option (cpu: the pipeline on a CPU host)")
    ap.add_argument("--mirror", type=Path, help="a second folder each row is written to as it is written "
                    "(the device machine's $OUT, which comes back even when the call runs out of time)")
    args, overrides = ap.parse_known_args(argv)
    parts = args.parts.split(",")
    if unknown := [p for p in parts if p not in PARTS]:
        refuse(f"unknown part {unknown[0]!r}; the parts are {', '.join(PARTS)}")
    for name in parts:
        path = args.out / f"{name}.json"
        row = json.loads(path.read_text()) if path.exists() else None
        if row and row["finished"]:
            print(f"{name}: finished before, skipped ({path})")
            continue
        folder = args.runs / name
        # A run that passed its checks (its .hydra/ is written then) is resumed, with a checkpoint
        # or without one yet (it starts again), even without a row: a call killed mid-part (the
        # device's 10-minute limit) writes none. Another config's run there is refused by the resume.
        resume = (folder / ".hydra").is_dir()
        cmd = [sys.executable, "-m", "ttt_research", *PARTS[name], f"trainer={args.trainer}", *overrides,
               "logger=csv", "progress=lines", f"hydra.run.dir={folder}", *["resume=true"][:resume]]
        print(f"{name}: {'resuming' if resume else 'starting'}, at most {args.limit_s:.0f} s: "
              f"{' '.join(cmd[1:])}", flush=True)
        made = [d for d in (args.out, folder.parent) if not d.exists()]
        for d in made:
            d.mkdir(parents=True, exist_ok=True)
        err = args.out / f"{name}.err.part"  # named .err once the part ran and failed
        code, wall, rss, gpu, interrupted = run_part(cmd, args.limit_s, err)
        if code == REFUSED:  # the command ran nothing: the run folder holds an earlier run's figures
            lines = err.read_text().strip().splitlines()
            err.unlink()
            for d in reversed(made):  # the folders made for it, if still empty
                if d.is_dir() and not any(d.iterdir()):
                    d.rmdir()
            refuse(f"{name} was refused (exit {code}), no row written and its run folder as it was: "
                   f"{lines[-1].removeprefix('error: ') if lines else '(it said nothing)'}")
        os.replace(err, args.out / f"{name}.err")
        row = row or {"part": name, "device": device_name(), "command": cmd[1:], "sessions": []}
        row["sessions"].append({"wall_s": round(wall, 1), "exit": code, "peak_rss_mib": round(rss),
                                "peak_gpu_mib": gpu})
        row.update(results(folder), finished=code == 0)
        row["wall_s"] = round(sum(s["wall_s"] for s in row["sessions"]), 1)
        write_row(path, row)
        if args.mirror:
            args.mirror.mkdir(parents=True, exist_ok=True)
            write_row(args.mirror / path.name, row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("command", "sessions")}), flush=True)
        if code == 0:
            (args.out / f"{name}.err").unlink()
        elif code not in (130, 143):  # its row says so too: the next call tries it again
            err = args.out / f"{name}.err"
            lines = err.read_text().strip().splitlines()
            sys.exit(f"{name} exited {code}: {lines[-1] if lines else ''} (all of it: {err})")
        if interrupted:
            sys.exit(f"stopped: {name} has its row in {path}; the same command resumes it")


if __name__ == "__main__":
    main()
