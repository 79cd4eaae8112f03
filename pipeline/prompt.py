"""The one prompt builder: profile + history -> chat messages. The server and training both use it."""

from __future__ import annotations

from collections.abc import Sequence
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
RELEVANT_HEADER = "Facts for the caller's question (answer from these if one fits):"
NO_FACT_IN_BLOCK = "Facts come right before each caller question; if none of them answers it, say you don't have that information."


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    facts: tuple[str, ...] = ()  # a caller message's retrieved facts: the block the model saw right before it


def retrieves(profile: Profile) -> bool:
    """Whether each caller turn gets its ranked facts in a block (the system prompt then lists none)."""
    return profile.llm.retrieved_facts > 0


def system_prompt(profile: Profile) -> str:
    """The system message for a profile: persona, facts (unless retrieval places them per turn) and policies (numbers as
    spoken), escalation, voice style."""
    lines = [profile.persona.strip(), f"You work for {profile.brand.rstrip('.')}.", VOICE_STYLE]
    blocks = retrieves(profile)
    if profile.facts and not blocks:
        lines.append("Facts you may state:")
        lines += [f"- {speakable(fact)}" for fact in profile.facts]
    if profile.policies:
        lines.append("Policies:")
        lines += [f"- {speakable(policy)}" for policy in profile.policies]
    if profile.escalation:
        lines.append(
            f"If the caller asks for a person, or you do not know the answer, offer to transfer them to {profile.escalation.description}."
        )
    lines.append(NO_FACT_IN_BLOCK if blocks else "If a fact is not listed above, say you don't have that information.")
    team = profile.escalation.description if profile.escalation else "a human agent"
    lines += prompt_lines(profile.tools, team)
    return "\n".join(lines)


def relevant_block(relevant: Sequence[str]) -> str:
    """The retrieved facts as the system message that sits right before the caller's question."""
    return "\n".join([RELEVANT_HEADER] + [f"- {speakable(item)}" for item in relevant])


def build_messages(profile: Profile, history: list[Message], history_turns: int | None = None, relevant: Sequence[str] = ()) -> list[dict]:
    """Chat messages for the model: the system prompt, then between N/2 and N recent exchanges.

    Old messages are dropped in blocks of N/2 exchanges rather than one at a time, so the prompt's
    prefix (and the KV cache built on it) stays the same for several turns in a row. `relevant` (facts the
    retrieval ranked for this turn) goes in a short system message right before the caller's last message,
    so the long system prompt stays a cached prefix; earlier caller messages keep the blocks they were answered
    with (`Message.facts`), so the prompt only grows from turn to turn.
    """
    keep = (profile.llm.history_turns if history_turns is None else history_turns) * 2
    recent = [m for m in history if m.content.strip()]
    if len(recent) > keep:
        step = max(keep // 2, 1)
        recent = recent[-(-(len(recent) - keep) // step) * step :]
        while recent and recent[0].role == "tool":  # never a tool result without its call
            recent = recent[1:]
    last_caller = next((i for i in range(len(recent) - 1, -1, -1) if recent[i].role == "user"), None)
    messages = [{"role": "system", "content": system_prompt(profile)}]
    for i, m in enumerate(recent):
        facts = relevant if relevant and i == last_caller else m.facts
        if facts and m.role == "user":
            messages.append({"role": "system", "content": relevant_block(facts)})
        messages.append({"role": m.role, "content": m.content})
    return messages
