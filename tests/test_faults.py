"""Faults: an LLM backend that is down, slow or cut mid-answer (a loopback stand-in), and an ASR or TTS stage that
raises in one call. The call goes on, speaks the fallback line when nothing was said, and other calls never notice."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest
from llm_standin import StandInLLM
from servers import QUICK_FALLBACK, quick_profiles, serving

from bench.wsclient import CallClient
from pipeline.call import Call
from pipeline.io import AudioIn, HangUp, TextIn
from pipeline.llm import OpenAICompatLLM
from pipeline.playout import Segment

FULL = "Our bags cost thirty dollars. Anything else?"


@pytest.mark.asyncio
async def test_llm_down_slow_and_cut_mid_answer(stages, tmp_path):
    async with StandInLLM() as llm:
        backend = OpenAICompatLLM(llm.url, timeout=1.0)
        with_standin = dataclasses.replace(stages, llm=backend)
        with serving(with_standin, tmp_path, profiles_dir=quick_profiles(tmp_path / "profiles")) as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                heard = {}
                for mode in ("healthy", "down", "slow", "drop", "drop_early", "healthy"):
                    await llm.switch(mode)
                    asked, t0 = len(client.agent_finals()), time.monotonic()
                    await client.send_json({"type": "text", "text": f"Question while the backend is {mode}?"})
                    await client.wait_for(lambda got, n=asked: len(client.agent_finals()) > n, timeout=60)
                    heard[mode] = (client.agent_finals()[-1], time.monotonic() - t0)
                call_id = client.got.of("ready")[0]["call_id"]
                assert not client.got.of("error") and client.close_code is None
            turns = await server.state.store.run(server.state.store.turns, call_id)
        await backend.aclose()
        warm = [w["messages"] for w in llm.warmups]  # while the caller speaks, the server's prefix cache gets the conversation
        assert all(m[0]["role"] == "system" for m in warm) and any(m[-1] == {"role": "assistant", "content": "Hi."} for m in warm)
        assert all(w["max_tokens"] == 1 and w.get("tools") == llm.requests[0].get("tools") for w in llm.warmups)
    assert heard["healthy"][0] == FULL
    assert heard["down"][0] == QUICK_FALLBACK
    assert heard["slow"][0] == QUICK_FALLBACK and heard["slow"][1] < 6, "the fallback comes after --llm-timeout, not never"
    assert heard["drop"][0] == "Our bags cost thirty dollars.", "what was said stays; no fallback after it"
    assert heard["drop_early"][0] == QUICK_FALLBACK, "cut before a word: the fallback line"
    bags = "Our bags cost thirty dollars."
    assert [t.agent_text for t in turns[1:]] == [FULL, QUICK_FALLBACK, QUICK_FALLBACK, bags, QUICK_FALLBACK, FULL]


class RecordingIO:
    """CallIO for a Call driven in-process: keeps the events, counts the audio."""

    output_rate = 16000
    confirms_playback = False

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.audio_bytes = 0

    async def send_event(self, event: dict) -> None:
        self.events.append(event)

    async def send_audio(self, pcm16: bytes) -> None:
        self.audio_bytes += len(pcm16)

    async def clear_audio(self) -> None:
        self.events.append({"type": "interrupt"})

    async def segment_sent(self, segment: Segment) -> None:
        return None

    def finals(self) -> list[str]:
        return [e["text"] for e in self.events if e["type"] == "agent_text" and e["final"]]

    async def wait(self, predicate, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            assert time.monotonic() < deadline, f"timed out; events: {self.events[-8:]}"
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def running(call: Call) -> AsyncIterator[asyncio.Task]:
    """`call.run()` as a task; leaving the block hangs the call up if it is still on, so a failed test leaks no call."""
    runner = asyncio.create_task(call.run())
    try:
        yield runner
    finally:
        if not runner.done():
            call.push(HangUp("caller_stop"))
            try:
                await asyncio.wait_for(runner, 30)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass


class BrokenASR:
    """Every decode (interim and final) raises."""

    async def atranscribe(self, audio: np.ndarray, slack_s: float = 0.0) -> str:
        raise RuntimeError("the ASR stage exploded")


@dataclasses.dataclass
class FlakyTTS:
    """The real voice, except that a clause containing `poison` raises."""

    real: object
    poison: str

    @property
    def sample_rate(self) -> int:
        return self.real.sample_rate

    async def synthesize_async(self, text: str, settings=None, slack_s: float = 0.0) -> np.ndarray:
        if self.poison in text:
            raise RuntimeError(f"the TTS stage exploded on {text!r}")
        return await self.real.synthesize_async(text, settings, slack_s)


async def broken_call(server, stages, llm_url: str, speech) -> tuple[RecordingIO, str]:
    """A call whose own stages fail: ASR on every decode, TTS on the clause about the price."""
    broken = dataclasses.replace(stages, asr=BrokenASR(), tts=FlakyTTS(stages.tts, "thirty"), llm=OpenAICompatLLM(llm_url))
    state, io = server.state, RecordingIO()
    call = Call(state.profiles["skyways"], broken, io, state.store, state.metrics, 16000, "test")
    async with running(call) as runner:
        await io.wait(lambda io: io.finals())
        silence = np.zeros(32000, np.float32)  # past the longest endpoint
        question = np.concatenate([speech("How much does it cost to check a bag?"), silence])
        for i in range(0, len(question), 320):  # 20 ms frames at real time
            call.push(AudioIn(question[i : i + 320], time.monotonic()))
            await asyncio.sleep(0.02)
        await io.wait(lambda io: {"type": "transcript", "text": "", "final": True} in io.events)  # ASR failed: an empty transcript
        call.push(TextIn("How much is a checked bag?", time.monotonic()))
        await io.wait(lambda io: len(io.finals()) >= 2)
        call.push(HangUp("caller_stop"))
        assert await runner == "caller_stop"
    await broken.llm.aclose()
    return io, call.id


async def normal_call(server) -> str:
    async with CallClient(server.ws_url, "northbank") as client:
        await client.wait_for(lambda got: client.agent_finals(), timeout=90)
        await client.send_json({"type": "text", "text": "When are your branches open on Saturday?"})
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2 and got.of("metrics"), timeout=120)
        assert not client.got.of("error")
        return client.agent_finals()[1]


@pytest.mark.asyncio
async def test_asr_and_tts_failures_stay_in_their_call(server, stages, speech):
    async with StandInLLM() as llm:
        (io, call_id), answer = await asyncio.gather(broken_call(server, stages, llm.url, speech), normal_call(server))
    assert answer, "the other call got its answer"
    assert io.finals()[1] == "Anything else?", "the clause whose synthesis failed is skipped, the rest is spoken"
    turns = await server.state.store.run(server.state.store.turns, call_id)
    assert [(t.caller_text, t.agent_text) for t in turns[1:]] == [("How much is a checked bag?", "Anything else?")]
    assert (await server.state.store.run(server.state.store.call, call_id)).end_reason == "caller_stop"
