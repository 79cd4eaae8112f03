"""One target forward over the new tokens of several sessions: the rows of all of them share each linear layer.

Decoding is bound by reading the weights, so a forward over the rows of four conversations costs little more than
over one. Each session's rows attend only to its own cache, one row at a time (`invariance.last_rows_attention`),
and every GEMM stays within `MAX_PACKED_ROWS` rows, where a row's result does not depend on the other rows: so each
session gets exactly the logits and features a forward of its rows alone gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.invariance import MAX_ROWWISE, last_rows_attention
from models.session import Session

MAX_PACKED_ROWS = 32  # bf16 GEMMs on this CPU give each row the same bits up to 32 rows, not beyond


def packable(model: nn.Module) -> bool:
    """Whether `packed_forward` knows this model's layers (the Llama family: SmolLM2)."""
    return getattr(model.config, "model_type", None) == "llama"


@dataclass
class Segment:
    session: Session
    start: int  # first row in the packed forward
    rows: int
    past: int  # tokens the session's cache held before


class PackedKV:
    """Stands in for the cache inside a packed forward: each segment's new keys and values go to its own cache,
    and the attention reads them back from there."""

    def __init__(self, segments: list[Segment]) -> None:
        self.segments = segments
        self.full: list[tuple[torch.Tensor, torch.Tensor]] = []

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        """keys/values [1, Hkv, N, D] of all rows -> each segment's cache layer grows by its rows."""
        self.full = [
            s.session.cache.update(keys[:, :, s.start : s.start + s.rows], values[:, :, s.start : s.start + s.rows], layer_idx)
            for s in self.segments
        ]
        return keys, values

    def attend(self, query: torch.Tensor, scale: float) -> torch.Tensor:
        """query [1, Hq, N, D] -> [1, N, Hq, D]: each row over its own session's causal prefix."""
        out = []
        for s, (keys, values) in zip(self.segments, self.full):
            out += last_rows_attention(query[0, :, s.start : s.start + s.rows], keys[0], values[0], scale)
        return torch.stack(out)[None].to(query.dtype)


def packed_forward(model: nn.Module, jobs: list[tuple[Session, list[int]]]) -> list[torch.Tensor]:
    """Feed each session its new tokens in one forward; per job, the logits [len(ids), vocab] as `Session.forward` gives."""
    segments, start = [], 0
    for session, ids in jobs:
        if not 0 < len(ids) <= MAX_ROWWISE:
            raise ValueError(f"a packed job feeds 1 to {MAX_ROWWISE} tokens, not {len(ids)}: run it alone")
        segments.append(Segment(session, start, len(ids), len(session.ids)))
        start += len(ids)
    if start > MAX_PACKED_ROWS:
        raise ValueError(f"{start} rows in one packed forward; at most {MAX_PACKED_ROWS} keep every row's result exact")
    inner = model.model
    input_ids = torch.tensor([[t for _, ids in jobs for t in ids]])
    positions = torch.tensor([[s.past + i for s in segments for i in range(s.rows)]])
    hidden = inner.embed_tokens(input_ids)
    rope = inner.rotary_emb(hidden, position_ids=positions)
    packed = PackedKV(segments)
    wanted = {i for s in segments if s.session.aux_layers is not None for i in s.session.aux_layers}
    layer_out: dict[int, torch.Tensor] = {}
    for index, layer in enumerate(inner.layers[: model.config.num_hidden_layers]):
        hidden = layer(hidden, attention_mask=None, position_embeddings=rope, position_ids=positions, cache=packed, packed=packed)
        if index in wanted:
            layer_out[index] = hidden[0]
    logits = model.lm_head(inner.norm(hidden))[0].float()
    results = []
    for (session, ids), s in zip(jobs, segments):
        rows = slice(s.start, s.start + s.rows)
        session.record(ids, {i: out[rows] for i, out in layer_out.items()})
        results.append(logits[rows])
    return results
