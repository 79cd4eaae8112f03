"""Domain dialogs for drafter stage 2: JSONL of chat messages -> prompts that end where the agent speaks, or
whole dialogs whose agent replies are the loss (`--replies dialogs`)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from pipeline.profile import DEFAULT_PROFILES, Profile, load_profiles, parse_profile
from pipeline.prompt import Message, build_messages
from pipeline.retrieval import without_retrieval
from training.drafter.target import encode_chat


def prompts_of(messages: list[dict]) -> list[list[dict]]:
    """One prompt per assistant turn that answers a user (the history before it); a chat ending with the user is one too."""
    chat = [{"role": m["role"], "content": m["content"]} for m in messages]
    prompts = [chat[:i] for i, m in enumerate(chat) if m["role"] == "assistant"]
    if chat and chat[-1]["role"] == "user":
        prompts.append(chat)
    return [p for p in prompts if p and p[-1]["role"] == "user"]


def _with_profile(row: dict, known: dict[str, Profile], where: str) -> list[dict]:
    """A row's messages behind its profile's system prompt (the profile is an id or an inline object)."""
    ref = row["profile"]
    profile = known[ref] if isinstance(ref, str) else parse_profile(ref, where)
    history = [Message(m["role"], m["content"]) for m in row["messages"] if m["role"] != "system"]
    return build_messages(without_retrieval(profile), history, history_turns=len(history))


def _chats(path: Path, profiles_dir: Path) -> list[list[dict]]:
    """Each JSONL line's whole chat, behind its system prompt."""
    known = load_profiles(profiles_dir)
    chats = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            chats.append(_with_profile(row, known, f"{path}:{n}") if "profile" in row else row["messages"])
    return chats


def load_dialogs(path: Path, limit: int | None = None, seed: int = 0, profiles_dir: Path = DEFAULT_PROFILES) -> list[list[dict]]:
    """Prompts from JSONL lines `{"messages": [...], "meta": {...}}` (`talkline train data`) or `{"profile", "messages"}`
    (bench/prompts.jsonl, scenarios); at most `limit` of them, a seeded sample."""
    prompts = [prompt for chat in _chats(path, profiles_dir) for prompt in prompts_of(chat)]
    if limit is not None and len(prompts) > limit:
        prompts = random.Random(seed).sample(prompts, limit)
    return prompts


@dataclass(frozen=True)
class DialogSample:
    """A whole dialog as written; the loss covers every agent reply that answers the caller (to its stop token)."""

    ids: list[int]
    reply_mask: list[bool]

    @property
    def reply_ids(self) -> list[int]:
        return [t for t, m in zip(self.ids, self.reply_mask) if m]


def dialog_sample(chat: list[dict], tokenizer: PreTrainedTokenizerBase, stops: set[int]) -> DialogSample:
    """Token ids of the chat as the engine encodes it, with each answering reply's tokens marked."""
    chat = [{"role": m["role"], "content": m["content"]} for m in chat]
    ids = encode_chat(tokenizer, chat, generation_prompt=False)
    mask = [False] * len(ids)
    for prompt in prompts_of(chat):
        head = encode_chat(tokenizer, prompt)
        start = len(head)
        if ids[:start] != head:
            raise ValueError("the chat template does not encode a dialog as its prompts' continuation")
        end = next((i for i in range(start, len(ids)) if ids[i] in stops), len(ids) - 1)
        mask[start : end + 1] = [True] * (end + 1 - start)
    return DialogSample(ids, mask)


PARALLEL_FROM = 10_000  # dialogs: fewer are tokenized in this process (starting a worker costs ~4 s)
_worker_args: tuple[PreTrainedTokenizerBase, set[int]] | None = None


def _start_worker(tokenizer: PreTrainedTokenizerBase, stops: set[int]) -> None:
    global _worker_args
    _worker_args = (tokenizer, stops)


def _worker_sample(chat: list[dict]) -> DialogSample:
    return dialog_sample(chat, *_worker_args)


def dialog_samples(
    chats: list[list[dict]], tokenizer: PreTrainedTokenizerBase, stops: set[int], workers: int | None = None
) -> list[DialogSample]:
    """`dialog_sample` of each chat, in order; many chats are spread over `workers` processes (default: every core)."""
    workers = workers or os.cpu_count() or 1
    if workers == 1 or len(chats) < PARALLEL_FROM:
        return [dialog_sample(chat, tokenizer, stops) for chat in chats]
    context = multiprocessing.get_context("spawn")  # the caller may hold a CUDA context, which fork must not copy
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(tokenizer, stops)) as pool:
        return list(pool.map(_worker_sample, chats, chunksize=max(1, len(chats) // (8 * workers))))


def load_dialog_samples(
    path: Path,
    tokenizer: PreTrainedTokenizerBase,
    stops: set[int],
    limit: int | None = None,
    seed: int = 0,
    profiles_dir: Path = DEFAULT_PROFILES,
) -> list[DialogSample]:
    """At most `limit` whole dialogs (a seeded sample), tokenized with their replies marked."""
    chats = [c for c in _chats(path, profiles_dir) if prompts_of(c)]
    if limit is not None and len(chats) > limit:
        chats = random.Random(seed).sample(chats, limit)
    return dialog_samples(chats, tokenizer, stops)
