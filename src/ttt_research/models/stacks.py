"""A population's members as one stacked module, whatever kind of network they are: a table
(``QTableStack``), a value head (``ValueHeadStack``) or a policy MLP (``MLPStack``); and a blank
stack of the same shape to copy values into (a resumed or shared population)."""

from __future__ import annotations

from torch import nn

from ttt_research.models.heads import ValueHead, ValueHeadStack
from ttt_research.models.nets import MLPStack
from ttt_research.models.qtable import QTable, QTableStack


def stack_of(members: list[nn.Module]) -> nn.Module:
    """The stacked module of a population's members: ``QTableStack`` for tables,
    ``ValueHeadStack`` for value heads (``models.heads``), else ``MLPStack`` (``models.nets``)."""
    if members and isinstance(members[0], QTable):
        return QTableStack.from_members(members)
    if members and isinstance(members[0], ValueHead):
        return ValueHeadStack.from_members(members)
    return MLPStack.from_members(members)


def blank_like(stack: nn.Module, n: int) -> nn.Module:
    """A stack of ``n`` members shaped as ``stack``'s (its values to be copied in)."""
    if isinstance(stack, QTableStack):
        return QTableStack.like(stack, n)
    return MLPStack(n, stack.hidden, stack.encoding_name, outputs=stack.outputs, cells=stack.cells)
