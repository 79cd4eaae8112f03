"""`talkline engine` as a real subprocess: the OpenAI-compatible API, and the sglang backend streaming from it, in a call."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time

import httpx
import pytest

from bench.wsclient import CallClient
from models.session import GenerationStats
from pipeline.llm import LLMError, OpenAICompatLLM
from server.app import create_app
from server.openai_api import MODEL_ID, StopMatcher
from server.settings import Settings
from tests.conftest import ServerThread, free_port

MESSAGES = [
    {"role": "system", "content": "You are Ava, a brief phone agent. A checked bag costs 30 dollars."},
    {"role": "user", "content": "How much is a checked bag?"},
]
MAX_TOKENS = 40
LONG = [{"role": "user", "content": "Count from 1 to 300, separated by commas."}]


@pytest.fixture(scope="module")
def reference(stages) -> tuple[str, GenerationStats]:
    """MESSAGES answered greedily by the in-process engine on a fresh session."""
    engine, stats = stages.llm.engine, GenerationStats()
    prompt = engine.encode_chat(MESSAGES)
    text = "".join(engine.generate_text(engine.new_session(), prompt, MAX_TOKENS, temperature=0.0, stats=stats))
    return text, stats


def chat(url: str, **body) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", json={"model": MODEL_ID, "messages": MESSAGES, **body}, timeout=60)


def sse_payloads(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


def test_models_and_health(engine_url):
    models = httpx.get(engine_url + "/v1/models").json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == [MODEL_ID]
    health = httpx.get(engine_url + "/health").json()
    assert health["status"] == "ok" and health["running"] == 0


def test_completion_matches_in_process_engine(engine_url, reference):
    text, stats = reference
    response = chat(engine_url, temperature=0, max_tokens=MAX_TOKENS)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-") and body["model"] == MODEL_ID
    assert "sglext" not in body
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": text}
    assert choice["finish_reason"] == ("length" if stats.new_tokens == MAX_TOKENS else "stop")
    usage = body["usage"]
    assert {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")} == {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.new_tokens,
        "total_tokens": stats.prompt_tokens + stats.new_tokens,
    }
    assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] < stats.prompt_tokens

    short = chat(engine_url, temperature=0, max_completion_tokens=3).json()
    assert short["choices"][0]["finish_reason"] == "length" and short["usage"]["completion_tokens"] == 3
    assert text.startswith(short["choices"][0]["message"]["content"])


def test_stream_chunks_and_spec_details(engine_url, reference):
    text, stats = reference
    response = chat(
        engine_url,
        temperature=0,
        max_tokens=MAX_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
        return_spec_tokens_details=True,
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    *content, final, usage = chunks
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in content) == text
    assert len(content) > 3 and all(c["choices"][0]["finish_reason"] is None for c in content)
    assert final["choices"][0]["finish_reason"] in ("stop", "length") and final["choices"][0]["delta"] == {}
    details = final["sglext"]["spec_tokens_details"]
    # `talkline engine` drafts with the committed drafter by default; `reference` decodes plainly, token for token alike
    assert 0 < details["spec_verify_ct"] < stats.target_forwards and details["spec_accept_length"] > 1
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == stats.new_tokens

    whole = chat(engine_url, temperature=0, max_tokens=MAX_TOKENS, return_spec_tokens_details=True).json()
    assert whole["choices"][0]["message"]["content"] == text
    assert whole["sglext"]["spec_tokens_details"]["spec_verify_ct"] == details["spec_verify_ct"]


def test_the_next_turn_of_a_conversation_reuses_its_cached_prefix(engine_url, stages):
    """The prefix cache (SGLang's radix cache, llama.cpp's prompt cache): a follow-up request on a conversation the
    engine has seen prefills only what is new, reports it as cached tokens, and answers as a fresh cache would."""
    system = {"role": "system", "content": "You are Noor, the phone agent of Harbour Kayaks. " + "Tours leave at 9 am. " * 12}
    first = [system, {"role": "user", "content": "When do the tours leave?"}]
    reply = chat(engine_url, messages=first, temperature=0, max_tokens=20).json()["choices"][0]["message"]["content"]
    follow = [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "And how long is a tour?"}]
    body = chat(engine_url, messages=follow, temperature=0, max_tokens=20).json()
    engine = stages.llm.engine
    prompt = engine.encode_chat(follow)
    cached = body["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert len(engine.encode_chat(first)) <= cached < len(prompt), "the first turn's tokens come from the cache"
    fresh = "".join(engine.generate_text(engine.new_session(), prompt, 20, temperature=0.0))
    assert body["choices"][0]["message"]["content"] == fresh
    assert httpx.get(engine_url + "/health").json()["cached_tokens"] > 0


def test_stop_string_cuts_the_answer(engine_url):
    count = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
    whole = chat(engine_url, messages=count, temperature=0, max_tokens=60).json()
    full = whole["choices"][0]["message"]["content"]
    assert len(full) > 8, full
    stop = full[len(full) // 2 - 1 : len(full) // 2 + 1]  # two characters mid-reply, whatever the model said
    body = chat(engine_url, messages=count, temperature=0, max_tokens=60, stop=[stop]).json()
    assert body["choices"][0]["message"]["content"] == full[: full.index(stop)]
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] < whole["usage"]["completion_tokens"]


def test_stop_matcher_holds_back_partial_matches():
    matcher = StopMatcher(["STOP"])
    assert [matcher.push(d) for d in ("abc S", "T", "x ST", "OP tail")] == ["abc ", "", "STx ", ""]
    assert matcher.hit and matcher.flush() == ""


@pytest.mark.parametrize(
    ("content", "code", "mentions"),
    [
        (b'{"messages": [', "invalid_json", "JSON"),
        (json.dumps({"messages": []}).encode(), "invalid_value", "messages"),
        (json.dumps({"messages": [{"role": "robot", "content": "hi"}]}).encode(), "invalid_value", "role"),
        (json.dumps({"messages": MESSAGES, "temperature": 5}).encode(), "invalid_value", "temperature"),
    ],
)
def test_bad_requests_get_openai_errors(engine_url, content, code, mentions):
    response = httpx.post(engine_url + "/v1/chat/completions", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error" and mentions in error["message"]


async def test_backend_streams_the_same_text(engine_url, reference):
    llm = OpenAICompatLLM(engine_url)
    try:
        await llm.warmup()
        assert llm.model == MODEL_ID
        deltas = [d async for d in llm.open_session().stream(MESSAGES, 0.0, MAX_TOKENS)]
    finally:
        await llm.aclose()
    assert len(deltas) > 3 and "".join(deltas) == reference[0]


async def test_embedded_backend_streams_the_same_text(stages, reference):
    deltas = [d async for d in stages.llm.open_session().stream(MESSAGES, 0.0, MAX_TOKENS)]
    assert "".join(deltas) == reference[0]


async def running(url: str) -> int:
    async with httpx.AsyncClient() as client:
        return (await client.get(url + "/health")).json()["running"]


async def wait_idle(url: str, within: float) -> None:
    t0 = time.monotonic()
    while await running(url):
        assert time.monotonic() - t0 < within, f"generation still running after {within} s"
        await asyncio.sleep(0.05)


async def test_closing_the_stream_stops_generation(engine_url, reference):
    llm = OpenAICompatLLM(engine_url, model=MODEL_ID)
    try:
        deltas = llm.open_session().stream(LONG, 0.0, 400)
        assert await anext(deltas)
        assert await running(engine_url) == 1
        t0 = time.monotonic()
        await deltas.aclose()
        assert time.monotonic() - t0 < 1.0
        await wait_idle(engine_url, within=1.5)
        again = [d async for d in llm.open_session().stream(MESSAGES, 0.0, MAX_TOKENS)]
        assert "".join(again) == reference[0]
    finally:
        await llm.aclose()


async def test_client_leaving_a_non_stream_request_stops_generation(engine_url):
    request = {"messages": LONG, "temperature": 0, "max_tokens": 400, "ignore_eos": True}  # seconds of decoding
    async with httpx.AsyncClient(timeout=0.25) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(engine_url + "/v1/chat/completions", json=request)
    await wait_idle(engine_url, within=1.5)


async def test_unreachable_server_is_an_llm_error():
    llm = OpenAICompatLLM(f"http://127.0.0.1:{free_port()}", timeout=5)
    try:
        await llm.warmup()  # logs, does not raise
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="cannot reach"):
            [d async for d in llm.open_session().stream(MESSAGES, 0.0, 8)]
        assert time.monotonic() - t0 < 2
    finally:
        await llm.aclose()


@contextlib.asynccontextmanager
async def raw_server(answer: bytes | None):
    """A TCP server that reads one request, then sends `answer` and closes, or (None) says nothing."""
    quiet = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        if answer is None:
            await quiet.wait()
        else:
            writer.write(answer)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        quiet.set()
        server.close()
        await server.wait_closed()


async def test_silent_server_times_out():
    async with raw_server(None) as url:
        llm = OpenAICompatLLM(url, model="m", timeout=1)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="sent nothing for 1 s"):
            [d async for d in llm.open_session().stream(MESSAGES, 0.0, 8)]
        assert 0.9 < time.monotonic() - t0 < 3
        await llm.aclose()


def http(status: str, content_type: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n"
    return head.encode() + body


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (http("503 Service Unavailable", "application/json", b'{"error": {"message": "overloaded"}}'), "HTTP 503: overloaded"),
        (http("200 OK", "text/event-stream", b"data: {not json\n\n"), "malformed stream chunk"),
        (http("200 OK", "text/event-stream", b'data: {"choices": [{"delta": {"content": "Hi"}}]}\n\n'), "before \\[DONE\\]"),
    ],
)
async def test_bad_answers_are_llm_errors(answer, match):
    async with raw_server(answer) as url:
        llm = OpenAICompatLLM(url, model="m", timeout=5)
        with pytest.raises(LLMError, match=match):
            [d async for d in llm.open_session().stream(MESSAGES, 0.0, 8)]
        await llm.aclose()


async def typed_call(stages, llm_url: str, tmp_path) -> tuple[CallClient, str]:
    """One call on a voice server whose LLM is the sglang backend at `llm_url`: greeting, then a typed question."""
    settings = Settings(llm="sglang", llm_url=llm_url, db_url=f"sqlite:///{tmp_path / 'talkline.db'}", warmup=False)
    voice = dataclasses.replace(stages, llm=OpenAICompatLLM(llm_url, timeout=settings.llm_timeout))
    with ServerThread(create_app(settings, stages=voice), free_port()) as server:
        async with CallClient(server.ws_url, "skyways") as client:
            await client.wait_for(lambda got: client.agent_finals(), timeout=60)
            n_events, n_audio = len(client.got.events), len(client.got.audio)
            await client.send_json({"type": "text", "text": "How much is a checked bag?"})
            await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=60)
            await client.wait_for(lambda got: len(got.audio) > n_audio, timeout=30)
            client.got.events = client.got.events[n_events:]
        return client, server.state.profiles["skyways"].fallback_line


async def test_voice_call_answers_through_sglang_backend(stages, engine_url, tmp_path):
    client, fallback = await typed_call(stages, engine_url, tmp_path)
    deltas = [e["text"] for e in client.got.of("agent_text") if not e["final"]]
    answer = client.agent_finals()[-1]
    assert len(deltas) > 1 and answer and answer != fallback
    assert client.got.of("metrics")[0]["llm_ttft_ms"] > 0


async def test_voice_call_speaks_fallback_when_llm_unreachable(stages, tmp_path):
    client, fallback = await typed_call(stages, f"http://127.0.0.1:{free_port()}", tmp_path)
    assert client.agent_finals()[-1] == fallback
