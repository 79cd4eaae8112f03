"""Batch-invariant kernels: a token's logits do not depend on how many tokens share its forward pass.

Verifying k drafted tokens in one target forward must give bit-identical logits to decoding them one
at a time, or greedy speculative decoding is not lossless in bf16. On this CPU two things break that:
bf16 GEMMs with a single row take a different kernel than with two or more rows, and SDPA over a block
of queries reduces differently than over one. So single-row linears run as two identical rows, and
short query blocks (decode, verify) attend one row at a time over exactly that row's causal prefix, in
float32 by plain matmuls (`one_query_attention`). The linears' bf16 weights are also reordered once for oneDNN's
kernel (`RowStableLinear.prepack`), which gives the same bits as `F.linear` and takes a decode step from ~53 to ~40 ms
on one core of this CPU (docs/performance.md).
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
    """nn.Linear that never runs a one-row GEMM (it takes a different bf16 kernel than 2+ rows).

    After `prepack()`, bf16 weights on the CPU are reordered once into oneDNN's blocked layout and multiplied by its
    kernel (`onednn_linear`) outside autograd: the same bits as `F.linear`, without reordering every weight on every
    call, which a decode step otherwise pays for each of the model's ~200 linears."""

    packed: torch.Tensor | None = None
    packed_for: tuple[int, int] | None = None  # (data pointer, version) of the weight it was packed from

    def prepack(self) -> bool:
        """Reorder the weight for oneDNN if it runs here and gives exactly `F.linear`'s bits; whether it did."""
        self.packed = self.packed_for = None
        if not prepackable(self.weight):
            return False
        with torch.inference_mode():
            packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), PACK_ROWS_HINT)
            probe = torch.randn(PROBE_ROWS, self.in_features, generator=torch.Generator().manual_seed(0)).to(self.weight.dtype)
            if not torch.equal(onednn_linear(probe, packed, self.bias), F.linear(probe, self.weight, self.bias)):
                return False
        self.packed, self.packed_for = packed, weight_key(self.weight)
        return True

    def __getstate__(self) -> dict:
        """Copies and pickles leave the packed weight behind (oneDNN's layout has no storage); `prepack` again."""
        return {**super().__getstate__(), "packed": None, "packed_for": None}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        flat = x.reshape(rows, x.shape[-1])
        if rows == 1:
            flat = flat.expand(2, -1)
        if self.packed is not None and not torch.is_grad_enabled() and self.packed_for == weight_key(self.weight):
            out = onednn_linear(flat.contiguous(), self.packed, self.bias)
        else:
            out = F.linear(flat, self.weight, self.bias)
        return out[:rows].reshape(*x.shape[:-1], -1)


PACK_ROWS_HINT = 2  # the row count oneDNN's reorder is told to expect (decode and verify: a few rows)
PROBE_ROWS = 3


def prepackable(weight: torch.Tensor) -> bool:
    """Whether oneDNN's prepacked bf16 linear runs for this weight on this machine."""
    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.bfloat16
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )


def weight_key(weight: torch.Tensor) -> tuple[int, int]:
    """Changes whenever the weight is replaced or written in place (training), so a stale packed copy is never used."""
    return weight.data_ptr(), weight._version


def onednn_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [N, in] @ a weight reordered by `torch.ops.mkldnn._reorder_linear_weight` (+ bias) -> [N, out]."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def prepack_linears(module: nn.Module) -> nn.Module:
    """Every nn.Linear of `module` as a RowStableLinear, prepacked where oneDNN runs; in place."""
    for child in module.modules():
        if type(child) is nn.Linear:
            child.__class__ = RowStableLinear
        if isinstance(child, RowStableLinear) and child.packed is None:
            child.prepack()
    return module


def make_batch_invariant(model: nn.Module) -> nn.Module:
    """Switch a HF causal LM to the kernels above, in place."""
    prepack_linears(model).set_attn_implementation(ATTENTION)
    return model
