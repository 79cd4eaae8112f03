"""A reply's text into clauses, clauses into audio, audio into the playout; nothing is heard before its turn commits."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from pipeline.agent_turn import Turn, ms_since, start_hold
from pipeline.audio import resample, trim_leading_silence
from pipeline.clauses import ClauseSplitter
from pipeline.playout import Playout
from pipeline.profile import Profile
from pipeline.tts import PiperTTS

log = logging.getLogger(__name__)
Commit = Callable[[Turn, list[str]], Awaitable[None]]


class Speaker:
    """Speaks one call's replies. `commit(turn, unsent)` makes a preemptive turn real (it waits for the endpoint)
    and sends the text in `unsent`."""

    def __init__(self, profile: Profile, tts: PiperTTS, playout: Playout, output_rate: int, commit: Commit, call_id: str) -> None:
        self.profile, self.tts, self.playout, self.output_rate = profile, tts, playout, output_rate
        self.commit, self.call_id = commit, call_id

    async def speak(self, turn: Turn, text: AsyncIterator[str]) -> None:
        """Stream text into clauses and clauses into the playout; the turn is committed by the end.

        Text and audio made before the turn is committed (a preemptive reply) wait in `unsent` and in
        the first clause's audio; nothing reaches the caller until the endpoint confirms the turn.
        """
        settings, unsent = self.profile.turn, []
        lookahead = settings.clause_lookahead_ms / 1000
        splitter = ClauseSplitter(
            first_clause_words=settings.first_clause_words,
            running_low=(lambda: self.playout.queued_s() < lookahead) if lookahead else None,
        )
        started = time.monotonic()
        async for delta in text:
            unsent.append(delta)
            if turn.index is not None:
                await self.commit(turn, unsent)
            for clause in splitter.push(delta):
                await self._say(turn, clause, unsent, started)
        if rest := splitter.flush():
            await self._say(turn, rest, unsent, started)
        await self.commit(turn, unsent)
        self.playout.release()

    async def _say(self, turn: Turn, clause: str, unsent: list[str], started: float) -> None:
        """Synthesize a clause and queue it; a turn's first clause may wait for the next (`start_hold`)."""
        t0, first = time.monotonic(), turn.tts_ttfb_ms is None
        try:
            audio = await self.tts.synthesize_async(clause, self.profile.voice, self.playout.queued_s())
        except Exception:
            log.exception("call %s: TTS failed for %r", self.call_id, clause)
            return
        ready, rate = time.monotonic(), self.tts.sample_rate
        if first:
            audio = trim_leading_silence(audio, rate)
            turn.tts_ttfb_ms = ms_since(t0)
            turn.timeline["tts_first_audio"] = (t0, ready)
        await self.commit(turn, unsent)
        hold = start_hold(ready - started, len(audio) / rate + time.monotonic() - ready) if first else 0.0
        self.playout.enqueue(turn.index, clause, resample(audio, rate, self.output_rate), hold)
