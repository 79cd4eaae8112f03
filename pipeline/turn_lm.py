"""The words' end-of-turn cue: how likely it is that the caller's turn ends right after the words heard so far.

A MiniLM classifier (the bundled all-MiniLM-L6-v2 with its top layers fine-tuned and a one-logit head, trained by
`talkline train turn-lm` on the train pools' caller turns against the same turns cut at a word) reads the words
lowercased, without punctuation: Whisper ends every clip, finished or not, with a full stop. A check is one encoder
pass over a short text (~5 ms on one thread), so it costs a pause far less than a causal LM's forward."""

from __future__ import annotations

import math
import re
import threading
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from models.assets import minilm_dir
from models.embedder import load_layers, top_layer_weights
from models.invariance import prepack_linears

FLOOR = -12.0  # log10 of a probability too small to matter
MAX_TOKENS = 64  # a turn's last words are what matter
HEAD = Path(__file__).resolve().parents[1] / "models" / "turn_lm" / "minilm_turn.safetensors"
_NOT_WORD = re.compile(r"[^\w\s']")


def words_only(text: str) -> str:
    """Lowercase words without punctuation."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


class TurnLM:
    """The classifier, shared by every call; `log10_done` is blocking (run it off the event loop) and thread-safe.

    `weights`: the trained top layers and head (default: the shipped file); None starts from the bundled encoder and a
    fresh head, for training."""

    def __init__(self, weights: Path | None = HEAD) -> None:
        path = minilm_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.encoder = AutoModel.from_pretrained(str(path), dtype=torch.float32).eval()
        self.head = torch.nn.Linear(2 * self.encoder.config.hidden_size, 1)
        if weights is not None:
            self._load(Path(weights))
        self._lock = threading.Lock()

    def _load(self, weights: Path) -> None:
        if not weights.exists():
            raise FileNotFoundError(f"{weights}: the turn LM's weights are missing; `talkline train turn-lm` makes them")
        state = load_file(str(weights))
        load_layers(self.encoder, {k: v for k, v in state.items() if not k.startswith("head.")}, weights)
        self.head.load_state_dict({k.removeprefix("head."): v.float() for k, v in state.items() if k.startswith("head.")})
        self.encoder.to(torch.bfloat16)
        self.head.to(torch.bfloat16)
        prepack_linears(self.encoder)

    def logits(self, texts: list[str]) -> torch.Tensor:
        """One logit per text (already `words_only`): above 0 reads as a finished turn."""
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
        hidden = self.encoder(**batch).last_hidden_state
        mask = batch["attention_mask"]
        last = hidden[torch.arange(hidden.shape[0]), mask.sum(1) - 2]  # the last word piece, before [SEP]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * weights).sum(1) / weights.sum(1)
        return self.head(torch.cat([last, mean], dim=-1)).squeeze(-1)

    def log10_done(self, text: str) -> float:
        """log10 P(the caller's turn ends here | its words so far); FLOOR for no words."""
        words = words_only(text)
        if not words:
            return FLOOR
        with self._lock, torch.inference_mode():
            log_p = float(torch.nn.functional.logsigmoid(self.logits([words]).float())[0])
        return max(log_p / math.log(10), FLOOR)

    def train_mode(self, layers: int) -> None:
        """Float32, the top `layers` encoder layers and the head learning, the rest frozen."""
        self.encoder.float().train()
        self.head.float()
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        for p in self.trainable_encoder_parameters(layers):
            p.requires_grad_(True)

    def trainable_encoder_parameters(self, layers: int = 3) -> list[torch.nn.Parameter]:
        return [p for layer in self.encoder.encoder.layer[-layers:] for p in layer.parameters()]

    def trained_weights(self, layers: int) -> dict[str, torch.Tensor]:
        """What `talkline train turn-lm` ships: the top `layers` encoder layers and the head, in bf16."""
        out = top_layer_weights(self.encoder, layers)
        out.update({f"head.{k}": v.detach().to(torch.bfloat16).contiguous() for k, v in self.head.state_dict().items()})
        return out
