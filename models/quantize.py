"""Weight-only int8 linear layers for CPU decoding.

Decoding a small model reads every weight once per token, so it is bound by memory bandwidth: int8 weights with one
bf16 scale per output row read half the bytes of bf16. PyTorch's own CPU kernel (`_weight_int8pack_mm`) multiplies
bf16 activations by them directly, and its result for a row does not depend on how many rows share the call, so
speculative verification stays bit-identical to plain decoding of the quantized model (`models/invariance.py`).
"""

from __future__ import annotations

import torch
from torch import nn

WEIGHTS = ("bf16", "int8")


class Int8Linear(nn.Module):
    """A linear layer whose weight is int8 with a per-output-row scale (symmetric, absmax)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127
        self.register_buffer("qweight", (weight / scale[:, None]).round().clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale.to(torch.bfloat16))
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(torch.bfloat16).contiguous()
        out = torch._weight_int8pack_mm(flat, self.qweight, self.scale).to(x.dtype)
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        return out.reshape(*x.shape[:-1], self.out_features)


def quantize_int8(model: nn.Module) -> nn.Module:
    """Swap every nn.Linear of `model` (the output head included; tied embeddings stay bf16) for an Int8Linear, in place."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8Linear(child))
    return model


def with_weights(model: nn.Module, weights: str) -> nn.Module:
    """`model` with its linear weights in `weights` (bf16: as loaded)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights '{weights}' is not one of {', '.join(WEIGHTS)}")
    return quantize_int8(model) if weights == "int8" else model
