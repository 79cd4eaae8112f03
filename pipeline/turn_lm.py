"""The words' end-of-turn cue: how likely SmolLM2-135M-Instruct finds it that the caller's message ends right after the
words heard so far (its chat template's <|im_end|> as the next token). Zero-shot, as a text end-of-utterance model.

Each pause of a turn re-reads the turn's words so far, which begin with the previous pause's: the KV caches of recent
checks are kept (`models/prefix_cache.py`), so a check feeds only the words that are new since the last one (and a
new turn only its own words after the shared instruction)."""

from __future__ import annotations

import copy
import math
import re
import threading
from pathlib import Path

from models import assets
from models.prefix_cache import PrefixCache
from models.session import Session

SYSTEM = "You are a helpful phone agent."
FLOOR = -12.0  # log10 of a probability too small to matter
KEPT_TOKENS, KEPT_CHECKS = 4096, 64  # the recent checks' caches: ~23 KB a token, ~94 MB at most
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
        self.instruction = self.prompt_ids("")  # the chat before the caller's words, the same for every check
        self._instruction: Session | None = None
        # a kept check is taken only by one that shares some of its words: a new turn starts from the instruction
        self.checks = PrefixCache(self._new_session, KEPT_TOKENS, KEPT_CHECKS, min_reuse=len(self.instruction) + 1)
        self._lock = threading.Lock()

    def _new_session(self) -> Session:
        """A session holding the instruction's keys and values, computed at the first check and copied since."""
        from transformers import DynamicCache

        if self._instruction is None:
            self._instruction = Session(cache=DynamicCache(config=self.model.config))
            self._instruction.prefill(self.model, self.instruction)
        return Session(cache=copy.deepcopy(self._instruction.cache), ids=list(self._instruction.ids))

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
        ids = self.prompt_ids(text)
        with self._lock, torch.inference_mode():
            session = self.checks.take(ids)
            logits, _ = session.prefill(self.model, ids)
            self.checks.give_back(session)  # not reached after a failed forward: that session is dropped
        return max(float(torch.log_softmax(logits, -1)[self.end_id]) / math.log(10), FLOOR)
