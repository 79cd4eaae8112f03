"""Agent actions over the browser path: the sglang backend against a loopback stand-in that streams scripted replies
and tool calls as SGLang does, a real HTTP tool endpoint on loopback that records the exact requests (or never
answers), malformed calls that are never run, keypresses that run tools, transfers and hang-ups; and the same tool
calls through `talkline engine`'s OpenAI-compatible API."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from conftest import ServerThread, free_port
from llm_standin import StandInLLM, read_request, sglang_call
from servers import QUICK_FALLBACK, idle, quick_profiles, serving
from test_faults import RecordingIO

from bench.wsclient import CallClient
from models.session import GenerationStats, Session
from pipeline.actions import post_json
from pipeline.call import Call
from pipeline.io import CallControlError, DtmfIn, HangUp, TextIn
from pipeline.llm import OpenAICompatLLM
from pipeline.metrics import Metrics
from pipeline.profile import load_profiles
from pipeline.store import Store
from pipeline.tools import HttpTool, ToolCall, split_reply
from server.openai_api import create_engine_app

DESK = "+18005550199"  # Skyways' escalation target, which the quick profile keeps
FILLER = "One moment while I check that."
ANSWER = {"found": True, "reference": "K7Q2ZP", "status": "confirmed for May 3"}
LOOKUP_CALL = ToolCall("lookup_booking", {"code": "K7Q2ZP"})


@dataclass
class Seen:
    request: str
    headers: dict[str, str]
    body: bytes


ROUTES = {  # path -> status, body
    "/lookup": (200, json.dumps(ANSWER)),
    "/broken": (503, json.dumps({"detail": "down for maintenance"})),
    "/text": (200, "Booking confirmed."),
    "/huge": (200, json.dumps(["x" * 100] * 200)),
}


class ToolEndpoint:
    """A tool's HTTP endpoint on loopback that records every request and answers as ROUTES says; /silent never answers."""

    async def __aenter__(self) -> ToolEndpoint:
        self.seen: list[Seen] = []
        self.closing = asyncio.Event()
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc) -> None:
        self.closing.set()
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if received := await read_request(reader):
            self.seen.append(Seen(*received))
            path = received[0].split()[1]
            if path == "/silent":
                await self.closing.wait()
            else:
                status, body = ROUTES[path]
                head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                writer.write((head + body).encode())
                await writer.drain()
        writer.close()


def tools(url: str) -> list[dict]:
    lookup = {
        "name": "lookup_booking",
        "description": "Look up a booking by its code.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        "url": url,
        "timeout_s": 1,
        "filler": FILLER,
    }
    return [{"name": "transfer_to_human"}, {"name": "end_call"}, lookup]


DTMF = {
    "0": {"tool": "transfer_to_human"},
    "1": "I want to check my booking.",
    "2": {"tool": "lookup_booking", "arguments": {"code": "K7Q2ZP"}},
}


@contextlib.contextmanager
def tool_server(stages, tmp_path, llm: StandInLLM, tool_url: str) -> Iterator[ServerThread]:
    """A voice server whose LLM is the sglang backend on the stand-in, with the quick profile's tools and keypad."""
    backend = OpenAICompatLLM(llm.url, timeout=5.0)
    profiles = quick_profiles(tmp_path / "profiles", tools=tools(tool_url), dtmf=DTMF)
    with serving(dataclasses.replace(stages, llm=backend), tmp_path, profiles_dir=profiles) as server:
        yield server


async def turn(client: CallClient, message: dict) -> str:
    """Send a text or keypress frame; the agent's next final text."""
    n = len(client.agent_finals())
    await client.send_json(message)
    await client.wait_for(lambda got: len(client.agent_finals()) > n, timeout=60)
    return client.agent_finals()[-1]


def said(client: CallClient) -> str:
    """Everything the client was shown of the agent's words, deltas and finals."""
    return " ".join(e["text"] for e in client.got.of("agent_text"))


def tool_count(server: ServerThread, tool: str, outcome: str) -> float:
    return server.state.metrics.registry.get_sample_value("talkline_tool_calls_total", {"tool": tool, "outcome": outcome}) or 0


async def stored_turns(server: ServerThread, client: CallClient) -> list:
    call_id = client.got.of("ready")[0]["call_id"]
    return await server.state.store.run(server.state.store.turns, call_id)


def without_system(request: dict) -> list[dict]:
    """The conversation a request carries: no system prompt, no retrieved-facts block."""
    return [m for m in request["messages"] if m["role"] != "system"]


@pytest.mark.asyncio
async def test_caller_gives_a_booking_code(stages, tmp_path):
    async with StandInLLM() as llm, ToolEndpoint() as endpoint:
        lookup = sglang_call(LOOKUP_CALL.name, LOOKUP_CALL.arguments)
        llm.script = [["What's your booking code?"], lookup, ["Your booking is ", "confirmed for May 3."]]
        with tool_server(stages, tmp_path, llm, endpoint.url + "/lookup") as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                assert await turn(client, {"type": "dtmf", "digit": "1"}) == "What's your booking code?"
                answer = await turn(client, {"type": "text", "text": "It's K7Q2ZP."})
                await turn(client, {"type": "text", "text": "Thanks."})
                turns = await stored_turns(server, client)
                assert not client.got.of("error") and client.close_code is None
            lookups = tool_count(server, "lookup_booking", "ok")

    assert answer == f"{FILLER} Your booking is confirmed for May 3."
    assert "tool_call" not in said(client) and "K7Q2ZP" not in said(client), "no markup reaches the caller"
    [seen] = endpoint.seen
    assert seen.request == "POST /lookup HTTP/1.1" and seen.headers["content-type"] == "application/json"
    assert json.loads(seen.body) == {"code": "K7Q2ZP"}

    first, ask_code, after_tool, next_turn = llm.requests
    assert {t["function"]["name"] for t in first["tools"]} == {"transfer_to_human", "end_call", "lookup_booking"}
    assert first["messages"][-1] == {"role": "user", "content": "I want to check my booking."}, "a plain keypress is caller text"
    assert ask_code["messages"][-1] == {"role": "user", "content": "It's K7Q2ZP."}
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup_booking", "arguments": '{"code": "K7Q2ZP"}'}}
    exchange = [
        {"role": "user", "content": "It's K7Q2ZP."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(ANSWER)},
    ]
    assert after_tool["messages"][-3:] == exchange
    assert without_system(next_turn)[-5:] == [
        *exchange,
        {"role": "assistant", "content": "Your booking is confirmed for May 3."},
        {"role": "user", "content": "Thanks."},
    ], "the history keeps the tool exchange, and the answer as heard (without the filler)"

    assert turns[2].agent_text == answer
    assert json.loads(turns[2].tool_calls) == [{**dataclasses.asdict(LOOKUP_CALL), "outcome": "ok", "result": ANSWER}]
    assert turns[1].tool_calls is None and lookups == 1


@pytest.mark.asyncio
async def test_a_keyed_lookup_whose_endpoint_never_answers(stages, tmp_path):
    async with StandInLLM() as llm, ToolEndpoint() as endpoint:
        llm.script = [["Sorry, I can't look that up right now."]]
        with tool_server(stages, tmp_path, llm, endpoint.url + "/silent") as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                t0 = time.monotonic()
                answer = await turn(client, {"type": "dtmf", "digit": "2"})
                took = time.monotonic() - t0
                after = await turn(client, {"type": "text", "text": "Okay, anything else?"})
                turns = await stored_turns(server, client)
                assert not client.got.of("error") and client.close_code is None
            timeouts = tool_count(server, "lookup_booking", "timeout")

    assert answer == f"{FILLER} Sorry, I can't look that up right now."
    assert after == "Our bags cost thirty dollars. Anything else?", "the call goes on"
    assert 1.0 <= took < 15, "the tool's 1 s timeout, then the spoken answer"
    [seen] = endpoint.seen
    assert seen.request == "POST /silent HTTP/1.1" and json.loads(seen.body) == {"code": "K7Q2ZP"}, "the keypress's arguments"
    error = {"error": "the lookup_booking service did not answer within 1 s"}
    assert without_system(llm.requests[0])[-3:] == [
        {"role": "user", "content": "The caller pressed 2."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup_booking", "arguments": '{"code": "K7Q2ZP"}'}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(error)},
    ], "the keypress ran the tool without asking the model; the model only phrases the answer"
    assert json.loads(turns[1].tool_calls) == [{**dataclasses.asdict(LOOKUP_CALL), "outcome": "timeout", "result": error}]
    assert timeouts == 1


@pytest.mark.asyncio
async def test_at_most_two_tool_calls_a_turn(stages, tmp_path):
    async with StandInLLM() as llm, ToolEndpoint() as endpoint:
        again = sglang_call(LOOKUP_CALL.name, LOOKUP_CALL.arguments, speech="Let me look again.")
        llm.script = [sglang_call(LOOKUP_CALL.name, LOOKUP_CALL.arguments), again, again]
        with tool_server(stages, tmp_path, llm, endpoint.url + "/lookup") as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                answer = await turn(client, {"type": "text", "text": "It's K7Q2ZP."})
            over = tool_count(server, "lookup_booking", "over_limit")
    assert answer == f"{FILLER} Let me look again. {FILLER} Let me look again."
    assert len(endpoint.seen) == 2 and len(llm.requests) == 3 and over == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("path", "outcome", "error"),
    [
        ("/broken", "error", "the lookup_booking service answered HTTP 503"),
        ("/text", "error", "the lookup_booking service did not answer JSON"),
        ("/huge", "error", "the lookup_booking service answered more than 16384 bytes"),
        (None, "error", "the lookup_booking service could not be reached"),
    ],
)
async def test_tool_failures_are_answers_for_the_model(path, outcome, error):
    async with ToolEndpoint() as endpoint:
        url = endpoint.url + path if path else f"http://127.0.0.1:{free_port()}/lookup"
        answer = await post_json(HttpTool(name="lookup_booking", description="Look up.", url=url, timeout_s=1), {"code": "K7Q2ZP"})
    assert (answer.outcome, answer.data) == (outcome, {"error": error})
    assert [json.loads(s.body) for s in endpoint.seen] == ([{"code": "K7Q2ZP"}] if path else [])


MALFORMED = [
    ["Sure. <tool", '_call>{"name": "lookup_booking", ', '"arguments": {"code": 5}}</tool_call>'],  # off the schema
    sglang_call("delete_account", {}, speech="Okay."),  # not a declared tool
    ['Okay then. <tool_call>{"name": "end_call"'],  # never closed
    ["Let me see.", {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "lookup_booking", "arguments": '{"code": '}}]}],
    ['<tool_call>{"name": "check", "arguments": {"submit": {"submit": {'],  # no words before it: the caller hears the fallback
]


@pytest.mark.asyncio
async def test_malformed_tool_calls_are_never_run(stages, tmp_path):
    async with StandInLLM() as llm, ToolEndpoint() as endpoint:
        llm.script = [*MALFORMED]
        with tool_server(stages, tmp_path, llm, endpoint.url + "/lookup") as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                finals = [await turn(client, {"type": "text", "text": f"Question {n}?"}) for n in range(len(MALFORMED) + 1)]
                turns = await stored_turns(server, client)
                assert client.close_code is None and not client.got.of("transfer") and not client.got.of("end")
            rejected = tool_count(server, "unknown", "malformed")

    assert finals == ["Sure.", "Okay.", "Okay then.", "Let me see.", QUICK_FALLBACK, "Our bags cost thirty dollars. Anything else?"]
    assert not endpoint.seen and rejected == len(MALFORMED)
    assert "tool_call" not in said(client) and "<tool" not in said(client)
    assert not any("tool_calls" in m or m["role"] == "tool" for m in llm.requests[-1]["messages"]), "history holds no call"
    assert [m["content"] for m in without_system(llm.requests[-1]) if m["role"] == "assistant"][-5:] == finals[:5]
    assert all(len(json.loads(t.tool_calls)) == 1 and "error" in json.loads(t.tool_calls)[0] for t in turns[1:6])


ENDINGS = {
    # what the caller does, the reply the model streams, what the agent says last, the end reason
    "asks_for_human": (
        {"type": "text", "text": "Can I talk to a person?"},
        [sglang_call("transfer_to_human", {}, speech="Sure, I'll connect you with a specialist now.")],
        "Sure, I'll connect you with a specialist now.",
        "transferred",
    ),
    "presses_0": ({"type": "dtmf", "digit": "0"}, [], "", "transferred"),
    "says_goodbye": (
        {"type": "text", "text": "That's all, thanks. Bye!"},
        [["Thanks for calling. ", 'Goodbye! <tool_call>{"name": "end_call", "arguments": {}}</tool_call>']],
        "Thanks for calling. Goodbye!",
        "agent_hangup",
    ),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("case", list(ENDINGS))
async def test_the_agent_ends_the_call(stages, tmp_path, case):
    message, script, last_words, reason = ENDINGS[case]
    async with StandInLLM() as llm, ToolEndpoint() as endpoint:
        llm.script = list(script)
        with tool_server(stages, tmp_path, llm, endpoint.url + "/lookup") as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                await client.send_json(message)
                await client.wait_for(lambda got: client.closed.is_set(), timeout=60, feed_silence=False)
            await idle(server)
            turns = await stored_turns(server, client)
            row = await server.state.store.run(server.state.store.call, client.got.of("ready")[0]["call_id"])
            done = tool_count(server, "transfer_to_human" if reason == "transferred" else "end_call", "ok")

    kinds = [e["type"] for _, e in client.got.events]
    ending = [e for _, e in client.got.events if e["type"] in ("transfer", "end")]
    expected = [{"type": "end", "reason": reason}]
    assert ending == ([{"type": "transfer", "target": DESK}] if reason == "transferred" else []) + expected
    assert kinds.index(ending[0]["type"]) > max(i for i, k in enumerate(kinds) if k == "agent_text"), "after the last words"
    assert client.agent_finals()[-1] == last_words and client.close_code == 1000
    if last_words:
        last_audio = client.got.audio[-1][0]
        assert last_audio < next(t for t, e in client.got.events if e["type"] in ("transfer", "end")), "the words played first"
    assert row.end_reason == reason and done == 1
    assert json.loads(turns[-1].tool_calls) == [{"name": "transfer_to_human" if reason == "transferred" else "end_call", "arguments": {}}]
    assert len(llm.requests) == len(script), "a keypress mapped to a tool does not ask the model"


class RefusingIO(RecordingIO):
    """A transport whose carrier refuses transfers (as one without credentials would)."""

    async def transfer(self, target: str) -> None:
        raise CallControlError(f"cannot transfer to {target}: no carrier credentials")


@pytest.mark.asyncio
async def test_a_refused_transfer_speaks_the_fallback_and_the_call_goes_on(stages, tmp_path):
    async with StandInLLM() as llm, ToolEndpoint() as endpoint:
        profile = load_profiles(quick_profiles(tmp_path / "profiles", tools=tools(endpoint.url), dtmf=DTMF))["quick"]
        backend = OpenAICompatLLM(llm.url, timeout=5.0)
        io, metrics = RefusingIO(), Metrics()
        call = Call(profile, dataclasses.replace(stages, llm=backend), io, Store(f"sqlite:///{tmp_path / 't.db'}"), metrics, 16000, "test")
        runner = asyncio.create_task(call.run())
        await io.wait(lambda io: io.finals())
        call.push(DtmfIn("0", time.monotonic()))
        await io.wait(lambda io: profile.fallback_line in io.finals())
        call.push(TextIn("Hello?", time.monotonic()))
        await io.wait(lambda io: len(io.finals()) >= 4)
        call.push(HangUp("caller_stop"))
        assert await runner == "caller_stop"
        await backend.aclose()
    assert io.finals() == ["Hi.", "", profile.fallback_line, "Our bags cost thirty dollars. Anything else?"]
    assert metrics.registry.get_sample_value("talkline_tool_calls_total", {"tool": "transfer_to_human", "outcome": "error"}) == 1


@dataclass
class FakeEngine:
    """Just enough of models.engine.Engine for the OpenAI API: every generation writes `reply`; prompts are kept."""

    reply: list[str]
    prompts: list[list[dict]] = dataclasses.field(default_factory=list)

    class model:  # noqa: N801 - the attribute path the API reads
        class config:  # noqa: N801
            max_position_embeddings = 2048

    def encode_chat(self, messages: list[dict]) -> list[int]:
        self.prompts.append(messages)
        return [1, 2, 3]

    def new_session(self) -> Session:
        return Session(cache=None)  # generate_text never touches it

    def generate_text(self, session, prompt: list[int], max_new: int, stats: GenerationStats, **kwargs) -> Iterator[str]:
        for piece in self.reply:
            stats.new_tokens += 1
            yield piece


HISTORY = [
    {"role": "system", "content": "Tools: ..."},
    {"role": "user", "content": "My code is K7Q2ZP."},
    {"role": "assistant", "content": LOOKUP_CALL.markup()},
    {"role": "tool", "content": json.dumps(ANSWER)},
    {"role": "assistant", "content": "It is confirmed."},
    {"role": "user", "content": "Please put me through to someone."},
]


@pytest.mark.asyncio
async def test_engine_api_returns_tool_calls_the_sglang_backend_reads(tmp_path):
    profile = load_profiles(quick_profiles(tmp_path / "profiles", tools=tools("http://127.0.0.1:9/lookup")))["quick"]
    engine = FakeEngine(["Sure, ", "one moment. <tool", '_call>{"name": "transfer_to_human", ', '"arguments": {}}</tool_call>'])
    with ServerThread(create_engine_app(engine), free_port()) as api:
        backend = OpenAICompatLLM(api.url, model="m")
        deltas = [d async for d in backend.open_session().stream(HISTORY, 0.0, 32, profile.tools)]
        plain = [d async for d in backend.open_session().stream(HISTORY, 0.0, 32)]
        await backend.aclose()
        async with httpx.AsyncClient(base_url=api.url) as http:
            body = {"messages": HISTORY[:2], "tools": [{"type": "function", "function": {"name": "transfer_to_human"}}]}
            whole = (await http.post("/v1/chat/completions", json=body)).json()["choices"][0]

    assert deltas[0] == "Sure, " and "tool_call" not in "".join(deltas[:-1])
    assert split_reply("".join(deltas), profile.tools).call == ToolCall("transfer_to_human", {})
    assert "".join(plain) == "".join(engine.reply), "without tools in the request the markup stays text"
    assert engine.prompts[0] == HISTORY, "the assistant's tool_calls and the tool message reach the model as our text"
    assert whole["finish_reason"] == "tool_calls" and whole["message"]["content"] == "Sure, one moment. "
    assert whole["message"]["tool_calls"][0]["function"] == {"name": "transfer_to_human", "arguments": "{}"}
