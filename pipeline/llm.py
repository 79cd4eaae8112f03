"""The LLM stage: a backend opens one session per call and streams text deltas, cancellable between tokens."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from models.engine import Engine, GenerationStats


class LLMError(RuntimeError):
    """The backend failed to produce an answer; the call speaks the profile's fallback line."""


class LLMSession(Protocol):
    def stream(self, messages: list[dict], temperature: float, max_tokens: int) -> AsyncIterator[str]:
        """Text deltas of the reply; closing the iterator cancels generation."""
        ...

    async def aclose(self) -> None: ...


class LLMBackend(Protocol):
    name: str

    def open_session(self) -> LLMSession: ...

    async def warmup(self) -> None: ...


_DONE = object()


class EmbeddedSession:
    """One call's conversation on the in-process engine; its KV cache persists across turns."""

    def __init__(self, backend: EmbeddedLLM) -> None:
        self.backend = backend
        self.session = backend.engine.new_session()
        self.last_stats = GenerationStats()

    async def stream(self, messages: list[dict], temperature: float, max_tokens: int) -> AsyncIterator[str]:
        engine, loop = self.backend.engine, asyncio.get_running_loop()
        prompt = engine.encode_chat(messages)
        queue: asyncio.Queue = asyncio.Queue()
        stop = threading.Event()
        self.last_stats = stats = GenerationStats()

        def work() -> None:
            try:
                for delta in engine.generate_text(
                    self.session, prompt, max_tokens, temperature=temperature, cancelled=stop.is_set, stats=stats
                ):
                    loop.call_soon_threadsafe(queue.put_nowait, delta)
            except Exception as e:  # noqa: BLE001 - handed to the consumer
                loop.call_soon_threadsafe(queue.put_nowait, e)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, _DONE)

        loop.run_in_executor(self.backend.executor, work)
        try:
            while (item := await queue.get()) is not _DONE:
                if isinstance(item, Exception):
                    raise LLMError(f"embedded engine failed: {item}") from item
                yield item
        finally:
            stop.set()

    async def aclose(self) -> None:
        self.session = None  # type: ignore[assignment]


class EmbeddedLLM:
    """The in-process engine (the default backend)."""

    name = "embedded"

    def __init__(self, engine: Engine, workers: int = 8) -> None:
        self.engine = engine
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm")

    def open_session(self) -> EmbeddedSession:
        return EmbeddedSession(self)

    async def warmup(self) -> None:
        session = self.open_session()
        async for _ in session.stream([{"role": "user", "content": "Hello"}], 0.0, 4):
            pass
