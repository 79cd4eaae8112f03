"""One call, top to bottom: greet, listen, answer, barge-in; history keeps only what the caller heard."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from pipeline.asr import RATE as ASR_RATE
from pipeline.asr import TurnTranscriber
from pipeline.audio import StreamResampler, resample
from pipeline.clauses import ClauseSplitter
from pipeline.io import AudioIn, CallIO, DtmfIn, HangUp, Inbound, TextIn
from pipeline.llm import LLMError
from pipeline.metrics import Metrics
from pipeline.playout import Playout
from pipeline.profile import Profile
from pipeline.prompt import Message, build_messages
from pipeline.stages import Stages
from pipeline.store import Store, TurnRecord, utcnow
from pipeline.vad import SpeechDetector, SpeechEvent

log = logging.getLogger(__name__)


def new_call_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Turn:
    """One agent reply and the caller input it answers (none for the greeting)."""

    index: int
    caller_text: str | None
    input_end: float | None  # monotonic time of the caller's last voiced sample (or typed text)
    started_at: datetime = field(default_factory=utcnow)
    asr_ms: float | None = None
    llm_ttft_ms: float | None = None
    tts_ttfb_ms: float | None = None
    voice_to_voice_ms: float | None = None
    interrupted: bool = False

    def latencies(self) -> dict[str, float | None]:
        return {
            "asr": self.asr_ms,
            "llm_ttft": self.llm_ttft_ms,
            "tts_ttfb": self.tts_ttfb_ms,
            "voice_to_voice": self.voice_to_voice_ms,
        }


async def one_line(text: str) -> AsyncIterator[str]:
    yield text


def ms_since(t0: float) -> float:
    return round((time.monotonic() - t0) * 1000, 1)


class Call:
    """The call loop. Transports feed it with `push`; it answers through its CallIO."""

    def __init__(
        self,
        profile: Profile,
        stages: Stages,
        io: CallIO,
        store: Store,
        metrics: Metrics,
        input_rate: int,
        transport: str,
        call_id: str | None = None,
    ) -> None:
        self.id = call_id or new_call_id()
        self.profile, self.stages, self.io, self.store, self.metrics = profile, stages, io, store, metrics
        self.transport = transport
        self.inbox: asyncio.Queue[Inbound] = asyncio.Queue()
        self.history: list[Message] = []
        self.llm = stages.llm.open_session()
        turn = profile.turn
        self.detector = SpeechDetector(stages.vad, turn.vad_threshold, turn.endpoint_silence_ms)
        self.transcriber = TurnTranscriber(stages.asr, self._interim, turn.interim_interval_ms)
        self.resampler = StreamResampler(input_rate, ASR_RATE)
        self.playout = Playout(
            io.send_audio, io.output_rate, on_segment_sent=io.segment_sent, confirmed_playback=io.confirms_playback
        )
        self.reply: asyncio.Task | None = None
        self.turns = 0

    def push(self, item: Inbound) -> None:
        """Called by the transport for each decoded input."""
        self.inbox.put_nowait(item)

    async def run(self) -> str:
        """Run the call until hang-up; returns the end reason."""
        await self.store.run(self.store.start_call, self.id, self.profile.id, self.transport)
        self.metrics.active_calls.inc()
        self.metrics.calls.labels(transport=self.transport).inc()
        player = asyncio.create_task(self.playout.run())
        reason = "error"
        try:
            self._start_reply(self._speak(self._new_turn(None, None), one_line(self.profile.greeting)))
            while not isinstance(item := await self.inbox.get(), HangUp):
                await self._handle(item)
            reason = item.reason
        finally:
            self.transcriber.cancel()
            await self._cancel(self.reply, player)
            await self.llm.aclose()
            with contextlib.suppress(Exception):
                await self.store.run(self.store.end_call, self.id, reason)
            self.metrics.active_calls.dec()
        return reason

    async def _handle(self, item: Inbound) -> None:
        if isinstance(item, AudioIn):
            await self._audio(item)
        elif isinstance(item, TextIn):
            await self._typed(item.text, item.arrived)
        elif isinstance(item, DtmfIn):
            await self._typed(self.profile.dtmf.get(item.digit, f"The caller pressed {item.digit}."), item.arrived)

    @property
    def replying(self) -> bool:
        return self.reply is not None and not self.reply.done()

    # ---- listening -------------------------------------------------------------------------
    async def _audio(self, item: AudioIn) -> None:
        samples = self.resampler(item.samples)
        self.transcriber.add(samples)
        for event in self.detector.feed(samples, item.arrived):
            if event.kind == "start":
                self.transcriber.begin()
            elif self.replying:
                self.transcriber.take()  # too short to interrupt the agent: ignored
            else:
                self._start_reply(self._spoken_turn(self.transcriber.take(), event))
        if self.detector.speaking:
            if self.replying and self.detector.speech_ms >= self.profile.turn.barge_in_min_ms:
                await self._barge_in()
            self.transcriber.maybe_interim(speaking=not self.detector.paused)

    async def _interim(self, text: str) -> None:
        await self.io.send_event({"type": "transcript", "text": text, "final": False})

    async def _spoken_turn(self, audio: np.ndarray, end: SpeechEvent) -> None:
        t0 = time.monotonic()
        try:
            text = await self.stages.asr.atranscribe(audio)
        except Exception:
            log.exception("call %s: ASR failed", self.id)
            text = ""
        await self.io.send_event({"type": "transcript", "text": text, "final": True})
        if not text:
            return
        turn = self._new_turn(text, end.time)
        turn.asr_ms = ms_since(t0)
        await self._answer(turn)

    async def _typed(self, text: str, arrived: float) -> None:
        if self.replying:
            await self._barge_in()
        self._start_reply(self._answer(self._new_turn(text, arrived)))

    # ---- answering -------------------------------------------------------------------------
    def _new_turn(self, caller_text: str | None, input_end: float | None) -> Turn:
        self.turns += 1
        return Turn(self.turns - 1, caller_text, input_end)

    def _start_reply(self, coro) -> None:
        self.reply = asyncio.create_task(coro)

    async def _answer(self, turn: Turn) -> None:
        self.history.append(Message("user", turn.caller_text or ""))
        messages = build_messages(self.profile, self.history)
        await self._speak(turn, self._llm_text(turn, messages))

    async def _llm_text(self, turn: Turn, messages: list[dict]) -> AsyncIterator[str]:
        t0, said = time.monotonic(), False
        settings = self.profile.llm
        try:
            async with contextlib.aclosing(self.llm.stream(messages, settings.temperature, settings.max_tokens)) as deltas:
                async for delta in deltas:
                    if turn.llm_ttft_ms is None:
                        turn.llm_ttft_ms = ms_since(t0)
                    said = True
                    yield delta
        except LLMError:
            log.exception("call %s: LLM backend failed", self.id)
            if not said:
                yield self.profile.fallback_line

    async def _speak(self, turn: Turn, text: AsyncIterator[str]) -> None:
        """Stream text into clauses, clauses into audio, audio into the playout; then close the turn."""
        splitter = ClauseSplitter()
        try:
            async for delta in text:
                await self.io.send_event({"type": "agent_text", "text": delta, "final": False})
                for clause in splitter.push(delta):
                    await self._say(turn, clause)
            if rest := splitter.flush():
                await self._say(turn, rest)
            await self.playout.drain()
        except asyncio.CancelledError:
            turn.interrupted = True
            raise
        finally:
            await asyncio.shield(self._close_turn(turn))

    async def _say(self, turn: Turn, clause: str) -> None:
        t0 = time.monotonic()
        try:
            audio = await self.stages.tts.synthesize_async(clause, self.profile.voice)
        except Exception:
            log.exception("call %s: TTS failed for %r", self.id, clause)
            return
        if turn.tts_ttfb_ms is None:
            turn.tts_ttfb_ms = ms_since(t0)
        self.playout.enqueue(turn.index, clause, resample(audio, self.stages.tts.sample_rate, self.io.output_rate))

    async def _close_turn(self, turn: Turn) -> None:
        """History gets what was heard; the client gets the final text and metrics; the turn is committed."""
        heard = self.playout.heard_text(turn.index)
        first_audio = self.playout.first_sent_at(turn.index)
        if first_audio is not None and turn.input_end is not None:
            turn.voice_to_voice_ms = round((first_audio - turn.input_end) * 1000, 1)
        self.history.append(Message("assistant", heard))
        await self.io.send_event({"type": "agent_text", "text": heard, "final": True})
        if turn.caller_text is not None:
            await self.io.send_event({"type": "metrics", "turn": turn.index, **{f"{k}_ms": v for k, v in turn.latencies().items()}})
        record = TurnRecord(
            call_id=self.id,
            index=turn.index,
            caller_text=turn.caller_text,
            agent_text=heard,
            interrupted=turn.interrupted,
            started_at=turn.started_at,
            ended_at=utcnow(),
            asr_ms=turn.asr_ms,
            llm_ttft_ms=turn.llm_ttft_ms,
            tts_ttfb_ms=turn.tts_ttfb_ms,
            voice_to_voice_ms=turn.voice_to_voice_ms,
        )
        try:
            await self.store.run(self.store.save_turn, record)
        except Exception:
            log.exception("call %s: could not store turn %d", self.id, turn.index)
        self.metrics.observe_turn(turn.latencies(), turn.interrupted)

    async def _barge_in(self) -> None:
        """The caller talks over the agent: stop LLM and TTS at once and flush the client's audio."""
        audible = self.playout.speaking
        self.playout.flush()
        await self._cancel(self.reply)
        if audible:
            await self.io.clear_audio()

    @staticmethod
    async def _cancel(*tasks: asyncio.Task | None) -> None:
        live = [t for t in tasks if t is not None and not t.done()]
        for t in live:
            t.cancel()
        await asyncio.gather(*live, return_exceptions=True)
