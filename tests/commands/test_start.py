"""Every command answers ``--help`` and a refused argument before torch loads (issue 43: the
evaluator's --help took 1.45 s against the training command's 0.18 s, all of it importing
torch). Checked by what is imported, not by the clock: ``bench/floor.py`` times the same
commands (``start_s``) for the bench's table."""

import json
import subprocess
import sys

from ttt_research.bench.floor import COMMANDS

# Runs each command as ``python -m`` would, in one process, and after each notes its exit code
# and whether torch (or Lightning) has been imported by then.
PROBE = """
import json, runpy, sys
out = []
for module, args in json.loads(sys.argv[1]):
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code
    out.append([module, args, code, sorted(m for m in ("torch", "lightning") if m in sys.modules)])
print(json.dumps(out), file=sys.__stdout__)
"""


def test_every_command_answers_help_and_a_refusal_without_torch(tmp_path):
    cases = [[m, ["--help"]] for m in COMMANDS] + [[m, refusal] for m, refusal in COMMANDS.items()]
    got = subprocess.run([sys.executable, "-c", PROBE, json.dumps(cases)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    results = json.loads(got.stdout.splitlines()[-1])
    assert [(m, a, code) for m, a, code, _ in results] == [(m, a, 0 if a == ["--help"] else 2)
                                                           for m, a in cases]
    assert [(m, a, loaded) for m, a, _, loaded in results if loaded] == []
