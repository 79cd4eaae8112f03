"""The one prompt builder: profile + history -> chat messages. The server and training both use it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pipeline.profile import Profile
from pipeline.spoken import speakable
from pipeline.tools import prompt_lines

Role = Literal["user", "assistant", "tool"]

VOICE_STYLE = (
    "You are speaking on a phone call: answer in at most two short sentences, about 35 words, "
    "with no lists, markdown, links or emoji, and say numbers the way a person would."
)


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


def system_prompt(profile: Profile) -> str:
    """The system message for a profile: persona, facts and policies (numbers as spoken), escalation, voice style."""
    lines = [profile.persona.strip(), f"You work for {profile.brand}.", VOICE_STYLE]
    if profile.facts:
        lines.append("Facts you may state:")
        lines += [f"- {speakable(fact)}" for fact in profile.facts]
    if profile.policies:
        lines.append("Policies:")
        lines += [f"- {speakable(policy)}" for policy in profile.policies]
    if profile.escalation:
        lines.append(
            f"If the caller asks for a person, or you do not know the answer, offer to transfer them "
            f"to {profile.escalation.description}."
        )
    lines.append("If a fact is not listed above, say you don't have that information.")
    team = profile.escalation.description if profile.escalation else "a human agent"
    lines += prompt_lines(profile.tools, team)
    return "\n".join(lines)


def build_messages(profile: Profile, history: list[Message], history_turns: int | None = None) -> list[dict]:
    """Chat messages for the model: the system prompt, then between N/2 and N recent exchanges.

    Old messages are dropped in blocks of N/2 exchanges rather than one at a time, so the prompt's
    prefix (and the KV cache built on it) stays the same for several turns in a row.
    """
    keep = (profile.llm.history_turns if history_turns is None else history_turns) * 2
    recent = [m for m in history if m.content.strip()]
    if len(recent) > keep:
        step = max(keep // 2, 1)
        recent = recent[-(-(len(recent) - keep) // step) * step :]
        while recent and recent[0].role == "tool":  # never a tool result without its call
            recent = recent[1:]
    return [{"role": "system", "content": system_prompt(profile)}] + [
        {"role": m.role, "content": m.content} for m in recent
    ]
