"""Transfer and hang-up on the phone carriers: a real HTTP server on loopback stands in for Twilio's, Telnyx's and Vonage's
REST APIs and records the exact requests; failures (missing credentials, HTTP errors, timeouts) are CallControlErrors;
end to end, a keypress mapped to transfer_to_human makes the server update the live Twilio call with <Dial> TwiML."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from conftest import ServerThread, free_port
from phone_calls import call_ids, ended_call
from servers import QUICK_FALLBACK, quick_profiles, serving

from bench.carrierclient import TelnyxClient, TwilioClient, VonageClient
from pipeline.io import CallControlError
from server.transports.carrier_control import TelnyxControl, TwilioControl, VonageControl
from server.transports.telnyx import TelnyxWire
from server.transports.twilio import TwilioWire
from server.transports.vonage import VonageWire
from server.transports.wire import Started

ACCOUNT, TOKEN = "AC" + "a1" * 16, "twilio-auth-token"
CALL_SID = "CA" + "b2" * 16
TELNYX_KEY, CONTROL_ID = "KEY0123telnyx", "v3:Qx9-callcontrol_id"
VONAGE_JWT, UUID = "eyJhbGciOiJSUzI1NiJ9.app.sig", "63f61863-4a51-4f6b-86e1-46edebcf9356"
DESK = "+15550100"
TWILIO_VARS = "TALKLINE_TWILIO_ACCOUNT_SID and TALKLINE_TWILIO_AUTH_TOKEN"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def form(self) -> dict[str, list[str]]:
        return parse_qs(self.body.decode())

    def json(self) -> object:
        return json.loads(self.body)


class CarrierAPI:
    """A REST API on loopback: records every request, answers `status` with `answer` after `delay` seconds."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.status, self.answer, self.delay = 200, {"sid": CALL_SID, "status": "in-progress"}, 0.0
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                api.seen.append(Seen(self.command, self.path, dict(self.headers), body))
                time.sleep(api.delay)
                data = json.dumps(api.answer).encode()
                with contextlib.suppress(OSError):  # a client that timed out has gone
                    self.send_response(api.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            do_POST = do_PUT = _any

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"

    def refuse(self, status: int, answer: dict) -> None:
        self.status, self.answer = status, answer

    async def wait_seen(self, n: int = 1, timeout: float = 60.0) -> list[Seen]:
        deadline = time.monotonic() + timeout
        while len(self.seen) < n:
            assert time.monotonic() < deadline, f"the carrier API got {len(self.seen)} requests, expected {n}"
            await asyncio.sleep(0.05)
        return self.seen


@pytest.fixture
def api() -> Iterator[CarrierAPI]:
    stand_in = CarrierAPI()
    thread = threading.Thread(target=stand_in.httpd.serve_forever, daemon=True)
    thread.start()
    yield stand_in
    stand_in.httpd.shutdown()
    stand_in.httpd.server_close()


def twilio(api: CarrierAPI, **changes) -> TwilioControl:
    options = {"call_id": CALL_SID, "account_sid": ACCOUNT, "auth_token": TOKEN, "base": api.url, "timeout": 5.0}
    return TwilioControl(**{**options, **changes})


def telnyx(api: CarrierAPI, **changes) -> TelnyxControl:
    return TelnyxControl(**{"call_id": CONTROL_ID, "token": TELNYX_KEY, "base": api.url, "timeout": 5.0, **changes})


def vonage(api: CarrierAPI, **changes) -> VonageControl:
    return VonageControl(**{"call_id": UUID, "token": VONAGE_JWT, "base": api.url + "/", "timeout": 5.0, **changes})


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# ---- the requests, exactly -----------------------------------------------------------------------
async def test_twilio_updates_the_live_call_with_dial_twiml_or_completed(api):
    await twilio(api).transfer(DESK)
    await twilio(api).transfer("sip:desk@pbx.example.com")
    await twilio(api).hang_up()
    path = f"/2010-04-01/Accounts/{ACCOUNT}/Calls/{CALL_SID}.json"
    assert [(s.method, s.path) for s in api.seen] == [("POST", path)] * 3
    assert all(s.headers["Authorization"] == basic(ACCOUNT, TOKEN) for s in api.seen)
    assert [s.form() for s in api.seen] == [
        {"Twiml": [f"<Response><Dial>{DESK}</Dial></Response>"]},
        {"Twiml": ["<Response><Dial><Sip>sip:desk@pbx.example.com</Sip></Dial></Response>"]},
        {"Status": ["completed"]},
    ]


async def test_telnyx_call_control_actions(api):
    await telnyx(api).transfer(DESK)
    await telnyx(api).transfer("sip:desk@pbx.example.com")
    await telnyx(api).hang_up()
    transfer, hangup = f"/v2/calls/{CONTROL_ID}/actions/transfer", f"/v2/calls/{CONTROL_ID}/actions/hangup"
    assert [(s.method, s.path) for s in api.seen] == [("POST", transfer), ("POST", transfer), ("POST", hangup)]
    assert all(s.headers["Authorization"] == f"Bearer {TELNYX_KEY}" for s in api.seen)
    assert all(s.headers["Content-Type"] == "application/json" for s in api.seen)
    assert [s.json() for s in api.seen] == [{"to": DESK}, {"to": "sip:desk@pbx.example.com"}, {}]


async def test_vonage_transfers_to_a_connect_ncco_or_hangs_up(api):
    await vonage(api).transfer("+1 (555) 010-0199")
    await vonage(api).transfer("sip:desk@pbx.example.com")
    await vonage(api).hang_up()
    assert [(s.method, s.path) for s in api.seen] == [("PUT", f"/v1/calls/{UUID}")] * 3  # the base's trailing / is dropped
    assert all(s.headers["Authorization"] == f"Bearer {VONAGE_JWT}" for s in api.seen)

    def to(endpoint: dict) -> dict:
        return {"action": "transfer", "destination": {"type": "ncco", "ncco": [{"action": "connect", "endpoint": [endpoint]}]}}

    assert [s.json() for s in api.seen] == [
        to({"type": "phone", "number": "15550100199"}),  # Vonage numbers are digits only
        to({"type": "sip", "uri": "sip:desk@pbx.example.com"}),
        {"action": "hangup"},
    ]


def test_the_streams_carry_the_call_ids():
    twilio_start = json.loads(TwilioClient("ws://x").opening()[1])
    twilio_start["start"]["callSid"] = CALL_SID
    assert TwilioWire().decode(json.dumps(twilio_start))[0].call_id == CALL_SID
    telnyx_start = json.loads(TelnyxClient("ws://x").opening()[1])
    assert TelnyxWire().decode(json.dumps(telnyx_start))[0].call_id == telnyx_start["start"]["call_control_id"]
    connected = {"event": "websocket:connected", "content-type": "audio/l16;rate=16000", "call_id": UUID}
    assert VonageWire().decode(json.dumps(connected)) == [Started(16000, call_id=UUID)]
    assert VonageWire().decode(VonageClient("ws://x").opening()[0])[0].call_id is None  # then ?call_id= in the URL


# ---- failures: always a CallControlError that says what to fix ----------------------------------
async def test_missing_credentials_or_call_id(api):
    cases = [
        (twilio(api, auth_token=None).transfer(DESK), "set TALKLINE_TWILIO_AUTH_TOKEN"),
        (twilio(api, account_sid=None).hang_up(), "set TALKLINE_TWILIO_ACCOUNT_SID"),
        (twilio(api, account_sid="", auth_token=None).hang_up(), f"set {TWILIO_VARS}"),
        (twilio(api, call_id=None).transfer(DESK), "no call id (the start message's callSid)"),
        (telnyx(api, token=None).hang_up(), "set TALKLINE_TELNYX_API_KEY"),
        (telnyx(api, call_id=None).transfer(DESK), "no call id (the start message's call_control_id)"),
        (vonage(api, token="").transfer(DESK), "set TALKLINE_VONAGE_JWT"),
        (vonage(api, call_id=None).hang_up(), "?call_id= in its uri"),
    ]
    for action, message in cases:
        with pytest.raises(CallControlError, match=re.escape(message)):
            await action
    assert api.seen == [], "nothing is sent without credentials and a call id"


async def test_refusals_name_the_status_and_what_to_check(api):
    api.refuse(500, {"code": 20500, "message": "Internal Server Error", "status": 500})
    refused = r"Twilio refused to transfer call CA\w+: HTTP 500 .*Internal Server Error \(Twilio error 20500\)"
    with pytest.raises(CallControlError, match=refused):
        await twilio(api).transfer(DESK)
    with pytest.raises(CallControlError, match="Telnyx refused to hang up call v3:.*: HTTP 500"):
        await telnyx(api).hang_up()
    with pytest.raises(CallControlError, match="Vonage refused to transfer call .*: HTTP 500"):
        await vonage(api).transfer(DESK)

    api.refuse(401, {"code": 20003, "message": "Authenticate", "status": 401})
    with pytest.raises(CallControlError, match=f"HTTP 401 .*Authenticate .*; check {TWILIO_VARS}"):
        await twilio(api).hang_up()
    with pytest.raises(CallControlError, match="HTTP 401 .*; check TALKLINE_VONAGE_JWT"):
        await vonage(api).hang_up()
    api.refuse(404, {"errors": [{"title": "Call has already ended"}]})
    with pytest.raises(CallControlError, match="HTTP 404 .*already ended.*; the call has already ended, or the call id is wrong"):
        await telnyx(api).transfer(DESK)
    assert len(api.seen) == 6


async def test_timeouts_and_unreachable_apis(api):
    api.delay = 1.0
    for control in (twilio(api, timeout=0.2), telnyx(api, timeout=0.2), vonage(api, timeout=0.2)):
        t0 = time.monotonic()
        with pytest.raises(CallControlError, match=rf"{control.carrier} did not answer the hang up request within 0.2 s"):
            await control.hang_up()
        assert time.monotonic() - t0 < 0.9
    closed = f"http://127.0.0.1:{free_port()}"
    for control in (twilio(api, base=closed), telnyx(api, base=closed), vonage(api, base=closed)):
        with pytest.raises(CallControlError, match=f"could not reach {control.carrier} at {closed} to transfer"):
            await control.transfer(DESK)


# ---- end to end: keypresses mapped to the tools, over the carriers' media streams ------------------
ACTIONS = {
    "tools": [{"name": "transfer_to_human", "target": DESK}, {"name": "end_call"}],
    "dtmf": {"0": {"tool": "transfer_to_human"}, "9": {"tool": "end_call"}},
}


@contextlib.contextmanager
def phone_server(stages, tmp_path, **settings) -> Iterator[ServerThread]:
    with serving(stages, tmp_path, profiles_dir=quick_profiles(tmp_path / "profiles", **ACTIONS), **settings) as server:
        yield server


async def test_twilio_keypress_transfers_the_live_call(stages, tmp_path, api):
    """0 = transfer_to_human: the server POSTs <Dial> TwiML for the stream's CallSid. Twilio stops the stream as
    soon as it runs the new TwiML, here before its API answers (the stand-in answers late): the call is 'transferred'."""
    api.delay = 1.0
    with phone_server(stages, tmp_path, twilio_account_sid=ACCOUNT, twilio_auth_token=TOKEN, twilio_api_base=api.url) as server:
        before = await call_ids(server)
        async with TwilioClient(server.ws_url, "quick") as phone:
            await phone.wait_played(timeout=60)
            await phone.send(phone.dtmf("0"))
            [seen] = await api.wait_seen(1, timeout=90)
            await phone.send(phone.stop())  # what Twilio does once the call runs the <Dial>
            await asyncio.wait_for(phone.closed.wait(), 15)
        assert (seen.method, seen.path) == ("POST", f"/2010-04-01/Accounts/{ACCOUNT}/Calls/{phone.call_sid}.json")
        assert seen.headers["Authorization"] == basic(ACCOUNT, TOKEN)
        assert seen.form() == {"Twiml": [f"<Response><Dial>{DESK}</Dial></Response>"]}
        assert phone.close_code == 1000
        assert (await ended_call(server, before, "twilio", "quick")).end_reason == "transferred"


async def test_vonage_keypress_hangs_up_and_the_server_closes_the_socket(stages, tmp_path, api):
    """9 = end_call, the call uuid from ?call_id= in the NCCO's websocket uri. The call ends itself once Vonage accepts
    the hang-up; the server closes the socket without waiting for Vonage to."""
    with phone_server(stages, tmp_path, vonage_jwt=VONAGE_JWT, vonage_api_base=api.url) as server:
        before = await call_ids(server)
        phone = VonageClient(server.ws_url, "quick")
        phone.url += f"&call_id={UUID}"
        async with phone:
            await phone.wait_played(timeout=60)
            await phone.send(phone.dtmf("9"))
            await asyncio.wait_for(phone.closed.wait(), 60)
        assert phone.close_code == 1000
        assert [(s.method, s.path, s.json()) for s in api.seen] == [("PUT", f"/v1/calls/{UUID}", {"action": "hangup"})]
        assert (await ended_call(server, before, "vonage", "quick")).end_reason == "agent_hangup"


async def test_telnyx_refused_transfer_leaves_the_call_running(stages, tmp_path, api):
    """Telnyx refuses (HTTP 500): the caller hears the fallback line and the call goes on until the carrier stops it."""
    api.refuse(500, {"errors": [{"title": "Internal error"}]})
    with phone_server(stages, tmp_path, telnyx_api_key=TELNYX_KEY, telnyx_api_base=api.url) as server:
        before = await call_ids(server)
        async with TelnyxClient(server.ws_url, "quick") as phone:
            await phone.wait_played(timeout=60)
            await phone.send(phone.dtmf("0"))
            [seen] = await api.wait_seen(1, timeout=90)
            t_refused = time.monotonic()
            await phone.wait_for(lambda got: got.samples_after(t_refused), timeout=60)  # the fallback line...
            await phone.wait_played(timeout=60)  # ...played to the end
            await phone.send(phone.stop())
            await asyncio.wait_for(phone.closed.wait(), 15)
        assert seen.method == "POST" and re.fullmatch(r"/v2/calls/v3:[0-9a-f]{32}/actions/transfer", seen.path)
        assert seen.headers["Authorization"] == f"Bearer {TELNYX_KEY}" and seen.json() == {"to": DESK}
        row = await ended_call(server, before, "telnyx", "quick")
        assert row.end_reason == "caller_stop"
        turns = await server.state.store.run(server.state.store.turns, row.id)
        assert turns[1].caller_text == "The caller pressed 0."
        assert (turns[-1].caller_text, turns[-1].agent_text) == (None, QUICK_FALLBACK)
