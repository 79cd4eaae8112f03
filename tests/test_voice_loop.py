"""End to end over a real socket with the real models: spoken question in, spoken answer out, turns stored."""

from __future__ import annotations

import numpy as np
import pytest

from bench.wsclient import CallClient

QUESTION = "What is the fee for a checked bag?"


def nonsilent_seconds(frames, rate: int) -> float:
    return sum(len(f) for _, f in frames if np.abs(f).max(initial=0) > 300) / rate


async def wait_greeting(client: CallClient) -> None:
    await client.wait_for(lambda got: any(e["final"] for e in got.of("agent_text")), timeout=60)


@pytest.mark.asyncio
async def test_spoken_question_gets_spoken_answer(server, speech):
    async with CallClient(server.ws_url, "skyways") as client:
        await client.wait_for(lambda got: got.of("ready"))
        await wait_greeting(client)
        n_audio = len(client.got.audio)
        await client.stream(speech(QUESTION))
        await client.wait_for(lambda got: got.of("metrics"), timeout=90)
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=90)

        transcripts = client.got.of("transcript")
        finals = [t["text"] for t in transcripts if t["final"]]
        assert any(not t["final"] for t in transcripts), "no interim transcript while speaking"
        assert finals and all(w in finals[-1].lower() for w in ("check", "bag")), finals
        deltas = [e["text"] for e in client.got.of("agent_text") if not e["final"]]
        assert len(deltas) > 3
        assert nonsilent_seconds(client.got.audio[n_audio:], 16000) >= 0.5
        metrics = client.got.of("metrics")[0]
        for key in ("asr_ms", "llm_ttft_ms", "tts_ttfb_ms", "voice_to_voice_ms"):
            assert metrics[key] is not None and metrics[key] > 0, metrics
        call_id = client.got.of("ready")[0]["call_id"]

    turns = await server.state.store.run(server.state.store.turns, call_id)
    assert [t.index for t in turns] == [0, 1]
    assert turns[0].caller_text is None and "Skyways" in turns[0].agent_text
    assert "bag" in turns[1].caller_text.lower()
    assert turns[1].agent_text and turns[1].voice_to_voice_ms > 0 and not turns[1].interrupted


def turn_events(got, after: float) -> list[tuple[float, dict]]:
    return [(t, e) for t, e in got.events if t >= after]


@pytest.mark.asyncio
async def test_barge_in_stops_audio_and_keeps_only_heard_text(server, speech):
    async with CallClient(server.ws_url, "skyways") as client:
        await wait_greeting(client)
        await client.stream(speech("Can you tell me everything about your baggage rules and fees?"))
        t_final = await client.wait_for(lambda got: next((t for t, e in got.events if e["type"] == "transcript" and e["final"]), None))
        # the tuned model's answers are short (two sentences at most): interrupt as soon as the answer starts playing
        await client.wait_for(lambda got: sum(len(f) for t, f in got.audio if t > t_final) >= 16000 * 0.2, timeout=60)
        await client.stream(speech("Wait, sorry, I have a different question about my flight."))
        t_interrupt = await client.wait_for(lambda got: next((t for t, e in got.events if e["type"] == "interrupt"), None), timeout=30)
        t_next = await client.wait_for(
            lambda got: next((t for t, e in got.events if t > t_interrupt and e["type"] == "transcript" and e["final"]), None),
            timeout=60,
        )
        assert not [f for t, f in client.got.audio if t_interrupt < t < t_next], "audio kept coming after interrupt"
        first_answer = [e for t, e in client.got.events if t_final < t <= t_interrupt + 1 and e["type"] == "agent_text"]
        streamed = "".join(e["text"] for e in first_answer if not e["final"])
        heard = next(e["text"] for e in first_answer if e["final"])
        call_id = client.got.of("ready")[0]["call_id"]

    turns = await server.state.store.run(server.state.store.turns, call_id)
    interrupted = turns[1]
    assert interrupted.interrupted and interrupted.agent_text == heard
    assert len(heard) < len(" ".join(streamed.split()))
    assert " ".join(streamed.split()).startswith(heard), (heard, streamed)
