"""Cut streamed LLM text into speakable clauses so TTS can start on the first one."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s")
_CLAUSE_END = re.compile(r"[,;:\u2014]\s")
_MARKUP = re.compile(r"[*_#`~>|]+|\[(.*?)\]\(.*?\)")


def clean_for_speech(text: str) -> str:
    """Drop markdown symbols and link targets the caller should not hear."""
    return re.sub(r"\s+", " ", _MARKUP.sub(lambda m: m.group(1) or "", text)).strip()


class ClauseSplitter:
    """Accumulates text deltas and returns complete clauses: sentence ends always cut, commas once long enough.

    The first clause may be a single word ("Sure," "Of course,"): the caller hears it while the rest is written.
    """

    def __init__(self, min_clause_words: int = 4, first_clause_words: int = 1) -> None:
        self.min_words, self.first_words = min_clause_words, first_clause_words
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
        return limit if sentence else None
