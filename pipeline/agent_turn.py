"""One agent turn as the call loop builds it: the caller input it answers, its model replies with their tool calls,
and its latencies; and the messages it leaves in the history."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime

from pipeline.llm import LLMError, LLMSession
from pipeline.profile import Profile
from pipeline.prompt import Message
from pipeline.readout import DeclineGuard
from pipeline.store import TurnRecord, utcnow
from pipeline.tools import SpeechFilter, ToolCall

log = logging.getLogger(__name__)


@dataclass
class Draft:
    """A preemptive reply started at a pause in the caller's speech, held until the endpoint opens its gate."""

    task: asyncio.Task
    gate: asyncio.Event


async def one_line(text: str) -> AsyncIterator[str]:
    yield text


def ms_since(t0: float) -> float:
    return round((time.monotonic() - t0) * 1000, 1)


NEXT_CLAUSE_COST = 2.0  # the next clause takes about twice as long to make as the first: more tokens, the same TTS
MAX_START_HOLD_S = 0.8


def start_hold(made_s: float, covered_s: float) -> float:
    """The longest a reply's first clause may wait for the next one (a start-up jitter buffer; it plays as soon as
    the next is queued): 0 when the machine keeps up; `covered_s` is its audio plus any time it already waited."""
    return min(max(NEXT_CLAUSE_COST * made_s - covered_s, 0.0), MAX_START_HOLD_S)


@dataclass
class Part:
    """One model reply within a turn: the turn's playout segments its speech filled, and the call it made."""

    first: int  # index of its first segment among the turn's
    last: int | None = None  # one past its last segment
    speech: str = ""  # as the model wrote it
    call: ToolCall | None = None  # a well-formed call (a malformed one is never kept)
    result: str | None = None  # an HTTP tool's answer (JSON text), once it came


@dataclass(frozen=True)
class Control:
    """A transfer or hang-up a closed turn decided; the call loop carries it out."""

    call: ToolCall


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
    facts: tuple[str, ...] = ()  # what retrieval ranked for caller_text; history keeps it with the caller's words
    continues: Turn | None = None  # the turn this one's words go on from (the caller was cut off): it replaces it
    history_at: int | None = None  # where its caller message went in the history
    parts: list[Part] = field(default_factory=list)
    control: ToolCall | None = None  # transfer_to_human or end_call, carried out once the turn closed
    tool_calls: list[dict] = field(default_factory=list)  # what the store records
    timeline: dict[str, tuple[float, float]] = field(default_factory=dict)  # stage -> monotonic (start, end), for traces

    def join(self, history: list[Message]) -> None:
        """The caller's words join the history; words that continue a cut-off turn replace it and its reply."""
        if self.continues is not None and self.continues.history_at is not None:
            del history[self.continues.history_at :]
        self.history_at = len(history)
        history.append(Message("user", self.caller_text or "", self.facts))

    def latencies(self) -> dict[str, float | None]:
        return {
            "asr": self.asr_ms,
            "llm_ttft": self.llm_ttft_ms,
            "tts_ttfb": self.tts_ttfb_ms,
            "voice_to_voice": self.voice_to_voice_ms,
        }

    def messages(self, text_of: Callable[[Part], str]) -> list[Message]:
        """The agent's side of the turn for the history: each reply's text (`text_of`: as written, or as heard)
        with the call it made once that call was carried out, then the tool's answer."""
        out = []
        for part in self.parts or [Part(0)]:
            text = text_of(part)
            done = part.result is not None or (part.call is not None and part.call is self.control and not self.interrupted)
            out.append(Message("assistant", f"{text} {part.call.markup()}".strip() if done else text))
            if part.result is not None:
                out.append(Message("tool", part.result))
        return out

    def record(self, call_id: str, agent_text: str) -> TurnRecord:
        """The committed turn as the store keeps it; `agent_text` is what the caller heard."""
        return TurnRecord(
            call_id=call_id,
            index=self.index,
            caller_text=self.caller_text,
            agent_text=agent_text,
            interrupted=self.interrupted,
            started_at=self.started_at,
            ended_at=utcnow(),
            asr_ms=self.asr_ms,
            llm_ttft_ms=self.llm_ttft_ms,
            tts_ttfb_ms=self.tts_ttfb_ms,
            voice_to_voice_ms=self.voice_to_voice_ms,
            tool_calls=json.dumps(self.tool_calls, ensure_ascii=False) if self.tool_calls else None,
        )


async def reply_text(
    llm: LLMSession,
    profile: Profile,
    turn: Turn,
    messages: list[dict],
    speech: SpeechFilter,
    call_id: str,
    then: Callable[[str], list[dict]] | None = None,
    guard: DeclineGuard | None = None,
) -> AsyncIterator[str]:
    """The model's reply as it streams, less its tool call (kept in `speech`); the fallback line if it failed before a
    word. `then` gives the prompt for a second answer from the first's text (a turn of two questions), asked unless
    the first called a tool. With a `guard`, a refusal ends the model's reply and the guard's fact is said instead.
    The turn gets its time to first token."""
    t0, said = time.monotonic(), False
    settings = profile.llm
    prompt: list[dict] | None = messages
    try:
        while prompt is not None:
            async with contextlib.aclosing(llm.stream(prompt, settings.temperature, settings.max_tokens, profile.tools)) as deltas:
                async for delta in deltas:
                    if turn.llm_ttft_ms is None:
                        turn.llm_ttft_ms = ms_since(t0)
                        turn.timeline["llm_first_token"] = (t0, time.monotonic())
                    said = True
                    text = speech.feed(delta)
                    if guard is not None:
                        text = guard.feed(text)
                    if text:
                        yield text
                    if guard is not None and guard.declined:
                        log.info("call %s: the model declined; reading out the closest fact", call_id)
                        yield guard.finish()
                        return
            prompt = None
            if then is not None and said and not speech.stopped:
                prompt, then = then(speech.text.strip()), None
                if text := speech.feed(" "):
                    yield text
    except LLMError:
        log.exception("call %s: LLM backend failed", call_id)
        if not said:
            yield profile.fallback_line
        return
    rest = speech.flush()
    if guard is not None:
        rest = guard.finish(rest)
    if rest:
        yield rest
