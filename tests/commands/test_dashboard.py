"""The W&B dashboard as code: the workspace's panels name only metrics of the contract, over
games played; a sweep's varied keys become parallel coordinates; saving without a key, a
server or the extra fails in one line. No W&B server is reachable from the tests."""

import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ttt_research import dashboard
from ttt_research.contract import EVAL_NAMES, GAMES
from ttt_research.errors import MissingExtra

pytest.importorskip("wandb_workspaces")


def run(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "ttt_research.dashboard", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def test_every_panel_charts_contract_metrics_over_games():
    ws = dashboard.build("me", "proj")
    assert ws.entity == "me" and ws.project == "proj" and ws.settings.x_axis == GAMES
    panels = [p for s in ws.sections for p in s.panels]
    assert all(p.x == GAMES for p in panels)  # no sweep: only line charts
    keys = dashboard.metric_keys(panels)
    assert keys <= dashboard.known_metrics()
    assert set(EVAL_NAMES) <= keys  # every exact metric is on some chart
    names = [s.name for s in ws.sections]
    assert names == ["Exact vs random", "Safety", "Policy as trained", "Sampled vs exact", "Population",
                     "Speed"]
    (perfect,) = [p for p in panels if "perfect" in p.title]
    assert perfect.log_y is True


def test_a_sweep_adds_parallel_coordinates_ending_on_the_objective():
    ws = dashboard.build("me", "proj", sweep="multirun/DATE/TIME", params=["algo.lr", "choices.net"])
    (sweep,) = [s for s in ws.sections if s.name == "Sweep"]
    parallel = sweep.panels[0]
    assert [c.metric.name for c in parallel.columns] == ["algo.lr", "choices.net", "objective"]
    assert dashboard.metric_keys(sweep.panels) == {"algo.lr", "choices.net", "objective"}


def test_the_report_holds_the_same_panels_in_grids():
    ws = dashboard.build("me", "proj", params=["algo.lr"])
    report = dashboard.build_report("me", "proj", params=["algo.lr"])
    grids = [b for b in report.blocks if type(b).__name__ == "PanelGrid"]
    assert [len(g.panels) for g in grids] == [len(s.panels) for s in ws.sections]
    assert dashboard.metric_keys(p for g in grids for p in g.panels) == \
        dashboard.metric_keys(p for s in ws.sections for p in s.panels)


def test_swept_params_reads_the_command_line_and_the_sweepers_params(tmp_path):
    (tmp_path / "multirun.yaml").write_text(textwrap.dedent("""\
        hydra:
          overrides:
            task: ["algo.lr=0.5,1", "seed=1,2", "+algo.momentum=0.9", "net=mlp25,mlp100", progress=lines]
          sweeper:
            params: {algo.ent_coef: 'interval(0.0, 0.1)', reward: choice(antirez, zero_sum)}
          runtime:
            choices: {net: mlp100, reward: antirez, algo: reinforce}
        """))
    assert dashboard.swept_params(tmp_path) == ["algo.lr", "choices.net", "algo.ent_coef", "choices.reward"]


def test_print_shows_the_workspace_and_saves_nothing():
    res = run("--entity", "me", "--print")
    assert res.returncode == 0 and res.stderr == ""
    assert '"x_axis": "train/games"' in res.stdout and '"eval/o_perfect_loss"' in res.stdout


@pytest.mark.parametrize("args, message", [
    (["--entity", "me", "--sweep", "."], "is not a multirun folder"),
    (["--entity", "me", "--params", ","], "--params names no key"),
])
def test_bad_arguments_are_one_line(args, message, tmp_path):
    res = run(*args)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and message in res.stderr


def no_key_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return {**env, "HOME": str(tmp_path), **extra}


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_saving_without_a_key_or_a_server_fails_in_one_line(tmp_path):
    res = run("--entity", "me", env=no_key_env(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "no W&B API key" in res.stderr and "nothing was saved" in res.stderr
    res = run("--entity", "me", env=no_key_env(tmp_path, WANDB_API_KEY="k" * 40,
                                               WANDB_BASE_URL="http://127.0.0.1:9"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "did not answer" in res.stderr


class Refuses(BaseHTTPRequestHandler):
    """A server that answers every request as W&B does a bad key."""

    def _refuse(self):
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"errors": [{"message": "user is not logged in"}]}')

    do_GET = do_POST = _refuse

    def log_message(self, *args):
        pass


@pytest.mark.slow  # the W&B client retries for ~15 s before it gives up
def test_a_server_that_refuses_the_key_is_one_line(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        res = run("--entity", "me", env=no_key_env(tmp_path, WANDB_API_KEY="k" * 40,
                                                   WANDB_BASE_URL=f"http://127.0.0.1:{server.server_port}"))
    finally:
        server.shutdown()
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("error: W&B refused to save:") and "not logged in" in res.stderr


def test_without_the_extra_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb_workspaces.workspaces", None)  # import fails
    with pytest.raises(MissingExtra, match=r"pip install 'ttt_research\[dashboard\]'"):
        dashboard.build("me", "proj")
