"""Domain dialogs for drafter stage 2: JSONL of chat messages -> prompts that end where the agent speaks."""

from __future__ import annotations

import json
import random
from pathlib import Path

from pipeline.profile import Profile, load_profiles, parse_profile
from pipeline.prompt import Message, build_messages
from server.settings import DEFAULT_PROFILES


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
    return build_messages(profile, history, history_turns=len(history))


def load_dialogs(path: Path, limit: int | None = None, seed: int = 0, profiles_dir: Path = DEFAULT_PROFILES) -> list[list[dict]]:
    """Prompts from JSONL lines `{"messages": [...], "meta": {...}}` (`talkline train data`) or `{"profile", "messages"}`
    (bench/prompts.jsonl, scenarios); at most `limit` of them, a seeded sample."""
    known = load_profiles(profiles_dir)
    prompts: list[list[dict]] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            messages = _with_profile(row, known, f"{path}:{n}") if "profile" in row else row["messages"]
            prompts += prompts_of(messages)
    if limit is not None and len(prompts) > limit:
        prompts = random.Random(seed).sample(prompts, limit)
    return prompts
