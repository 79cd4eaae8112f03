"""Calls over WebRTC (POST /webrtc/offer) with a real aiortc peer: speech in over Opus, the agent's voice out on a track,
the browser protocol's events on the data channel, barge-in; the database records transport `webrtc`."""

from __future__ import annotations

import asyncio

import numpy as np
from servers import idle

from bench.rtcclient import RtcClient
from server.transports.webrtc_media import JITTER_ATTRIBUTE, NextPacketBuffer

QUESTION = "How much does it cost to check a bag?"


def audible(client: RtcClient, after: float = 0.0) -> int:
    """Agent samples received after `after` with a peak above the codec's noise floor."""
    return sum(len(f) for t, f in client.got.audio if t > after and np.abs(f).max(initial=0) > 500)


async def test_spoken_call_with_barge_in(server, speech):
    async with RtcClient(server.url, "skyways") as client:
        ready = await client.wait_for(lambda got: got.of("ready"), timeout=60)
        await client.wait_for(lambda got: client.agent_finals(), timeout=60)  # the greeting
        assert audible(client) > 16000 // 2, "the greeting was heard over the track"
        await client.stream(np.concatenate([speech(QUESTION), np.zeros(16000, np.float32)]))
        transcript = await client.wait_for(lambda got: [e["text"] for e in got.of("transcript") if e["final"] and e["text"]])
        assert all(word in transcript[0].lower() for word in ("cost", "check")), transcript
        await client.wait_for(lambda got: len(got.of("agent_text")) > 2)  # the answer streams
        await client.wait_for(lambda got: audible(client, after=got.events[-1][0] - 5) > 0)
        interrupted = len(client.got.of("interrupt"))
        await client.stream(speech("Wait, actually, what time is it in Paris?"))
        await client.wait_for(lambda got: len(got.of("interrupt")) > interrupted, timeout=30)
    await idle(server)
    row = await server.state.store.run(server.state.store.call, ready[0]["call_id"])
    assert row.transport == "webrtc" and row.ended_at is not None


async def test_typed_turn_and_keypad_over_the_data_channel(server):
    async with RtcClient(server.url, "skyways") as client:
        await client.wait_for(lambda got: client.agent_finals(), timeout=60)
        await client.send_json({"type": "text", "text": "How much is a checked bag?"})
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2 and got.of("metrics"), timeout=90)
        await client.send_json({"type": "stop"})
        end = await client.wait_for(lambda got: got.of("end"), timeout=20)
        assert end[0]["reason"] == "caller_stop"
        await asyncio.wait_for(client.closed.wait(), 10)
    await idle(server)


async def test_caller_audio_is_handed_on_without_a_playout_buffer(server):
    async with RtcClient(server.url, "skyways") as client:
        ready = await client.wait_for(lambda got: got.of("ready"), timeout=60)
        (peer,) = [p for p in server.state.peers if p.call is not None and p.call.id == ready[0]["call_id"]]
        receivers = [t.receiver for t in peer.pc.getTransceivers()]
        own = [getattr(t.receiver, JITTER_ATTRIBUTE) for t in client.pc.getTransceivers()]
    assert all(isinstance(getattr(r, JITTER_ATTRIBUTE), NextPacketBuffer) for r in receivers) and receivers, "aiortc changed"
    assert all(isinstance(b, NextPacketBuffer) for b in own), "the bench client times agent audio on arrival"
