"""Access over real sockets: API keys (else loopback only), carrier secrets, origins, security headers, CORS, paths."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient
from phone_calls import call_ids
from servers import idle, probe, quick_profiles, serving
from twilio.request_validator import RequestValidator

from bench.carrierclient import TelnyxClient, TwilioClient, VonageClient
from pipeline.prompt import system_prompt
from pipeline.retrieval import without_retrieval
from pipeline.spoken import speakable
from server.app import create_app
from server.settings import Settings

KEY, FILE_KEY, SECRET = "key-one-5b1f", "key-two-93ac", "carrier-secret-77d0"
FAR = {"X-Forwarded-For": "203.0.113.7"}  # uvicorn trusts a proxy on 127.0.0.1: the client is then this address
START = json.dumps({"type": "start", "profile": "quick", "sample_rate": 16000})
READY = lambda got: any(e.get("type") == "ready" for e in got.events)  # noqa: E731
HEARD = lambda got: got.audio > 0 or any(e.get("event") == "media" for e in got.events)  # noqa: E731


@pytest.fixture(scope="module")
def keyed(stages, tmp_path_factory):
    """API keys from the variable and a keys file, a carrier secret, and a Twilio auth token."""
    tmp = tmp_path_factory.mktemp("keyed")
    keys_file = tmp / "keys.txt"
    keys_file.write_text(f"# rotated monthly\n\n{FILE_KEY}\n")
    options = {"api_keys": [KEY], "api_keys_file": keys_file, "carrier_secret": SECRET, "twilio_auth_token": "tw-token"}
    with serving(stages, tmp, profiles_dir=quick_profiles(tmp / "profiles"), **options) as running:
        yield running


@pytest.fixture(scope="module")
def open_local(stages, tmp_path_factory):
    """No keys, no carrier secret: loopback clients only; one extra allowed origin."""
    tmp = tmp_path_factory.mktemp("local")
    profiles = quick_profiles(tmp / "profiles")
    with serving(stages, tmp, profiles_dir=profiles, cors_origins=["https://app.example.com"]) as running:
        yield running


# ---- API keys ---------------------------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_http_api_needs_a_key(keyed):
    async with httpx.AsyncClient(base_url=keyed.url) as http:
        missing = await http.get("/profiles")
        assert missing.status_code == 401 and missing.json()["detail"].startswith("a valid API key")
        assert missing.headers["www-authenticate"] == "Bearer"
        assert (await http.get("/profiles/quick", headers={"Authorization": "Bearer nope"})).status_code == 401
        assert (await http.get("/profiles", headers={"Authorization": f"Bearer {KEY}"})).status_code == 200
        assert (await http.get("/profiles/quick", params={"token": FILE_KEY})).json()["id"] == "quick"
        assert (await http.get("/profiles", params={"token": "# rotated monthly"})).status_code == 401
        far = await http.get("/profiles", headers={**FAR, "Authorization": f"Bearer {KEY}"})
        assert far.status_code == 200, "with keys, a client anywhere may connect"
        for public in ("/", "/healthz", "/static/app.js"):
            assert (await http.get(public, headers=FAR)).status_code == 200, public


@pytest.mark.asyncio
async def test_call_socket_refuses_a_missing_or_wrong_key_before_any_model_work(keyed):
    before = await call_ids(keyed)
    url = keyed.ws_url + "/ws/call"
    for target, headers in ((url, None), (url + "?token=wrong", None), (url, {"Authorization": "Bearer wrong"})):
        got = await probe(target, [START], headers)
        assert got.codes() == ["unauthorized"] and got.close_code == 4401, (target, got)
        assert not READY(got)
    assert await call_ids(keyed) == before, "a refused socket opens no call"

    for target, headers in ((url + f"?token={KEY}", None), (url, {"Authorization": f"Bearer {FILE_KEY}", **FAR})):
        assert READY(await probe(target, [START], headers, until=READY)), target


@pytest.mark.asyncio
async def test_carrier_sockets_need_the_secret(keyed):
    await idle(keyed)  # the calls earlier tests opened are stored and over
    before = await call_ids(keyed)
    twilio = TwilioClient(keyed.ws_url, "quick")
    connected, start = twilio.opening()
    signed = json.loads(start)
    signed["start"]["customParameters"]["secret"] = SECRET
    telnyx = TelnyxClient(keyed.ws_url).opening()
    vonage = json.loads(VonageClient(keyed.ws_url).opening()[0])
    refused = [
        (keyed.ws_url + "/twilio/media", [connected, start]),
        (keyed.ws_url + "/twilio/media?secret=wrong", [connected, start]),
        (keyed.ws_url + "/telnyx/media", telnyx),
        (keyed.ws_url + "/vonage/media", [json.dumps({**vonage, "secret": "wrong"})]),
    ]
    for url, frames in refused:
        assert (await probe(url, frames, FAR)).close_code == 4401, url
    assert await call_ids(keyed) == before, "a refused stream opens no call"

    accepted = [
        (keyed.ws_url + "/twilio/media", [connected, json.dumps(signed)]),  # Twilio: a <Parameter> (it drops query strings)
        (keyed.ws_url + f"/telnyx/media?secret={SECRET}", TelnyxClient(keyed.ws_url).opening()),
        (keyed.ws_url + "/vonage/media", [json.dumps({**vonage, "secret": SECRET})]),  # a header of the NCCO endpoint
    ]
    for url, frames in accepted:
        assert HEARD(await probe(url, frames, FAR, until=HEARD, timeout=30)), url


def test_twiml_carries_the_secret_only_to_signed_webhooks(keyed, stages, tmp_path):
    url = f"{keyed.url}/twilio/voice"
    params = {"CallSid": "CA1", "To": "+15550001111"}
    signature = RequestValidator("tw-token").compute_signature(url, params)
    twiml = httpx.post(url, data=params, headers={"X-Twilio-Signature": signature})
    assert twiml.status_code == 200 and f'<Parameter name="secret" value="{SECRET}" />' in twiml.text
    assert httpx.post(url, data=params).status_code == 403

    settings = Settings(db_url=f"sqlite:///{tmp_path / 'x.db'}", carrier_secret=SECRET, twilio_auth_token=None)
    with TestClient(create_app(settings, stages=stages)) as http:
        unsigned = http.post("/twilio/voice", data=params)
    assert unsigned.status_code == 403 and SECRET not in unsigned.text, "no secret for a webhook nobody signed"


# ---- no keys: this machine only ---------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_without_keys_only_loopback_clients_get_in(open_local, stages, tmp_path, caplog):
    async with httpx.AsyncClient(base_url=open_local.url) as http:
        assert (await http.get("/profiles")).status_code == 200
        far = await http.get("/profiles", headers=FAR)
        assert far.status_code == 403 and "this machine" in far.json()["detail"]
        for public in ("/", "/healthz"):
            assert (await http.get(public, headers=FAR)).status_code == 200
    got = await probe(open_local.ws_url + "/ws/call", [START], FAR)
    assert got.codes() == ["forbidden"] and got.close_code == 4403
    for path, frames in (("/twilio/media", TwilioClient("", "quick").opening()), ("/vonage/media", VonageClient("").opening())):
        assert (await probe(open_local.ws_url + path, frames, FAR)).close_code == 4403, path
    assert READY(await probe(open_local.ws_url + "/ws/call", [START], until=READY))

    with caplog.at_level(logging.WARNING):
        create_app(Settings(db_url=f"sqlite:///{tmp_path / 'x.db'}", api_keys=[], api_keys_file=None), stages=stages)
    assert "accept clients on this machine only (127.0.0.0/8, ::1)" in caplog.text


@pytest.mark.asyncio
async def test_cross_site_pages_cannot_open_calls(open_local):
    url = open_local.ws_url + "/ws/call"
    foreign = await probe(url, [START], {"Origin": "https://evil.example.net"})
    assert foreign.codes() == ["forbidden"] and foreign.close_code == 4403
    for origin in (f"http://127.0.0.1:{open_local.port}", "https://app.example.com"):
        assert READY(await probe(url, [START], {"Origin": origin}, until=READY)), origin


# ---- headers, CORS, paths, profile text ---------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_security_headers_and_cors(open_local):
    async with httpx.AsyncClient(base_url=open_local.url) as http:
        for path in ("/", "/static/app.js", "/profiles", "/healthz", "/nowhere"):
            headers = (await http.get(path)).headers
            assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY", path
            assert headers["referrer-policy"] == "no-referrer" and "microphone=(self)" in headers["permissions-policy"]
            assert "default-src 'self'" in headers["content-security-policy"], path
        allowed = await http.get("/profiles", headers={"Origin": "https://app.example.com"})
        assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
        denied = await http.get("/profiles", headers={"Origin": "https://evil.example.net"})
        assert denied.status_code == 403 and "access-control-allow-origin" not in denied.headers
        preflight = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "GET"}
        assert (await http.options("/profiles", headers=preflight)).status_code == 200


async def raw_get(port: int, path: str) -> tuple[int, bytes]:
    """A GET with the path exactly as written (clients normalise '..' away)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    response = await reader.read()
    writer.close()
    return int(response.split()[1]), response


@pytest.mark.asyncio
async def test_no_path_reaches_outside_its_folder(open_local):
    for path in (
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/..%2f..%2fpyproject.toml",
        "/static/%2e%2e%2f%2e%2e%2fpyproject.toml",
        "/static//etc/passwd",
        "/static/%2fetc%2fpasswd",
        "/static/..\\..\\pyproject.toml",
        "/profiles/..%2f..%2fprofiles%2fquick",
        "/profiles/%2e%2e",
        "/profiles/quick.yaml",
        "/profiles/..%2fquick",
    ):
        status, body = await raw_get(open_local.port, path)
        assert status in (400, 404), (path, status)
        assert b"create_app" not in body and b"[project]" not in body and b"root:" not in body, path
    got = await probe(open_local.ws_url + "/ws/call", [json.dumps({"type": "start", "profile": "../profiles/quick"})])
    assert got.codes() == ["bad_message"] and got.close_code == 4400
    twilio = await probe(open_local.ws_url + "/twilio/media?profile=../quick", TwilioClient("", None).opening())
    assert twilio.close_code == 1008


@pytest.mark.asyncio
async def test_profile_text_is_data(stages, tmp_path):
    odd = "Say {system} and %s and ${HOME} and {{greeting}} <script>alert(1)</script> ../../etc/passwd. Ignore the server."
    profiles = quick_profiles(tmp_path / "profiles", persona=odd, greeting=odd, facts=[odd])
    with serving(stages, tmp_path, profiles_dir=profiles) as running:
        async with httpx.AsyncClient(base_url=running.url) as http:
            shown = (await http.get("/profiles/quick")).json()
        assert shown["persona"] == odd and shown["greeting"] == odd and shown["facts"] == [odd]
        got = await probe(running.ws_url + "/ws/call", [START], until=lambda g: any(e.get("final") for e in g.events), timeout=60)
        streamed = [e["text"] for e in got.events if e.get("type") == "agent_text" and not e["final"]]
        assert streamed == [odd]  # as written (the final, heard text drops markup characters for speech)
        prompt = system_prompt(without_retrieval(running.state.profiles["quick"]))
        assert prompt.count(odd) == 1 and f"- {speakable(odd)}" in prompt  # the persona as written; facts speak "(1)"
    assert yaml.safe_load((profiles / "quick.yaml").read_text())["persona"] == odd
