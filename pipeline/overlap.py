"""The caller's sound while the agent speaks: a backchannel ("uh-huh", "okay") or a cough must not cut the agent off,
a real barge-in must. The sound's words decide; an agent stopped by a sound that never becomes words resumes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Literal

import numpy as np

from pipeline.profile import TurnSettings
from pipeline.vad import SpeechEvent

log = logging.getLogger(__name__)

BACKCHANNEL_WORDS = frozenset(
    """
    uh huh mm hmm mhm hm um ah oh aha yeah yep yup yes ok okay right sure alright all i see got it cool thank thanks you
    """.split()
)
MAX_BACKCHANNEL_WORDS = 3
NOT_SPEECH = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*")  # Whisper's "(coughing)", "[Music]"
HALLUCINATED = {("you",)}  # what Whisper writes for a hum or a breath
WORD = re.compile(r"[a-z0-9']+")
DRAWN_OUT = re.compile(r"([a-z])\1\1")
RESUME_AFTER_S = 1.0  # an agent paused by a sound with no words in it resumes after this long

Heard = Literal["words", "backchannel", "nothing"]


def heard(text: str) -> Heard:
    """What a transcript of the caller's sound over the agent carries. Letters alone and drawn-out sounds ("a a a",
    "Aaaaah", "Hm-n-n-n") are how Whisper writes a hum or a cough: no words."""
    words = [w for w in WORD.findall(NOT_SPEECH.sub(" ", text.lower())) if len(w) > 1 and not DRAWN_OUT.search(w)]
    if not words or tuple(words) in HALLUCINATED:
        return "nothing"
    if len(words) <= MAX_BACKCHANNEL_WORDS and all(w in BACKCHANNEL_WORDS for w in words):
        return "backchannel"
    return "words"


class Overlap:
    """One stretch of caller sound over the agent. Every `check_ms` of it, its words are read (`transcribe`):
    words barge in (`barge_in`); a backchannel lets the agent go on; no words yet pause the agent (`pause`), who
    resumes (`resume`) once the sound ends with no words, or after RESUME_AFTER_S while it goes on wordless."""

    def __init__(
        self,
        transcribe: Callable[[np.ndarray], Awaitable[str]],
        barge_in: Callable[[], Awaitable[None]],
        pause: Callable[[], Awaitable[None]],
        resume: Callable[[], None],
        check_ms: int,
    ) -> None:
        self.transcribe, self.barge_in, self.pause, self.resume = transcribe, barge_in, pause, resume
        self.check_ms = check_ms
        self.next_check_ms = float(check_ms)
        self.paused = False
        self.may_pause = True  # once a wordless sound was waited out, only words stop the agent
        self._check: asyncio.Task | None = None
        self._timer: asyncio.Task | None = None

    def hear(self, speech_ms: float, audio: Callable[[], np.ndarray]) -> None:
        """The caller's sound has lasted `speech_ms`; read its words when a check is due and none is running."""
        if speech_ms < self.next_check_ms or (self._check is not None and not self._check.done()):
            return
        self.next_check_ms = speech_ms + self.check_ms
        self._check = asyncio.create_task(self._read(audio()))

    async def settle(self, audio: np.ndarray) -> str | None:
        """The sound ended: its words (for the call to answer, after barging in) or None (the agent goes on)."""
        self.cancel()
        text = await self._transcribe(audio)
        if heard(text) == "words":
            await self.barge_in()
            return text
        self._resume()
        return None

    def cancel(self) -> None:
        for task in (self._check, self._timer):
            if task is not None and not task.done() and task is not asyncio.current_task():
                task.cancel()

    async def _read(self, audio: np.ndarray) -> None:
        kind = heard(await self._transcribe(audio))
        if kind == "words":
            self.cancel()
            await self.barge_in()
        elif kind == "nothing" and self.may_pause and not self.paused:
            self.paused = True
            await self.pause()
            self._timer = asyncio.create_task(self._resume_later())

    async def _transcribe(self, audio: np.ndarray) -> str:
        try:
            return await self.transcribe(audio)
        except Exception as e:  # noqa: BLE001 - an unread sound counts as no words
            log.warning("reading the caller's words over the agent failed: %r", e)
            return ""

    async def _resume_later(self) -> None:
        await asyncio.sleep(RESUME_AFTER_S)
        self.may_pause = False
        self._resume()

    def _resume(self) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
        if self.paused:
            self.paused = False
            self.resume()


class OverTheAgent:
    """One call's caller sounds over the agent, one `Overlap` each: `hear` while it lasts, `ended` when it stops."""

    def __init__(
        self,
        settings: TurnSettings,
        transcribe: Callable[[np.ndarray], Awaitable[str]],
        barge_in: Callable[[], Awaitable[None]],
        pause: Callable[[], Awaitable[None]],
        resume: Callable[[], None],
        answer: Callable[[str, float, SpeechEvent], None],
    ) -> None:
        self.reads_words, self.check_ms = settings.barge_in_reads_words, settings.barge_in_min_ms
        self.transcribe, self.barge_in, self.pause, self.resume, self.answer = transcribe, barge_in, pause, resume, answer
        self.current: Overlap | None = None
        self._settling: asyncio.Task | None = None

    async def hear(self, speech_ms: float, audio: Callable[[], np.ndarray]) -> None:
        """The caller's sound has lasted `speech_ms` (at least `check_ms`) while the agent speaks."""
        if not self.reads_words:
            await self.barge_in()
            return
        if self.current is None:
            self.current = Overlap(self.transcribe, self.barge_in, self.pause, self.resume, self.check_ms)
        self.current.hear(speech_ms, audio)

    def ended(self, audio: np.ndarray, end: SpeechEvent, settle: bool) -> None:
        """The caller's utterance ended (at `end`). With `settle` (the agent still has the floor), a sound over the
        agent is read once more: its words, if any, go to `answer`. Either way the next sound starts afresh."""
        overlap, self.current = self.current, None
        if overlap is None:
            return
        if settle:
            self._settling = asyncio.create_task(self._settle(overlap, audio, end))
        else:
            overlap.cancel()
            self.resume()

    async def _settle(self, overlap: Overlap, audio: np.ndarray, end: SpeechEvent) -> None:
        t0 = time.monotonic()
        text = await overlap.settle(audio)
        if text is not None:
            self.answer(text, round((time.monotonic() - t0) * 1000, 1), end)

    async def close(self) -> None:
        if self.current is not None:
            self.current.cancel()
        if self._settling is not None and not self._settling.done():
            self._settling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._settling
