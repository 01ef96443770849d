"""Tree search over the game's positions (AlphaZero's Gumbel search): a layer above the game (``env``),
below the networks that feed it tables and the algorithm that trains on its targets."""
