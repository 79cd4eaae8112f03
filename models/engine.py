"""The embedded LLM engine: per-conversation KV caches kept across turns, streamed decoding."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, PreTrainedTokenizerBase

from models import assets
from models.batching import ForwardBatcher
from models.eagle3 import DrafterCache, Eagle3Drafter, load_drafter
from models.forward_gate import WARM_UP_SLACK_S, ForwardGate
from models.invariance import make_batch_invariant, prepack_linears
from models.packed import packable
from models.phrases import PHRASES_NAME, PhraseMemory
from models.quantize import with_weights
from models.session import GenerationStats, Session
from models.spec_config import SpecConfig
from models.speculative import speculative_decode

STOP_TOKENS = ("<|im_end|>", "<end_of_turn>")  # end of a reply in ChatML (SmolLM2) and in Gemma's format


def sample(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None) -> int:
    """Greedy at temperature 0, else a draw from softmax(logits / temperature)."""
    if temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


class Detokenizer:
    """Turns a growing list of token ids into text deltas, holding back split UTF-8 characters."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.text = ""

    def push(self, token: int) -> str:
        self.ids.append(token)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return ""
        delta, self.text = text[len(self.text) :], text
        return delta


class Engine:
    """A causal LM with its tokenizer and an optional EAGLE3 drafter; generation runs in the caller's thread.

    With `batching`, the target forwards of all sessions run on one worker thread, and those waiting at the same
    moment share one forward (`models/batching.py`); each session's output is unchanged."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        drafter: Eagle3Drafter | None = None,
        draft_tokens: int = 4,
        min_draft_confidence: float = 0.0,
        prompt_lookup: bool = False,
        phrases: PhraseMemory | None = None,
        learn_phrases: bool = True,
        batching: bool = False,
        slots: int = 0,
    ) -> None:
        self.model = make_batch_invariant(model.eval())
        self.batcher = ForwardBatcher(self.model) if batching and packable(self.model) else None
        self.gate = ForwardGate(slots) if slots and self.batcher is None else None
        self.tokenizer = tokenizer
        stop = {tokenizer.eos_token_id, *tokenizer.convert_tokens_to_ids(list(STOP_TOKENS))} - {tokenizer.unk_token_id}
        self.stop_ids = {t for t in stop if isinstance(t, int) and t >= 0}
        self.draft_tokens, self.min_draft_confidence = draft_tokens, min_draft_confidence
        self.prompt_lookup = prompt_lookup  # greedy chains also draft from earlier context (models/lookup.py)...
        self.phrases = phrases  # ...and, with it, from the target's past replies (models/phrases.py)
        self.learn_phrases = learn_phrases  # every reply served joins `phrases`
        self.drafter: Eagle3Drafter | None = None
        if drafter is not None:
            self.set_drafter(drafter)

    @classmethod
    def load(
        cls,
        path: Path | None = None,
        dtype: torch.dtype = torch.bfloat16,
        model: str = "tuned",
        spec: SpecConfig | None = None,
        weights: str = "bf16",
        batching: bool = False,
        slots: int = 0,
    ) -> Engine:
        """Load a model folder, else `model` (tuned: SmolLM2 + the committed adapter, merged; base: plain SmolLM2),
        decoding speculatively as `spec` says (None, or no drafter in it: plain greedy decoding). With prompt lookup
        and phrases on, the drafter folder's phrase memory (`phrases.json`) comes along. `weights` int8 quantizes
        the linear layers of the model and the drafter (`models/quantize.py`); `batching` shares target forwards
        between concurrent sessions; `slots` > 0 (without batching) runs at most that many target forwards at once, the
        most urgent first (`models/forward_gate.py`)."""
        path = path or assets.llm_dir(model)
        tokenizer = AutoTokenizer.from_pretrained(path)
        lm = with_weights(AutoModelForCausalLM.from_pretrained(path, dtype=dtype), weights)
        if spec is None or spec.drafter is None:
            return cls(lm, tokenizer, batching=batching, slots=slots)
        shipped = Path(spec.drafter) / PHRASES_NAME
        memory = PhraseMemory.load(shipped) if spec.prompt_lookup and spec.phrases and shipped.exists() else None
        return cls(
            lm,
            tokenizer,
            with_weights(load_drafter(spec.drafter, dtype=dtype)[0], weights),
            spec.draft_tokens,
            spec.min_confidence,
            spec.prompt_lookup,
            memory,
            spec.learn_phrases,
            batching,
            slots,
        )

    def set_drafter(self, drafter: Eagle3Drafter | None) -> None:
        """Use an EAGLE3 drafter (sharing this model's embeddings), or None for plain decoding."""
        if drafter is not None:
            cfg, target = drafter.config, self.model.config
            if (cfg.hidden_size, cfg.vocab_size) != (target.hidden_size, target.vocab_size):
                raise ValueError(
                    f"drafter was built for hidden {cfg.hidden_size} / vocab {cfg.vocab_size}, the model has "
                    f"{target.hidden_size} / {target.vocab_size}: train a drafter for this model"
                )
            drafter = prepack_linears(drafter.to(self.model.dtype).eval())
            drafter.set_embedding(self.model.get_input_embeddings())
        self.drafter = drafter

    def new_session(self) -> Session:
        session = Session(
            cache=DynamicCache(config=self.model.config), runner=self.batcher.forward if self.batcher else None, gate=self.gate
        )
        if self.drafter is not None:
            session.aux_layers, session.draft_cache = list(self.drafter.config.aux_layer_ids), DrafterCache()
        return session

    def encode_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        encoded = self.tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=True, return_dict=True)
        return list(encoded["input_ids"])

    def prefill(
        self,
        session: Session,
        prompt_ids: list[int],
        cancelled: Callable[[], bool] = lambda: False,
        slack: Callable[[], float] | None = None,
    ) -> None:
        """Bring the session's cache to exactly `prompt_ids` (the reusable prefix kept), ahead of the next turn; `slack`
        says how urgent it is (default: a warm-up, after any reply)."""
        with session.lock, torch.inference_mode():
            session.slack = slack or (lambda: WARM_UP_SLACK_S)
            if not cancelled():
                session.extend(self.model, prompt_ids)

    def generate(
        self,
        session: Session,
        prompt_ids: list[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        cancelled: Callable[[], bool] = lambda: False,
        stats: GenerationStats | None = None,
        seed: int | None = None,
        ignore_eos: bool = False,
        slack: Callable[[], float] | None = None,
    ) -> Iterator[int]:
        """Yield new token ids until a stop token (unless `ignore_eos`), the limit, or cancellation (speculative with a
        drafter); `slack` gives the seconds of speech the listener has yet to hear (default 0: they are waiting)."""
        if max_new_tokens <= 0:
            return
        stats = stats if stats is not None else GenerationStats()
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        with session.lock, torch.inference_mode():
            session.slack = slack or (lambda: 0.0)
            t0 = time.perf_counter()
            logits, stats.reused_tokens = session.prefill(self.model, prompt_ids)
            stats.prompt_tokens, stats.target_forwards = len(prompt_ids), 1
            stats.prefill_s = time.perf_counter() - t0
            first = sample(logits, temperature, generator)
            if self.drafter is None or session.draft_cache is None:
                rest = self._plain_decode(session, first, temperature, stats, generator)
            else:
                rest = speculative_decode(
                    self.model,
                    self.drafter,
                    session,
                    first,
                    self.draft_tokens,
                    temperature,
                    stats,
                    cancelled,
                    generator,
                    self.min_draft_confidence,
                    self.prompt_lookup,
                    self.phrases,
                )
            reply: list[int] = []
            try:
                with self.batcher.decoding() if self.batcher else contextlib.nullcontext():
                    for token in itertools.chain([first], rest):
                        reply.append(token)
                        if token in self.stop_ids and not ignore_eos:
                            break
                        stats.new_tokens += 1
                        yield token
                        if cancelled() or stats.new_tokens >= max_new_tokens:
                            break
            finally:
                stats.decode_s = time.perf_counter() - t0 - stats.prefill_s
                if self.phrases is not None and self.learn_phrases:
                    self.phrases.add(reply)

    def _plain_decode(
        self, session: Session, token: int, temperature: float, stats: GenerationStats, generator: torch.Generator | None
    ) -> Iterator[int]:
        """One target forward per token."""
        while True:
            logits = session.forward(self.model, [token])[-1]
            stats.target_forwards += 1
            token = sample(logits, temperature, generator)
            yield token

    def generate_text(self, session: Session, prompt_ids: list[int], max_new_tokens: int, **kwargs) -> Iterator[str]:
        """`generate`, as text deltas."""
        detok = Detokenizer(self.tokenizer)
        for token in self.generate(session, prompt_ids, max_new_tokens, **kwargs):
            delta = detok.push(token)
            if delta:
                yield delta
