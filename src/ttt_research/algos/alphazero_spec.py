"""``algo=alphazero``'s declaration (``algos/alphazero.py``; ``algos/spec.py`` says what a spec is)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ttt_research.algos.spec import (
    CELLS,
    RATE,
    RATE_FINAL,
    TEMPERATURE,
    WEIGHT,
    AlgoSpec,
    Buffer,
    Memory,
    Rule,
    Settings,
    between,
    flag,
    games,
    integer,
    zero_sum,
)
from ttt_research.contract import MAX_CELLS, VALUE_MAX
from ttt_research.errors import need, value_of

if TYPE_CHECKING:  # the spec loads without torch or numpy (tests/algos/test_specs.py)
    from ttt_research.env.mnk import MNK

NUMBER = between(0, VALUE_MAX, f"a number in [0, {VALUE_MAX:g}]")
SIMULATIONS = integer(1, 1024, "an integer in [1, 1024] (simulations per searched move)")
TEST_SIMULATIONS = integer(0, 1024, "an integer in [0, 1024] (simulations per searched move; "
                                    "0: the search is not evaluated)")


# ``search=auto``: self-play searches the reached positions on a board of more placements (``MNK.
# placements``, known before its positions are built) than this (4x4's 10.2M: 4,4,4's 9.1M decision
# positions), the whole tree's subtrees on the smaller ones (tic-tac-toe, 3,4,3's 143,365: there
# one pass over every position is the cheaper way).
REACHED_FROM = 1_000_000
SEARCHES = ("auto", "whole", "reached")  # algo.search's choices


def reached_self_play(search: str, board: MNK) -> bool:
    """Whether ``algo.search`` (``SEARCHES``) makes self-play search the positions it reaches."""
    if search not in SEARCHES:
        raise ValueError(f"algo.search must be one of {', '.join(SEARCHES)}, got {search!r}")
    return search == "reached" or (search == "auto" and board.placements > REACHED_FROM)


WHOLE = Memory(per_position_cell=44)
# No whole-tree search (self-play over the reached positions, test_simulations 0): a member holds
# its value table over the board's positions (4 bytes each: the learned values' accuracy), a
# bound of a byte a (position, cell).
REACHED = Memory(per_position_cell=1)


def _reached(cfg: Settings, board: MNK) -> bool:
    """``reached_self_play`` of the run's settings (a value the key's rule refuses: ``auto``, the
    rule says why)."""
    search = value_of(cfg, "algo.search")
    return reached_self_play(search if search in SEARCHES else "auto", board)


def _memory(cfg: Settings, board: MNK) -> Memory:
    """The whole-tree search's memory where a run makes one (self-play's, or the final
    evaluation of the search), else a value table's."""
    whole = not _reached(cfg, board) or value_of(cfg, "algo.test_simulations") != 0
    return WHOLE if whole else REACHED


def _advice(cfg: Settings, board: MNK) -> str | None:
    """What leaves out the whole-tree search, on a board where it is what fills the memory (the
    boards ``auto`` searches over the reached positions)."""
    if _memory(cfg, board) is not WHOLE or not reached_self_play("auto", board):
        return None
    steps = [] if _reached(cfg, board) else ["algo.search=reached"]
    if value_of(cfg, "algo.test_simulations") != 0:
        steps.append("algo.test_simulations=0")
    return f"{' and '.join(steps)} (no whole-tree search, most of each member's memory here)"


def _check(cfg: Settings) -> None:
    zero_sum(cfg, "with algo=alphazero (its values are game results, +1 / 0 / -1)")
    win = value_of(cfg, "reward.win")
    need(win == 1, "reward.win", "1 with algo=alphazero (its value head is a tanh: results in [-1, 1])", win)


@dataclass
class Hyper:
    """``algo=alphazero``'s hyperparameters and their defaults (``algos/spec.py``: the schema of
    ``conf/algo/alphazero.yaml``)."""

    _target_: str = "ttt_research.algos.alphazero.AlphaZero"
    games_per_update: Any = 50
    """self-play games per update, then gradient_steps steps: 50 updates of 50 spend the budget exactly, and
    beat 40 of 64 (experiments/alphazero)"""
    simulations: Any = 16
    """simulations per searched move (self-play): 16 beat 8 (experiments/alphazero)"""
    test_simulations: Any = 4
    """the deterministic search evaluated exactly at the end (eval.json's search; 0: not evaluated,
    which on 4x4 saves two whole-tree searches a member, ~43 s and 8.5 GB each)"""
    max_considered: Any = 9
    """moves the root's Gumbel top-k considers (9: all on tic-tac-toe; a bigger board's 16 for all)"""
    lr: Any = 0.003
    """Adam ..."""
    lr_final: Any = 0.0003
    """... decayed linearly to this over the budget (null: constant)"""
    temperature: Any = 2.0
    """scale of the root's Gumbel noise (0: a deterministic search): 2 explores"""
    temperature_final: Any = 2.0
    """... annealed linearly to this (2 -> 1 hurt the search: experiments/alphazero)"""
    value_coef: Any = 2.0
    """weight of the value's squared error beside the policy's cross-entropy"""
    value_mix: Any = 0.0
    """value target: (1 - mix) * the game's result + mix * the search's value"""
    weight_decay: Any = 0.0
    """L2 on every weight, in the loss (1e-4 and 1e-3 hurt: experiments/alphazero)"""
    capacity: Any = 20000
    """replay positions per member (a ring)"""
    batch_size: Any = 256
    """positions per gradient step"""
    gradient_steps: Any = 32
    """gradient steps per update: 32 beat 8, 64 and 128 (experiments/alphazero)"""
    max_grad_norm: Any = 5.0
    """clip the gradient norm to this (0: no clipping)"""
    symmetries: Any = True
    """each learned position turned by a random one of the board's 8 symmetries"""
    search: Any = "auto"
    """self-play's search: whole (every position's subtree played once from the net's tables each
    update, then a search is a few gathers), reached (a tree per searched move over the positions it
    reaches, the net asked at each new node: no tables, whatever the board's size), auto: reached on a
    board of more than 1M placements (4x4), whole on the smaller ones (algos/alphazero.py)"""


SPEC = AlgoSpec(
    name="alphazero",
    any_board=True,  # any m,n,k board: its tables, search and symmetries are the board's (algos/alphazero.py)
    hyper=Hyper,
    acting="the search's choice; as_trained scores the raw network's softmax (temperature 1)",
    keys={"simulations": SIMULATIONS, "test_simulations": TEST_SIMULATIONS,
          "max_considered": integer(1, MAX_CELLS, f"an integer in [1, {MAX_CELLS}] (moves at the root; "
                                                  "all the legal ones where there are fewer)"),
          "lr": RATE, "lr_final": RATE_FINAL, "temperature": TEMPERATURE, "temperature_final": RATE_FINAL,
          "value_coef": NUMBER, "value_mix": between(0, 1, "a share in [0, 1] (of the value target)"),
          "weight_decay": NUMBER, "capacity": games(), "batch_size": games(), "gradient_steps": games(),
          "max_grad_norm": WEIGHT, "symmetries": flag(),
          "search": Rule(lambda v: v in SEARCHES, " or ".join(SEARCHES))},
    varies=("lr", "lr_final", "temperature", "temperature_final"),
    # the defaults' fit on tic-tac-toe; on another board a member's whole-tree search (its net's
    # tables, the subtrees' nodes, children, visits and values, the final search policies): 4,4,4
    # debug=tiny, one member, peaked at 10.26 GB where this estimates 10.1 GB
    memory=WHOLE,
    memory_for=_memory,
    memory_advice=_advice,
    check=_check,
    no_cell={"mlp25": f"{CELLS}#algoa2c-algoalphazero-algodqn-on-one-layer"},  # at best 2 of 8 seeds
    # A position (algos/alphazero.py's replay): the view (a board of int8), the search's policy
    # over the cells (float32 each) and the game's result (float32).
    buffers=(Buffer("algo.capacity", record=49, what="replay positions"),),
)
