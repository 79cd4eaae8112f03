"""The learning-rate schedule the hand-written training loops share (the drafter, DPO)."""

from __future__ import annotations

import math


def warmup_cosine(step: int, lr: float, warmup_steps: int, total_steps: int, floor: float = 0.0) -> float:
    """Linear warmup over `warmup_steps`, then cosine decay to lr * floor at `total_steps`."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = min((step - warmup_steps) / max(1, total_steps - warmup_steps), 1.0)
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))
