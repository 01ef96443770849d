"""Which way each metric improves, and that every reader takes it from ``contract.better``:
``report --compare``, the performance profiles, W&B's summaries and a sweep's direction.

Issue 43: ``--compare`` read a best response's value as higher-is-better and credited a
configuration whose policy concedes 0.998 with improving on one that concedes 0.666. One test
per metric family below; a name the contract adds falls into one of them or fails the last."""

import json
from pathlib import Path

import pytest
import yaml

from ttt_research import report
from ttt_research.analysis.summary import METRICS
from ttt_research.contract import EVAL_NAMES, EXPLOIT_NAMES, VALUE_NAMES, better
from ttt_research.evaluation.objectives import NAMES, direction
from ttt_research.train.tracking import metric_definitions

# (family, its names, which way it improves)
FAMILIES = [
    ("win rate vs random", ["eval/x_random_win", "eval/o_random_win", "o_random_win"], "higher"),
    ("draw rate vs random (a draw beats a loss)", ["eval/x_random_tie", "o_random_tie"], "higher"),
    ("loss rate vs random", ["eval/x_random_loss", "o_random_loss"], "lower"),
    ("loss rate vs perfect play", ["eval/x_perfect_loss", "o_perfect_loss"], "lower"),
    ("worst case (+1 win .. -1 loss)", ["eval/x_worst_case", "o_worst_case"], "higher"),
    ("optimal-move rate", ["eval/optimal_move_rate", "optimal_move_rate"], "higher"),
    ("NashConv, greedy and as trained", ["eval/nashconv", "trained_nashconv"], "lower"),
    ("a best response's value: what the policy concedes",
     ["eval/trained_x_best_response", "trained_o_best_response"], "lower"),
    ("the policy as trained vs random: wins", ["eval/trained_o_random_win"], "higher"),
    ("the policy as trained vs random: losses", ["eval/trained_o_random_loss"], "lower"),
    ("value accuracy: sign agreement", [VALUE_NAMES["sign_agreement"]], "higher"),
    ("value accuracy: mean absolute error", [VALUE_NAMES["mae"]], "lower"),
    ("sweep objectives: scores, wins, unbeatable shares",
     ["score", "win", "population_median_score", "population_iqm_score", "population_median_win",
      "population_iqm_win", "population_unbeatable_fraction", "population_unbeatable_ci_low"], "higher"),
    ("sweep objectives: losses", ["loss", "population_median_loss", "population_iqm_loss"], "lower"),
]


@pytest.mark.parametrize("family,names,way", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_each_metric_family_improves_one_way(family, names, way):
    assert {n: better(n) for n in names} == {n: way for n in names}


def test_every_metric_and_objective_belongs_to_a_family():
    covered = {n.removeprefix("eval/") for _, names, _ in FAMILIES for n in names}
    # Each name with its seat made O's (x_random_win as o_random_win), so the families list one seat.
    shapes = {n.removeprefix("eval/").replace("x_", "o_", 1)
              for n in (*EVAL_NAMES, *EXPLOIT_NAMES, *VALUE_NAMES.values(), *METRICS, *NAMES)}
    assert shapes - covered == set()


def test_a_sweep_minimises_exactly_what_is_lower_is_better():
    for name in NAMES:
        assert direction(name) == ("minimize" if better(name) == "lower" else "maximize"), name


def test_wandb_keeps_each_metrics_best_value_its_own_way():
    summaries = {name: kw["summary"] for name, kw in metric_definitions() if "summary" in kw}
    assert summaries["eval/trained_o_best_response"] == summaries["eval/nashconv"] == "min,last"
    assert summaries["eval/o_random_loss"] == "min,last" and summaries["eval/o_random_win"] == "max,last"
    for name, summary in summaries.items():
        if name.startswith("eval/"):
            assert summary == ("min,last" if better(name) == "lower" else "max,last"), name


def run(path: Path, seed: int, net: str, conceded: float) -> None:
    """A run folder as training leaves it, trained as O: the same greedy results for every
    seed, and a policy as trained that concedes ``conceded`` to a best response as O."""
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={seed}", f"net={net}"]))
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"seed": seed, "seat": {"side": "o"}, "optimized_metric": "score"}))
    greedy = {"vs_random": {"win": 0.9, "loss": 0.0, "tie": 0.1},
              "vs_perfect": {"win": 0.0, "loss": 0.0, "tie": 1.0}, "worst_case": "draw"}
    trained = {"best_response": conceded, "vs_random": {"win": 0.85, "loss": 0.02, "tie": 0.13},
               "vs_perfect": {"win": 0.0, "loss": 0.1, "tie": 0.9}}
    (path / "eval.json").write_text(json.dumps({
        "as_x": greedy, "as_o": greedy, "optimal_move_rate": 0.9, "decision_points": 500, "nashconv": 2.0,
        "as_trained": {"policy": "softmax at temperature 0.5", "nashconv": 1.0 + conceded,
                       "as_x": {**trained, "best_response": 1.0}, "as_o": trained}}))


def test_compare_credits_the_configuration_that_concedes_less(tmp_path, capsys):
    # The sweep in numbers: mlp100's policy as trained concedes far less than mlp25's.
    for seed in range(5):
        run(tmp_path / f"a{seed}", seed, "mlp25", 0.99 + 0.001 * seed)
        run(tmp_path / f"b{seed}", seed, "mlp100", 0.60 + 0.01 * seed)
    args = [str(tmp_path), "--reps", "200", "--compare"]
    assert report.main([*args, "net=mlp25", "net=mlp100", "--json"]) == 0
    got = {c["metric"]: c for c in json.loads(capsys.readouterr().out)["comparisons"]}
    assert got["trained_o_best_response"]["better"] == "lower"
    assert got["trained_o_best_response"]["p_improvement"] == 0.0  # mlp25 never concedes less
    assert report.main([*args, "net=mlp100", "net=mlp25"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if "trained_o_best_response" in s)
    assert "(lower is better): 1.000 [1.000, 1.000]" in line
