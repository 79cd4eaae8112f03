"""`talkline bench capacity`: the levels it runs, how it reads the capacity off them, and one real level over a socket."""

from __future__ import annotations

import pytest

from bench.capacity import (
    DEFAULT_WAVS,
    STAGGER_S,
    THINK_S,
    TURNS_PER_CALL,
    Level,
    caller_pace,
    capacity,
    levels_up_to,
    passes,
    plot,
    run_level,
)


def level(calls: int, p95: float | None, underruns: int = 0) -> Level:
    summary = {"turns": 3, "voice_to_voice_ms": {"p50": p95, "p95": p95, "max": p95}, "underruns": underruns}
    return Level(calls, 60.0, summary, 50.0, passes(summary))


def test_levels_and_the_capacity_they_show():
    assert levels_up_to(8) == [1, 2, 4, 6, 8] and levels_up_to(5) == [1, 2, 4] and levels_up_to(1) == [1]
    assert capacity([level(1, 700), level(2, 800), level(4, 990), level(6, 1200), level(8, 900)]) == 4, "the first failure ends it"
    assert capacity([level(1, 700), level(2, 800, underruns=1)]) == 1, "an underrun fails a level"
    assert capacity([level(1, None)]) == 0, "no answer at all is no capacity"


def test_callers_arrive_apart_and_pause_a_while_unless_in_lockstep():
    delays, pauses = [], []
    for number in range(8):
        delay, think = caller_pace(number, seconds=45)
        delays.append(delay)
        pauses += [think() for _ in range(20)]
    assert all(0 <= d < STAGGER_S for d in delays) and len(set(delays)) == 8, "each caller starts at its own moment"
    assert all(THINK_S[0] <= p <= THINK_S[1] for p in pauses) and max(pauses) - min(pauses) > 0.5
    again, think = caller_pace(3, seconds=45)
    assert again == delays[3] and think() == caller_pace(3, seconds=45)[1](), "the same arrivals in every run"
    assert caller_pace(3, seconds=0.1)[0] <= 0.05, "a short level still starts every caller inside it"
    assert caller_pace(3, seconds=45, lockstep=True) == (0.0, None), "lockstep: all at once, the client's fixed pause"


@pytest.mark.asyncio
async def test_one_level_over_a_real_socket_and_its_plot(server, tmp_path):
    measured = await run_level(server.ws_url, "skyways", DEFAULT_WAVS, calls=1, seconds=0.1)
    assert measured.calls == 1 and measured.summary["turns"] == TURNS_PER_CALL, "a call runs to its end"
    assert measured.summary["voice_to_voice_ms"]["p95"] > 0 and measured.cpu_percent > 0
    assert measured.summary["server_stages_ms"]["llm_ttft_ms"]["p50"] > 0
    plot([measured, level(2, 900)], tmp_path / "capacity.png")
    assert (tmp_path / "capacity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
