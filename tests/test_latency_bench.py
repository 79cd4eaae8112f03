"""The latency bench's clock: the agent's first audible sample, timed by its frame's arrival and its place in the frame."""

from __future__ import annotations

import numpy as np
import pytest

from bench.latency import first_audible

RATE = 16000
FRAME = RATE // 50


def frame(loud_from: int | None = None) -> np.ndarray:
    f = np.zeros(FRAME, np.int16)
    if loud_from is not None:
        f[loud_from:] = 5000
    return f


def test_the_first_audible_sample_is_timed_within_its_frame():
    frames = [(10.0, frame()), (10.02, frame(loud_from=160)), (10.04, frame(loud_from=0))]
    assert first_audible(frames, RATE) == pytest.approx(10.03)
    assert first_audible([(10.0, frame()), (10.0, frame())], RATE) is None
