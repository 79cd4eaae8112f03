"""Continuous batching: one thread runs the decode-time target forwards of the engine's concurrent sessions,
packing those of every session that is decoding into one forward (`models/packed.py`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from models.invariance import MAX_ROWWISE
from models.packed import MAX_PACKED_ROWS, packed_forward
from models.session import Session


@dataclass
class Job:
    session: Session
    ids: list[int]
    done: threading.Event = field(default_factory=threading.Event)
    logits: torch.Tensor | None = None
    error: BaseException | None = None


@dataclass
class BatchStats:
    forwards: int = 0
    packed_forwards: int = 0  # forwards that served more than one session
    jobs: int = 0


class ForwardBatcher:
    """`forward(session, ids)` from any thread. A long job (a prefill) runs at once in the caller's thread, beside
    everything else, as without the batcher. Short jobs (decode steps, verifies) go to one worker thread, which
    steps the decoding sessions together: it waits up to `gather_s` for each session inside `decoding()` to hand
    in its next job, then runs them in one packed forward of at most `max_rows` rows (the rest in the next one).
    One session decoding alone never waits. Each session's output is exactly what it would be without the batcher."""

    def __init__(self, model: nn.Module, max_rows: int = MAX_PACKED_ROWS, gather_s: float = 0.01) -> None:
        self.model, self.max_rows, self.gather_s = model, max_rows, gather_s
        self.stats = BatchStats()
        self._queue: deque[Job] = deque()
        self._wake = threading.Condition()
        self._worker: threading.Thread | None = None
        self._decoding = 0

    @contextlib.contextmanager
    def decoding(self) -> Iterator[None]:
        """Mark the calling session as decoding: the worker expects a job from it each step."""
        with self._wake:
            self._decoding += 1
        try:
            yield
        finally:
            with self._wake:
                self._decoding -= 1
                self._wake.notify()

    def forward(self, session: Session, ids: list[int]) -> torch.Tensor:
        """Logits [len(ids), vocab] of feeding `ids` to `session`."""
        if len(ids) > MAX_ROWWISE:
            return session.forward_alone(self.model, ids)
        job = Job(session, list(ids))
        with self._wake:
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="llm-batcher", daemon=True)
                self._worker.start()
            self._queue.append(job)
            self._wake.notify()
        job.done.wait()
        if job.error is not None:
            session.repair()
            raise job.error
        assert job.logits is not None
        return job.logits

    def _next_batch(self) -> list[Job]:
        with self._wake:
            while not self._queue:
                self._wake.wait()
            deadline = time.perf_counter() + self.gather_s
            while len(self._queue) < self._decoding and (left := deadline - time.perf_counter()) > 0:
                self._wake.wait(left)
            batch = [self._queue.popleft()]
            rows = len(batch[0].ids)
            while self._queue and rows + len(self._queue[0].ids) <= self.max_rows:
                batch.append(self._queue.popleft())
                rows += len(batch[-1].ids)
            return batch

    def _run(self) -> None:
        with torch.inference_mode():
            while True:
                batch = self._next_batch()
                try:
                    for job, logits in zip(batch, packed_forward(self.model, [(j.session, j.ids) for j in batch])):
                        job.logits = logits
                except BaseException as e:  # noqa: BLE001 - handed to every waiting caller
                    for job in batch:
                        job.error = e
                finally:
                    self.stats.forwards += 1
                    self.stats.packed_forwards += len(batch) > 1
                    self.stats.jobs += len(batch)
                    for job in batch:
                        job.done.set()
