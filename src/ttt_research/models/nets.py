"""Policy networks: small MLPs from the mover's view to masked logits.

``MLP(hidden=[100], encoding="planes18")`` is antirez's 18 -> 100 -> 9 network;
``MLP(hidden=[128, 128], encoding="signed9")`` is the PPO seed's 9 -> 128 -> 128 -> 9.
The input is always the mover's view (B, 9) (+1 own, -1 opponent, 0 empty); the encoding
happens inside the module, so the exported ONNX graph takes the contract's board as is.
Another m,n,k board's networks are built with ``cells`` (``game.cells``): its views are
(B, cells), its logits (B, cells); the default is tic-tac-toe's.

Action masking: occupied cells get ``MASKED`` (a very large negative number) in place of
their logit, so a softmax gives them probability 0 and an argmax never picks them. We
mask with a finite number rather than -inf so that a softmax over a row stays finite
and ONNX runtimes that dislike infinities are happy; ``raw_logits`` skips the mask for
algorithms that learn which cells are occupied (antirez's seed, PPO with masking off).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ttt_research.env.board import TIC_TAC_TOE
from ttt_research.models import encodings

MASKED = -1e9
DEFAULT_CELLS = TIC_TAC_TOE.cells  # the default board's


def _spec(hidden: list[int], encoding: str, cells: int) -> dict:
    """What it takes to build a network again (checkpoints, ONNX metadata); the board's cells
    only when not tic-tac-toe's (so tic-tac-toe's files stay as they were)."""
    return {"hidden": hidden, "encoding": encoding, **({"cells": cells} if cells != DEFAULT_CELLS else {})}


class MLP(nn.Module):
    """Mover's view (B, cells) -> logits (B, cells), ReLU hidden layers of the given sizes
    (``outputs``: another width, 1 for a value network)."""

    def __init__(self, hidden: list[int] | tuple[int, ...] = (100,), encoding: str = "planes18",
                 init: str = "default", outputs: int | None = None, cells: int = DEFAULT_CELLS):
        super().__init__()
        self.encoding_name = encoding
        self.encode = encodings.get(encoding)
        self.hidden = [int(h) for h in hidden]
        self.cells = int(cells)
        outputs = self.cells if outputs is None else outputs
        sizes = [encodings.width(encoding, self.cells), *self.hidden]
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], outputs))  # a logit per cell; 1 for a value network
        self.body = nn.Sequential(*layers)
        if init == "uniform":  # antirez's ttt-rl: every weight and bias uniform in [-0.5, 0.5]
            for p in self.parameters():
                nn.init.uniform_(p, -0.5, 0.5)
        elif init != "default":
            raise ValueError(f"net.init must be 'default' or 'uniform', got {init!r}")

    def spec(self) -> dict:
        """What it takes to build this network again (stored in checkpoints)."""
        return _spec(self.hidden, self.encoding_name, self.cells)

    def trunk(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, H) last hidden layer (for a shared value head)."""
        return self.body[:-1](self.encode(view))

    def raw_logits(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, 9) logits for every cell, occupied ones included."""
        return self.body(self.encode(view))

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """(B, H) last hidden layer (``trunk``) -> (B, 9) logits, occupied cells included."""
        return self.body[-1](h)

    def forward(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, 9) logits with occupied cells masked."""
        return self.raw_logits(view).masked_fill(view != 0, MASKED)


def linears(mlp: MLP) -> list[nn.Linear]:
    """An MLP's linear layers, input to output."""
    return [m for m in mlp.body if isinstance(m, nn.Linear)]


class MLPStack(nn.Module):
    """N MLPs of one shape as one module: views (N, B, 9) -> masked logits (N, B, 9).

    A population of agents runs as one network: each layer's weights are stacked into an
    (N, out, in) tensor and its biases into (N, out), and a layer is one batched matmul
    (``torch.baddbmm``: bias + x @ W^T for every member at once), not a Python loop over
    members; ``by_member`` is the exception, for rows of different lengths per member.
    Member k only ever touches slice k of every tensor, so its output and its
    gradients do not depend on its neighbours. (``torch.func.vmap`` over ``functional_call``
    computes the same thing; on the CPU at N=64, B=2048 the plain batched matmuls were
    about as fast or faster, with no functional indirection, so we keep them.)

    Build it from existing networks with ``MLPStack.from_members([...])``, or fresh with
    ``MLPStack(n, hidden, encoding, init, outputs)``, which draws member 0's ``MLP``
    initialisation, then member 1's, and so on: exactly the random draws of building the
    n ``MLP``s one after another (so member 0 of a stack built under ``torch.manual_seed(s)``
    is the ``MLP`` built under that seed). ``member(k)`` returns member k as a plain ``MLP``
    (to export or checkpoint it) and ``load_member(k, mlp)`` writes one back.
    """

    def __init__(self, n: int, hidden: list[int] | tuple[int, ...] = (100,), encoding: str = "planes18",
                 init: str = "default", outputs: int | None = None, cells: int = DEFAULT_CELLS):
        super().__init__()
        if n < 1:
            raise ValueError(f"a population needs at least one member, got n={n}")
        members = [MLP(hidden, encoding, init, outputs, cells) for _ in range(n)]
        self.encoding_name = encoding
        self.encode = encodings.get(encoding)
        self.hidden = [int(h) for h in hidden]
        self.cells = int(cells)
        self.outputs = self.cells if outputs is None else int(outputs)
        # weights[i]: (N, out_i, in_i); biases[i]: (N, out_i): layer i of every member.
        layers = [linears(m) for m in members]
        self.weights = nn.ParameterList(nn.Parameter(torch.stack([ls[i].weight.detach() for ls in layers]))
                                        for i in range(len(layers[0])))
        self.biases = nn.ParameterList(nn.Parameter(torch.stack([ls[i].bias.detach() for ls in layers]))
                                       for i in range(len(layers[0])))

    @classmethod
    def from_members(cls, members: list[MLP]) -> MLPStack:
        """Stack existing networks (all of one shape and encoding); their weights are copied."""
        if not members:
            raise ValueError("a population needs at least one member")
        first = members[0]
        outputs = linears(first)[-1].out_features
        shapes = [p.shape for p in first.parameters()]
        for k, m in enumerate(members):
            if m.spec() != first.spec() or [p.shape for p in m.parameters()] != shapes:
                raise ValueError(f"member {k} has shape {m.spec()}, member 0 has {first.spec()}")
        with torch.random.fork_rng(devices=[]):  # building the stack must not move the caller's RNG
            stack = cls(len(members), first.hidden, first.encoding_name, "default", outputs, first.cells)
        for k, m in enumerate(members):
            stack.load_member(k, m)
        return stack.to(next(first.parameters()).device)

    @property
    def n(self) -> int:
        """The number of members."""
        return self.weights[0].shape[0]

    def spec(self) -> dict:
        """What it takes to build one member again (as ``MLP.spec``)."""
        return _spec(self.hidden, self.encoding_name, self.cells)

    def _member_params(self, k: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(w[k], b[k]) for w, b in zip(self.weights, self.biases, strict=True)]

    def member(self, k: int) -> MLP:
        """Member k as a plain ``MLP`` with a copy of its weights, on the stack's device."""
        with torch.random.fork_rng(devices=[]):  # its throwaway init must not move the caller's RNG
            mlp = MLP(self.hidden, self.encoding_name, "default", self.outputs, self.cells)
        mlp.to(self.weights[0].device)
        with torch.no_grad():
            for lin, (w, b) in zip(linears(mlp), self._member_params(k), strict=True):
                lin.weight.copy_(w)
                lin.bias.copy_(b)
        return mlp

    def load_member(self, k: int, mlp: MLP) -> None:
        """Overwrite member k's weights with ``mlp``'s (same shape and encoding)."""
        if mlp.spec() != self.spec():
            raise ValueError(f"cannot load a {mlp.spec()} network into a {self.spec()} population")
        with torch.no_grad():
            for lin, (w, b) in zip(linears(mlp), self._member_params(k), strict=True):
                w.copy_(lin.weight)
                b.copy_(lin.bias)

    def _layers(self, view: torch.Tensor, last: bool, members: slice | None) -> torch.Tensor:
        members = members if members is not None else slice(None)
        weights = [w[members] for w in self.weights]  # views of the stacked tensors, no copy
        biases = [b[members] for b in self.biases]
        n_layers = len(weights) if last else len(weights) - 1
        for i in range(n_layers):
            if i == 0 and view.dim() == 2:
                # A (B, 9) view shared by every member (a table of positions): the bias rides
                # in the matmul as a column of ones, so the (N, B, H) output is written once
                # rather than filled with the bias and then added to (the largest tensor of
                # the pass; on a CPU the pass is bound by memory, not by arithmetic).
                x = self.encode(view)  # (B, in)
                x = torch.cat([x, x.new_ones(x.shape[0], 1)], 1).expand(weights[0].shape[0], -1, -1)
                h = torch.bmm(x, torch.cat([weights[0], biases[0].unsqueeze(2)], 2).transpose(1, 2))
            else:
                h = self.encode(view) if i == 0 else h  # (N, B, in)
                h = torch.baddbmm(biases[i].unsqueeze(1), h, weights[i].transpose(1, 2))  # b + h @ W^T
            if i < len(weights) - 1:
                h = torch.relu_(h)  # in place: the matmuls' backward does not need its output
        return h

    # ``members`` (a slice) runs only those members, e.g. a chunk of a large population; the
    # view's leading axis is then that chunk's size.

    def trunk(self, view: torch.Tensor, members: slice | None = None) -> torch.Tensor:
        """(N, B, 9) (or shared (B, 9)) mover's views -> (N, B, H) last hidden layer."""
        return self._layers(view, False, members)

    def raw_logits(self, view: torch.Tensor, members: slice | None = None) -> torch.Tensor:
        """(N, B, 9) (or shared (B, 9)) mover's views -> (N, B, 9) logits, occupied cells included."""
        return self._layers(view, True, members)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """(N, B, H) last hidden layer (``trunk``) -> (N, B, 9) logits, occupied cells included."""
        return torch.baddbmm(self.biases[-1].unsqueeze(1), h, self.weights[-1].transpose(1, 2))

    def forward(self, view: torch.Tensor, members: slice | None = None) -> torch.Tensor:
        """(N, B, 9) (or shared (B, 9)) mover's views -> (N, B, 9) logits, occupied cells masked."""
        return self.raw_logits(view, members).masked_fill(view != 0, MASKED)

    def by_member(self, view: torch.Tensor, counts: list[int], masked: bool = True) -> torch.Tensor:
        """(R, 9) views, member k's ``counts[k]`` rows after member k - 1's -> (R, 9) logits
        (occupied cells masked, unless ``masked`` is false), each member's rows through its
        own layers: a matmul per member and layer, ``MLP``'s own (``F.linear``).

        Why not one batched matmul: members with different numbers of rows would be padded
        to the most, and a weight's gradient is a sum over the rows whose float result
        changes with the padded length: a member's numbers would depend on its neighbours'.
        (On the CPU, one thread: faster than the padded batched matmul, 220 against 386 ms for
        100 members of 1,000 rows; two threads: slower with few rows, level over a whole run.)"""
        weights = [w.unbind(0) for w in self.weights]  # views; their backward stacks the grads once
        biases = [b.unbind(0) for b in self.biases]
        last = len(weights) - 1
        out = []
        for k, h in enumerate(self.encode(view).split(counts)):
            for i in range(last + 1):
                h = F.linear(h, weights[i][k], biases[i][k])
                h = torch.relu(h) if i < last else h
            out.append(h)
        logits = torch.cat(out)
        return logits.masked_fill(view != 0, MASKED) if masked else logits
