"""Training-time test (EAGLE3 / SpecForge): unroll the drafter k steps on its own hidden states; the weighted loss.

Row t of step i stands for the drafter's position t + i at inference: it reads the embedding of token
t + 1 + i and (step 0) the target's aux features at t or (step i > 0) its own output hidden state of step
i - 1 at row t, and predicts token t + 2 + i, whose target distribution is the target's logits at t + 1 + i.
It attends to the step-0 keys of rows <= t (the verified context) and to the step-j keys of row t for
1 <= j <= i (its own earlier drafts), exactly what `DrafterCache` holds when `speculative.py` drafts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from models.eagle3 import Eagle3Attention, Eagle3Drafter
from training.drafter.features import Batch


def shift(x: Tensor, n: int, fill: float | bool = 0) -> Tensor:
    """x[:, n:] padded at the end with `fill` back to x's length (dim 1)."""
    pad = torch.full_like(x[:, :n], fill)
    return torch.cat([x[:, n:], pad], dim=1)


def ttt_attention_mask(t: int, step: int, device: torch.device | str | None = None) -> Tensor:
    """bool [T, (step + 1) * T] over the keys of steps 0..step: causal to step 0, diagonal to the later ones."""
    causal = torch.ones(t, t, dtype=torch.bool, device=device).tril()
    diagonal = torch.eye(t, dtype=torch.bool, device=device)
    return torch.cat([causal] + [diagonal] * step, dim=1)


def _attention(attn: Eagle3Attention, x: Tensor, cos: Tensor, sin: Tensor, keys: list[Tensor], values: list[Tensor]) -> Tensor:
    """`Eagle3Attention` with the TTT mask over the keys of all steps so far (this step's are appended)."""
    b, t, _ = x.shape
    q, k, v = attn.project(x, cos, sin)
    keys.append(k)
    values.append(v)
    mask = ttt_attention_mask(t, len(keys) - 1, x.device)
    o = F.scaled_dot_product_attention(q, torch.cat(keys, 2), torch.cat(values, 2), attn_mask=mask, enable_gqa=True)
    return attn.o_proj(o.transpose(1, 2).reshape(b, t, -1))  # [B, T, H]


def unroll_hidden(drafter: Eagle3Drafter, batch: Batch, steps: int) -> list[Tensor]:
    """Output hidden states [B, T, H] of each TTT step, each step fed the previous step's."""
    layer = drafter.midlayer
    hidden = drafter.fuse(batch.aux)  # [B, T, H]
    keys: list[Tensor] = []
    values: list[Tensor] = []
    outputs = []
    for i in range(steps):
        embeds = drafter.embed(shift(batch.input_ids, 1 + i))  # token t + 1 + i at row t
        cos, sin = drafter.rope(batch.position_ids + i, hidden.dtype)
        x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(hidden)], dim=-1)  # [B, T, 2H]
        h = hidden + _attention(layer.self_attn, x, cos, sin, keys, values)
        hidden = h + layer.mlp(layer.post_attention_layernorm(h))
        outputs.append(hidden)
    return outputs


def draft_head(drafter: Eagle3Drafter) -> Callable[[Tensor], Tensor]:
    """Output hidden states -> draft logits."""
    return lambda hidden: drafter.lm_head(drafter.norm(hidden))


def step_targets(batch: Batch, step: int) -> tuple[Tensor, Tensor, Tensor]:
    """(target logits [B, T, Vd], target draft ids [B, T], reply mask [B, T]) for the tokens step `step` predicts."""
    reply = shift(batch.loss_mask, 2 + step, False)  # token t + 2 + step is part of a reply
    return shift(batch.target_logits, 1 + step), shift(batch.target_draft_ids, 1 + step, -1), reply


def soft_cross_entropy(logits: Tensor, target_logits: Tensor) -> Tensor:
    """Mean over rows of -sum_v p(v) log q(v), p = softmax of the target logits over the draft vocab."""
    p = torch.softmax(target_logits.float(), dim=-1)
    return -(p * torch.log_softmax(logits.float(), dim=-1)).sum(dim=-1).mean() if len(p) else logits.sum() * 0.0


@dataclass
class TTTResult:
    """The weighted loss to backpropagate, and per-step loss and accuracy for the logs."""

    loss: Tensor
    step_losses: list[float]
    step_accuracy: list[float]


def ttt_loss(step_outputs: list[Tensor], batch: Batch, decay: float = 0.8, head: Callable[[Tensor], Tensor] | None = None) -> TTTResult:
    """sum_i decay^i * CE_i over reply positions whose target argmax is in the draft vocab.

    `step_outputs` are each step's logits, or its hidden states when `head` maps them to logits: then only
    the reply rows go through the head (most rows are context the loss never reads). Accuracy counts every
    reply position, out-of-vocabulary targets as misses (they can never be accepted).
    """
    total, losses, accuracy = 0.0, [], []
    for i, out in enumerate(step_outputs):
        target_logits, target_ids, reply = step_targets(batch, i)
        logits = head(out[reply]) if head is not None else out[reply]  # [N, Vd]
        ids = target_ids[reply]
        known = ids >= 0
        loss = soft_cross_entropy(logits[known], target_logits[reply][known])
        total = total + decay**i * loss
        losses.append(float(loss.detach()))
        accuracy.append(float((logits.argmax(dim=-1) == ids).sum() / max(1, len(ids))))
    return TTTResult(total, losses, accuracy)
