"""Two questions in one caller turn, asked of the model one after the other, each with its own facts.

Asked two things at once ("when is the first boat out, and how long is the trip?"), a 135M model answers one of
them. When the caller's turn holds two questions about different facts, the model is asked the first with the
facts ranked for it, then the second, after its own answer, with the facts ranked for that; the caller hears both
answers as one reply, and the history keeps the turn as it was said. docs/retrieval.md has the measurements.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.profile import Profile
from pipeline.prompt import Message, build_messages
from pipeline.readout import readout_fact
from pipeline.retrieval import FactIndex, Retriever, turn_query

# A part asks about a fact when its best fact leads its median one by MIN_LEAD and it reads as a question with a
# best score of MIN_QUESTION_SCORE, or ends in bare keywords (a last clause of at most MAX_KEYWORDS words, no "I", "we"
# or "my": "while I have you, baguette price", not "I'm not parking") and scores MIN_KEYWORD_SCORE. Chosen on the
# validation scenarios of training sectors (docs/retrieval.md).
MIN_LEAD, MIN_QUESTION_SCORE, MIN_KEYWORD_SCORE, MAX_KEYWORDS = 0.1, 0.3, 0.45, 6
WH_WORD = re.compile(r"\b(?:what|what's|whats|how|when|where|which|who|why|whether)\b", re.I)
ASKING = re.compile(
    r"(?:^|,\s*|\b(?:and|so|but|also)\s+)(?:can|could|do|does|did|is|are|was|will|would|should|may|might|have|has|am)"
    r"\s+(?:i|you|we|my|your|it|there|they|he|she|the|a|an|this|that|kids?|children)\b",
    re.I,
)
FIRST_PERSON = re.compile(r"\b(?:i|i'm|im|i've|ive|we|we're|we've|my|our|us|me)\b", re.I)
LEFT_BY_THE_CUT = re.compile(r"\s+(?:i|we)$", re.I)  # "price I | also need to know, ...": the cut leaves the "I"


def is_question(text: str) -> bool:
    """Whether a part of a turn reads as a question: a question mark, a wh-word, or "can I", "is there", ..."""
    return text.rstrip().endswith("?") or bool(WH_WORD.search(text) or ASKING.search(text))


def asks_about_fact(part: str, best: float, lead: float) -> bool:
    """Whether a part of a turn asks about the fact it scores `best` on (`lead` over the median fact)."""
    if lead < MIN_LEAD:
        return False
    if is_question(part):
        return best >= MIN_QUESTION_SCORE
    keywords = LEFT_BY_THE_CUT.sub("", part.rsplit(",", 1)[-1].strip())
    return best >= MIN_KEYWORD_SCORE and len(keywords.split()) <= MAX_KEYWORDS and not FIRST_PERSON.search(keywords)


@dataclass(frozen=True)
class Question:
    """One question of a split turn: the caller's words for it and the facts ranked for them."""

    text: str
    facts: tuple[str, ...]


@dataclass(frozen=True)
class Asked:
    """A caller turn as the model is asked it: `facts` ranked for the whole turn (what the history keeps), and,
    for a turn of two questions about different facts, the two with their own facts."""

    facts: tuple[str, ...]
    split: tuple[Question, Question] | None = None
    readout: str | None = None  # one question: the fact to say if the model declines (pipeline/readout.py)


def two_questions(index: FactIndex, text: str, parts: Sequence[str], vectors: np.ndarray) -> tuple[int, int] | None:
    """Where the turn's second question starts and how many parts the first takes, or None for one question."""
    asking = []
    for i, (part, vector) in enumerate(zip(parts, vectors)):
        scores = index.scores(part, vector)
        best = float(scores.max())
        lead = best - float(np.median(scores))
        if asks_about_fact(part, best, lead):
            asking.append((lead, int(scores.argmax()), i))
    if len(asking) < 2:
        return None
    (_, fact_a, part_a), (_, fact_b, part_b) = sorted(asking, key=lambda a: -a[0])[:2]
    if fact_a == fact_b:
        return None
    first = min(part_a, part_b)
    end = 0
    for part in parts[: first + 1]:
        end = text.index(part, end) + len(part)
    return end, first + 1


def ask(retriever: Retriever, profile: Profile, history: Sequence[Message]) -> Asked:
    """The caller's last turn ranked for the model: its facts, and its two questions when it asks two."""
    ranked = retriever.ranked(profile, history)
    facts, parts, vectors = tuple(ranked.facts), ranked.parts, ranked.vectors
    one = Asked(facts, readout=readout_fact(profile, facts[0] if facts else None, ranked.first_cosine))
    caller = history[-1].content.strip() if history and history[-1].role == "user" else ""
    # after an agent question the caller is answering it (slot filling): one answer, never split
    if vectors is None or turn_query(history) != caller or not profile.llm.split_questions:
        return one
    index = retriever.index(profile)
    cut = two_questions(index, caller, parts, vectors)
    if cut is None:
        return one
    end, n_first = cut

    def question(text: str, rows: slice) -> Question:
        mean = vectors[rows].mean(0)
        return Question(text, tuple(index.top(text, mean / np.linalg.norm(mean), len(facts), list(zip(parts[rows], vectors[rows])))))

    return Asked(facts, (question(caller[:end].strip(), slice(0, n_first)), question(caller[end:].strip(" ,"), slice(n_first, None))))


async def aask(retriever: Retriever, profile: Profile, history: Sequence[Message]) -> Asked:
    return await asyncio.to_thread(ask, retriever, profile, history)


def asked_messages(profile: Profile, history: Sequence[Message], asked: Asked) -> tuple[list[dict], Callable[[str], list[dict]] | None]:
    """The prompt for the reply to the caller's last turn, and, for a split turn, the prompt for the second answer
    given what the model said to the first (None otherwise). Earlier caller turns keep their own facts."""
    *before, _ = history
    if asked.split is None:
        return build_messages(profile, list(history), relevant=asked.facts), None
    first, second = asked.split
    asking_first = [*before, Message("user", first.text, first.facts)]

    def then(said: str) -> list[dict]:
        return build_messages(profile, [*asking_first, Message("assistant", said), Message("user", second.text, second.facts)])

    return build_messages(profile, asking_first), then


async def awarm_messages(retriever: Retriever, profile: Profile, history: Sequence[Message], heard: str = "") -> list[dict]:
    """The prompt the caller's next turn starts with, up to their words: the system prompt and history and, given the
    words heard so far (an interim transcript), the block of facts ranked for them, so that when those facts are the
    turn's, the turn itself feeds the model only the caller's words."""
    if not heard.strip():
        return build_messages(profile, list(history))
    prior = [*history, Message("user", heard)]
    messages, _ = asked_messages(profile, prior, await aask(retriever, profile, prior))
    return messages[:-1]
