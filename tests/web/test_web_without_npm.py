"""A clone without ``npm ci`` in ``web/``: the fast browser tests pass or skip with the reason,
none fails (a new user's `pytest -m "not slow"` once failed on a test that needed
onnxruntime-web without saying so)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # runs the fast web tests again in a child: about a minute
def test_without_node_modules_every_in_browser_test_skips_with_the_reason():
    env = dict(os.environ, TTT_TEST_NO_NODE_MODULES="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/web", "-m", "not slow", "-q", "-rs",
                           "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert not re.search(r"\d+ failed", out), out[-3000:]
    skipped = re.findall(r"^SKIPPED \[\d+\] .*$", out, re.M)
    # every skip says why: chromium or Playwright missing, or onnxruntime-web not installed
    assert skipped and all(("node_modules is missing" in s or "chromium is not installed" in s
                            or "Playwright" in s) for s in skipped), skipped
    if Path("/usr/bin/chromium").is_file():
        assert any("web/node_modules is missing (run `npm ci` in web/)" in s for s in skipped), skipped
