"""Turn-taking: speech events, adaptive endpointing, and preemptive replies that are discarded when the caller goes on."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import numpy as np
import pytest
from test_faults import RecordingIO, running

from bench.wsclient import CallClient
from pipeline.call import Call
from pipeline.io import HangUp, TextIn
from pipeline.prompt import build_messages
from pipeline.questions import awarm_messages
from pipeline.turns import endpoint_ms, looks_complete
from pipeline.vad import SpeechDetector


@pytest.mark.parametrize(
    "text, complete",
    [
        ("How much does it cost to check a bag?", True),
        ("I lost my card.", True),
        ("Thanks a lot", True),
        ("My booking code is", False),
        ("I want to ask about", False),
        ("I want to ask about.", False),
        ("and then, um", False),
        ("Well,", False),
        ("", False),
        ("Hello", False),
        ("Wait.", False),  # a barge-in that holds the floor; the caller goes on after the pause
        ("Hmm, actually.", False),
    ],
)
def test_looks_complete(text, complete):
    assert looks_complete(text) is complete


def test_endpoint_is_short_only_for_complete_sentences():
    assert endpoint_ms("Is delivery free?", 250, 700) == 250
    assert endpoint_ms("My order number is", 250, 700) == 700
    assert endpoint_ms("Is delivery free?", 900, 700) == 700


def test_detector_reports_start_pause_resume_end(stages, speech):
    detector = SpeechDetector(stages.vad, threshold=0.5, endpoint_silence_ms=600)
    audio = np.concatenate(
        [
            np.zeros(8000, np.float32),
            speech("I want to ask about"),
            np.zeros(4800, np.float32),
            speech("the price of a bag"),
            np.zeros(16000, np.float32),
        ]
    )
    events = []
    for i in range(0, len(audio), 320):
        events += [e.kind for e in detector.feed(audio[i : i + 320], now=i / 16000)]
    collapsed = [k for k, prev in zip(events, [None, *events]) if k != prev]
    assert collapsed[0] == "start" and collapsed[-1] == "end"
    assert "resume" in events and events.count("start") == 1 and events.count("end") == 1


def test_a_shortened_endpoint_lasts_only_for_its_pause(stages, speech):
    """A pause's transcript may look complete ("Wait, sorry."); once the caller goes on, the default holds again."""
    detector = SpeechDetector(stages.vad, threshold=0.5, endpoint_silence_ms=700)
    silence = lambda ms: np.zeros(16 * ms, np.float32)  # noqa: E731
    audio = np.concatenate(
        [
            silence(500),
            speech("Wait, sorry"),
            silence(200),
            speech("I have a question"),
            silence(450),
            speech("about my flight"),
            silence(1200),
        ]
    )
    kinds = []
    for i in range(0, len(audio), 320):
        for event in detector.feed(audio[i : i + 320], now=i / 16000):
            kinds.append(event.kind)
            if event.kind == "pause" and kinds.count("pause") == 1:
                detector.set_endpoint_ms(350)  # the first pause's words read as a finished sentence
    assert kinds.count("start") == 1 and kinds.count("end") == 1 and kinds[-1] == "end", kinds


def preemptive(metrics: str, outcome: str) -> float:
    m = re.search(rf'talkline_preemptive_replies_total{{outcome="{outcome}"}} ([0-9.]+)', metrics)
    return float(m.group(1)) if m else 0.0


@pytest.mark.asyncio
async def test_caller_resuming_after_a_pause_gets_one_answer_to_the_whole_utterance(server, speech):
    async with httpx.AsyncClient(base_url=server.url) as http:
        before = (await http.get("/metrics")).text
    async with CallClient(server.ws_url, "skyways") as client:
        await client.wait_for(lambda got: client.agent_finals(), timeout=60)
        await client.stream(speech("I want to ask about"))
        await client.silence(0.4)
        await client.stream(speech("the price of a checked bag."))
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=90)
        await client.silence(1.0)
        finals = [e["text"] for e in client.got.of("transcript") if e["final"]]
        assert len(finals) == 1, finals
        assert "ask" in finals[0].lower() and "bag" in finals[0].lower(), finals
        assert len(client.agent_finals()) == 2 and len(client.got.of("metrics")) == 1
    async with httpx.AsyncClient(base_url=server.url) as http:
        after = (await http.get("/metrics")).text
    assert preemptive(after, "discarded") > preemptive(before, "discarded")
    assert preemptive(after, "used") == preemptive(before, "used") + 1


@pytest.mark.asyncio
async def test_a_warm_up_after_the_call_ended_does_nothing(stages, caplog):
    session = stages.llm.open_session()
    await session.aclose()
    await session.prefill([{"role": "user", "content": "Hello"}])
    assert "prefill failed" not in caplog.text


@pytest.mark.asyncio
async def test_the_next_prompt_is_prefilled_while_the_caller_talks(server):
    """After the greeting and after each turn the call warms its KV cache with the next prompt's prefix, so the
    turn itself only feeds the caller's words."""
    state, io = server.state, RecordingIO()
    call = Call(state.profiles["skyways"], state.stages, io, state.store, state.metrics, 16000, "test")
    engine = state.stages.llm.engine

    def warmed() -> list[int]:
        return engine.encode_chat(build_messages(call.profile, call.history), add_generation_prompt=False)

    async with running(call) as runner:
        for asked in range(2):
            await io.wait(lambda io, n=asked: len(io.finals()) > n, timeout=120)
            await io.wait(lambda io: call.llm.session.ids == warmed(), timeout=60)
            prefix = len(call.llm.session.ids)
            call.push(TextIn("How much does it cost to check a bag?", time.monotonic()))
            await io.wait(lambda io, n=asked: len(io.finals()) > n + 1, timeout=120)
            assert call.llm.last_stats.reused_tokens == prefix, "the turn fed only its own words"
        call.push(HangUp("caller_stop"))
        assert await runner == "caller_stop"


@pytest.mark.asyncio
@pytest.mark.parametrize("warm_facts", [True, False])
async def test_words_heard_so_far_warm_the_facts_they_ask_about(server, warm_facts):
    """An interim transcript between replies prefills the block of facts ranked for it after the history, so a turn
    that asks what the interim did feeds the model only its own words; `llm.warm_facts: false` keeps the warm-up at
    the history."""
    state, io = server.state, RecordingIO()
    profile = state.profiles["skyways"]
    profile = profile.model_copy(update={"llm": profile.llm.model_copy(update={"warm_facts": warm_facts})})
    call = Call(profile, state.stages, io, state.store, state.metrics, 16000, "test")
    engine, question = state.stages.llm.engine, "How much does a second checked bag cost?"

    async def warmed(heard: str = "") -> list[int]:
        messages = await awarm_messages(state.stages.retriever, profile, call.history, heard)
        return engine.encode_chat(messages, add_generation_prompt=False)

    async with running(call) as runner:
        await io.wait(lambda io: len(io.finals()) > 0, timeout=120)
        history_only = await warmed()
        await io.wait(lambda io: call.llm.session.ids == history_only, timeout=60)
        with_facts = await warmed(question)
        assert len(with_facts) > len(history_only) + 20 and with_facts[: len(history_only)] == history_only
        await call.caller.transcriber.on_interim(question)
        expected = with_facts if warm_facts else history_only
        await io.wait(lambda io: call.llm.session.ids == expected, timeout=60)
        call.push(TextIn(question, time.monotonic()))
        await io.wait(lambda io: len(io.finals()) > 1, timeout=120)
        assert call.llm.last_stats.reused_tokens == len(expected)
        call.push(HangUp("caller_stop"))
        assert await runner == "caller_stop"


@pytest.mark.asyncio
async def test_a_guess_at_the_turn_is_warmed_only_on_spare_cores(stages):
    """While any call's reply or warm-up runs on the embedded engine, the facts for the words heard so far wait."""
    backend = stages.llm
    assert backend.spare()
    replying = backend.open_session().stream([{"role": "user", "content": "Hello"}], 0.0, 8)
    await anext(replying)
    assert not backend.spare()
    await replying.aclose()
    warming = asyncio.create_task(backend.open_session().prefill([{"role": "user", "content": "Hello there, how are you?"}]))
    await asyncio.sleep(0)
    assert not backend.spare()
    await warming
    assert backend.spare()
