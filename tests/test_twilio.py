"""Twilio over real sockets with the real models: a Media Streams call with marks, barge-in, DTMF and stop; the webhook
and its signatures; bad input beside a good call."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import xml.etree.ElementTree as ET

import httpx
import numpy as np
import pytest
import websockets
from fastapi.testclient import TestClient
from phone_calls import active_calls_back_to_zero, call_ids, ended_call
from twilio.request_validator import RequestValidator

from bench.carrierclient import TwilioClient
from pipeline.clauses import ClauseSplitter
from server.app import create_app
from server.settings import Settings, parse_number_profiles

QUESTION = "Can you tell me everything about your baggage rules and fees?"
INTERRUPTION = "Wait, sorry, I have a different question about my flight."
GREETING = "Thanks for calling Skyways Air, this is Ava. How can I help you today?"


def clauses(text: str) -> list[str]:
    splitter = ClauseSplitter()
    out = splitter.push(text)
    return out + [rest] if (rest := splitter.flush()) else out


async def hang_up(phone: TwilioClient) -> None:
    await phone.send(phone.stop())
    await asyncio.wait_for(phone.closed.wait(), 10)
    assert phone.close_code == 1000


@pytest.mark.asyncio
async def test_call_with_marks_barge_in_dtmf_and_stop(server, speech):
    before = await call_ids(server)
    async with TwilioClient(server.ws_url, "skyways") as phone:
        await phone.wait_played(timeout=60)
        media = [e for _, e in phone.got.events if e["event"] == "media"]
        marks = [e for _, e in phone.got.events if e["event"] == "mark"]
        assert media and all(e["streamSid"] == phone.stream_sid for e in media)
        assert marks and all(e["streamSid"] == phone.stream_sid for e in marks)
        sizes = phone.got.frame_bytes  # 20 ms mu-law frames; only a clause's last one may be shorter
        assert max(sizes) == 160 and sizes.count(160) >= len(sizes) - len(marks), sizes
        assert len(phone.got.echoed) == len(marks) and not phone.got.clears

        t_question = time.monotonic()
        await phone.stream(speech(QUESTION, 8000))
        # once a clause of the answer has played (its mark echoed), speak over the rest
        await phone.wait_for(lambda got: [n for t, n in got.echoed if t > t_question], timeout=90)
        await phone.stream(speech(INTERRUPTION, 8000))
        t_clear = await phone.wait_for(lambda got: next((t for t in got.clears if t > t_question), None), timeout=30)
        heard_marks = [(t, n) for t, n in phone.got.echoed if t_question < t < t_clear]

        # the interruption gets an answer; a keypress interrupts that one in turn
        await phone.wait_for(lambda got: got.samples_after(t_clear) >= 4000, timeout=90)
        t_dtmf = time.monotonic()
        await phone.send(phone.dtmf("1"))
        await phone.wait_for(lambda got: any(t > t_dtmf for t, _ in got.echoed), timeout=90)
        await hang_up(phone)

    row = await ended_call(server, before, "twilio", "skyways")
    assert row.end_reason == "caller_stop"
    turns = await server.state.store.run(server.state.store.turns, row.id)
    assert [t.index for t in turns] == [0, 1, 2, 3], [(t.caller_text, t.agent_text, t.interrupted) for t in turns]
    assert turns[0].agent_text == GREETING and not turns[0].interrupted
    assert "tell me" in turns[1].caller_text.lower() and turns[1].interrupted  # whisper tiny on 8 kHz: wording varies
    # heard = the clauses whose marks were echoed before the clear (one fewer if an echo crossed the clear on the wire)
    heard, crossed = clauses(turns[1].agent_text), t_clear - heard_marks[-1][0] < 0.2
    assert len(heard) == len(heard_marks) or (crossed and len(heard) == len(heard_marks) - 1), (heard, heard_marks)
    assert turns[3].caller_text == "I want to check my booking."
    assert turns[3].voice_to_voice_ms > 0


# ---- the webhook ----------------------------------------------------------------------------------
def stream_of(twiml: str) -> tuple[str, dict[str, str]]:
    root = ET.fromstring(twiml)
    assert root.tag == "Response"
    stream = root.find("./Connect/Stream")
    return stream.get("url"), {p.get("name"): p.get("value") for p in stream.findall("Parameter")}


def test_webhook_twiml_profile_by_number_and_signatures(stages, tmp_path):
    settings = Settings(
        db_url=f"sqlite:///{tmp_path / 'webhook.db'}",
        warmup=False,
        twilio_auth_token="s3cret-token",
        public_url="https://talk.example.com",
        number_profiles={"+15557654321": "northbank"},
    )
    url = "https://talk.example.com/twilio/voice"
    params = {"CallSid": "CA123", "AccountSid": "AC1", "From": "+15550001111", "To": "+15557654321"}
    sign = RequestValidator("s3cret-token").compute_signature
    with TestClient(create_app(settings, stages=stages)) as http:
        ok = http.post("/twilio/voice", data=params, headers={"X-Twilio-Signature": sign(url, params)})
        assert ok.status_code == 200 and ok.headers["content-type"].startswith("application/xml")
        assert stream_of(ok.text) == ("wss://talk.example.com/twilio/media", {"profile": "northbank"})

        other = {**params, "To": "+15550000000"}
        default = http.post("/twilio/voice", data=other, headers={"X-Twilio-Signature": sign(url, other)})
        assert stream_of(default.text)[1] == {"profile": "freshcart"}  # the first profile id alphabetically

        forged = [
            (other, sign(url, params)),  # a parameter changed after signing
            (params, sign("https://elsewhere.example.com/twilio/voice", params)),  # signed for another URL
            (params, RequestValidator("another-token").compute_signature(url, params)),  # another account's token
        ]
        for data, signature in forged:
            assert http.post("/twilio/voice", data=data, headers={"X-Twilio-Signature": signature}).status_code == 403
        assert http.post("/twilio/voice", data=params).status_code == 403  # no signature at all


@pytest.mark.asyncio
async def test_webhook_without_token_streams_to_the_request_host(server):
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post("/twilio/voice", data={"To": "+15550000000"})
    assert response.status_code == 200
    assert stream_of(response.text) == (f"wss://127.0.0.1:{server.port}/twilio/media", {"profile": "freshcart"})


def test_phone_settings(stages, tmp_path, caplog):
    assert parse_number_profiles(" +1555=skyways , +1666=northbank ,") == {"+1555": "skyways", "+1666": "northbank"}
    with pytest.raises(ValueError, match="NUMBER=PROFILE"):
        parse_number_profiles("+1555")
    with pytest.raises(ValueError, match="nope"):
        create_app(Settings(number_profiles={"+1555": "nope"}), stages=stages)
    with caplog.at_level(logging.WARNING):
        create_app(Settings(db_url=f"sqlite:///{tmp_path / 'x.db'}"), stages=stages)
    assert "does not check webhook signatures" in caplog.text


# ---- bad input ------------------------------------------------------------------------------------
class Garbage(TwilioClient):
    """A stream that interleaves every kind of bad frame the call must survive with its connected and start."""

    def opening(self) -> list[str | bytes]:
        connected, start = super().opening()
        sid = self.stream_sid
        media = {"event": "media", "streamSid": sid}
        before_start = [self.media(np.zeros(160, np.float32))[0], "not json", b"\x00\x01" * 80, '{"event": "hello"}', "[1, 2]"]
        after_start = [
            {**media, "media": {"payload": "!!not base64!!"}},
            {**media, "media": {"payload": ""}},
            {**media, "media": {"payload": "A" * 12000}},  # 9000 bytes: more than a second
            {**media, "streamSid": "MZother", "media": {"payload": "AAAA"}},
            {"event": "media", "media": {"payload": "AAAA"}},  # no streamSid
            {"event": "stop", "streamSid": "MZother"},  # a stop for another stream
            {"event": "dtmf", "streamSid": sid, "dtmf": {"digit": "x"}},
            {"event": "mark", "streamSid": sid, "mark": {"name": "never-sent"}},
            json.loads(start),  # a second start
        ]
        return [connected, *before_start, start, *[json.dumps(f) for f in after_start]]


async def survives_garbage(server) -> None:
    async with Garbage(server.ws_url, "northbank") as phone:
        await phone.wait_for(lambda got: len(got.audio) > 25, timeout=60)
        await hang_up(phone)


async def closed_with(url: str, start: dict) -> int:
    async with websockets.connect(url + "/twilio/media") as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send(json.dumps(start))
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
        return ws.close_code


async def unservable_starts(server) -> None:
    start = json.loads(TwilioClient(server.ws_url).opening()[1])
    info = start["start"]
    no_sid = {k: v for k, v in info.items() if k != "streamSid"}
    for bad in (no_sid, {**info, "customParameters": {"profile": "nope"}}, {**info, "mediaFormat": {"encoding": "audio/x-l16"}}):
        assert await closed_with(server.ws_url, {**start, "start": bad}) == 1008


async def vanishing_caller(server, speech) -> None:
    phone = TwilioClient(server.ws_url, "freshcart")
    await phone.__aenter__()
    await phone.stream(speech("Where is my order?", 8000)[:4000])
    phone.ws.transport.abort()


async def good_dtmf_call(server) -> None:
    async with TwilioClient(server.ws_url, "skyways") as phone:
        await phone.wait_for(lambda got: got.audio, timeout=60)
        t = time.monotonic()
        await phone.send(phone.dtmf("2"))
        await phone.wait_for(lambda got: any(at > t for at, _ in got.echoed), timeout=90)
        await hang_up(phone)


@pytest.mark.asyncio
async def test_bad_input_never_disturbs_a_concurrent_call(server, speech, caplog):
    before = await call_ids(server)
    bad = [survives_garbage(server), unservable_starts(server), vanishing_caller(server, speech)]
    await asyncio.gather(good_dtmf_call(server), *bad)

    good = await ended_call(server, before, "twilio", "skyways")
    turns = await server.state.store.run(server.state.store.turns, good.id)
    assert good.end_reason == "caller_stop" and turns[-1].caller_text == "I want to change my flight." and turns[-1].agent_text
    assert (await ended_call(server, before, "twilio", "northbank")).end_reason == "caller_stop"
    assert (await ended_call(server, before, "twilio", "freshcart")).end_reason == "caller_disconnected"
    assert len(await call_ids(server) - before) == 3, "a start that cannot be served opens no call"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a bad frame made the server fail"

    async with httpx.AsyncClient(base_url=server.url) as http:
        metrics = await active_calls_back_to_zero(http)
    for code in ("not_started", "bad_json", "bad_message", "unknown_event", "bad_audio", "wrong_stream", "already_started"):
        assert f'talkline_errors_total{{code="{code}"}}' in metrics, code
    for code in ("unknown_profile", "unsupported_format"):
        assert f'talkline_errors_total{{code="{code}"}}' in metrics, code
