"""Agent audio out: paced at real time with a short lead, flushable, and aware of what the caller heard."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from pipeline.audio import float_to_pcm16


@dataclass
class Segment:
    """One clause's audio; `sent` counts the samples already handed to the transport."""

    turn: int
    text: str
    pcm: np.ndarray  # float32 at the output rate
    sent: int = 0
    end: int = -1  # samples to send; a flush cuts it to `sent`
    marked: bool = False  # the transport was told this segment finished
    played: bool = False  # the transport confirmed the caller's side played it to the end

    def __post_init__(self) -> None:
        self.end = len(self.pcm)


@dataclass
class TurnAudio:
    first_sent_at: float | None = None
    segments: list[Segment] = field(default_factory=list)


class Playout:
    """Sends queued segments frame by frame so the client's buffer stays `lead_ms` deep.

    With `confirmed_playback` the transport reports each segment the far end played (`confirm`, from a
    carrier's echoed marks): heard text counts only confirmed segments, and `drain` waits for them.
    """

    def __init__(
        self,
        send_audio: Callable[[bytes], Awaitable[None]],
        rate: int,
        frame_ms: int = 20,
        lead_ms: int = 200,
        on_segment_sent: Callable[[Segment], Awaitable[None]] | None = None,
        confirmed_playback: bool = False,
        confirm_timeout_s: float = 1.0,
    ) -> None:
        self.send_audio = send_audio
        self.on_segment_sent = on_segment_sent
        self.confirmed_playback, self.confirm_timeout = confirmed_playback, confirm_timeout_s
        self.rate = rate
        self.frame = rate * frame_ms // 1000
        self.lead = lead_ms / 1000
        self.queue: deque[Segment] = deque()
        self.turns: dict[int, TurnAudio] = {}
        self.play_until = 0.0  # when the client finishes playing what was sent
        self.hold_until = 0.0  # a lone queued segment waits until then, unless another joins it or `release`
        self._wake = asyncio.Event()
        self._current: Segment | None = None
        self._started: deque[Segment] = deque(maxlen=64)  # segments in the order they began to play
        self._awaiting: list[Segment] = []  # marked segments whose confirmation `drain` waits for
        self.paused = False
        self._replay: Segment | None = None  # the clause a pause cut, played again from its start on `resume`
        self._epoch = 0  # bumped by a pause or flush: the segment being sent stops

    @property
    def speaking(self) -> bool:
        """Agent audio is queued, being sent, or still playing at the client."""
        return bool(self.queue) or self._current is not None or self.play_until > time.monotonic()

    def queued_s(self) -> float:
        """Seconds of agent audio the caller has yet to hear: sent but not played, being sent, and queued."""
        current = self._current.end - self._current.sent if self._current else 0
        unsent = current + sum(s.end - s.sent for s in self.queue)
        return max(self.play_until - time.monotonic(), 0.0) + unsent / self.rate

    def enqueue(self, turn: int, text: str, pcm: np.ndarray, hold_s: float = 0.0) -> None:
        """Queue a clause; `hold_s` keeps it back while it is alone in the queue (a reply's first clause waiting
        for the next: a start-up jitter buffer) until another joins it, `release`, or the time is up."""
        if hold_s > 0:
            self.hold_until = time.monotonic() + hold_s
        segment = Segment(turn, text, pcm)
        self.turns.setdefault(turn, TurnAudio()).segments.append(segment)
        self.queue.append(segment)
        self._wake.set()

    def release(self) -> None:
        """Nothing more is coming for now: play what is queued."""
        self.hold_until = 0.0
        self._wake.set()

    def flush(self) -> None:
        """Drop everything not yet sent, and take back what was sent but not yet played (the client drops it)."""
        self._take_back()
        for segment in [*self._started, *self.queue]:
            segment.end = min(segment.end, segment.sent)
        self.queue.clear()
        self._awaiting.clear()
        self.hold_until = 0.0
        self.paused, self._replay = False, None
        self._wake.set()

    def pause(self) -> None:
        """Stop sending and take back what the client had not played (it drops it); that audio waits in the queue
        for `resume`, which plays the clause the pause cut again from its start. A `flush` meanwhile drops it."""
        if self.paused:
            return
        self.paused = True
        self._take_back()
        cut = [s for s in self._started if s.sent < s.end]
        for segment in cut:
            self._started.remove(segment)
            segment.marked = segment.played = False
        self.queue.extendleft(reversed(cut))
        self._replay = cut[0] if cut else None

    def resume(self) -> None:
        if not self.paused:
            return
        if self._replay is not None:
            self._replay.sent = 0
        self.paused, self._replay = False, None
        self._wake.set()

    def _take_back(self) -> None:
        """The client's unplayed audio is gone: rewind the segments that sent it, and stop the one being sent."""
        unplayed = int(max(self.play_until - time.monotonic(), 0.0) * self.rate)
        for segment in reversed(self._started):
            taken = min(segment.sent, unplayed)
            segment.sent -= taken
            unplayed -= taken
            if not unplayed:
                break
        self.play_until = time.monotonic()
        self._epoch += 1

    def confirm(self, segment: Segment) -> None:
        """The far end played this segment to its end; ignored for a segment a flush cut."""
        if segment.end == len(segment.pcm):
            segment.played = True

    def first_sent_at(self, turn: int) -> float | None:
        audio = self.turns.get(turn)
        return audio.first_sent_at if audio else None

    def segment_count(self, turn: int | None) -> int:
        """How many clauses the turn has queued so far: a boundary for `heard_text`."""
        audio = self.turns.get(turn)
        return len(audio.segments) if audio else 0

    def heard_text(self, turn: int, first: int = 0, last: int | None = None) -> str:
        """The turn's text (its segments first..last) up to where its audio played: whole clauses, then a
        word-share of a cut one (none if confirmed)."""
        words: list[str] = []
        for segment in (self.turns.get(turn) or TurnAudio()).segments[first:last]:
            clause = segment.text.split()
            if segment.played if self.confirmed_playback else segment.sent >= len(segment.pcm):
                words += clause
                continue
            if not self.confirmed_playback:  # a cut segment: the share of its words that was sent
                words += clause[: len(clause) * segment.sent // max(len(segment.pcm), 1)]
            break
        return " ".join(words)

    async def drain(self) -> None:
        """Wait until every queued segment was sent and has played out at the client (and confirmed, up to a timeout)."""
        while self.speaking:
            await asyncio.sleep(max(self.play_until - time.monotonic(), 0.01))
        deadline = time.monotonic() + self.confirm_timeout
        while time.monotonic() < deadline and not all(s.played for s in self._awaiting):
            await asyncio.sleep(0.01)
        self._awaiting.clear()

    async def run(self) -> None:
        """The pacing loop; runs for the whole call."""
        while True:
            held = self.hold_until - time.monotonic() if len(self.queue) == 1 else 0.0
            if not self.queue or held > 0 or self.paused:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), held if self.queue and not self.paused else None)
                continue
            self.hold_until = 0.0
            self._current = segment = self.queue.popleft()
            self._started.append(segment)
            try:
                await self._send_segment(segment)
            finally:
                self._current = None
            if segment.sent < segment.end:  # a pause stopped it; it waits in the queue
                continue
            if segment.end == len(segment.pcm) and self.on_segment_sent and not segment.marked:
                segment.marked = True
                if self.confirmed_playback:
                    self._awaiting.append(segment)
                await self.on_segment_sent(segment)

    async def _send_segment(self, segment: Segment) -> None:
        turn, epoch = self.turns[segment.turn], self._epoch
        while segment.sent < segment.end and epoch == self._epoch:
            ahead = self.play_until - time.monotonic()
            if ahead > self.lead:
                await asyncio.sleep(ahead - self.lead)
                continue
            frame = segment.pcm[segment.sent : min(segment.sent + self.frame, segment.end)]
            await self.send_audio(float_to_pcm16(frame))
            if epoch != self._epoch:  # taken back while it was being sent: the client drops it
                return
            now = time.monotonic()
            if turn.first_sent_at is None:
                turn.first_sent_at = now
            segment.sent += len(frame)
            self.play_until = max(self.play_until, now) + len(frame) / self.rate
