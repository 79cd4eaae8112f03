"""`talkline engine`: the embedded engine as an OpenAI-compatible chat API, with SGLang's `sglext` speculative stats."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from models.engine import Engine
from models.prefix_cache import PrefixCache
from models.session import GenerationStats
from pipeline.llm import iterate_in_thread
from pipeline.openai_format import call_deltas, call_markup, openai_call, split_call
from pipeline.tools import SpeechFilter

log = logging.getLogger(__name__)

MODEL_ID = "talkline-smollm2-135m"


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class FunctionCall(BaseModel):
    name: str
    arguments: str = "{}"  # a JSON object, as text


class ToolCallPart(BaseModel):
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    tool_calls: list[ToolCallPart] | None = None  # an assistant's calls; rendered as <tool_call> text for the model

    def as_dict(self) -> dict:
        text = self.content if isinstance(self.content, str | None) else "".join(p.text for p in self.content)
        calls = [call_markup(c.function.name, c.function.arguments) for c in self.tool_calls or []]
        return {"role": self.role, "content": " ".join([text, *calls] if text else calls)}


class FunctionSpec(BaseModel):
    name: str
    description: str = ""
    parameters: dict = {}


class ToolSpec(BaseModel):
    type: Literal["function"] = "function"
    function: FunctionSpec


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The fields of OpenAI's chat completion request that this engine honours; others are ignored."""

    model: str = MODEL_ID
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    seed: int | None = None
    stop: str | list[str] | None = None
    ignore_eos: bool = False  # SGLang's and vLLM's sampling parameter: decode to max_tokens (load tests, benchmarks)
    return_spec_tokens_details: bool = False
    tools: list[ToolSpec] | None = None  # the model reads tools from the system prompt; these name the calls returned

    @property
    def tool_names(self) -> set[str]:
        return {t.function.name for t in self.tools or []}

    @property
    def stops(self) -> list[str]:
        return [s for s in ([self.stop] if isinstance(self.stop, str) else self.stop or []) if s]


class StopMatcher:
    """Cuts streamed text at the first stop string, holding back a tail that may be the start of one."""

    def __init__(self, stops: list[str]) -> None:
        self.stops = stops
        self.pending = ""
        self.hit = False

    def push(self, delta: str) -> str:
        text, self.pending = self.pending + delta, ""
        found = [i for s in self.stops if (i := text.find(s)) >= 0]
        if found:
            self.hit = True
            return text[: min(found)]
        keep = max((k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        self.pending = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        rest, self.pending = self.pending, ""
        return rest


@dataclass
class EngineAPI:
    """What the routes share: the engine, its worker pool and the generations in flight."""

    engine: Engine
    drafter_path: Path | None
    executor: ThreadPoolExecutor
    sessions: PrefixCache
    running: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def context_len(self) -> int:
        return int(self.engine.model.config.max_position_embeddings)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        with self.lock:
            self.running += 1
        try:
            yield
        finally:
            with self.lock:
                self.running -= 1


class Generation:
    """One request decoded on a fresh engine session in the worker pool: visible deltas, then finish reason and stats."""

    def __init__(self, api: EngineAPI, req: ChatRequest, prompt: list[int]) -> None:
        self.api, self.req, self.prompt = api, req, prompt
        requested = req.max_completion_tokens or req.max_tokens
        room = api.context_len - len(prompt)
        self.max_new = min(requested, room) if requested else room
        self.temperature = 1.0 if req.temperature is None else req.temperature
        self.stop = threading.Event()
        self.stats = GenerationStats()
        self.finish_reason = "stop"

    def _produce(self) -> Iterator[str]:
        engine = self.api.engine
        with self.api.busy():
            session = self.api.sessions.take(self.prompt)
            yield from engine.generate_text(
                session,
                self.prompt,
                self.max_new,
                temperature=self.temperature,
                cancelled=self.stop.is_set,
                stats=self.stats,
                seed=self.req.seed,
                ignore_eos=self.req.ignore_eos,
            )
            self.api.sessions.give_back(session)  # not after a failure: its cache may be half-written

    async def deltas(self) -> AsyncIterator[str]:
        """Text deltas up to a stop string; after one, decoding stops and the rest is drained unseen."""
        matcher = StopMatcher(self.req.stops)
        async with contextlib.aclosing(iterate_in_thread(self.api.executor, self._produce, self.stop)) as items:
            async for delta in items:
                if matcher.hit:
                    continue
                if text := matcher.push(delta):
                    yield text
                if matcher.hit:
                    self.stop.set()
        if rest := matcher.flush():
            yield rest
        self.finish_reason = "length" if not matcher.hit and self.stats.new_tokens >= self.max_new else "stop"

    def usage(self) -> dict:
        prompt, completion = self.stats.prompt_tokens, self.stats.new_tokens
        cached = {"cached_tokens": self.stats.reused_tokens}
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": cached,
        }

    def sglext(self) -> dict:
        """SGLang's speculative decoding details, under its field names."""
        details = {"spec_accept_length": self.stats.mean_accept_len, "spec_verify_ct": self.stats.target_forwards}
        return {"spec_tokens_details": details}


def error_response(status: int, message: str, kind: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


def validation_error(exc: RequestValidationError) -> JSONResponse:
    """FastAPI's validation errors as one OpenAI-style 400."""
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, "the request body is not valid JSON", "invalid_request_error", "invalid_json")
    message = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}" for e in errors)
    return error_response(400, message, "invalid_request_error", "invalid_value")


async def wait_disconnect(request: Request, stop: threading.Event) -> None:
    """Set `stop` when the client goes away."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    stop.set()


def sse(obj: dict | str) -> str:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n"


async def complete(request: Request, gen: Generation, head: dict) -> JSONResponse:
    """A whole `chat.completion`; a disconnect stops decoding."""
    watcher = asyncio.create_task(wait_disconnect(request, gen.stop))
    try:
        content = "".join([d async for d in gen.deltas()])
    except Exception as e:  # noqa: BLE001 - reported to the client
        log.exception("generation failed")
        return error_response(500, f"generation failed: {e}", "server_error", "generation_failed")
    finally:
        watcher.cancel()
    message, finish_reason = {"role": "assistant", "content": content}, gen.finish_reason
    speech, call = split_call(content, gen.req.tool_names)
    if call is not None:
        message = {"role": "assistant", "content": speech or None, "tool_calls": [openai_call(call, 1)]}
        finish_reason = "tool_calls"
    body = {
        **head,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": gen.usage(),
    }
    if gen.req.return_spec_tokens_details:
        body["sglext"] = gen.sglext()
    return JSONResponse(body)


async def stream_chunks(gen: Generation, head: dict) -> AsyncIterator[str]:
    """SSE `chat.completion.chunk`s: role, content deltas (a requested tool's call as `tool_calls` deltas, as SGLang's
    tool parser streams it), finish reason (+ sglext), usage if asked, [DONE]."""

    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return {**head, "object": "chat.completion.chunk", "choices": [choice]}

    yield sse(chunk({"role": "assistant", "content": ""}))
    names, speech, sent = gen.req.tool_names, SpeechFilter(), 0
    try:
        async for delta in gen.deltas():
            if text := (speech.feed(delta) if names else delta):
                sent += len(text)
                yield sse(chunk({"content": text}))
    except Exception as e:  # noqa: BLE001 - reported in the stream
        log.exception("generation failed")
        yield sse({"error": {"message": f"generation failed: {e}", "type": "server_error", "code": "generation_failed"}})
        yield sse("[DONE]")
        return
    finish_reason = gen.finish_reason
    _, call = split_call(speech.text, names)
    if call is not None:
        for delta in call_deltas(call):
            yield sse(chunk(delta))
        finish_reason = "tool_calls"
    elif rest := speech.text[sent:]:
        yield sse(chunk({"content": rest}))
    last = chunk({}, finish_reason)
    if gen.req.return_spec_tokens_details:
        last["sglext"] = gen.sglext()
    yield sse(last)
    if gen.req.stream_options and gen.req.stream_options.include_usage:
        yield sse({**head, "object": "chat.completion.chunk", "choices": [], "usage": gen.usage()})
    yield sse("[DONE]")


def create_engine_app(engine: Engine, drafter_path: Path | None = None, workers: int = 4, cache_tokens: int = 32768) -> FastAPI:
    """The OpenAI-compatible app: POST /v1/chat/completions, GET /v1/models, GET /health. `cache_tokens` bounds the
    prefix cache of finished conversations (0: every request starts on a fresh cache)."""
    sessions = PrefixCache(engine.new_session, max_tokens=cache_tokens)
    api = EngineAPI(engine, drafter_path, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="engine"), sessions)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        api.executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="Talkline engine", lifespan=lifespan)
    app.state.engine_api = api

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error(exc)

    @app.get("/health")
    def health() -> dict:
        drafter = str(api.drafter_path) if api.drafter_path else None
        return {"status": "ok", "model": MODEL_ID, "drafter": drafter, "running": api.running, "cached_tokens": api.sessions.tokens}

    @app.get("/v1/models")
    def models() -> dict:
        card = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "talkline", "max_model_len": api.context_len}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(req: ChatRequest, request: Request) -> JSONResponse | StreamingResponse:
        prompt = engine.encode_chat([m.as_dict() for m in req.messages])
        if len(prompt) >= api.context_len:
            message = f"the prompt is {len(prompt)} tokens; the model's context is {api.context_len}: send fewer messages"
            return error_response(400, message, "invalid_request_error", "context_length_exceeded")
        gen = Generation(api, req, prompt)
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": req.model}
        if req.stream:
            return StreamingResponse(stream_chunks(gen, head), media_type="text/event-stream")
        return await complete(request, gen, head)

    return app
