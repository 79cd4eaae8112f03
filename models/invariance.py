"""Batch-invariant kernels: a token's logits do not depend on how many tokens share its forward pass.

Verifying k drafted tokens in one target forward must give bit-identical logits to decoding them one
at a time, or greedy speculative decoding is not lossless in bf16. On this CPU two things break that:
bf16 GEMMs with a single row take a different kernel than with two or more rows, and SDPA over a block
of queries reduces differently than over one. So single-row linears run as two identical rows, and
short query blocks (decode, verify) attend one row at a time over exactly that row's causal prefix, in
float32 by plain matmuls (`one_query_attention`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface

ATTENTION = "talkline_rowwise"
MAX_ROWWISE = 16


def rowwise_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """query [B, Hq, T, D], key/value [B, Hkv, S, D] -> ([B, T, Hq, D], None); causal, cache-aligned."""
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    packed = kwargs.get("packed")  # several sessions' rows in one forward (models/packed.py)
    if packed is not None:
        return packed.attend(query, scale), None
    rows, total = query.shape[2], key.shape[2]
    if query.shape[0] != 1:
        raise ValueError("the embedded engine runs one sequence per forward")
    if rows > MAX_ROWWISE:  # a prefill: the queries are the last `rows` positions of the sequence
        causal = torch.ones(rows, total, dtype=torch.bool).tril(diagonal=total - rows)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=causal, scale=scaling, enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    return torch.stack(last_rows_attention(query[0], key[0], value[0], scale))[None].to(query.dtype), None


def last_rows_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float) -> list[torch.Tensor]:
    """query [Hq, T, D], the last T positions of key/value [Hkv, S, D] -> T rows [Hq, D], each over its causal prefix."""
    past = key.shape[1] - query.shape[1]
    keys, values = key.float(), value.float()  # once per layer; each row attends to a prefix view of them
    return [one_query_attention(query[:, t], keys[:, : past + t + 1], values[:, : past + t + 1], scale) for t in range(query.shape[1])]


def one_query_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float) -> torch.Tensor:
    """One position's attention in float32: query [Hq, D] over key/value [Hkv, S, D] -> [Hq, D].

    Five times cheaper than SDPA's CPU kernel for a single query, which matters as decode and verify run
    it once per layer and row."""
    heads, kv_heads, dim = query.shape[0], key.shape[0], query.shape[-1]
    q = query.float().reshape(kv_heads, heads // kv_heads, dim)  # query heads grouped by their kv head
    weights = torch.softmax(torch.bmm(q, key.float().transpose(1, 2)) * scale, dim=-1)  # [Hkv, G, S]
    return torch.bmm(weights, value.float()).reshape(heads, dim)


AttentionInterface.register(ATTENTION, rowwise_attention)


class RowStableLinear(nn.Linear):
    """nn.Linear that never runs a one-row GEMM (it takes a different bf16 kernel than 2+ rows)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() // x.shape[-1] != 1:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(1, x.shape[-1])
        return F.linear(flat.expand(2, -1), self.weight, self.bias)[:1].reshape(*x.shape[:-1], -1)


def make_batch_invariant(model: nn.Module) -> nn.Module:
    """Switch a HF causal LM to the kernels above, in place."""
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = RowStableLinear
    model.set_attn_implementation(ATTENTION)
    return model
