"""The caller's sound while the agent speaks, over a real call: a backchannel leaves the agent talking, a question
stops it at once, a sound with no words pauses it and it goes on."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from test_faults import RecordingIO, running

from bench.wsclient import CallClient
from pipeline.call import Call
from pipeline.io import AudioIn, HangUp
from pipeline.overlap import OverTheAgent, heard
from pipeline.profile import TurnSettings
from pipeline.vad import SpeechEvent

GREETING = "Thanks for calling Skyways Air, this is Ava. How can I help you today?"  # profiles/skyways.yaml
RATE = 16000


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Uh-huh.", "backchannel"),
        ("Okay.", "backchannel"),
        ("Mm-hmm, right.", "backchannel"),
        ("Thank you.", "backchannel"),
        ("", "nothing"),
        ("(coughing)", "nothing"),
        ("you", "nothing"),
        ("Aaaaaa", "nothing"),
        ("A A A A A A", "nothing"),
        ("Hm-n-n-n.", "backchannel"),
        ("I see.", "backchannel"),
        ("What about Sunday?", "words"),
        ("Yeah, but what about Sunday?", "words"),
        ("Okay okay okay okay", "words"),  # longer than a backchannel
    ],
)
def test_what_a_sound_over_the_agent_carries(text, kind):
    assert heard(text) == kind


def audio_s(client: CallClient, after: float = 0.0) -> float:
    return sum(len(frame) for t, frame in client.got.audio if t > after) / RATE


def drawn_out_vowel(seconds: float = 1.5, f0: float = 160.0) -> np.ndarray:
    """A voice going "aaa" with no word in it: glottal pulses with vibrato through the formants of /ae/."""
    t = np.arange(int(RATE * seconds)) / RATE
    phase = np.cumsum(f0 * (1 + 0.03 * np.sin(2 * np.pi * 5 * t))) / RATE
    x = (np.diff(np.floor(phase), prepend=0) > 0).astype(np.float64)
    for centre, width in ((660, 110), (1720, 120), (2410, 160)):
        r, theta = np.exp(-np.pi * width / RATE), 2 * np.pi * centre / RATE
        a1, a2, y1, y2 = -2 * r * np.cos(theta), r * r, 0.0, 0.0
        out = np.empty_like(x)
        for i, v in enumerate(x):
            y1, y2 = (1 - r) * v - a1 * y1 - a2 * y2, y1
            out[i] = y1
        x = out
    x *= np.minimum(1.0, np.minimum(t / 0.05, (t[-1] - t) / 0.1))
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


def onset(samples: np.ndarray, floor: float = 0.02) -> int:
    return int(np.argmax(np.abs(samples) > floor))


async def greeting_playing(client: CallClient) -> None:
    await client.wait_for(lambda got: audio_s(client) >= 0.6, timeout=60)


async def greeting_turn(server, client: CallClient):
    call_id = client.got.of("ready")[0]["call_id"]
    return (await server.state.store.run(server.state.store.turns, call_id))[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("backchannel", ["Okay.", "Right.", "Uh-huh.", "Yeah."])
async def test_a_backchannel_leaves_the_agent_talking(server, speech, backchannel):
    async with CallClient(server.ws_url, "skyways") as client:
        await greeting_playing(client)
        said = (await client.stream(speech(backchannel)))[-1]
        await client.wait_for(lambda got: client.agent_finals(), timeout=30)
        assert not client.got.of("interrupt"), client.got.events
        assert audio_s(client, after=said) >= 0.5, "the agent's audio stopped"
        assert client.agent_finals()[0] == GREETING
        turn = await greeting_turn(server, client)
    assert not turn.interrupted and turn.agent_text == GREETING


@pytest.mark.asyncio
async def test_a_question_over_the_agent_stops_it_within_half_a_second(server, speech):
    question = speech("Sorry, what are your opening hours on Sunday?")
    async with CallClient(server.ws_url, "skyways") as client:
        await greeting_playing(client)
        sent = await client.stream(question)
        started = sent[onset(question) // (RATE // 50)]
        stopped = next(t for t, e in client.got.events if e["type"] == "interrupt")
        assert stopped - started <= 0.5, f"interrupted {stopped - started:.3f} s after the caller started"
        final = await client.wait_for(lambda got: next((e["text"] for e in got.of("transcript") if e["final"]), None), timeout=30)
        assert "sunday" in final.lower()
        assert not [f for t, f in client.got.audio if stopped + 0.05 < t < stopped + 0.3], "audio kept coming after interrupt"
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=90)
        turn = await greeting_turn(server, client)
    assert turn.interrupted and GREETING.startswith(turn.agent_text) and turn.agent_text != GREETING


@pytest.mark.asyncio
async def test_a_sound_with_no_words_pauses_the_agent_and_it_goes_on(server, stages):
    sound = drawn_out_vowel()
    assert heard(stages.asr.transcribe(np.concatenate([np.zeros(4800, np.float32), sound]))) == "nothing"
    async with CallClient(server.ws_url, "skyways") as client:
        await greeting_playing(client)
        await client.stream(sound)
        paused = await client.wait_for(lambda got: next((t for t, e in got.events if e["type"] == "interrupt"), None), timeout=10)
        await client.wait_for(lambda got: client.agent_finals(), timeout=30)
        assert audio_s(client, after=paused + 0.2) >= 1.0, "the agent did not go on"
        assert len(client.got.of("interrupt")) == 1 and len(client.agent_finals()) == 1
        assert client.agent_finals()[0] == GREETING
        turn = await greeting_turn(server, client)
    assert not turn.interrupted and turn.agent_text == GREETING


@pytest.mark.asyncio
async def test_a_caller_cut_off_mid_thought_gets_one_turn_for_the_whole_thought(server, speech):
    """A hasty endpoint (the VAD alone, 300 ms) ends the turn inside the caller's pause; the caller goes on over the
    agent: the two halves are transcribed as one turn, and the history keeps that turn instead of the cut-off one."""
    state, io = server.state, RecordingIO()
    skyways = state.profiles["skyways"]
    hasty = skyways.model_copy(update={"turn": skyways.turn.model_copy(update={"detector": "vad", "endpoint_silence_ms": 300})})
    call = Call(hasty, state.stages, io, state.store, state.metrics, 16000, "test")
    async with running(call) as runner:
        await io.wait(lambda io: io.finals(), timeout=60)

        async def say(samples: np.ndarray) -> None:
            for i in range(0, len(samples), 320):
                call.push(AudioIn(samples[i : i + 320], time.monotonic()))
                await asyncio.sleep(0.02)

        def finals() -> list[str]:
            return [e["text"] for e in io.events if e["type"] == "transcript" and e["final"]]

        def answered() -> bool:
            """The last final transcript has the agent's final text after it."""
            last = max((i for i, e in enumerate(io.events) if e["type"] == "transcript" and e["final"]), default=None)
            return last is not None and any(e["type"] == "agent_text" and e["final"] for e in io.events[last:])

        await say(np.concatenate([speech("How much does it cost to bring"), np.zeros(int(0.9 * RATE), np.float32)]))
        assert call.replying, "the hasty endpoint did not end the turn inside the pause"
        await say(np.concatenate([speech("a second checked bag on my flight?"), np.zeros(2 * RATE, np.float32)]))
        await io.wait(lambda io: any("bag" in t.lower() for t in finals()) and answered(), timeout=90)
        *cut_off, whole = (t.lower() for t in finals())
        assert "cost" in whole and "bag" in whole, whole
        assert not [t for t in cut_off if "bag" in t], cut_off  # shown before the caller went on (a fast machine)
        callers = [m.content for m in call.history if m.role == "user"]
        assert len(callers) == 1 and "cost" in callers[0].lower() and "bag" in callers[0].lower(), call.history
        call.push(HangUp("caller_stop"))
        assert await runner == "caller_stop"


@pytest.mark.asyncio
async def test_each_sound_over_the_agent_is_read_afresh(stages, speech):
    """A backchannel's checks do not carry over: the next sound is read at `barge_in_min_ms` again, even when the
    utterance ended after the agent had finished."""
    calls: list[str] = []

    async def barge_in() -> None:
        calls.append("barge_in")

    async def pause() -> None:
        calls.append("pause")

    okay = np.concatenate([np.zeros(4800, np.float32), speech("Okay.")])
    settings = TurnSettings(barge_in_min_ms=300)
    over = OverTheAgent(
        settings, stages.asr.atranscribe, barge_in, pause, lambda: calls.append("resume"), lambda *a: calls.append("answer")
    )
    await over.hear(320, lambda: okay)
    await over.current._check
    assert calls == [] and over.current.next_check_ms == 620
    over.ended(okay, SpeechEvent("end", 0, time.monotonic()), settle=False)
    assert over.current is None
    question = np.concatenate([np.zeros(4800, np.float32), speech("What time do you close on Sunday?")])
    await over.hear(320, lambda: question)
    await over.current._check
    assert calls == ["resume", "barge_in"]
    await over.close()
