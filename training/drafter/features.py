"""Teacher-forced target forward over prompt + reply: the aux hidden states and logits the drafter trains on."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from transformers import PreTrainedModel

from training.drafter.conversations import DialogSample
from training.drafter.regenerate import Sample
from training.drafter.vocab import target_to_draft


@dataclass
class Batch:
    """B sequences cut to their last `window` tokens, right-padded to T (causal attention never sees the padding)."""

    input_ids: Tensor  # [B, T] target-vocab tokens
    position_ids: Tensor  # [B, T] positions in the full sequence
    aux: Tensor  # [B, T, 3H] target aux hidden states (HF hidden_states[i + 1] for each aux layer id i)
    target_logits: Tensor  # [B, T, Vd] target logits for the next token, restricted to the draft vocabulary
    target_draft_ids: Tensor  # [B, T] the target's argmax next token as a draft id, -1 outside the draft vocab
    loss_mask: Tensor  # [B, T] bool: the token at this position belongs to a reply

    def to(self, device: str | torch.device) -> Batch:
        """The same batch on `device`."""
        return Batch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


@torch.no_grad()
def target_features(
    model: PreTrainedModel, samples: list[Sample | DialogSample], aux_layer_ids: list[int], t2d: Tensor, window: int
) -> Batch:
    """Run the target over whole sequences (it sees the full context), keep each sequence's last `window` positions."""
    device = model.device
    lengths = [len(s.ids) for s in samples]
    width = max(lengths)
    ids = torch.tensor([s.ids + [0] * (width - len(s.ids)) for s in samples], device=device)
    attention = torch.tensor([[1] * n + [0] * (width - n) for n in lengths], device=device)
    out = model(input_ids=ids, attention_mask=attention, output_hidden_states=True, use_cache=False)
    aux = torch.cat([out.hidden_states[i + 1] for i in aux_layer_ids], dim=-1)  # [B, L, 3H]
    t2d = t2d.to(device)
    draft_ids = target_to_draft(t2d)[out.logits.argmax(dim=-1)]  # [B, L]
    draft_logits = out.logits[..., t2d]  # [B, L, Vd]
    reply = torch.tensor([s.reply_mask + [False] * (width - n) for s, n in zip(samples, lengths)], dtype=torch.bool, device=device)
    windows = [range(max(0, n - window), n) for n in lengths]

    def cut(x: Tensor, fill: float) -> Tensor:
        """Each row's window, right-padded with `fill`: [B, T, ...]."""
        return pad_sequence([x[b, w.start : w.stop] for b, w in enumerate(windows)], batch_first=True, padding_value=fill)

    positions = [torch.tensor(w, device=device) for w in windows]
    return Batch(
        input_ids=cut(ids, 0),
        position_ids=pad_sequence(positions, batch_first=True, padding_value=0),
        aux=cut(aux, 0),
        target_logits=cut(draft_logits, 0),
        target_draft_ids=cut(draft_ids, -1),
        loss_mask=cut(reply, False),
    )
