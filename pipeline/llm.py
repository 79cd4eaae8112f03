"""The LLM stage: a backend opens one session per call and streams text deltas, cancellable between tokens."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Protocol, TypeVar

import httpx

from models.engine import Engine
from models.session import GenerationStats
from pipeline.openai_format import StreamedCalls, to_openai
from pipeline.tools import openai_tools

log = logging.getLogger(__name__)
T = TypeVar("T")


class LLMError(RuntimeError):
    """The backend failed to produce an answer; the call speaks the profile's fallback line."""


class LLMSession(Protocol):
    def stream(self, messages: list[dict], temperature: float, max_tokens: int, tools: list | None = None) -> AsyncIterator[str]:
        """Text deltas of the reply, a tool call as <tool_call> text; closing the iterator cancels generation.
        `tools` (the profile's) is for backends whose server parses calls; the system prompt lists them anyway."""
        ...

    async def prefill(self, messages: list[dict], tools: list | None = None) -> None:
        """Warm this conversation's cache with the prompt the next turn starts with, while the caller talks.
        Never raises: a failed prefill only leaves the work to the next turn."""
        ...

    async def aclose(self) -> None: ...


class LLMBackend(Protocol):
    name: str

    def open_session(self, slack: Callable[[], float] | None = None) -> LLMSession:
        """A conversation; `slack` gives the seconds of agent speech its caller has yet to hear, for backends that
        serve the most urgent conversation first."""
        ...

    def spare(self) -> bool:
        """Whether a warm-up that may be wasted (a guess at the turn) can run now without slowing another call."""
        ...

    async def warmup(self) -> None: ...

    async def aclose(self) -> None: ...


_DONE = object()


async def iterate_in_thread(executor: Executor, produce: Callable[[], Iterator[T]], stop: threading.Event) -> AsyncIterator[T]:
    """Run the blocking iterator `produce()` in `executor` and yield its items here; leaving early sets `stop`."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def work() -> None:
        try:
            for item in produce():
                loop.call_soon_threadsafe(queue.put_nowait, item)
        except Exception as e:  # noqa: BLE001 - handed to the consumer
            loop.call_soon_threadsafe(queue.put_nowait, e)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, _DONE)

    loop.run_in_executor(executor, work)
    try:
        while (item := await queue.get()) is not _DONE:
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        stop.set()


class EmbeddedSession:
    """One call's conversation on the in-process engine; its KV cache persists across turns."""

    def __init__(self, backend: EmbeddedLLM, slack: Callable[[], float] | None = None) -> None:
        self.backend = backend
        self.session = backend.engine.new_session()
        self.last_stats = GenerationStats()
        self._slack = slack

    def slack(self) -> float:
        """Seconds of speech the caller has yet to hear (read from the engine's threads: a failed read counts as 0)."""
        try:
            return float(self._slack()) if self._slack is not None else 0.0
        except Exception:  # noqa: BLE001 - the call's audio queue changed under the read
            return 0.0

    async def stream(self, messages: list[dict], temperature: float, max_tokens: int, tools: list | None = None) -> AsyncIterator[str]:
        engine = self.backend.engine
        prompt = engine.encode_chat(messages)
        stop = threading.Event()
        self.last_stats = stats = GenerationStats()

        def produce() -> Iterator[str]:
            return engine.generate_text(
                self.session, prompt, max_tokens, temperature=temperature, cancelled=stop.is_set, stats=stats, slack=self.slack
            )

        self.backend.running += 1
        try:
            async with contextlib.aclosing(iterate_in_thread(self.backend.executor, produce, stop)) as deltas:
                async for delta in deltas:
                    yield delta
        except Exception as e:
            raise LLMError(f"embedded engine failed: {e}") from e
        finally:
            self.backend.running -= 1

    async def prefill(self, messages: list[dict], tools: list | None = None) -> None:
        if self.session is None:  # the call ended before its warm-up started
            return
        engine = self.backend.engine
        ids = engine.encode_chat(messages, add_generation_prompt=False)
        stop = threading.Event()
        self.backend.running += 1
        try:
            await asyncio.get_running_loop().run_in_executor(self.backend.executor, engine.prefill, self.session, ids, stop.is_set)
        except Exception:  # noqa: BLE001 - the next turn's generation prefills it
            log.warning("prompt prefill failed", exc_info=True)
        finally:
            stop.set()
            self.backend.running -= 1

    async def aclose(self) -> None:
        self.session = None  # type: ignore[assignment]


class EmbeddedLLM:
    """The in-process engine (the default backend)."""

    name = "embedded"

    def __init__(self, engine: Engine, workers: int = 8) -> None:
        self.engine = engine
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm")
        self.running = 0  # replies and warm-ups under way, all calls

    def open_session(self, slack: Callable[[], float] | None = None) -> EmbeddedSession:
        return EmbeddedSession(self, slack)

    def spare(self) -> bool:
        """No reply or warm-up of any call is running on the engine."""
        return self.running == 0

    async def warmup(self) -> None:
        session = self.open_session()
        async for _ in session.stream([{"role": "user", "content": "Hello"}], 0.0, 4):
            pass

    async def aclose(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def chunk_delta(data: str, calls: StreamedCalls) -> str:
    """The content delta of one `chat.completion.chunk` SSE payload ("" for role-only and usage chunks); its
    `tool_calls` fragments go to `calls`."""
    try:
        chunk = json.loads(data)
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise LLMError(f"the LLM server reported an error: {message}")
        choices = chunk["choices"]
        delta = choices[0]["delta"] if choices else {}
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise TypeError(content)
        calls.add(delta.get("tool_calls") or [])
        return content or ""
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
        raise LLMError(f"malformed stream chunk from the LLM server: {data[:200]!r}") from e


async def error_text(response: httpx.Response) -> str:
    """The `error.message` of an OpenAI-style error body, else the start of the body."""
    body = (await response.aread()).decode(errors="replace")
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, TypeError, KeyError):
        return body[:300]


class OpenAICompatSession:
    """One call on a remote OpenAI-compatible server: each turn sends the whole conversation."""

    def __init__(self, backend: OpenAICompatLLM) -> None:
        self.backend = backend

    def stream(self, messages: list[dict], temperature: float, max_tokens: int, tools: list | None = None) -> AsyncIterator[str]:
        return self.backend.stream(messages, temperature, max_tokens, tools)

    async def prefill(self, messages: list[dict], tools: list | None = None) -> None:
        """A one-token request on the conversation so far, so the server's prefix cache (SGLang's radix cache,
        `talkline engine`'s) holds it when the caller's turn arrives; cancelled with the warm-up, never raises."""
        try:
            async for _ in self.backend.stream(messages, 0.0, 1, tools):
                pass
        except LLMError as e:
            log.debug("prefix warm-up failed: %s", e)

    async def aclose(self) -> None:
        """Nothing to free: the server keeps no per-call state."""


class OpenAICompatLLM:
    """Streams chat completions from any OpenAI-compatible server (SGLang in production)."""

    name = "sglang"

    def __init__(self, base_url: str, model: str | None = None, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model, self.timeout = model, timeout
        self.client = httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(timeout))

    def open_session(self, slack: Callable[[], float] | None = None) -> OpenAICompatSession:
        """`slack` is not used: the server schedules its own requests."""
        return OpenAICompatSession(self)

    def spare(self) -> bool:
        """The server's cores are not this process's: always."""
        return True

    async def served_models(self) -> list[str]:
        """The model ids the server lists at GET /v1/models."""
        async with self._errors():
            response = await self.client.get("/v1/models")
            if response.status_code != 200:
                reason = await error_text(response)
                raise LLMError(f"{self.base_url}/v1/models answered HTTP {response.status_code}: {reason}")
        try:
            return [str(m["id"]) for m in response.json()["data"]]
        except (ValueError, TypeError, KeyError) as e:
            raise LLMError(f"malformed /v1/models answer from {self.base_url}: {response.text[:200]!r}") from e

    async def model_id(self) -> str:
        """The model to ask for: the configured one, else the first the server lists."""
        if self.model is None:
            models = await self.served_models()
            if not models:
                raise LLMError(f"{self.base_url}/v1/models lists no model")
            self.model = models[0]
        return self.model

    async def stream(self, messages: list[dict], temperature: float, max_tokens: int, tools: list | None = None) -> AsyncIterator[str]:
        """Text deltas from POST /v1/chat/completions with stream=true, then any streamed tool call as <tool_call>
        text; any failure is an LLMError."""
        body = {
            "model": await self.model_id(),
            "messages": to_openai(messages),
            "temperature": temperature,
            "max_tokens": max_tokens,
            "stream": True,
        }
        if tools:
            body["tools"] = openai_tools(tools)
        calls = StreamedCalls()
        async with self._errors(), self.client.stream("POST", "/v1/chat/completions", json=body) as response:
            if response.status_code != 200:
                reason = await error_text(response)
                raise LLMError(f"{self.base_url}/v1/chat/completions answered HTTP {response.status_code}: {reason}")
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    if text := calls.text():
                        yield text
                    return
                if delta := chunk_delta(data, calls):
                    yield delta
            raise LLMError(f"{self.base_url} closed the stream before [DONE]")

    @contextlib.asynccontextmanager
    async def _errors(self) -> AsyncIterator[None]:
        """Turn transport failures into LLMErrors that say what to check."""
        try:
            yield
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            raise LLMError(f"cannot reach the LLM server at {self.base_url} ({e!r}): start it or fix --llm-url") from e
        except httpx.TimeoutException as e:
            message = f"the LLM server at {self.base_url} sent nothing for {self.timeout:g} s ({e!r}): is it overloaded?"
            raise LLMError(message) from e
        except httpx.HTTPError as e:
            raise LLMError(f"the stream from the LLM server at {self.base_url} failed: {e!r}") from e

    async def warmup(self) -> None:
        """Check the server answers; an unreachable one is logged, not fatal (calls speak the fallback line)."""
        try:
            models = await self.served_models()
        except LLMError as e:
            log.warning("LLM server not ready: %s", e)
            return
        if self.model is None and models:
            self.model = models[0]
        log.info("LLM server %s serves %s; using %s", self.base_url, models, self.model)

    async def aclose(self) -> None:
        await self.client.aclose()
