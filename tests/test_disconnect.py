"""A caller who vanishes at any stage (speaking, ASR, generation, TTS): every per-call task is cancelled, the call row
closes with the reason, active calls return to zero and the server's event loop holds no more tasks than before."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import httpx
import numpy as np
import pytest
from llm_standin import StandInLLM
from phone_calls import call_ids, ended_call
from servers import idle, quick_profiles, serving

from bench.carrierclient import TwilioClient
from bench.wsclient import CallClient
from pipeline.llm import OpenAICompatLLM


@dataclasses.dataclass
class Stuck:
    """Wraps a stage: while `armed`, a call signals `entered`, counts in `stuck` and waits until it is cancelled."""

    real: object
    armed: bool = False
    entered: threading.Event = dataclasses.field(default_factory=threading.Event)
    stuck: int = 0

    @property
    def sample_rate(self) -> int:
        return self.real.sample_rate

    async def _maybe_stick(self) -> None:
        if self.armed:
            self.stuck += 1
            self.entered.set()
            await asyncio.Event().wait()  # only cancellation gets out

    async def atranscribe(self, audio: np.ndarray, slack_s: float = 0.0) -> str:
        await self._maybe_stick()
        return await self.real.atranscribe(audio, slack_s)

    async def synthesize_async(self, text: str, settings=None, slack_s: float = 0.0) -> np.ndarray:
        await self._maybe_stick()
        return await self.real.synthesize_async(text, settings, slack_s)


@pytest.fixture(scope="module")
async def rig(stages, tmp_path_factory):
    """A server whose ASR and TTS can be made to stick, with a stand-in LLM that can hang mid-answer."""
    tmp = tmp_path_factory.mktemp("disconnect")
    async with StandInLLM() as llm:
        backend = OpenAICompatLLM(llm.url, timeout=30)
        stuck = dataclasses.replace(stages, asr=Stuck(stages.asr), tts=Stuck(stages.tts), llm=backend)
        with serving(stuck, tmp, profiles_dir=quick_profiles(tmp / "profiles")) as server:
            yield server, stuck, llm
        await backend.aclose()


async def tasks(server) -> int:
    async with httpx.AsyncClient(base_url=server.url) as http:
        return (await http.get("/healthz")).json()["tasks"]


async def vanish_then_check(server, client, baseline: int) -> None:
    """Drop the connection without a close frame; the call must be closed, counted out and leave no task behind."""
    call_id = client.got.of("ready")[0]["call_id"]
    client.ws.transport.abort()
    await idle(server)
    for _ in range(100):
        row = await server.state.store.run(server.state.store.call, call_id)
        if row.ended_at is not None and await tasks(server) <= baseline:
            break
        await asyncio.sleep(0.1)
    assert row.end_reason == "caller_disconnected"
    assert await tasks(server) <= baseline, "a per-call task outlived its call"


async def wait_thread_event(event: threading.Event, timeout: float = 60.0) -> None:
    assert await asyncio.to_thread(event.wait, timeout), "the stage was never reached"


@pytest.mark.asyncio
@pytest.mark.parametrize("stage", ["speech", "asr", "generation", "tts"])
async def test_vanishing_caller_at_every_stage(rig, speech, stage):
    server, stuck, llm = rig
    baseline = await tasks(server)
    stuck.asr.armed = stuck.tts.armed = False
    stuck.asr.entered.clear(), stuck.tts.entered.clear()
    await llm.switch("hang" if stage == "generation" else "healthy")
    question = speech("How much does it cost to check a bag?")
    client = CallClient(server.ws_url, "quick")
    await client.__aenter__()
    await client.wait_for(lambda got: client.agent_finals(), timeout=60)
    if stage == "speech":
        await client.stream(question[: len(question) // 2])  # mid-utterance, interim decodes running
    elif stage == "asr":
        stuck.asr.armed, stuck.asr.stuck = True, 0
        await client.stream(np.concatenate([question, np.zeros(16000, np.float32)]))
        await wait_thread_event(stuck.asr.entered)
        assert stuck.asr.stuck >= 2, "the first interim decode and the final one both stuck"
    else:
        stuck.tts.armed = stage == "tts"
        await client.send_json({"type": "text", "text": "How much is a checked bag?"})
        if stage == "tts":
            await wait_thread_event(stuck.tts.entered)
        else:
            await asyncio.wait_for(llm.answering.wait(), 30)
            await asyncio.sleep(0.3)  # the first delta is in, the stream hangs
    await vanish_then_check(server, client, baseline)


@pytest.mark.asyncio
async def test_vanishing_phone_mid_generation(rig):
    server, stuck, llm = rig
    stuck.asr.armed = stuck.tts.armed = False
    baseline, before = await tasks(server), await call_ids(server)
    await llm.switch("hang")
    phone = TwilioClient(server.ws_url, "quick")
    await phone.__aenter__()
    await phone.wait_for(lambda got: got.audio, timeout=60)
    await phone.send(phone.dtmf("1"))
    await asyncio.wait_for(llm.answering.wait(), 30)
    phone.ws.transport.abort()
    assert (await ended_call(server, before, "twilio", "quick")).end_reason == "caller_disconnected"
    await idle(server)
    for _ in range(50):
        if await tasks(server) <= baseline:
            break
        await asyncio.sleep(0.1)
    assert await tasks(server) <= baseline
