"""One conversation's state in the engine: its KV cache (and the drafter's), the tokens it holds, generation counts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from models.eagle3 import DrafterCache
from models.forward_gate import ForwardGate


def common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    reused_tokens: int = 0
    new_tokens: int = 0
    target_forwards: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @property
    def mean_accept_len(self) -> float:
        """Tokens emitted per decode-time target forward (bonus token included; the prefill's token excluded)."""
        return (self.new_tokens - 1) / (self.target_forwards - 1) if self.target_forwards > 1 else 0.0


@dataclass
class Session:
    """One conversation's KV cache; `ids` are exactly the tokens whose keys and values it holds.

    With a drafter, `aux` holds the target features [len(ids), 3H] the drafter reads, and `draft_cache`
    the drafter's own KV cache (position p was fed the embedding of ids[p+1]). With a `runner` (the engine's
    `ForwardBatcher.forward`), target forwards go through it, so concurrent sessions share them. With a `gate`, each
    target forward waits for a slot, which goes to the session whose `slack` (seconds of speech its listener has yet
    to hear) is least.
    """

    cache: DynamicCache
    ids: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    aux_layers: list[int] | None = None
    aux: torch.Tensor | None = None
    draft_cache: DrafterCache | None = None
    runner: Callable[[Session, list[int]], torch.Tensor] | None = None
    gate: ForwardGate | None = None
    slack: Callable[[], float] = lambda: 0.0

    def crop(self, n: int) -> None:
        if n < len(self.ids):
            self.cache.crop(n - len(self.ids))
            del self.ids[n:]
        if self.aux is not None:
            self.aux = self.aux[:n]
        if self.draft_cache is not None and self.draft_cache.length > max(n - 1, 0):
            self.draft_cache.crop(max(n - 1, 0))

    def forward(self, model: torch.nn.Module, new_ids: list[int]) -> torch.Tensor:
        """Run new tokens through the model on top of the cache; logits [len(new_ids), vocab]."""
        if self.gate is None:
            return self._run(model, new_ids)
        with self.gate.forward(self.slack()):
            return self._run(model, new_ids)

    def _run(self, model: torch.nn.Module, new_ids: list[int]) -> torch.Tensor:
        if self.runner is not None:
            return self.runner(self, new_ids)
        return self.forward_alone(model, new_ids)

    def forward_alone(self, model: torch.nn.Module, new_ids: list[int]) -> torch.Tensor:
        """Run new tokens through the model in a call that holds no other session's rows; logits [len(new_ids), vocab]."""
        features = self.aux_layers is not None
        out = model(input_ids=torch.tensor([new_ids]), cache=self.cache, use_cache=True, output_hidden_states=features)
        self.record(new_ids, {i: out.hidden_states[i + 1][0] for i in self.aux_layers} if features else {})  # layer i's output
        return out.logits[0].float()

    def record(self, new_ids: list[int], layer_outputs: dict[int, torch.Tensor]) -> None:
        """The cache now holds `new_ids` too; keep the drafter's features from the outputs [T, H] of the aux layers."""
        self.ids.extend(new_ids)
        if self.aux_layers is not None:
            aux = torch.cat([layer_outputs[i] for i in self.aux_layers], dim=-1)  # [T, 3H]
            self.aux = aux if self.aux is None else torch.cat([self.aux, aux])

    def repair(self) -> None:
        """After a failed forward: drop the keys and values beyond `ids` that some layers may hold."""
        for layer in self.cache.layers:
            if (extra := layer.get_seq_length() - len(self.ids)) > 0:
                layer.crop(-extra)

    def extend(self, model: torch.nn.Module, ids: list[int], min_new: int = 0) -> tuple[torch.Tensor | None, int]:
        """Make the cache hold exactly `ids`: keep the cached common prefix (leaving at least `min_new` tokens to
        feed), feed the rest; (logits of the fed tokens or None when none was fed, reused tokens)."""
        keep = min(common_prefix_len(self.ids, ids), len(ids) - min_new)
        self.crop(keep)
        return (self.forward(model, ids[keep:]) if keep < len(ids) else None), keep

    def prefill(self, model: torch.nn.Module, prompt_ids: list[int]) -> tuple[torch.Tensor, int]:
        """Reuse the cached common prefix, feed the rest; (last-position logits, reused tokens)."""
        logits, keep = self.extend(model, prompt_ids, min_new=1)
        return logits[-1], keep
