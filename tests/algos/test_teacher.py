"""algo=teacher: its loss by hand, a few updates on 3,4,3 that raise the optimal-move share over
every decision point above the untrained net's, the command (trains, evaluates exactly, exports,
resumes), its games walked over legal positions, its refusals; one update on 4,4,4 (slow)."""

import math

import lightning as L
import pytest
import torch

from tests.helpers.configs import make_cfg
from tests.helpers.resume import metric_rows, train_killed
from tests.helpers.updates import first_update
from ttt_research.algos import teacher
from ttt_research.algos.teacher import decision_rows, teacher_loss, wrong_rows
from ttt_research.env.board import Game
from ttt_research.env.solver import solve
from ttt_research.errors import ConfigError
from ttt_research.train.callbacks import exact_reports
from ttt_research.train.run import build, train
from ttt_research.train.validate import validate

BOARD = ["game=mnk343", "algo=teacher"]
DECISIONS_343 = 79_563  # FACTS.md: 3,4,3's positions where somebody is to move
MASKED = -1e9


pytestmark = pytest.mark.usefixtures("own_positions_cache")  # not the user's cache


def test_the_loss_is_minus_log_of_the_mass_on_the_optimal_set():
    logits = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, MASKED], [math.log(3.0), 0.0, 0.0]])
    optimal = torch.tensor([[True, False, False], [True, False, False], [True, True, False]])
    # row 0: 1/3 on the optimal cell -> ln 3; row 1: the occupied cell takes nothing -> ln 2;
    # row 2: (3 + 1) / (3 + 1 + 1) on the optimal pair -> ln(5 / 4)
    expected = (math.log(3) + math.log(2) + math.log(5 / 4)) / 3
    assert teacher_loss(logits, optimal).item() == pytest.approx(expected, rel=1e-6)
    every = torch.tensor([[True, True, True]])  # a lost position: every legal move keeps the value
    assert teacher_loss(torch.tensor([[1.0, -2.0, 0.5]]), every).item() == pytest.approx(0.0, abs=1e-6)


def share_optimal(net, game: Game) -> float:
    """The share of every decision point of ``game`` where ``net``'s argmax is optimal."""
    t, rows = game.tables(), decision_rows(game, "cpu")
    with torch.no_grad():
        move = net(t.view[rows].float()).argmax(-1)
    return solve(g=game).optimal[rows].gather(1, move[:, None]).float().mean().item()


def test_a_few_updates_on_3_4_3_raise_the_optimal_share_over_every_decision_point(tmp_path):
    assert decision_rows(Game(3, 4, 3), "cpu").numel() == DECISIONS_343
    cfg = make_cfg(*BOARD, "budget.games=5120", "algo.games_per_update=256")  # 20 updates
    L.seed_everything(cfg.seed, verbose=False)
    untrained = share_optimal(build(cfg).net, Game(3, 4, 3))
    report = train(cfg, tmp_path / "run")
    assert report["optimal_move_rate_all"] > untrained + 0.1


def test_its_games_walk_legal_positions_and_the_batch_holds_its_moves_and_uniform_ones():
    module = first_update(*BOARD, "algo.games_per_update=512", "algo.uniform=100")
    u = module.last_update
    t, optimal = Game(3, 4, 3).tables(), solve(g=Game(3, 4, 3)).optimal
    assert set(u.rates) == {"win_rate", "loss_rate", "tie_rate"}
    assert sum(float(v) for v in u.rates.values()) == pytest.approx(1.0)
    # every game of 3,4,3 has at least one move of each side's: the learner moved 512+ times
    played = int(u.moves.sum())
    assert played >= 512 and float(u.terms["positions"]) == played + 100
    assert 0.0 <= float(u.terms["played_optimal"]) <= 1.0
    assert optimal.any(-1)[decision_rows(Game(3, 4, 3), "cpu")].all()  # a target for every row
    assert not t.done[decision_rows(Game(3, 4, 3), "cpu")].any()


def test_the_command_on_3_4_3_evaluates_exactly_exports_and_resumes(tmp_path, monkeypatch):
    overrides = [*BOARD, "checkpoint_every=2"]
    whole = train(make_cfg(*overrides), tmp_path / "whole")
    train_killed(make_cfg(*overrides), tmp_path / "killed", monkeypatch)
    resumed = train(make_cfg(*overrides, "resume=true"), tmp_path / "killed")
    assert resumed == whole
    assert metric_rows(tmp_path / "killed") == metric_rows(tmp_path / "whole")
    assert 0 < whole["optimal_move_rate_all"] <= 1
    assert whole["as_o"]["game_value"] == "loss"  # X wins 3,4,3
    onnx = pytest.importorskip("onnx")
    model = onnx.load(tmp_path / "whole" / "policy.onnx")
    assert {p.key: p.value for p in model.metadata_props}.get("game") == "3,4,3"


@pytest.mark.parametrize("override, message", [
    ("algo.uniform=-1", "algo.uniform"),
    ("algo.epsilon=2", "algo.epsilon"),
    ("population.size=2", "algo=teacher trains one agent a run"),
])
def test_bad_values_are_refused_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        validate(make_cfg(*BOARD, override))


@pytest.mark.slow
def test_one_update_on_4_4_4(monkeypatch):
    """4,4,4 (9,062,619 decision points): one update from the shared positions, finite, learned."""
    monkeypatch.setenv("TTT_RESEARCH_CACHE", "/tmp/tcache")
    assert decision_rows(Game(4, 4, 4), "cpu").numel() == 9_062_619
    module = first_update("game=mnk444", "algo=teacher", "budget.games=256", "algo.games_per_update=256")
    u = module.last_update
    assert math.isfinite(float(u.terms["loss"])) and int(u.moves.sum()) >= 256 * 3


def test_the_walk_finds_the_wrong_moves_the_exact_evaluation_counts_from_each_seat():
    """``wrong_rows`` walks the tree the greedy policy spans against every reply: its rows where X
    (O) moves are the decision points the exact evaluation scores as X (O), less the optimal ones."""
    module = first_update(*BOARD, games=2048)  # 4 updates: far from perfect
    (report,) = exact_reports(module)
    g = Game(3, 4, 3)
    t, optimal = g.tables(), solve(g=g).optimal
    wrong = wrong_rows(module.net, t, optimal)
    assert wrong.numel() > 0 and not t.done[wrong].any()
    for seat, key in ((1, "as_x"), (-1, "as_o")):
        side = report[key]
        erred = round(side["decision_points"] * (1 - side["optimal_move_rate"]))
        assert int((t.mover[wrong] == seat).sum()) == erred


def test_hard_rows_join_the_batch():
    module = first_update(*BOARD, "algo.games_per_update=512", "algo.uniform=100", "algo.hard=64",
                          "algo.recheck_every=1")
    u = module.last_update
    assert float(u.terms["positions"]) == int(u.moves.sum()) + 100 + 64
    assert float(u.terms["wrong_in_tree"]) > 0


class TableNet:
    """A stand-in net that plays the solver's first optimal move at every row of ``g``, except
    at the rows of ``spoilt``, where it plays ``cell`` (its view -> its row by the view's code)."""

    def __init__(self, g: Game, spoilt: dict[int, int] | None = None):
        t = g.tables()
        self.code = self._codes(t.view)
        self.order = self.code.argsort()
        assert torch.unique(self.code).numel() == self.code.numel()  # a view names one row
        self.logits = solve(g=g).optimal.float()
        for row, cell in (spoilt or {}).items():
            self.logits[row] = 0.0
            self.logits[row, cell] = 1.0

    @staticmethod
    def _codes(view: torch.Tensor) -> torch.Tensor:
        return ((view.long() + 1) * 3 ** torch.arange(view.shape[-1])).sum(-1)

    def __call__(self, view: torch.Tensor) -> torch.Tensor:
        at = torch.searchsorted(self.code[self.order], self._codes(view.round().long()))
        return self.logits.index_select(0, self.order.index_select(0, at))


def test_the_value_walk_finds_exactly_the_moves_that_give_up_the_game_value():
    """3,4,3 (X wins): the solver's own moves give up nothing from either seat; a net that plays
    a drawing first move (cell 4) as X gives up the win at the empty board and only there (the
    walk leaves the children below the value); O's seat is lost: nothing to give up."""
    g = Game(3, 4, 3)
    t, solution = g.tables(), solve(g=g)
    assert int(solution.value[0]) == 1 and not bool(solution.optimal[0, 4])  # cell 4 draws
    perfect = TableNet(g)
    assert wrong_rows(perfect, t, solution.optimal).numel() == 0
    assert wrong_rows(perfect, t, solution.optimal, solution.value).numel() == 0
    spoilt = TableNet(g, {0: 4})
    assert wrong_rows(spoilt, t, solution.optimal, solution.value).tolist() == [0]
    assert 0 in wrong_rows(spoilt, t, solution.optimal).tolist()


def test_the_value_walk_is_empty_from_a_seat_exactly_when_the_evaluation_says_it_holds():
    """After 4 updates on 3,4,3: the rows where X gives up the win are none exactly when the
    exact evaluation says X holds the value; O's none (a lost seat has nothing to give up: its
    holds_value, an optimal move at every point it reaches, is the wrong-row walk's); all of
    them wrong rows."""
    module = first_update(*BOARD, games=2048)
    (report,) = exact_reports(module)
    g = Game(3, 4, 3)
    t, solution = g.tables(), solve(g=g)
    gives_up = wrong_rows(module.net, t, solution.optimal, solution.value)
    assert (int((t.mover[gives_up] == 1).sum()) == 0) == report["as_x"]["holds_value"]
    assert int((t.mover[gives_up] == -1).sum()) == 0
    assert set(gives_up.tolist()) <= set(wrong_rows(module.net, t, solution.optimal).tolist())


def test_a_walk_past_freeze_after_that_finds_nothing_freezes_the_net(monkeypatch):
    """A walk that finds no hard row (stubbed) past freeze_after=0: no step from the first
    update on (the net stays as built), the update says frozen and walks no more."""
    monkeypatch.setattr(teacher, "wrong_rows", lambda *a: torch.zeros(0, dtype=torch.long))
    overrides = [*BOARD, "algo.hard=64", "algo.hard_from=value", "algo.freeze_after=0",
                 "algo.recheck_every=1"]
    cfg = make_cfg("budget.games=1024", *overrides)
    L.seed_everything(cfg.seed, verbose=False)
    built = build(cfg).net.state_dict()
    module = first_update(*overrides, games=1024)  # 2 updates of 512 games
    assert float(module.last_update.terms["frozen"]) == 1.0
    assert all(torch.equal(built[k], v) for k, v in module.net.state_dict().items())
    monkeypatch.setattr(teacher, "wrong_rows", lambda *a: torch.tensor([1]))
    assert module.algo.frozen  # and no further walk undoes it


@pytest.mark.parametrize("override", ["algo.hard_from=some", "algo.freeze_after=2"])
def test_bad_hard_settings_are_refused(override):
    with pytest.raises(ConfigError, match=override.split("=")[0]):
        validate(make_cfg(*BOARD, override))


def test_a_frozen_net_ends_the_run_evaluated_and_checkpointed_as_at_its_budgets_end(tmp_path, monkeypatch):
    # Frozen, a run used to play the rest of its budget learning nothing (4,4,4: the last quarter
    # of 16,000 updates). Now the update that froze it is the run's last: its exact evaluation,
    # checkpoint and outputs are those of a budget's end, and a resume finds the run finished.
    monkeypatch.setattr(teacher, "wrong_rows", lambda *a: torch.zeros(0, dtype=torch.long))
    overrides = [*BOARD, "budget.games=4096", "algo.games_per_update=256", "algo.hard=64",
                 "algo.hard_from=value", "algo.freeze_after=0.5", "algo.recheck_every=1", "eval_every=100",
                 "checkpoint_every=100"]
    report = train(make_cfg(*overrides), tmp_path / "run")
    updates = [r for r in metric_rows(tmp_path / "run") if r.get("train/frozen")]
    assert len(updates) == 9  # 8 updates play half of 16; the 9th walks past freeze_after, freezes, ends
    assert [float(r["train/frozen"]) for r in updates] == [0.0] * 8 + [1.0]
    evaluated = [r for r in metric_rows(tmp_path / "run") if r.get("eval/nashconv")]
    assert [float(r["train/games"]) for r in evaluated] == [9 * 256]  # the last update's evaluation
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    module = build(make_cfg(*overrides))
    module.load_state_dict(ckpt["state_dict"])
    assert ckpt["games_played"] == 9 * 256  # the checkpoint of the last update
    (fresh,) = exact_reports(module)
    assert fresh["optimal_move_rate_all"] == report["optimal_move_rate_all"]
    assert train(make_cfg(*overrides, "resume=true"), tmp_path / "run") == report
