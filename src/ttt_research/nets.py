"""Policy networks: small MLPs from the mover's view to masked logits.

``MLP(hidden=[100], encoding="planes18")`` is antirez's 18 -> 100 -> 9 network;
``MLP(hidden=[128, 128], encoding="signed9")`` is the PPO seed's 9 -> 128 -> 128 -> 9.
The input is always the mover's view (B, 9) (+1 own, -1 opponent, 0 empty); the encoding
happens inside the module, so the exported ONNX graph takes the contract's board as is.

Action masking: occupied cells get ``MASKED`` (a very large negative number) in place of
their logit, so a softmax gives them probability 0 and an argmax never picks them. We
mask with a finite number rather than -inf so that a softmax over a row stays finite
and ONNX runtimes that dislike infinities are happy; ``raw_logits`` skips the mask for
algorithms that learn which cells are occupied (antirez's seed, PPO with masking off).
"""

from __future__ import annotations

import torch
from torch import nn

from . import encodings

MASKED = -1e9


def sample(logits: torch.Tensor, generator: torch.Generator | None = None,
           temperature: float = 1.0) -> torch.Tensor:
    """(B, 9) logits -> (B,) cells drawn from softmax(logits / temperature), by the
    Gumbel-max trick: argmax of logits / T plus Gumbel noise (masked cells stay at -1e9,
    so they are never drawn). One uniform draw per cell, on the logits' device."""
    u = torch.rand(logits.shape, device=logits.device, generator=generator)
    return (logits / temperature - torch.log(-torch.log(u.clamp(1e-20, 1.0)))).argmax(-1)


class MLP(nn.Module):
    """Mover's view (B, 9) -> logits (B, 9), ReLU hidden layers of the given sizes."""

    def __init__(self, hidden: list[int] | tuple[int, ...] = (100,), encoding: str = "planes18",
                 init: str = "default", outputs: int = 9):
        super().__init__()
        self.encoding_name = encoding
        self.encode = encodings.get(encoding)
        self.hidden = [int(h) for h in hidden]
        sizes = [encodings.WIDTH[encoding], *self.hidden]
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], outputs))  # 9 logits; 1 for a value network
        self.body = nn.Sequential(*layers)
        if init == "uniform":  # antirez's ttt-rl: every weight and bias uniform in [-0.5, 0.5]
            for p in self.parameters():
                nn.init.uniform_(p, -0.5, 0.5)
        elif init != "default":
            raise ValueError(f"net.init must be 'default' or 'uniform', got {init!r}")

    def spec(self) -> dict:
        """What it takes to build this network again (stored in checkpoints)."""
        return {"hidden": self.hidden, "encoding": self.encoding_name}

    def trunk(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, H) last hidden layer (for a shared value head)."""
        return self.body[:-1](self.encode(view))

    def raw_logits(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, 9) logits for every cell, occupied ones included."""
        return self.body(self.encode(view))

    def forward(self, view: torch.Tensor) -> torch.Tensor:
        """(B, 9) mover's view -> (B, 9) logits with occupied cells masked."""
        return self.raw_logits(view).masked_fill(view != 0, MASKED)
