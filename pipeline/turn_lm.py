"""The words' end-of-turn cue: how likely SmolLM2-135M-Instruct finds it that the caller's message ends right after the
words heard so far (its chat template's <|im_end|> as the next token). Zero-shot, as a text end-of-utterance model."""

from __future__ import annotations

import math
import re
import threading
from pathlib import Path

from models import assets

SYSTEM = "You are a helpful phone agent."
FLOOR = -12.0  # log10 of a probability too small to matter
_NOT_WORD = re.compile(r"[^\w\s']")


def words_only(text: str) -> str:
    """Lowercase words without punctuation: Whisper ends every clip, finished or not, with a full stop."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


class TurnLM:
    """One small causal LM shared by every call (the base model: it judges plain English better than the tuned one);
    `log10_done` is blocking, run it off the event loop."""

    def __init__(self, path: Path | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from models.invariance import prepack_linears

        path = path or assets.smollm2_safetensors_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = prepack_linears(AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval())
        self.end_id = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self._lock = threading.Lock()

    def prompt_ids(self, text: str) -> list[int]:
        """The chat up to and including the caller's words, with the caller's message left open."""
        chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": words_only(text)}]
        rendered = self.tokenizer.apply_chat_template(chat, tokenize=False)
        return self.tokenizer(rendered[: rendered.rindex("<|im_end|>")]).input_ids

    def log10_done(self, text: str) -> float:
        """log10 P(the caller's message ends here | its words so far); FLOOR for no words."""
        import torch

        if not words_only(text):
            return FLOOR
        ids = torch.tensor([self.prompt_ids(text)])
        with self._lock, torch.inference_mode():
            logits = self.model(ids).logits[0, -1].float()
        return max(float(torch.log_softmax(logits, -1)[self.end_id]) / math.log(10), FLOOR)
