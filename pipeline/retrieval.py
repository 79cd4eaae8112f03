"""Fact retrieval for one caller turn: rank a profile's facts and policies against the caller's words.

A 135M model reads a short, relevant context far better than it searches a dozen facts, so each turn's prompt
repeats the few best-ranked facts right before the caller's question (`prompt.build_messages`). Ranking is hybrid:
cosine similarity of MiniLM sentence embeddings (which bridge paraphrases: "take my car over" ~ "car deck tickets")
plus a BM25 term over the words (exact names, numbers, rare nouns). docs/retrieval.md has the measurements.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from pipeline.profile import Profile
from pipeline.prompt import Message, build_messages

BM25_WEIGHT = 0.1  # chosen on training sectors kept out of the retriever's training (docs/retrieval.md)
MAX_PART_PICKS = 2  # parts of a turn ("... and how long is the trip?") that each place their best fact first
PART_BREAK = re.compile(r"(?<=[.!?])\s+|,?\s+\b(?:and|also|plus|second|secondly|another thing|one more thing)\b\s*", re.I)
BM25_K1, BM25_B = 1.2, 0.75
STOPWORDS = frozenset(
    "a an and are as at be but by can could do does for from have how i if in is it its me my of on or our so that "
    "the their them then there this to was we what when where which who will with would you your".split()
)
INDEX_CACHE = 256  # profiles whose fact vectors a process keeps


def without_retrieval(profile: Profile) -> Profile:
    """The profile with retrieval off: every fact in the system prompt, no per-turn block."""
    return profile.model_copy(update={"llm": profile.llm.model_copy(update={"retrieved_facts": 0})})


class Encoder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


def words(text: str) -> list[str]:
    """Lowercase content words with a light plural/verb stem: "tickets" -> "ticket", "parking" -> "park"."""
    out = []
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if w in STOPWORDS:
            continue
        for suffix in ("ing", "es", "s", "ed"):
            if len(w) > len(suffix) + 3 and w.endswith(suffix):
                w = w[: -len(suffix)]
                break
        out.append(w)
    return out


class BM25:
    """Okapi BM25 over a handful of short documents."""

    def __init__(self, docs: Sequence[str]) -> None:
        self.docs = [Counter(words(d)) for d in docs]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg = (sum(self.lengths) / len(self.docs)) if self.docs else 0.0
        df = Counter(w for c in self.docs for w in c)
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def scores(self, query: str) -> np.ndarray:
        terms = [w for w in set(words(query)) if w in self.idf]
        out = np.zeros(len(self.docs), dtype=np.float32)
        for i, (doc, length) in enumerate(zip(self.docs, self.lengths)):
            norm = BM25_K1 * (1 - BM25_B + BM25_B * length / (self.avg or 1.0))
            out[i] = sum(self.idf[w] * doc[w] * (BM25_K1 + 1) / (doc[w] + norm) for w in terms if w in doc)
        return out


@dataclass(frozen=True)
class FactIndex:
    """One profile's facts and policies with their vectors and word statistics."""

    items: tuple[str, ...]
    vectors: np.ndarray | None  # None: words only
    bm25: BM25

    def scores(self, query: str, query_vector: np.ndarray | None) -> np.ndarray:
        """Hybrid score per item: cosine similarity + BM25_WEIGHT x BM25 scaled to the best item's."""
        lexical = self.bm25.scores(query)
        if lexical.max() > 0:
            lexical = lexical / lexical.max()
        if self.vectors is None or query_vector is None:
            return lexical
        return self.vectors @ query_vector + BM25_WEIGHT * lexical

    def cosine(self, item: str, query_vector: np.ndarray) -> float | None:
        """An item's cosine similarity to a query's vector (None without vectors)."""
        return None if self.vectors is None else float(self.vectors[self.items.index(item)] @ query_vector)

    def top(self, query: str, query_vector: np.ndarray | None, k: int, parts: Sequence[tuple[str, np.ndarray]] = ()) -> list[str]:
        """The k best items for the whole turn; with several parts (two questions in one turn), each part's best item
        comes first (the MAX_PART_PICKS surest: the widest lead over the part's median item), so one question cannot
        crowd out the other."""
        if not self.items or k <= 0:
            return []
        order = [int(i) for i in np.argsort(-self.scores(query, query_vector), kind="stable")]
        if len(parts) > 1:
            scored = (self.scores(text, vector) for text, vector in parts)
            best = [(float(s.max() - np.median(s)), int(s.argmax())) for s in scored]
            picks = list(dict.fromkeys(i for _, i in sorted(best, key=lambda b: -b[0])))[:MAX_PART_PICKS]
            order = picks + [i for i in order if i not in picks]
        return [self.items[i] for i in order[:k]]


def query_parts(query: str) -> list[str]:
    """The turn cut at sentence ends and at the words that join two questions; parts of under two content words go."""
    return [p.strip(" ,") for p in PART_BREAK.split(query) if p and len(words(p)) >= 2]


def turn_query(history: Sequence[Message]) -> str:
    """What to rank facts against: the caller's last turn, after the agent's question it answers (slot filling; the
    greeting's "How can I help?" answers nothing)."""
    caller = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "user"), None)
    if caller is None:
        return ""
    text = history[caller].content.strip()
    before = history[caller - 1] if caller > 1 else None
    if before is not None and before.role == "assistant" and before.content.rstrip().endswith("?"):
        question = re.split(r"(?<=[.!?])\s+", before.content.strip())[-1]
        text = f"{question} {text}"
    return text


@dataclass(frozen=True)
class Ranked:
    """A turn's ranked facts; for a turn of several parts, also the parts and their vectors (`questions.ask` reads them)."""

    facts: list[str]
    parts: list[str] = field(default_factory=list)
    vectors: np.ndarray | None = None  # one row per part
    first_cosine: float | None = None  # the first fact's cosine similarity to the turn (None without an encoder)


class Retriever:
    """Ranks facts for a turn; profile indexes are built once and cached (thread-safe)."""

    def __init__(self, encoder: Encoder | None) -> None:
        self.encoder = encoder
        self._indexes: OrderedDict[tuple[str, ...], FactIndex] = OrderedDict()
        self._lock = threading.Lock()

    def index(self, profile: Profile) -> FactIndex:
        items = tuple(profile.facts) + tuple(profile.policies)
        with self._lock:
            if items in self._indexes:
                self._indexes.move_to_end(items)
                return self._indexes[items]
        vectors = self.encoder.embed(list(items)) if self.encoder is not None and items else None
        index = FactIndex(items, vectors, BM25(items))
        with self._lock:
            self._indexes[items] = index
            while len(self._indexes) > INDEX_CACHE:
                self._indexes.popitem(last=False)
        return index

    def relevant(self, profile: Profile, history: Sequence[Message], k: int | None = None) -> list[str]:
        """The profile's k facts or policies most relevant to the caller's last turn (none before the caller speaks)."""
        return self.ranked(profile, history, k).facts

    def ranked(self, profile: Profile, history: Sequence[Message], k: int | None = None) -> Ranked:
        """`relevant`'s facts, with the parts of the turn and their vectors when it has several."""
        k = profile.llm.retrieved_facts if k is None else k
        query = turn_query(history)
        if k <= 0 or not query or not (profile.facts or profile.policies):
            return Ranked([])
        index = self.index(profile)
        if self.encoder is None:
            return Ranked(index.top(query, None, k))
        parts = query_parts(query)
        if len(parts) < 2:
            vector = self.encoder.embed([query])[0]
            facts = index.top(query, vector, k)
            return Ranked(facts, first_cosine=index.cosine(facts[0], vector))
        vectors = self.encoder.embed(parts)  # the whole turn as their mean: one short batch instead of a long row more
        whole = vectors.mean(0)
        whole = whole / np.linalg.norm(whole)
        facts = index.top(query, whole, k, list(zip(parts, vectors)))
        return Ranked(facts, parts, vectors, index.cosine(facts[0], whole))

    def with_facts(self, profile: Profile, history: Sequence[Message]) -> list[Message]:
        """The history with each caller message's ranked facts attached, as a call builds it turn by turn."""
        return [replace(m, facts=tuple(self.relevant(profile, history[: i + 1]))) if m.role == "user" else m for i, m in enumerate(history)]


def served_messages(profile: Profile, history: Sequence[Message], retriever: Retriever | None) -> list[dict]:
    """A history's prompt messages as a call builds them turn by turn: each caller turn with its ranked facts, or,
    without a retriever, every fact in the system prompt."""
    if retriever is None:
        return build_messages(without_retrieval(profile), list(history))
    return build_messages(profile, retriever.with_facts(profile, history))
