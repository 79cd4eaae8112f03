"""One call, top to bottom: greet, listen, answer (tools included), barge-in; history keeps only what the caller heard."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Coroutine

import numpy as np

from pipeline.actions import post_json
from pipeline.agent_turn import Control, Draft, Part, Turn, ms_since, one_line, reply_text
from pipeline.io import AudioIn, CallControlError, CallIO, Closing, DtmfIn, HangUp, Inbound, TextIn
from pipeline.listening import CallerAudio
from pipeline.metrics import Metrics
from pipeline.overlap import OverTheAgent
from pipeline.playout import Playout
from pipeline.profile import Profile
from pipeline.prompt import Message, build_messages
from pipeline.questions import aask, asked_messages, awarm_messages
from pipeline.readout import DeclineGuard
from pipeline.speaking import Speaker
from pipeline.stages import Stages
from pipeline.store import Store
from pipeline.tools import HttpTool, SpeechFilter, ToolCall, split_reply
from pipeline.tracing import NO_SPAN, record_turn, start_call_span
from pipeline.vad import SpeechEvent

log = logging.getLogger(__name__)
MAX_HTTP_CALLS = 2  # HTTP tool calls answered per caller turn
END_REASONS = {"transfer_to_human": "transferred", "end_call": "agent_hangup"}


def new_call_id() -> str:
    return uuid.uuid4().hex


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
        self.inbox: asyncio.Queue[Inbound | Control] = asyncio.Queue()
        self.history: list[Message] = []
        self.caller = CallerAudio(stages, profile.turn, input_rate, self._interim)
        self.playout = Playout(io.send_audio, io.output_rate, on_segment_sent=io.segment_sent, confirmed_playback=io.confirms_playback)
        self.llm = stages.llm.open_session(slack=self.playout.queued_s)
        agent = (self._cut_in, self._pause_agent, self.playout.resume, self._answer_over_the_agent)
        self.over_agent = OverTheAgent(profile.turn, stages.asr.atranscribe, *agent)
        self.speaker = Speaker(profile, stages.tts, self.playout, io.output_rate, self._commit, self.id)
        self.last_spoken: Turn | None = None  # the caller's last spoken turn
        self.reply: asyncio.Task | None = None
        self.draft: Draft | None = None
        self.warm: asyncio.Task | None = None  # prefilling the next turn's prompt
        self.turns = 0
        self.span = NO_SPAN

    def push(self, item: Inbound) -> None:
        """Called by the transport for each decoded input."""
        self.inbox.put_nowait(item)

    async def run(self) -> str:
        """Run the call until hang-up; returns the end reason."""
        await self.store.run(self.store.start_call, self.id, self.profile.id, self.transport)
        self.span = start_call_span(self.id, self.profile.id, self.transport)
        self.metrics.active_calls.inc()
        self.metrics.calls.labels(transport=self.transport).inc()
        player = asyncio.create_task(self.playout.run())
        indexing: asyncio.Task | None = None  # the profile's fact vectors, made while the greeting plays
        reason = "error"
        try:
            self._start_reply(self._say_line(Turn(None, None), self.profile.greeting))
            self._warm()
            indexing = asyncio.create_task(asyncio.to_thread(self.stages.retriever.index, self.profile))
            while (ended := await self._handle(await self.inbox.get())) is None:
                pass
            reason = ended
        finally:
            self.caller.close()
            await self.over_agent.close()
            await self._cancel(self.reply, self.draft and self.draft.task, player, self.warm, indexing)
            await self.llm.aclose()
            with contextlib.suppress(Exception):
                await self.store.run(self.store.end_call, self.id, reason)
            self.metrics.active_calls.dec()
            self.span.set_attribute("talkline.end_reason", reason)
            self.span.end()
        return reason

    async def _handle(self, item: Inbound | Control) -> str | None:
        """One inbox item; returns the end reason once the call is over."""
        if isinstance(item, HangUp):
            return item.reason
        if isinstance(item, Closing):
            await self._take_turn(self._say_line(Turn(None, None), self.profile.closing_line))
            with contextlib.suppress(asyncio.CancelledError):
                await self.reply
            return item.reason
        if isinstance(item, Control):
            return await self._control(item.call)
        if isinstance(item, AudioIn):
            await self._audio(item)
        elif isinstance(item, TextIn):
            await self._take_turn(self._answer(Turn(item.text, item.arrived, typed=True)))
        elif isinstance(item, DtmfIn):
            await self._keypress(item)
        return None

    async def _keypress(self, item: DtmfIn) -> None:
        """A digit the profile maps to a tool runs it without the model; any other is caller text."""
        text, call = self.profile.keypress(item.digit)
        await self._take_turn(self._answer(Turn(text, item.arrived, typed=True), call))

    @property
    def replying(self) -> bool:
        return self.reply is not None and not self.reply.done()

    # ---- listening -------------------------------------------------------------------------
    async def _audio(self, item: AudioIn) -> None:
        for event in self.caller.feed(item.samples, item.arrived):
            if event.kind == "pause" and not self.replying:
                self._start_draft(event)
            elif event.kind == "resume":
                self._discard_draft()
            elif event.kind == "end":
                self._end_of_turn(event)
        if self.caller.speaking:
            if self.replying and self.caller.speech_ms >= self.profile.turn.barge_in_min_ms:
                await self.over_agent.hear(self.caller.speech_ms, self.caller.audio)
            self.caller.maybe_interim()

    async def _interim(self, text: str) -> None:
        """Words heard so far: to the client, and between replies into the warm-up, with the facts they ask about. That
        is a guess at the turn, so it waits for spare cores (the history warm-up goes on meanwhile)."""
        await self.io.send_event({"type": "transcript", "text": text, "final": False})
        if self.profile.llm.warm_facts and not self.replying and self.draft is None and self.stages.llm.spare():
            self._warm(heard=text)

    def _start_draft(self, pause: SpeechEvent) -> None:
        """Preemptive generation: transcribe and start answering at the pause, held until the endpoint."""
        self._discard_draft()
        self._warm(start=False)
        gate = asyncio.Event()
        turn = self._spoken_turn(self.caller.audio(), pause, gate, continues=self._continued())
        self.draft = Draft(asyncio.create_task(turn), gate)

    def _discard_draft(self) -> None:
        if self.draft is not None:
            self.draft.task.cancel()
            self.draft = None
            self.metrics.preemptive.labels(outcome="discarded").inc()

    def _continued(self) -> Turn | None:
        """The turn the utterance under way goes on from, if it does."""
        return self.last_spoken if self.caller.continuing else None

    def _end_of_turn(self, end: SpeechEvent) -> None:
        continues = self._continued()
        audio = self.caller.take()
        self.over_agent.ended(audio, end, settle=self.replying and self.draft is None)
        if self.draft is not None:
            self.draft.gate.set()
            self.reply, self.draft = self.draft.task, None
            self.metrics.preemptive.labels(outcome="used").inc()
            self.caller.last = (audio, end.time)
        elif not self.replying:
            self._start_reply(self._spoken_turn(audio, end, continues=continues))
            self.caller.last = (audio, end.time)

    def _answer_over_the_agent(self, text: str, asr_ms: float, end: SpeechEvent) -> None:
        """Words over the agent stopped it: they are the caller's turn."""
        self._start_reply(self._spoken_turn(np.zeros(0, np.float32), end, text=(text, asr_ms)))

    async def _spoken_turn(
        self,
        audio: np.ndarray,
        end: SpeechEvent,
        gate: asyncio.Event | None = None,
        text: tuple[str, float] | None = None,
        continues: Turn | None = None,
    ) -> None:
        """Transcribe and answer the caller's turn (`text`: its transcript and decode time, when already read;
        `continues`: the turn whose words it goes on from)."""
        t0 = time.monotonic()
        if text is None:
            try:
                text = (await self.stages.asr.atranscribe(audio), ms_since(t0))
            except Exception:
                log.exception("call %s: ASR failed", self.id)
                text = ("", ms_since(t0))
        text, asr_ms = text
        turn = Turn(text, end.time, gate=gate, asr_ms=asr_ms, continues=continues)
        turn.timeline.update(vad_end=(end.time, t0), asr=(t0, time.monotonic()))
        if gate is not None:
            self.caller.endpointer.heard(text)
        if text:
            await self._answer(turn)
            return
        if gate is not None:
            await gate.wait()
        await self.io.send_event({"type": "transcript", "text": "", "final": True})

    async def _take_turn(self, reply: Coroutine) -> None:
        """Input that needs no endpoint (typed text, a keypress): it interrupts the agent and is answered at once."""
        self._discard_draft()
        if self.replying:
            await self._barge_in()
        self._start_reply(reply)

    # ---- answering -------------------------------------------------------------------------
    def _start_reply(self, coro) -> None:
        self._warm(start=False)
        self.reply = asyncio.create_task(coro)

    def _warm(self, start: bool = True, heard: str = "") -> None:
        """Prefill the next turn's prompt (system prompt, history, and the facts for the words `heard` so far) while the
        caller talks; stop that on a reply."""
        if self.warm is not None:
            self.warm.cancel()
        self.warm = asyncio.create_task(self._prefill(heard)) if start else None

    async def _prefill(self, heard: str) -> None:
        try:
            messages = await awarm_messages(self.stages.retriever, self.profile, self.history, heard)
        except Exception:  # noqa: BLE001 - the turn ranks its facts itself
            log.warning("call %s: facts for the warm-up not ranked", self.id, exc_info=True)
            messages = build_messages(self.profile, self.history)
        await self.llm.prefill(messages, self.profile.tools)

    async def _say_line(self, turn: Turn, line: str) -> None:
        """A turn of fixed words: the greeting, or the fallback line."""
        await self._reply(turn, self.speaker.speak(turn, one_line(line)))

    async def _answer(self, turn: Turn, call: ToolCall | None = None) -> None:
        """The model's answer to the caller (a keyed tool `call` stands in for its first reply)."""
        await self._reply(turn, self._rounds(turn, call))

    async def _reply(self, turn: Turn, speaking: Coroutine) -> None:
        """Speak, wait until the audio played, close the turn (even when cut short, or when it said nothing); then
        hand a transfer or hang-up it decided to the call loop."""
        try:
            await speaking
            await self._commit(turn, [])
            await self.playout.drain()
            if turn.control is not None:
                turn.tool_calls.append({"name": turn.control.name, "arguments": turn.control.arguments})
        except asyncio.CancelledError:
            turn.interrupted = True
            raise
        finally:
            if turn.index is not None:
                await asyncio.shield(self._close_turn(turn))
        if turn.control is not None:
            self.push(Control(turn.control))

    async def _rounds(self, turn: Turn, call: ToolCall | None) -> None:
        """Model replies, each spoken as it streams (the first answers a turn of two questions one after the other):
        an HTTP tool's answer goes back to the model for the next (at most MAX_HTTP_CALLS a turn); a transfer or
        hang-up ends the turn."""
        prior = [*self.history, Message("user", turn.caller_text or "")]
        t0 = time.monotonic()
        asked = await aask(self.stages.retriever, self.profile, prior)
        turn.facts = asked.facts
        turn.timeline["retrieval"] = (t0, time.monotonic())
        for answered in range(MAX_HTTP_CALLS + 1):
            part = Part(self.playout.segment_count(turn.index))
            turn.parts.append(part)
            if call is None:
                messages, then = (
                    asked_messages(self.profile, prior, asked)
                    if answered == 0
                    else (build_messages(self.profile, [*prior, *turn.messages(lambda p: p.speech)], relevant=turn.facts), None)
                )
                guard = DeclineGuard(asked.readout) if answered == 0 and asked.readout else None
                call = await self._model_reply(turn, part, messages, then, guard)
            part.last = self.playout.segment_count(turn.index)
            if call is None:
                return
            tool = self.profile.tool(call.name)
            if not isinstance(tool, HttpTool):
                part.call = turn.control = call
                return
            if answered == MAX_HTTP_CALLS:
                log.warning("call %s: %s not run: over %d tool calls in one turn", self.id, call.name, MAX_HTTP_CALLS)
                self._count(call.name, "over_limit")
                return
            part.call = call
            part.result = await self._run_tool(turn, tool, call)
            call = None

    async def _model_reply(
        self,
        turn: Turn,
        part: Part,
        messages: list[dict],
        then: Callable[[str], list[dict]] | None = None,
        guard: DeclineGuard | None = None,
    ) -> ToolCall | None:
        """One model reply, spoken up to its tool call; returns the call (a malformed one is logged and dropped).
        A reply that leaves the caller in silence (no words, no call to run) is replaced by the fallback line; one that
        declines under a `guard` by the guard's fact."""
        speech = SpeechFilter()
        await self.speaker.speak(turn, reply_text(self.llm, self.profile, turn, messages, speech, self.id, then, guard))
        if guard is not None and guard.declined:
            self.metrics.fact_readouts.inc()
            part.speech = guard.speech
            return None
        reply = split_reply(speech.text, self.profile.tools)
        part.speech = reply.speech
        if reply.error:
            log.warning("call %s: tool call not run (%s): %r", self.id, reply.error, speech.text[:300])
            self._count("unknown", "malformed")
            turn.tool_calls.append({"error": reply.error})
        if reply.call is None and self.playout.segment_count(turn.index) == part.first:
            await self.speaker.speak(turn, one_line(self.profile.fallback_line))
        return reply.call

    async def _run_tool(self, turn: Turn, tool: HttpTool, call: ToolCall) -> str:
        """Say the tool's filler while it runs; returns its answer (or what went wrong) for the model."""
        _, answer = await asyncio.gather(self.speaker.speak(turn, one_line(tool.filler)), post_json(tool, call.arguments))
        self._count(call.name, answer.outcome)
        turn.tool_calls.append({"name": call.name, "arguments": call.arguments, "outcome": answer.outcome, "result": answer.data})
        return answer.content

    async def _control(self, call: ToolCall) -> str | None:
        """Transfer or hang up; returns the end reason, or None after telling the caller it could not be done."""
        try:
            if call.name == "transfer_to_human":
                await self.io.transfer(self.profile.transfer_target())
            else:
                await self.io.hang_up()
        except Exception as e:  # noqa: BLE001 - the call goes on with the fallback line
            log.warning("call %s: %s failed: %s", self.id, call.name, e, exc_info=not isinstance(e, CallControlError))
            self._count(call.name, "error")
            await self._take_turn(self._say_line(Turn(None, None), self.profile.fallback_line))
            return None
        self._count(call.name, "ok")
        return END_REASONS[call.name]

    def _count(self, tool: str, outcome: str) -> None:
        self.metrics.tool_calls.labels(tool=tool, outcome=outcome).inc()

    async def _commit(self, turn: Turn, unsent: list[str]) -> None:
        """Wait for the endpoint if preemptive, then make the turn real: index, history, transcript; flush text."""
        if turn.index is None:
            if turn.gate is not None:
                await turn.gate.wait()
            turn.index, self.turns = self.turns, self.turns + 1
            if turn.caller_text is not None:
                if not turn.typed:
                    await self.io.send_event({"type": "transcript", "text": turn.caller_text, "final": True})
                turn.join(self.history)
                if not turn.typed:
                    self.last_spoken = turn
        for delta in unsent:
            await self.io.send_event({"type": "agent_text", "text": delta, "final": False})
        unsent.clear()

    async def _close_turn(self, turn: Turn) -> None:
        """History gets what was heard (and the tool exchange); the turn is committed before the client's final text."""
        heard = self.playout.heard_text(turn.index)
        first_audio = self.playout.first_sent_at(turn.index)
        if first_audio is not None:
            turn.timeline["first_audio_sent"] = (first_audio, first_audio)
        if first_audio is not None and turn.input_end is not None:
            turn.voice_to_voice_ms = round((first_audio - turn.input_end) * 1000, 1)
        self.history += turn.messages(lambda part: self.playout.heard_text(turn.index, part.first, part.last))
        try:
            await self.store.run(self.store.save_turn, turn.record(self.id, heard))
        except Exception:
            log.exception("call %s: could not store turn %d", self.id, turn.index)
        await self.io.send_event({"type": "agent_text", "text": heard, "final": True})
        if turn.caller_text is not None:
            await self.io.send_event({"type": "metrics", "turn": turn.index, **{f"{k}_ms": v for k, v in turn.latencies().items()}})
        self._warm()
        self.metrics.observe_turn(turn.latencies(), turn.interrupted)
        record_turn(self.span, self.id, self.profile.id, turn, time.monotonic())

    async def _barge_in(self) -> None:
        """The caller talks over the agent: stop LLM and TTS at once and flush the client's audio."""
        audible = self.playout.speaking
        self.playout.flush()
        if self.reply is not None:
            self.reply.cancel()  # at once: the client's flush need not wait for the turn to close
        if audible:
            await self.io.clear_audio()
        await self._cancel(self.reply)

    async def _cut_in(self) -> None:
        """The caller's words stop the agent; said right after their last turn, they go on from it (it was cut off)."""
        self.caller.continue_previous()
        await self._barge_in()

    async def _pause_agent(self) -> None:
        """A caller sound with no words yet: the agent stops at once but keeps its reply (`Overlap` resumes it)."""
        self.playout.pause()
        await self.io.clear_audio()

    @staticmethod
    async def _cancel(*tasks: asyncio.Task | None) -> None:
        live = [t for t in tasks if t is not None and not t.done()]
        for t in live:
            t.cancel()
        await asyncio.gather(*live, return_exceptions=True)
