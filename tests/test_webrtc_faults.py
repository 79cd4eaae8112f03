"""WebRTC faults and limits: bad offers get a 400 and open nothing, bad data channel messages get error events, a peer
that never connects or vanishes mid-call is cleaned up, slots and API keys apply; a call beside them is undisturbed."""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import pytest
from aiortc import RTCPeerConnection
from servers import idle, serving
from test_bad_input import good_call

from bench.rtcclient import OfferRefused, RtcClient
from server.settings import parse_ice_servers
from server.transports import webrtc
from server.transports.webrtc_media import PacedTrack


async def no_peers(server, timeout: float = 10.0) -> None:
    """Until every peer connection the server answered has finished closing (after its call slot was given back)."""
    for _ in range(int(timeout * 10)):
        if not server.state.peers:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"peer connections left open: {server.state.peers}")


async def local_offer(audio: bool = True) -> tuple[RTCPeerConnection, str]:
    """A real offer from an aiortc peer (with a microphone track and the data channel, or the channel alone)."""
    pc = RTCPeerConnection()
    if audio:
        pc.addTrack(PacedTrack())
    pc.createDataChannel("talkline")
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


async def post(url: str, body: bytes | dict, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        if isinstance(body, dict):
            return await http.post(url + "/webrtc/offer", json=body, headers=headers)
        return await http.post(url + "/webrtc/offer", content=body, headers={"content-type": "application/json", **headers})


async def bad_offers(url: str) -> list[tuple[int, str]]:
    pc, sdp = await local_offer(audio=False)
    await pc.close()
    cases = [
        b"not json",
        {"type": "offer", "profile": "skyways"},
        {"type": "answer", "sdp": "v=0", "profile": "skyways"},
        {"type": "offer", "sdp": "v=0\r\nthis is not sdp\r\n", "profile": "skyways"},
        {"type": "offer", "sdp": "v=0\r\n" + "a=x\r\n" * 20000, "profile": "skyways"},
        {"type": "offer", "sdp": sdp, "profile": "skyways"},  # a data channel, no audio
        {"type": "offer", "sdp": sdp, "profile": "nobody"},
    ]
    answers = [await post(url, case) for case in cases]
    return [(r.status_code, r.json()["code"]) for r in answers]


async def test_bad_offers_are_refused_and_open_nothing_beside_a_good_call(server):
    good, refused = await asyncio.gather(good_call(server), bad_offers(server.url))
    assert good
    assert refused == [
        (400, "bad_offer"),
        (400, "bad_offer"),
        (400, "bad_offer"),
        (400, "bad_sdp"),
        (400, "offer_too_large"),
        (400, "no_audio"),
        (404, "unknown_profile"),
    ]
    await idle(server)
    await no_peers(server)


async def test_bad_data_channel_messages_get_errors_and_the_call_goes_on(server):
    async with RtcClient(server.url, "skyways") as client:
        await client.wait_for(lambda got: client.agent_finals(), timeout=60)
        for message in ["not json", b"\x00\x01", json.dumps({"type": "hello"}), json.dumps({"type": "start", "profile": "skyways"})]:
            await client.send_raw(message)
        await client.send_json({"type": "text", "text": "x" * 5000})
        await client.send_json({"type": "dtmf", "digit": "!"})
        codes = ["bad_json", "bad_message", "unknown_type", "already_started", "text_too_long", "bad_message"]
        await client.wait_for(lambda got: len(got.of("error")) >= len(codes), timeout=30)
        assert [e["code"] for e in client.got.of("error")] == codes
        await client.send_json({"type": "text", "text": "How much is a checked bag?"})
        await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=90)
    await idle(server)


def cut_network(client: RtcClient) -> None:
    """The caller's network goes away: its sockets close without a word to the server (no DTLS or SCTP goodbye)."""
    ice = client.pc.getTransceivers()[0].sender.transport.transport
    for protocol in ice._connection._protocols:
        protocol.transport.close()


async def test_a_peer_that_vanishes_mid_call_is_hung_up(server, monkeypatch):
    monkeypatch.setattr(webrtc, "MEDIA_SILENT_S", 1.5)
    async with RtcClient(server.url, "skyways") as client:
        ready = await client.wait_for(lambda got: got.of("ready"), timeout=60)
        await client.send_json({"type": "text", "text": "How much is a checked bag?"})
        await client.wait_for(lambda got: len(got.of("agent_text")) > 2, timeout=60)  # mid-answer
        cut_network(client)
        await idle(server, timeout=30)
    row = await server.state.store.run(server.state.store.call, ready[0]["call_id"])
    assert row.end_reason == "caller_disconnected"
    await no_peers(server)


async def test_unconnected_peers_are_dropped_and_slots_and_keys_apply(stages, tmp_path):
    turn = [{"urls": "turn:turn.example.com:3478", "username": "u", "credential": "p"}]
    with serving(stages, tmp_path, max_calls=1, webrtc_connect_s=1.5, api_keys=["k1"], ice_servers=turn) as server:
        assert (await post(server.url, {"type": "offer", "sdp": "v=0", "profile": "skyways"})).status_code == 401
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert (await http.get("/webrtc/ice")).status_code == 401
            assert (await http.get("/webrtc/ice", headers={"authorization": "Bearer k1"})).json() == {"iceServers": turn}
        pc, sdp = await local_offer()
        first = await post(server.url, {"type": "offer", "sdp": sdp, "profile": "skyways"}, authorization="Bearer k1")
        assert first.status_code == 200  # its answer is never applied: it never connects
        with pytest.raises(OfferRefused) as busy:
            await RtcClient(server.url, "skyways", token="k1").__aenter__()
        assert (busy.value.status, busy.value.body["code"]) == (503, "busy")
        await idle(server, timeout=10)
        await no_peers(server)
        await pc.close()
        async with RtcClient(server.url, "skyways", token="k1") as client:
            await client.wait_for(lambda got: got.of("ready"), timeout=60)


def mutate(sdp: str, rng: random.Random) -> str:
    """A real offer, damaged as a fuzzer would: lines dropped, repeated, swapped or cut, bytes flipped."""
    lines = sdp.split("\r\n")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        op = rng.choice(["drop", "repeat", "swap", "cut", "flip"])
        if op == "drop":
            del lines[i]
        elif op == "repeat":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "cut":
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif lines[i]:
            k = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:k] + chr(rng.randrange(32, 127)) + lines[i][k + 1 :]
        if not lines:
            break
    return "\r\n".join(lines)


async def test_fuzzed_offers_never_break_the_server(stages, tmp_path):
    """60 damaged offers: each is answered (and, never connecting, dropped) or refused with a 400; nothing leaks."""
    rng = random.Random(7)
    pc, sdp = await local_offer()
    await pc.close()
    with serving(stages, tmp_path, max_calls=100, webrtc_connect_s=1.0) as server:
        offers = [{"type": "offer", "sdp": mutate(sdp, rng), "profile": "skyways"} for _ in range(60)]
        statuses = [(await post(server.url, offer)).status_code for offer in offers]
        assert set(statuses) <= {200, 400}, statuses
        assert 400 in statuses
        await idle(server, timeout=15)
        await no_peers(server)
        async with RtcClient(server.url, "skyways") as client:
            await client.wait_for(lambda got: got.of("ready"), timeout=60)


def test_ice_servers_setting():
    assert parse_ice_servers("") == []
    assert parse_ice_servers('[{"urls": ["stun:a:3478", "stun:b:3478"]}]') == [{"urls": ["stun:a:3478", "stun:b:3478"]}]
    for text, error in [("stun:a:3478", "not JSON"), ('{"urls": "stun:a"}', "JSON list"), ('[{"urls": 5}]', "JSON list")]:
        with pytest.raises(ValueError, match=error):
            parse_ice_servers(text)
    with pytest.raises(ValueError, match="unknown keys"):
        parse_ice_servers('[{"urls": "turn:a", "password": "p"}]')
