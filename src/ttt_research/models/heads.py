"""A value head over a policy network's last hidden layer: AlphaZero's second head.

The policy stays the project's ``MLP`` (nine masked logits: what the exact evaluation,
the export and the browser see); the value is ``tanh(w . h + b)`` of its trunk ``h``, so
the two heads share every hidden layer. ``ValueHeadStack`` is N heads for a population's
``MLPStack`` (weights (N, 1, H), one batched matmul), built from the members' own heads
(each made under its member's seed) with ``ValueHeadStack.from_members``.
"""

from __future__ import annotations

import torch
from torch import nn


class ValueHead(nn.Module):
    """(..., H) last hidden layer -> (...) a value in (-1, 1)."""

    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(int(width), 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(h)).squeeze(-1)


class ValueHeadStack(nn.Module):
    """N value heads: (N, B, H) -> (N, B)."""

    def __init__(self, n: int, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n, 1, int(width)))  # (N, 1, H)
        self.bias = nn.Parameter(torch.zeros(n, 1))  # (N, 1)

    @classmethod
    def from_members(cls, heads: list[ValueHead]) -> ValueHeadStack:
        """Stack existing heads (their weights are copied)."""
        width = heads[0].linear.in_features
        stack = cls(len(heads), width)
        with torch.no_grad():
            stack.weight.copy_(torch.stack([h.linear.weight for h in heads]))
            stack.bias.copy_(torch.stack([h.linear.bias for h in heads]))
        return stack.to(heads[0].linear.weight.device)

    @property
    def n(self) -> int:
        return self.weight.shape[0]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = torch.baddbmm(self.bias.unsqueeze(1), h, self.weight.transpose(1, 2))  # (N, B, 1)
        return torch.tanh(out).squeeze(-1)
