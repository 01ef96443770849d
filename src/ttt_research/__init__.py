"""ttt_research: reinforcement learning on tic-tac-toe with batched rollouts on tensors and
exact evaluation over the whole game tree.

The core (``game``, ``encodings``, ``solver``, ``evaluate``, ``opponents``) needs only
torch and the standard library.
"""

__version__ = "0.1.0"
