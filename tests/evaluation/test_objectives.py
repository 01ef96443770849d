"""What each objective a sweep can optimise says about itself on screen."""

from ttt_research.evaluation.objectives import POPULATION_NAMES, meaning


def test_every_per_member_name_and_aggregate_says_what_it_measures():
    for name in ("score", "win", "loss", "optimal_move_rate", *POPULATION_NAMES):
        assert meaning(name), name
    assert meaning("population_median_score") == meaning("score")
    assert "minus 1 if beatable" in meaning("score")
    assert meaning("eval/o_random_win") == ""  # a metric's name says it already
