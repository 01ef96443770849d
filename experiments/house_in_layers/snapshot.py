#!/usr/bin/env python3
"""Behaviour snapshot of a ttt_research tree, for before/after comparisons of a refactor.

    python experiments/house_in_layers/snapshot.py TREE OUTDIR [--jobs N]

Everything runs with cwd=TREE and PYTHONPATH=TREE/src (nothing else on it), threads=1.

1. cfg/: ``python -m ttt_research GROUP=OPTION --cfg job`` for every option of every group
   folder of TREE/conf (hydra/ skipped), the default (no override) and a few combinations;
   for experiment/hparams_search also the Hydra sweeper node (``--cfg hydra --package
   hydra.sweeper``), where hparams_search's search space lives. Lines holding ``_target_:``
   are removed (module paths change on purpose); TREE/OUTDIR paths and timestamps are
   normalised. A command that fails writes its exit status and stderr instead.
2. runs/NAME/: tiny training runs (``debug=tiny threads=1 logger=csv
   hydra.run.dir=OUTDIR/runs/NAME``). The run folder keeps its raw files; the captured ones are
   eval.json (as is), metrics.csv (perf/* and time-like columns dropped; the raw file is kept
   as metrics.raw.csv), population.json (time-like keys dropped: none exist today),
   population.csv / population_evals.csv (time-like columns dropped), sha256 of policy.onnx,
   and status.txt (exit codes and the last stderr line of each command).
   The resume runs are stopped deterministically: the command runs through this script's
   ``--stop-after-first-checkpoint`` wrapper, which sends SIGTERM to its own process right after
   the first ``os.replace`` onto checkpoints/last.ckpt (the project's handler then stops the run
   at the end of that update, with a checkpoint), then ``resume=true`` continues it.
3. index.txt: what was captured. manifest.txt: the captured files (compare.py diffs these).
Raw command logs go to OUTDIR/logs/ (not compared: they hold timings).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

GROUP_ORDER = ["algo", "net", "reward", "opponent", "seat", "trainer", "logger",
               "experiment", "hparams_search", "debug"]
PLUS_FALLBACK = {"experiment", "hparams_search", "debug"}  # `+group=x` only if `group=x` fails
SWEEPER_GROUPS = {"experiment", "hparams_search"}
COMBOS = [
    ["algo=ppo", "net=mlp128", "seat=both"],
    ["algo=reinforce_faithful"],
    ["population.size=4", "algo=ppo"],
]
TINY = ["debug=tiny", "threads=1", "logger=csv"]
# name -> list of stages; a stage: (overrides, stop_after_first_checkpoint)
RUNS: dict[str, list[tuple[list[str], bool]]] = {
    "a_default": [([], False)],
    "b_reinforce_faithful": [(["algo=reinforce_faithful"], False)],
    "c_ppo": [(["algo=ppo"], False)],
    "d_ppo_both_mlp128": [(["algo=ppo", "seat=both", "net=mlp128"], False)],
    "e_population3": [(["population.size=3"], False)],
    "f_population3_ppo": [(["population.size=3", "algo=ppo"], False)],
    "g_self_ppo": [(["opponent=self", "algo=ppo"], False)],
    # The literal "budget.games=1024, then budget.games=2048 resume=true" is refused by the
    # code (exit 2: "is the end of a finished run (1,024 games)"; test_run_folder.py
    # test_a_larger_budget_for_a_finished_run_is_refused); recorded as h0. The resumes
    # actually captured follow tests/test_signals.py: SIGTERM during the run, then resume.
    "h0_finished_then_larger_budget_refused": [(["budget.games=1024"], False),
                                               (["budget.games=2048", "resume=true"], False)],
    # stopped after 1,024 games (checkpoint of update 1 renamed at the start of update 2 ->
    # SIGTERM -> stop at the end of update 2), resumed to the same 2,048 games budget:
    # test_a_signal_checkpoints_the_update_and_resume_ends_as_an_uninterrupted_run
    "h1_sigterm_resume": [(["budget.games=2048", "checkpoint_every=1"], True),
                          (["budget.games=2048", "resume=true"], False)],
    # the same stop, resumed with a larger budget (3,072): test_a_stopped_run_resumes_with_a_larger_budget
    "h2_sigterm_resume_larger_budget": [(["budget.games=2048", "checkpoint_every=1"], True),
                                        (["budget.games=3072", "resume=true"], False)],
    # Issue 33's references (the second step of the house): its own runs, at full size where
    # it names a budget ("!full": threads=1 logger=csv without debug=tiny).
    "i1_seed7_40k": [(["!full", "seed=7", "budget.games=40000"], False)],
    "i2_ppo_mlp128_seed7_20k": [(["!full", "algo=ppo", "net=mlp128", "seed=7", "budget.games=20000"], False)],
    "i3_population3_seed7_40k": [(["!full", "population.size=3", "seed=7", "budget.games=40000"], False)],
    "i4_antirez_repro_seed7_3k": [(["!full", "experiment=antirez_repro", "seed=7", "budget.games=3000"],
                                   False)],
    "i5_qlearning": [(["algo=qlearning", "net=qtable", "seed=7"], False)],
    "i6_dqn": [(["algo=dqn", "seed=7"], False)],
    "i7_alphazero": [(["algo=alphazero", "seed=7", "budget.games=200", "algo.games_per_update=50"], False)],
}
FULL = ["threads=1", "logger=csv"]
TIME_COLUMN = re.compile(r"(^perf/)|((^|[/_.])(time|times|wall|walltime|timestamp|seconds|secs|"
                         r"elapsed|duration|started|finished|date|now)($|[/_.]))", re.I)
CAPTURE_CSV = ["metrics.csv", "population.csv", "population_evals.csv"]


# ------------------------------------------------------------------ the stop wrapper (child)

def stop_after_first_checkpoint(run_dir: str, args: list[str]) -> None:
    """Run ``python -m ttt_research ARGS`` in this process; SIGTERM to itself right after the
    first rename onto RUN_DIR/checkpoints/last.ckpt (deterministic: always the same update)."""
    import runpy
    import signal

    target = os.path.realpath(os.path.join(run_dir, "checkpoints", "last.ckpt"))
    real_replace = os.replace
    fired = []

    def replace(src, dst, *a, **k):
        out = real_replace(src, dst, *a, **k)
        if not fired and os.path.realpath(os.fspath(dst)) == target:
            fired.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    os.replace = replace
    sys.path[0] = os.getcwd()  # as `python -m` has it (cwd first), not this script's folder
    sys.argv = ["ttt_research", *args]
    runpy.run_module("ttt_research", run_name="__main__", alter_sys=True)


# ------------------------------------------------------------------ helpers

class Snap:
    def __init__(self, tree: Path, out: Path, jobs: int):
        self.tree, self.out, self.jobs = tree, out, jobs
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
        self.env.update(PYTHONPATH=str(tree / "src"), PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
                        MKL_NUM_THREADS="1", TZ="UTC", NO_COLOR="1", COLUMNS="120")
        self.env.pop("WANDB_MODE", None)
        self.logs = out / "logs"
        self.manifest: list[str] = []
        self.index: list[str] = []

    def run(self, args: list[str], log: str, timeout: int = 900) -> subprocess.CompletedProcess:
        t0 = time.time()
        p = subprocess.run([sys.executable, *args], cwd=self.tree, env=self.env, capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        (self.logs / f"{log}.log").write_text(
            f"$ {' '.join(args)}\nrc={p.returncode} wall={time.time() - t0:.1f}s\n"
            f"--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}")
        return p

    def normalise(self, text: str) -> str:
        for path, name in ((self.out, "<OUT>"), (self.tree, "<TREE>")):
            for p in {str(path), os.path.realpath(path)}:
                text = text.replace(p, name)
        text = re.sub(r"\d{4}-\d{2}-\d{2}[T _]\d{2}[:-]\d{2}[:-]\d{2}(\.\d+)?([+-]\d{2}:?\d{2}|Z)?",
                      "<TIMESTAMP>", text)
        text = re.sub(r"\b\d{4}-\d{2}-\d{2}\b", "<DATE>", text)
        text = re.sub(r"(?<![\d.])\d{2}-\d{2}-\d{2}(?![\d.])", "<TIME>", text)
        return text

    def write(self, rel: str, text: str) -> None:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.manifest.append(rel)

    # -------------------------------------------------------------- 1. configs

    def cfg_one(self, name: str, overrides: list[str], extra: list[str] | None = None,
                fallback: list[str] | None = None) -> str:
        extra = extra or ["--cfg", "job"]
        p = self.run(["-m", "ttt_research", *overrides, *extra], f"cfg_{name}")
        used = overrides
        if p.returncode != 0 and fallback:
            q = self.run(["-m", "ttt_research", *fallback, *extra], f"cfg_{name}.plus")
            if q.returncode == 0 or not p.stdout:
                p, used = q, fallback
        if p.returncode == 0:
            body = "".join(l for l in p.stdout.splitlines(keepends=True) if "_target_:" not in l)
        else:
            body = f"# command failed: exit {p.returncode}\n# stderr:\n{p.stderr}"
        self.write(f"cfg/{name}.yaml", self.normalise(body))
        return f"cfg/{name}.yaml  <- {' '.join(used + extra)}  (exit {p.returncode})"

    def configs(self) -> None:
        conf = self.tree / "conf"
        skip = ("hydra", "__pycache__")
        found = sorted(d.name for d in conf.iterdir() if d.is_dir() and d.name not in skip)
        groups = [g for g in GROUP_ORDER if g in found] + [g for g in found if g not in GROUP_ORDER]
        tasks = [("default", [], None, None)]
        for g in groups:
            for opt in sorted(f.stem for f in (conf / g).glob("*.yaml")):
                fb = [f"+{g}={opt}"] if g in PLUS_FALLBACK else None
                tasks.append((f"{g}={opt}", [f"{g}={opt}"], None, fb))
                if g in SWEEPER_GROUPS:
                    tasks.append((f"{g}={opt}.sweeper", [f"{g}={opt}"],
                                  ["--cfg", "hydra", "--package", "hydra.sweeper"],
                                  [f"+{g}={opt}"] if g in PLUS_FALLBACK else None))
        for combo in COMBOS:
            tasks.append(("combo_" + "+".join(combo), combo, None, None))
        with ThreadPoolExecutor(self.jobs) as ex:
            lines = list(ex.map(lambda t: self.cfg_one(*t), tasks))
        self.index.append(f"== cfg: {len(lines)} files (groups: {', '.join(groups)})")
        self.index += lines

    # -------------------------------------------------------------- 2. runs

    def filter_csv(self, src: Path, dst: Path) -> list[str]:
        rows = list(csv.reader(io.StringIO(src.read_text(), newline="")))
        if not rows:
            dst.write_text("")
            return []
        keep = [i for i, c in enumerate(rows[0]) if not TIME_COLUMN.search(c)]
        dropped = [c for c in rows[0] if TIME_COLUMN.search(c)]
        buf = io.StringIO(newline="")
        w = csv.writer(buf, lineterminator="\n")
        for r in rows:
            w.writerow([r[i] if i < len(r) else "" for i in keep])
        dst.write_text(buf.getvalue())
        return dropped

    def filter_json(self, obj, dropped: set, path: str = ""):
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if TIME_COLUMN.search(str(k)):
                    dropped.add(f"{path}{k}")
                    continue
                out[k] = self.filter_json(v, dropped, f"{path}{k}.")
            return out
        if isinstance(obj, list):
            return [self.filter_json(v, dropped, path + "[].") for v in obj]
        return obj

    def train_one(self, name: str, stages: list[tuple[list[str], bool]]) -> str:
        run_dir = self.out / "runs" / name
        status = []
        for k, (overrides, stop) in enumerate(stages):
            base = TINY
            if overrides[:1] == ["!full"]:
                base, overrides = FULL, overrides[1:]
            args = [*base, *overrides, f"hydra.run.dir={run_dir}"]
            if stop:
                cmd = [str(Path(__file__).resolve()), "--stop-after-first-checkpoint", str(run_dir), *args]
            else:
                cmd = ["-m", "ttt_research", *args]
            p = self.run(cmd, f"run_{name}.{k}")
            last = (p.stderr.strip().splitlines() or [""])[-1]
            last = last if last.startswith(("stopped by", "error:")) else ""
            shown = " ".join([*base, *overrides]) + (" [SIGTERM after first checkpoint]" if stop else "")
            status.append(f"stage {k}: {shown}\n  exit {p.returncode}"
                          + (f"\n  {self.normalise(last)}" if last else "") + "\n")
        run_dir.mkdir(parents=True, exist_ok=True)
        self.write(f"runs/{name}/status.txt", "".join(status))
        got, dropped = ["status.txt"], set()
        if (run_dir / "eval.json").is_file():  # copied as is (it is the run's own file)
            self.manifest.append(f"runs/{name}/eval.json")
            got.append("eval.json")
        for fname in CAPTURE_CSV:
            src = run_dir / fname
            if src.is_file():
                raw = run_dir / (Path(fname).stem + ".raw.csv")
                shutil.move(src, raw)
                dropped.update(self.filter_csv(raw, src))
                self.manifest.append(f"runs/{name}/{fname}")
                got.append(fname)
        pj = run_dir / "population.json"
        if pj.is_file():
            d: set = set()
            data = self.filter_json(json.loads(pj.read_text()), d)
            if d:  # only rewritten if something had to go
                shutil.move(pj, run_dir / "population.raw.json")
                pj.write_text(json.dumps(data, indent=2) + "\n")
                dropped.update(f"population.json:{x}" for x in d)
            self.manifest.append(f"runs/{name}/population.json")
            got.append("population.json")
        onnx = run_dir / "policy.onnx"
        if onnx.is_file():
            self.write(f"runs/{name}/policy.onnx.sha256",
                       hashlib.sha256(onnx.read_bytes()).hexdigest() + "\n")
            got.append("policy.onnx.sha256")
        return (f"runs/{name}: {', '.join(got)}\n"
                + "".join("    " + l + "\n" for l in "".join(status).rstrip().splitlines())
                + f"    dropped: {', '.join(sorted(dropped)) or 'nothing'}")

    def runs(self) -> None:
        with ThreadPoolExecutor(self.jobs) as ex:
            lines = list(ex.map(lambda kv: self.train_one(*kv), RUNS.items()))
        self.index.append(f"== runs: {len(lines)} (each: {' '.join(TINY)} hydra.run.dir=<OUT>/runs/NAME ...)")
        self.index += lines

    def main(self) -> None:
        if self.out.exists():
            shutil.rmtree(self.out)
        self.logs.mkdir(parents=True)
        t0 = time.time()
        self.configs()
        t1 = time.time()
        self.runs()
        t2 = time.time()
        self.index.insert(0, "ttt_research behaviour snapshot (snapshot.py): cwd=TREE, PYTHONPATH=TREE/src; "
                             "cfg files have every `_target_:` line removed; metrics/population csv: "
                             "perf/* and time-like columns dropped")
        self.write("index.txt", "\n".join(self.index) + "\n")
        self.manifest.sort()
        (self.out / "manifest.txt").write_text("\n".join(self.manifest) + "\n")
        cfgs = sum(m.startswith("cfg/") for m in self.manifest)
        print(f"snapshot of {self.tree} -> {self.out}: {cfgs} cfg files ({t1 - t0:.0f} s), "
              f"{len(RUNS)} runs ({t2 - t1:.0f} s), {len(self.manifest)} files captured")


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] == "--stop-after-first-checkpoint":
        stop_after_first_checkpoint(argv[1], argv[2:])
        return
    jobs = 1
    if "--jobs" in argv:
        i = argv.index("--jobs")
        jobs = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 2:
        sys.exit("usage: python snapshot.py TREE OUTDIR [--jobs N]   (N <= 2 on this host)")
    tree, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    if not (tree / "conf" / "config.yaml").is_file() or not (tree / "src" / "ttt_research").is_dir():
        sys.exit(f"{tree}: not a ttt_research tree (conf/config.yaml, src/ttt_research)")
    Snap(tree, out, jobs).main()


if __name__ == "__main__":
    main()
