"""SpecForge's regenerate step: the target answers every prompt itself, so the drafter learns what it will say."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from training.drafter.target import encode_chat, fingerprint, stop_ids


@dataclass(frozen=True)
class Sample:
    """A prompt and the target's reply (ending with its stop token when it stopped on its own)."""

    prompt_ids: list[int]
    reply_ids: list[int]

    @property
    def ids(self) -> list[int]:
        """prompt + reply."""
        return self.prompt_ids + self.reply_ids

    @property
    def reply_mask(self) -> list[bool]:
        """True at the reply's positions (the drafter's loss)."""
        return [False] * len(self.prompt_ids) + [True] * len(self.reply_ids)


@dataclass(frozen=True)
class RegenSettings:
    """How replies are generated; all of it is part of the cache key."""

    max_new_tokens: int = 160
    temperature: float = 0.0  # 0: greedy, as the engine decodes
    seed: int = 0
    batch_size: int = 16


def cache_key(messages: list[dict], settings: RegenSettings, model_hash: str) -> str:
    """Identity of one reply: the chat, the generation settings and the model's weights."""
    blob = json.dumps([messages, settings.max_new_tokens, settings.temperature, settings.seed, model_hash])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def read_cache(path: Path | None) -> dict[str, Sample]:
    """Cached replies by key; a missing file is an empty cache."""
    if path is None or not path.exists():
        return {}
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return {r["key"]: Sample(r["prompt_ids"], r["reply_ids"]) for r in rows}


def _cut_reply(row: list[int], stops: set[int]) -> list[int]:
    """Generated ids up to and including the first stop token."""
    for i, token in enumerate(row):
        if token in stops:
            return row[: i + 1]
    return row


@torch.no_grad()
def _generate(
    model: PreTrainedModel, prompts: list[list[int]], settings: RegenSettings, stops: list[int], pad: int, seed: int
) -> list[list[int]]:
    """Left-padded batched generation; replies as id lists."""
    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=model.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)
    sampled = settings.temperature > 0
    config = GenerationConfig(
        max_new_tokens=settings.max_new_tokens,
        do_sample=sampled,
        temperature=settings.temperature if sampled else None,
        top_k=0 if sampled else None,
        top_p=1.0 if sampled else None,
        eos_token_id=stops,
        pad_token_id=pad,
    )
    torch.manual_seed(seed)
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    return [_cut_reply(row, set(stops)) for row in out[:, width:].tolist()]


def regenerate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    chats: list[list[dict]],
    settings: RegenSettings,
    cache: Path | None = None,
) -> list[Sample]:
    """One Sample per chat, answered by `model`; new replies are appended to the JSONL `cache` as they finish."""
    model_hash = fingerprint(model)
    keys = [cache_key(chat, settings, model_hash) for chat in chats]
    done = read_cache(cache)
    pending = {k: c for k, c in zip(keys, chats) if k not in done}
    todo = sorted(((k, c, encode_chat(tokenizer, c)) for k, c in pending.items()), key=lambda row: len(row[2]))  # less padding
    stops = stop_ids(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
    batches = range(0, len(todo), settings.batch_size)
    for n, start in enumerate(tqdm(batches, desc="regenerate", unit="batch", disable=not todo)):
        part = todo[start : start + settings.batch_size]
        replies = _generate(model, [ids for _, _, ids in part], settings, stops, pad, settings.seed + n)
        lines = []
        for (key, chat, prompt), reply in zip(part, replies):
            done[key] = Sample(prompt, reply)
            text = tokenizer.decode(reply, skip_special_tokens=True)
            lines.append(json.dumps({"key": key, "messages": chat, "prompt_ids": prompt, "reply_ids": reply, "reply": text}))
        if cache is not None:
            with cache.open("a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
    return [done[k] for k in keys]
