"""The draft vocabulary: the target's most frequent reply tokens (SpecForge's d2t/t2d mapping)."""

from __future__ import annotations

import torch

from models.eagle3 import vocab_mapping_from_counts
from training.drafter.regenerate import Sample


def reply_token_counts(samples: list[Sample], vocab_size: int) -> torch.Tensor:
    """How often each target token appears at loss-masked (reply) positions: int64 [vocab_size]."""
    ids = torch.tensor([t for s in samples for t in s.reply_ids], dtype=torch.long)
    return torch.bincount(ids, minlength=vocab_size)


def draft_vocab(samples: list[Sample], vocab_size: int, draft_vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(d2t, t2d) for the `draft_vocab_size` most frequent reply tokens."""
    return vocab_mapping_from_counts(reply_token_counts(samples, vocab_size), draft_vocab_size)


def target_to_draft(t2d: torch.Tensor) -> torch.Tensor:
    """Lookup target id -> draft id, -1 outside the draft vocabulary: int64 [vocab_size]."""
    index = torch.full(t2d.shape, -1, dtype=torch.long, device=t2d.device)
    index[t2d] = torch.arange(int(t2d.sum()), device=t2d.device)
    return index
