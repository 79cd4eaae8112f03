"""Playout: real-time pacing with a short lead, flush on barge-in, and what the caller heard."""

from __future__ import annotations

import asyncio
import contextlib
import time

import numpy as np
import pytest

from pipeline.agent_turn import start_hold
from pipeline.audio import float_to_pcm16
from pipeline.playout import Playout, Segment

RATE = 16000
LEAD_MS = 200
TEXT = "one two three four five six seven eight nine ten"


class Sink:
    """A list-collecting async send function."""

    def __init__(self) -> None:
        self.frames: list[tuple[float, bytes]] = []

    async def __call__(self, data: bytes) -> None:
        self.frames.append((time.monotonic(), data))

    @property
    def samples(self) -> int:
        return sum(len(data) for _, data in self.frames) // 2

    @property
    def data(self) -> bytes:
        return b"".join(data for _, data in self.frames)


def tone(seconds: float, rate: int = RATE, freq: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def mark_into(marked: list[Segment]):
    """An on_segment_sent callback that records the segments."""

    async def on_sent(segment: Segment) -> None:
        marked.append(segment)

    return on_sent


@contextlib.asynccontextmanager
async def running(playout: Playout):
    task = asyncio.create_task(playout.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
async def test_paced_in_real_time_and_flush_stops_sending():
    sink = Sink()
    playout = Playout(sink, RATE, lead_ms=LEAD_MS)
    assert not playout.speaking
    audio = tone(1.0)
    async with running(playout) as task:
        t0 = time.monotonic()
        playout.enqueue(0, TEXT, audio)
        await asyncio.sleep(0.5)
        elapsed = time.monotonic() - t0
        sent_s = sink.samples / RATE

        # real-time pacing: about elapsed + lead, not a burst of the whole second
        assert 0.4 <= sent_s <= 0.9, sent_s
        assert abs(sent_s - (elapsed + LEAD_MS / 1000)) <= 0.15, (sent_s, elapsed)
        assert playout.speaking
        assert not task.done()

        # 20 ms frames carrying exactly the queued audio as PCM16
        assert all(len(data) == 2 * RATE * 20 // 1000 for _, data in sink.frames)
        assert sink.data == float_to_pcm16(audio[: sink.samples])

        first = playout.first_sent_at(0)
        assert first is not None and t0 <= first <= t0 + 0.1

        # what was sent so far, as words: a proportional strict prefix
        heard = playout.heard_text(0)
        assert TEXT.startswith(heard) and heard != TEXT
        expected_words = int(10 * sink.samples / len(audio))
        assert len(heard.split()) == expected_words

        playout.flush()
        n_frames = len(sink.frames)
        await asyncio.sleep(0.3)
        assert len(sink.frames) == n_frames, "frames were sent after flush"
        assert not playout.speaking
        assert playout.first_sent_at(0) == first
        await asyncio.wait_for(playout.drain(), 0.5)
        assert not task.done()  # the loop survives a flush


@pytest.mark.asyncio
async def test_heard_text_after_flush_is_a_proportional_strict_prefix():
    sink = Sink()
    playout = Playout(sink, RATE, lead_ms=LEAD_MS)
    async with running(playout):
        playout.enqueue(0, TEXT, tone(1.0))
        await asyncio.sleep(0.3)
        playout.flush()
        share = 0.3  # played at the client so far (sent minus the unplayed lead), of one second of audio
        await asyncio.sleep(0.05)
        heard = playout.heard_text(0)
        assert TEXT.startswith(heard) and heard != TEXT, heard
        assert abs(len(heard.split()) - 10 * share) <= 1.5, (heard, share)


@pytest.mark.asyncio
async def test_fully_sent_segments_yield_full_text_and_drain_waits_for_playout():
    sink, marked = Sink(), []
    playout = Playout(sink, RATE, lead_ms=LEAD_MS, on_segment_sent=mark_into(marked))
    async with running(playout):
        t0 = time.monotonic()
        playout.enqueue(3, "Hello there.", tone(0.3))
        playout.enqueue(3, "How are you?", tone(0.3, freq=660.0))
        assert playout.speaking
        await asyncio.wait_for(playout.drain(), 2.0)
        elapsed = time.monotonic() - t0

        # drain returns only after the 0.6 s of audio has played out at the client, not when it was sent
        assert 0.55 <= elapsed <= 1.2, elapsed
        assert not playout.speaking
        assert sink.samples == int(0.6 * RATE)
        assert sink.data == float_to_pcm16(np.concatenate([tone(0.3), tone(0.3, freq=660.0)]))
        assert playout.heard_text(3) == "Hello there. How are you?"
        first = playout.first_sent_at(3)
        assert first is not None and t0 <= first <= t0 + 0.1
        assert [s.text for s in marked] == ["Hello there.", "How are you?"]
        assert all(s.marked and s.sent == len(s.pcm) for s in marked)


@pytest.mark.asyncio
async def test_heard_text_stops_at_first_unsent_segment_and_flush_drops_the_queue():
    sink = Sink()
    playout = Playout(sink, RATE, lead_ms=LEAD_MS)
    async with running(playout):
        playout.enqueue(0, "First clause here.", tone(0.1))
        playout.enqueue(0, "Second clause that is long.", tone(1.0))
        playout.enqueue(0, "Third clause never sent.", tone(0.5))
        await asyncio.sleep(0.15)
        heard = playout.heard_text(0)
        assert heard.startswith("First clause here.")
        assert "Third" not in heard
        playout.flush()
        n = len(sink.frames)
        await asyncio.sleep(0.2)
        assert len(sink.frames) == n
        assert not playout.queue
        assert sink.samples < int(0.6 * RATE)
        assert "Third" not in playout.heard_text(0)

        # the loop keeps running: a later turn plays normally
        playout.enqueue(1, "New turn.", tone(0.1))
        await asyncio.wait_for(playout.drain(), 1.0)
        assert playout.heard_text(1) == "New turn."
        assert playout.first_sent_at(1) is not None


@pytest.mark.asyncio
async def test_unknown_turn_and_nothing_sent():
    playout = Playout(Sink(), RATE)
    assert playout.heard_text(7) == ""
    assert playout.first_sent_at(7) is None
    playout.enqueue(7, "queued only", tone(0.1))
    assert playout.speaking  # queued counts as speaking
    assert playout.heard_text(7) == ""
    assert playout.first_sent_at(7) is None


@pytest.mark.asyncio
@pytest.mark.parametrize("rate", [8000, 24000])
async def test_frame_size_follows_rate(rate):
    sink = Sink()
    playout = Playout(sink, rate, frame_ms=20, lead_ms=LEAD_MS)
    async with running(playout):
        playout.enqueue(0, "short", tone(0.1, rate=rate))
        await asyncio.wait_for(playout.drain(), 1.0)
    sizes = [len(data) // 2 for _, data in sink.frames]
    assert sizes == [rate // 50] * 5
    assert playout.heard_text(0) == "short"


@pytest.mark.asyncio
async def test_partial_last_frame_is_sent():
    sink = Sink()
    playout = Playout(sink, RATE, lead_ms=LEAD_MS)
    async with running(playout):
        playout.enqueue(0, "odd length", tone(0.105))  # 1680 samples = 5 frames + 80 samples
        await asyncio.wait_for(playout.drain(), 1.0)
    assert sink.samples == 1680
    assert len(sink.frames[-1][1]) == 80 * 2


@pytest.mark.asyncio
async def test_confirmed_playback_counts_only_segments_the_transport_confirmed():
    marked: list[Segment] = []

    async def on_sent(segment: Segment) -> None:
        marked.append(segment)

    playout = Playout(Sink(), RATE, lead_ms=LEAD_MS, on_segment_sent=on_sent, confirmed_playback=True, confirm_timeout_s=0.5)
    async with running(playout):
        playout.enqueue(0, "First clause here.", tone(0.1))
        playout.enqueue(0, "Second clause that is long.", tone(1.0))
        await asyncio.sleep(0.15)
        assert [s.text for s in marked] == ["First clause here."]
        assert playout.heard_text(0) == ""  # sent, not yet confirmed
        playout.confirm(marked[0])
        assert playout.heard_text(0) == "First clause here."
        playout.flush()
        playout.confirm(playout.turns[0].segments[1])  # a segment the flush cut: ignored, and never marked
        await asyncio.sleep(0.05)
        assert playout.heard_text(0) == "First clause here." and len(marked) == 1

        playout.enqueue(1, "New turn.", tone(0.1))
        drained = asyncio.create_task(playout.drain())
        await asyncio.sleep(0.3)
        assert not drained.done(), "drain waits for the confirmation, not only for the pacing clock"
        playout.confirm(marked[-1])
        await asyncio.wait_for(drained, 0.2)
        assert playout.heard_text(1) == "New turn."

        playout.enqueue(2, "Its mark is lost.", tone(0.1))
        t0 = time.monotonic()
        await playout.drain()
        assert 0.5 <= time.monotonic() - t0 <= 1.0  # gives up after confirm_timeout_s
        assert playout.heard_text(2) == ""


@pytest.mark.asyncio
async def test_queued_seconds_count_down_as_the_audio_plays():
    playout = Playout(Sink(), RATE, lead_ms=LEAD_MS)
    assert playout.queued_s() == 0.0
    playout.enqueue(0, "one", tone(0.6))
    playout.enqueue(0, "two", tone(0.4))
    assert playout.queued_s() == pytest.approx(1.0)
    async with running(playout):
        await asyncio.sleep(0.4)
        assert 0.45 <= playout.queued_s() <= 0.75, "about a second less what played"
        playout.flush()
        assert playout.queued_s() == 0.0


@pytest.mark.parametrize(
    ("made_s", "covered_s", "hold_s"),
    [
        (0.1, 0.35, 0.0),  # the machine keeps up: "Sure," plays at once
        (0.3, 0.35, 0.25),  # the next clause would come 0.25 s after "Sure," ended
        (0.7, 0.35, 0.8),  # never more than the cap
        (0.5, 0.35 + 0.7, 0.0),  # a preemptive reply that waited for the endpoint is covered already
    ],
)
def test_a_first_clause_is_held_only_when_the_next_would_come_late(made_s, covered_s, hold_s):
    assert start_hold(made_s, covered_s) == pytest.approx(hold_s)


@pytest.mark.asyncio
@pytest.mark.parametrize("then", ["next_clause", "release", "timeout"])
async def test_a_held_first_clause_plays_when_the_next_arrives_when_released_or_when_the_hold_ends(then):
    sink = Sink()
    playout = Playout(sink, RATE, lead_ms=LEAD_MS)
    async with running(playout):
        t0 = time.monotonic()
        playout.enqueue(0, "Sure,", tone(0.3), hold_s=0.6)
        await asyncio.sleep(0.2)
        assert not sink.frames, "held"
        if then == "next_clause":
            playout.enqueue(0, "a bag costs thirty dollars.", tone(0.5))
        elif then == "release":
            playout.release()
        await asyncio.wait_for(playout.drain(), 3)
        started = sink.frames[0][0] - t0
        assert (0.2 <= started < 0.35) if then != "timeout" else (0.55 <= started < 0.8), started
        assert playout.hold_until == 0.0


@pytest.mark.asyncio
async def test_a_pause_holds_the_reply_and_resume_plays_the_cut_clause_again():
    sink, marked = Sink(), []
    playout = Playout(sink, RATE, lead_ms=LEAD_MS, on_segment_sent=mark_into(marked))
    first, second = tone(0.6), tone(0.4, freq=330.0)
    async with running(playout):
        playout.enqueue(0, "one two three", first)
        playout.enqueue(0, "four five", second)
        await asyncio.sleep(0.3)
        playout.pause()
        n_frames = len(sink.frames)
        await asyncio.sleep(0.4)
        assert len(sink.frames) == n_frames, "frames were sent while paused"
        assert playout.speaking and abs(playout.queued_s() - 0.7) <= 0.15  # the rest of the reply waits, nothing is lost
        assert playout.heard_text(0) in ("", "one")  # what had played before the pause
        playout.resume()
        await asyncio.wait_for(playout.drain(), 3)
    replayed = sink.data[n_frames * 2 * RATE * 20 // 1000 :]
    assert replayed == float_to_pcm16(first) + float_to_pcm16(second)  # the cut clause from its start, then the next
    assert playout.heard_text(0) == "one two three four five"
    assert [s.text for s in marked] == ["one two three", "four five"]


@pytest.mark.asyncio
async def test_a_flush_while_paused_keeps_only_what_played_before_the_pause():
    sink = Sink()
    playout = Playout(sink, RATE, lead_ms=LEAD_MS)
    async with running(playout):
        playout.enqueue(0, TEXT, tone(1.0))
        await asyncio.sleep(0.5)
        playout.pause()
        heard = playout.heard_text(0)
        playout.flush()
        await asyncio.sleep(0.3)
        assert not playout.speaking
        await asyncio.wait_for(playout.drain(), 0.5)
    assert playout.heard_text(0) == heard and TEXT.startswith(heard) and 2 <= len(heard.split()) <= 5, heard
