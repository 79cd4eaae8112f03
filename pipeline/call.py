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
from pipeline.turns import endpoint_ms
from pipeline.vad import SpeechDetector, SpeechEvent

log = logging.getLogger(__name__)


def new_call_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Draft:
    """A preemptive reply started at a pause in the caller's speech."""

    task: asyncio.Task
    gate: asyncio.Event


@dataclass
class Turn:
    """One agent reply and the caller input it answers (none for the greeting).

    A turn gets its index when it is committed: at once for typed input, at the endpoint for a
    preemptive reply (which may run ahead, gated, and be discarded if the caller goes on speaking).
    """

    caller_text: str | None
    input_end: float | None  # monotonic time of the caller's last voiced sample (or typed text)
    index: int | None = None
    gate: asyncio.Event | None = None  # set when the endpoint confirms a preemptive turn
    started_at: datetime = field(default_factory=utcnow)
    asr_ms: float | None = None
    llm_ttft_ms: float | None = None
    tts_ttfb_ms: float | None = None
    voice_to_voice_ms: float | None = None
    interrupted: bool = False
    typed: bool = False

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
        self.draft: Draft | None = None
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
            self._start_reply(self._speak(Turn(None, None), one_line(self.profile.greeting)))
            while not isinstance(item := await self.inbox.get(), HangUp):
                await self._handle(item)
            reason = item.reason
        finally:
            self.transcriber.cancel()
            await self._cancel(self.reply, self.draft and self.draft.task, player)
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
            elif event.kind == "pause" and not self.replying:
                self._start_draft(event)
            elif event.kind == "resume":
                self._discard_draft()
            elif event.kind == "end":
                self._end_of_turn(event)
        if self.detector.speaking:
            if self.replying and self.detector.speech_ms >= self.profile.turn.barge_in_min_ms:
                await self._barge_in()
            self.transcriber.maybe_interim(speaking=not self.detector.paused)

    def _start_draft(self, pause: SpeechEvent) -> None:
        """Preemptive generation: transcribe and start answering at the pause, held until the endpoint."""
        self._discard_draft()
        gate = asyncio.Event()
        self.draft = Draft(asyncio.create_task(self._spoken_turn(self.transcriber.audio(), pause, gate)), gate)

    def _discard_draft(self) -> None:
        if self.draft is not None:
            self.draft.task.cancel()
            self.draft = None
            self.metrics.preemptive.labels(outcome="discarded").inc()

    def _end_of_turn(self, end: SpeechEvent) -> None:
        audio = self.transcriber.take()
        if self.draft is not None:
            self.draft.gate.set()
            self.reply, self.draft = self.draft.task, None
            self.metrics.preemptive.labels(outcome="used").inc()
        elif not self.replying:
            self._start_reply(self._spoken_turn(audio, end))
        # else: speech too short to interrupt the agent: ignored

    async def _interim(self, text: str) -> None:
        await self.io.send_event({"type": "transcript", "text": text, "final": False})

    async def _spoken_turn(self, audio: np.ndarray, end: SpeechEvent, gate: asyncio.Event | None = None) -> None:
        t0 = time.monotonic()
        try:
            text = await self.stages.asr.atranscribe(audio)
        except Exception:
            log.exception("call %s: ASR failed", self.id)
            text = ""
        turn = Turn(text, end.time, gate=gate, asr_ms=ms_since(t0))
        if gate is not None:  # adaptive endpointing: a complete sentence needs less silence
            settings = self.profile.turn
            self.detector.set_endpoint_ms(endpoint_ms(text, settings.endpoint_complete_ms, settings.endpoint_silence_ms))
        if text:
            await self._answer(turn)
            return
        if gate is not None:
            await gate.wait()
        await self.io.send_event({"type": "transcript", "text": "", "final": True})

    async def _typed(self, text: str, arrived: float) -> None:
        self._discard_draft()
        if self.replying:
            await self._barge_in()
        self._start_reply(self._answer(Turn(text, arrived, typed=True)))

    # ---- answering -------------------------------------------------------------------------
    def _start_reply(self, coro) -> None:
        self.reply = asyncio.create_task(coro)

    async def _answer(self, turn: Turn) -> None:
        messages = build_messages(self.profile, [*self.history, Message("user", turn.caller_text or "")])
        await self._speak(turn, self._llm_text(turn, messages))

    async def _commit(self, turn: Turn, unsent: list[str]) -> None:
        """Wait for the endpoint if preemptive, then make the turn real: index, history, transcript; flush text."""
        if turn.index is None:
            if turn.gate is not None:
                await turn.gate.wait()
            turn.index, self.turns = self.turns, self.turns + 1
            if turn.caller_text is not None:
                if not turn.typed:
                    await self.io.send_event({"type": "transcript", "text": turn.caller_text, "final": True})
                self.history.append(Message("user", turn.caller_text))
        for delta in unsent:
            await self.io.send_event({"type": "agent_text", "text": delta, "final": False})
        unsent.clear()

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
        """Stream text into clauses, clauses into audio, audio into the playout; then close the turn.

        Text and audio made before the turn is committed (a preemptive reply) wait in `unsent` and in
        the first clause's audio; nothing reaches the caller until the endpoint confirms the turn.
        """
        splitter, unsent = ClauseSplitter(), []
        try:
            async for delta in text:
                unsent.append(delta)
                if turn.index is not None:
                    await self._commit(turn, unsent)
                for clause in splitter.push(delta):
                    await self._say(turn, clause, unsent)
            if rest := splitter.flush():
                await self._say(turn, rest, unsent)
            await self._commit(turn, unsent)
            await self.playout.drain()
        except asyncio.CancelledError:
            turn.interrupted = True
            raise
        finally:
            if turn.index is not None:
                await asyncio.shield(self._close_turn(turn))

    async def _say(self, turn: Turn, clause: str, unsent: list[str]) -> None:
        t0 = time.monotonic()
        try:
            audio = await self.stages.tts.synthesize_async(clause, self.profile.voice)
        except Exception:
            log.exception("call %s: TTS failed for %r", self.id, clause)
            return
        if turn.tts_ttfb_ms is None:
            turn.tts_ttfb_ms = ms_since(t0)
        await self._commit(turn, unsent)
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
