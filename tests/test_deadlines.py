"""The model workers run the job whose call waits first: earliest deadline, FIFO on ties, cancelled jobs skipped."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pipeline.deadlines import DeadlineWorker


@pytest.mark.asyncio
async def test_the_earliest_deadline_runs_first_and_a_cancelled_job_never_runs():
    worker, ran, started, release = DeadlineWorker("test"), [], threading.Event(), threading.Event()
    busy = asyncio.create_task(worker.run(0.0, lambda: started.set() or release.wait()))
    await asyncio.to_thread(started.wait)  # the worker is busy: everything below queues
    jobs = {
        name: asyncio.create_task(worker.run(slack, ran.append, name))
        for name, slack in [("interim", 0.7), ("clause behind 3 s of audio", 3.0), ("final", 0.0), ("first clause", 0.0)]
    }
    gone = asyncio.create_task(worker.run(0.0, ran.append, "hung up"))
    while worker.waiting() < 5:
        await asyncio.sleep(0.01)
    gone.cancel()
    release.set()
    await asyncio.gather(busy, *jobs.values())
    assert ran == ["final", "first clause", "interim", "clause behind 3 s of audio"]
    worker.close()


@pytest.mark.asyncio
async def test_a_failing_job_raises_in_its_caller_and_the_worker_goes_on():
    worker = DeadlineWorker("test")
    with pytest.raises(ZeroDivisionError):
        await worker.run(0.0, lambda: 1 / 0)
    assert await worker.run(0.0, lambda: 42) == 42
    worker.close()
    with pytest.raises(RuntimeError, match="closed"):
        await worker.run(0.0, lambda: 1)
