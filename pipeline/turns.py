"""Adaptive endpointing: how much silence ends the caller's turn, judged from what they said so far."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# A turn that ends on one of these words is trailing off ("my booking code is ...") or holding the floor
# ("Wait.", "Hmm, actually."), not finished, whatever punctuation the recognizer put after it.
TRAILING_WORDS = frozenset(
    """
    wait hold actually hmm well oh sorry
    a an the and or but so because if that which who whose whom when where while to of for from with
    about into onto at by on in as than then is are was were be been am my your our their his her its
    this these those um uh er like just also very really some any no not can could would should will
    i i'm we you he she they it's there's what's
    """.split()
)
_WORDS = re.compile(r"[a-z']+")


def looks_complete(text: str) -> bool:
    """True for a transcript that reads as a finished sentence or question."""
    stripped = text.strip()
    if not stripped or stripped.endswith((",", "...", "-", "\u2026", ":")):
        return False
    words = _WORDS.findall(stripped.lower())
    if not words or words[-1] in TRAILING_WORDS:
        return False
    return stripped.endswith(("?", ".", "!")) or len(words) >= 3


def endpoint_ms(text: str, complete_ms: int, default_ms: int) -> int:
    """The silence that ends this turn: short once the words form a complete sentence, else the default."""
    return min(complete_ms, default_ms) if looks_complete(text) else default_ms


DETECTORS = ("vad", "text", "smart_turn", "turn_lm", "combined", "combined_audio")
COMBINED_THRESHOLDS = {"combined": -0.2, "combined_audio": 0.0}  # chosen on the even-numbered lines of the benchmark


@dataclass(frozen=True)
class Cues:
    """What is known about a pause a moment after it starts: the words so far, Smart Turn's probability that the
    caller is done (audio), and the turn LM's log10 probability that the caller's message ends here (words)."""

    text: str | None = None
    p_audio: float | None = None
    lm_log10: float | None = None


@dataclass(frozen=True)
class EndpointRule:
    """How long a pause must last to end the caller's turn. `vad`: always `silence_ms`; `text`: `complete_ms` for
    words that read as finished, else `silence_ms`; `smart_turn`, `turn_lm`: `complete_ms` when the model's cue
    passes its threshold, else `incomplete_ms`; `combined`: `complete_ms` when the turn LM's log10 probability plus
    `text_weight` for finished-looking words reaches `score_threshold`, else `silence_ms` for finished-looking words
    (words the turn LM doubts, often Whisper's garbled ones) and `incomplete_ms` for the rest; `combined_audio`
    adds Smart Turn's probability to that score. Until the cues a rule reads have arrived, it waits as for an
    unfinished turn."""

    detector: str = "turn_lm"
    complete_ms: int = 250
    silence_ms: int = 700
    incomplete_ms: int = 1200
    audio_threshold: float = 0.5
    lm_threshold: float = -1.5  # chosen on the even-numbered lines of the benchmark
    score_threshold: float | None = None  # None: COMBINED_THRESHOLDS
    text_weight: float = 1.5

    @property
    def reads_text(self) -> bool:
        return self.detector in ("text", "turn_lm", "combined", "combined_audio")

    @property
    def reads_audio(self) -> bool:
        return self.detector in ("smart_turn", "combined_audio")

    @property
    def reads_lm(self) -> bool:
        return self.detector in ("turn_lm", "combined", "combined_audio")

    @property
    def doubted_ms(self) -> int:
        """The combined rules' wait for finished-looking words the score leaves short: never beyond the unfinished one."""
        return min(self.silence_ms, self.incomplete_ms)

    @property
    def threshold(self) -> float:
        """The combined rules' score threshold."""
        return COMBINED_THRESHOLDS.get(self.detector, 0.0) if self.score_threshold is None else self.score_threshold

    def wait_ms(self, cues: Cues) -> int:
        if self.detector == "vad":
            return self.silence_ms
        if self.detector == "text":
            return self.silence_ms if cues.text is None else endpoint_ms(cues.text, self.complete_ms, self.silence_ms)
        if self.detector == "smart_turn":
            done = cues.p_audio is not None and cues.p_audio >= self.audio_threshold
        elif self.detector == "turn_lm":
            done = cues.lm_log10 is not None and cues.lm_log10 >= self.lm_threshold
        else:
            if cues.text is None or cues.lm_log10 is None or (self.reads_audio and cues.p_audio is None):
                return self.incomplete_ms
            audio = cues.p_audio if self.reads_audio else 0.0
            finished = looks_complete(cues.text)
            if cues.lm_log10 + audio + self.text_weight * finished >= self.threshold:
                return self.complete_ms
            return self.doubted_ms if finished else self.incomplete_ms
        return self.complete_ms if done else self.incomplete_ms

    def describe(self) -> str:
        waits = f"{self.complete_ms} ms, else {self.incomplete_ms} ms"
        doubted = f"{self.complete_ms} ms, else {self.doubted_ms} ms for finished words, {self.incomplete_ms} ms"
        words = f"LM log10 p + {self.text_weight:g} x finished words"
        return {
            "vad": f"every pause {self.silence_ms} ms",
            "text": f"finished-looking words {self.complete_ms} ms, else {self.silence_ms} ms",
            "smart_turn": f"Smart Turn p >= {self.audio_threshold}: {waits}",
            "turn_lm": f"turn LM log10 p >= {self.lm_threshold}: {waits}",
            "combined": f"{words} >= {self.threshold}: {doubted}",
            "combined_audio": f"{words} + Smart Turn p >= {self.threshold}: {doubted}",
        }[self.detector]

    def sweep(self) -> list[float]:
        """The values `with_knob` takes to trace this rule's curve, from hasty to patient."""
        combined = [-2.0, -1.5, -1.0, -0.7, -0.5, -0.3, -0.1, 0.0, 0.25, 0.5]
        return {
            "vad": [200, 300, 400, 500, 600, 700, 800, 1000, 1200, 1400, 1700, 2000],
            "text": [0.8, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0],
            "smart_turn": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
            "turn_lm": [-4.0, -3.0, -2.5, -2.0, -1.5, -1.0, -0.7, -0.5, -0.3, -0.1],
            "combined": combined,
            "combined_audio": combined,
        }[self.detector]

    def with_knob(self, knob: float) -> EndpointRule:
        """This rule with its threshold at `knob`: the VAD's silence, the text rule's waits scaled, a model's threshold."""
        if self.detector == "vad":
            return replace(self, silence_ms=int(knob))
        if self.detector == "text":
            return replace(self, complete_ms=int(self.complete_ms * knob), silence_ms=int(self.silence_ms * knob))
        field = {"smart_turn": "audio_threshold", "turn_lm": "lm_threshold"}.get(self.detector, "score_threshold")
        return replace(self, **{field: knob})

    @classmethod
    def named(cls) -> dict[str, EndpointRule]:
        """The rules the endpointing benchmark compares: each detector with its default settings."""
        return {d: cls(detector=d) for d in DETECTORS}
