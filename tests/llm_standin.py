"""A stand-in for a third-party OpenAI-compatible LLM server (SGLang) on loopback: switchable between healthy and broken
modes, answering scripted replies (text, or tool calls streamed as SGLang streams them) and recording each request; a
one-token warm-up request gets one token and is recorded apart."""

from __future__ import annotations

import asyncio
import json
import uuid

from conftest import free_port

REPLY = ["Our bags ", "cost thirty dollars. ", "Anything ", "else?"]
# healthy: the REPLY deltas, then [DONE]; down: nothing listens; slow: the request is read, never answered;
# drop: two deltas, then the connection is cut; drop_early: headers, then cut; hang: one delta, then silence.
MODES = ("healthy", "down", "slow", "drop", "drop_early", "hang")
Delta = str | dict  # a content delta, or a whole `delta` object (tool_calls)


def sglang_call(name: str, arguments: dict, speech: str = "") -> list[Delta]:
    """A reply as SGLang's tool parser streams it: the speech as content, then the call's id and name with empty
    arguments, then the arguments in pieces, each with a fresh id and a null name (as older SGLang versions send)."""

    def fragment(name: str | None, arguments: str) -> dict:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        return {"role": None, "content": None, "tool_calls": [call]}

    text = json.dumps(arguments)
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    return ([speech] if speech else []) + [fragment(name, "")] + [fragment(None, piece) for piece in pieces]


async def read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes] | None:
    """One HTTP/1.1 request: its request line, headers (lower-case names) and body; None once the client closed."""
    request = await reader.readline()
    if not request:
        return None
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return request.decode().strip(), headers, await reader.readexactly(int(headers.get("content-length", 0)))


class StandInLLM:
    """GET /v1/models and streaming POST /v1/chat/completions, answered as `mode` says (MODES)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.mode = "healthy"
        self.server: asyncio.Server | None = None
        self.handlers: set[asyncio.Task] = set()  # one per open connection
        self.answering = asyncio.Event()  # set when a chat completion request arrives
        self.script: list[list[Delta]] = []  # replies for the next chat requests, in order; then REPLY
        self.requests: list[dict] = []  # the JSON bodies of the chat requests
        self.warmups: list[dict] = []  # the one-token requests that warm the prefix cache while the caller speaks

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> StandInLLM:
        await self.switch("healthy")
        return self

    async def __aexit__(self, *exc) -> None:
        await self._close()

    async def switch(self, mode: str) -> None:
        assert mode in MODES, mode
        self.mode = mode
        self.answering.clear()
        if mode == "down":
            await self._close()
        elif self.server is None:
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)

    async def _close(self) -> None:
        """Stop listening and cut every open connection (a pooled keep-alive one would otherwise still answer)."""
        if self.server is not None:
            self.server.close()
            for handler in list(self.handlers):
                handler.cancel()
            await asyncio.gather(*self.handlers, return_exceptions=True)
            await self.server.wait_closed()
            self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.handlers.add(asyncio.current_task())
        try:
            while received := await read_request(reader):
                request, _, body = received
                if request.startswith("GET /v1/models"):
                    body = json.dumps({"object": "list", "data": [{"id": "standin", "object": "model"}]}).encode()
                    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                    writer.write(head + body)
                    await writer.drain()
                elif (request_body := json.loads(body)).get("max_tokens") == 1:  # a prefix warm-up: one token, as SGLang
                    self.warmups.append(request_body)
                    await self._answer(writer, REPLY[:1])
                else:
                    self.requests.append(request_body)
                    self.answering.set()
                    await self._answer(writer, self.script.pop(0) if self.script else REPLY)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.handlers.discard(asyncio.current_task())
            writer.transport.abort()

    async def _answer(self, writer: asyncio.StreamWriter, reply: list[Delta]) -> None:
        if self.mode == "slow":
            await asyncio.sleep(3600)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        cut_after = {"drop": 2, "drop_early": 0, "hang": 1}.get(self.mode)
        for n, delta in enumerate(reply):
            if n == cut_after:
                if self.mode == "hang":
                    await asyncio.sleep(3600)
                writer.transport.abort()
                raise ConnectionError("cut by the stand-in")
            delta = {"content": delta} if isinstance(delta, str) else delta
            chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
            self._chunk(writer, f"data: {json.dumps(chunk)}\n\n".encode())
            await writer.drain()
            await asyncio.sleep(0.05)
        self._chunk(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    @staticmethod
    def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
