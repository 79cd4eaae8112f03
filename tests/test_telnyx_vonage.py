"""Telnyx and Vonage over real sockets with the real models: out-of-order Telnyx media, PCMA, exact 20 ms Vonage frames,
DTMF barge-in for both, and the starts that cannot be served."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import numpy as np
import pytest
import websockets
from phone_calls import call_ids, ended_call

from bench.carrierclient import TelnyxClient, VonageClient
from server.transports.telnyx import Reorder


def msg(seq: int) -> SimpleNamespace:
    return SimpleNamespace(sequence_number=seq, event="media")


def released(order: Reorder, *seqs: int) -> list[list[int]]:
    return [[m.sequence_number for m in order.push(msg(s))] for s in seqs]


def test_reorder_releases_in_sequence_and_drops_duplicates_and_late_ones():
    order = Reorder(depth=5)
    assert released(order, 1, 3, 2, 4, 4, 3, 0) == [[1], [], [2, 3], [4], [], [], []]
    assert released(order, 6, 6, 5) == [[], [], [5, 6]]  # a duplicate while held
    # 7 is lost: after `depth` messages held, stop waiting for it; when it comes at last, it is late
    assert released(order, 8, 9, 10, 11, 12, 13, 7) == [[], [], [], [], [], [8, 9, 10, 11, 12, 13], []]
    assert released(order, 16, 15) == [[], []]
    assert [m.sequence_number for m in order.flush()] == [15, 16] and order.flush() == []


async def hang_up(phone: TelnyxClient) -> None:
    await phone.send(phone.stop())
    await asyncio.wait_for(phone.closed.wait(), 10)
    assert phone.close_code == 1000


async def answer_then_keypress(phone, question: np.ndarray, digit: str) -> None:
    """Greeting played; a spoken question; a keypress while the answer plays (a barge-in); its answer."""
    await phone.wait_played(timeout=60)
    t_question = time.monotonic()
    await phone.stream(question)
    await phone.wait_for(lambda got: got.samples_after(t_question) >= phone.rate // 2, timeout=90)
    t_key = time.monotonic()
    await phone.send(phone.dtmf(digit))
    t_clear = await phone.wait_for(lambda got: next((t for t in got.clears if t > t_key), None), timeout=30)
    await phone.wait_for(lambda got: got.samples_after(t_clear + 0.3) >= phone.rate // 2, timeout=90)


@pytest.mark.asyncio
async def test_telnyx_call_with_out_of_order_media_marks_and_dtmf(server, speech):
    before = await call_ids(server)
    async with TelnyxClient(server.ws_url, "skyways", jumble=True) as phone:
        await answer_then_keypress(phone, speech("How much does it cost to check a bag?", 8000), "1")
        await hang_up(phone)
    media = [e for _, e in phone.got.events if e["event"] == "media"]
    assert media and all(set(e) == {"event", "media"} and set(e["media"]) == {"payload"} for e in media)
    assert max(phone.got.frame_bytes) == 160
    assert phone.got.echoed, "marks are sent and echoed"

    row = await ended_call(server, before, "telnyx", "skyways")
    assert row.end_reason == "caller_stop"
    turns = await server.state.store.run(server.state.store.turns, row.id)
    assert [t.index for t in turns] == [0, 1, 2]
    assert {"cost", "check"} <= set(turns[1].caller_text.lower().split()), turns[1].caller_text
    assert turns[1].interrupted  # heard: only the clauses whose marks came back (tests/test_twilio.py checks the text)
    assert turns[2].caller_text == "I want to check my booking."


@pytest.mark.asyncio
async def test_telnyx_pcma(server):
    async with TelnyxClient(server.ws_url, "freshcart", encoding="PCMA") as phone:
        await phone.wait_for(lambda got: len(got.audio) >= 25, timeout=60)
        await hang_up(phone)
    assert max(np.abs(f).max() for _, f in phone.got.audio) > 3000, "A-law greeting decodes to speech"


@pytest.mark.asyncio
async def test_vonage_call_with_exact_frames_dtmf_and_hang_up(server, speech):
    before = await call_ids(server)
    async with VonageClient(server.ws_url, "northbank") as phone:
        await answer_then_keypress(phone, speech("When are your branches open on Saturday?"), "5")
        await phone.send(b"\x00" * 3)  # odd length: ignored
        await phone.send(json.dumps({"event": "websocket:connected", "content-type": "audio/l16;rate=16000"}))
    assert set(phone.got.frame_bytes) == {640}, "Vonage takes exact 20 ms frames: 640 bytes at 16 kHz"
    assert [e for _, e in phone.got.events] and all(e == {"action": "clear"} for _, e in phone.got.events)

    row = await ended_call(server, before, "vonage", "northbank")
    assert row.end_reason == "caller_disconnected"  # Vonage hangs up by closing the socket
    turns = await server.state.store.run(server.state.store.turns, row.id)
    # greeting, question, keypress; the model may answer the keypress with a transfer, whose refusal is a 4th turn
    assert [t.index for t in turns][:3] == [0, 1, 2]
    assert "saturday" in turns[1].caller_text.lower() and turns[1].interrupted
    assert turns[2].caller_text == "The caller pressed 5."


@pytest.mark.asyncio
async def test_vonage_8k_and_profile_from_the_connected_event(server):
    before = await call_ids(server)
    phone = VonageClient(server.ws_url, rate=8000)
    connected = {"event": "websocket:connected", "content-type": "audio/l16;rate=8000", "profile": "freshcart"}
    phone.opening = lambda: [json.dumps(connected)]
    async with phone:
        await phone.wait_for(lambda got: len(got.audio) >= 25, timeout=60)
    assert set(phone.got.frame_bytes) == {320}
    assert (await ended_call(server, before, "vonage", "freshcart")).end_reason == "caller_disconnected"


async def closed_with(url: str, frames: list[str | bytes]) -> int:
    async with websockets.connect(url) as ws:
        for frame in frames:
            await ws.send(frame)
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
        return ws.close_code


@pytest.mark.asyncio
async def test_starts_that_cannot_be_served_close_the_socket(server):
    before = await call_ids(server)
    telnyx = TelnyxClient(server.ws_url, "skyways", encoding="G722").opening()
    assert await closed_with(server.ws_url + "/telnyx/media", telnyx) == 1008
    assert await closed_with(server.ws_url + "/telnyx/media?profile=nope", TelnyxClient(server.ws_url).opening()) == 1008
    vonage = [b"\x00" * 640, json.dumps({"event": "websocket:connected", "content-type": "audio/l16;rate=44100"})]
    assert await closed_with(server.ws_url + "/vonage/media", vonage) == 1008
    assert await call_ids(server) == before
