"""Cut streamed LLM text into speakable clauses so TTS can start on the first one."""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.turns import TRAILING_WORDS

_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s")
_CLAUSE_END = re.compile(r"[,;:\u2014]\s")
_MARKUP = re.compile(r"[*_#`~>|]+|\[(.*?)\]\(.*?\)")
_COMPLETE_WORD = re.compile(r"\S+(?=\s)")
# A number goes on ("thirty | five dollars"): a hurried cut never falls after one.
_NUMBER_WORDS = frozenset(
    """
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
    point oh
    """.split()
)


def clean_for_speech(text: str) -> str:
    """Drop markdown symbols and link targets the caller should not hear."""
    return re.sub(r"\s+", " ", _MARKUP.sub(lambda m: m.group(1) or "", text)).strip()


class ClauseSplitter:
    """Accumulates text deltas and returns complete clauses: sentence ends always cut, commas once long enough.

    The first clause may be a single word ("Sure," "Of course,"): the caller hears it while the rest is written.
    When `running_low()` says the caller is about to hear silence (nothing queued yet, or the queued audio nearly
    played), a clause with no punctuation in sight is cut at a word boundary once it has `hurried_words` words.
    """

    def __init__(
        self,
        min_clause_words: int = 4,
        first_clause_words: int = 1,
        running_low: Callable[[], bool] | None = None,
        hurried_words: int = 4,
    ) -> None:
        self.min_words, self.first_words = min_clause_words, first_clause_words
        self.running_low, self.hurried_words = running_low, hurried_words
        self.buffer = ""
        self.clauses = 0

    def push(self, delta: str) -> list[str]:
        self.buffer += delta
        out: list[str] = []
        while (cut := self._cut_at()) is not None:
            clause, self.buffer = self.buffer[:cut], self.buffer[cut:]
            if spoken := clean_for_speech(clause):
                out.append(spoken)
                self.clauses += 1
        return out

    def flush(self) -> str | None:
        """Whatever is left when the text stream ends."""
        rest, self.buffer = clean_for_speech(self.buffer), ""
        return rest or None

    def _cut_at(self) -> int | None:
        sentence = _SENTENCE_END.search(self.buffer)
        limit = sentence.end() if sentence else len(self.buffer)
        for m in _CLAUSE_END.finditer(self.buffer, 0, limit):
            if len(self.buffer[: m.end()].split()) >= (self.min_words if self.clauses else self.first_words):
                return m.end()
        if sentence:
            return limit
        return self._word_cut() if self.running_low is not None and self.running_low() else None

    def _word_cut(self) -> int | None:
        """End of the first complete word that leaves `hurried_words` words and does not trail off or split a number."""
        for count, m in enumerate(_COMPLETE_WORD.finditer(self.buffer), 1):
            word = m.group().lower().strip("\"'()")
            if count >= self.hurried_words and word not in TRAILING_WORDS and word not in _NUMBER_WORDS:
                if not any(ch.isdigit() for ch in word):
                    return m.end()
        return None
