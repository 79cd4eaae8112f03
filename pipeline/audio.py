"""PCM16 conversions and resampling (soxr) for mono audio."""

from __future__ import annotations

import numpy as np
import soxr

PCM16_MAX = 32768.0


def pcm16_to_float(data: bytes) -> np.ndarray:
    """Little-endian signed 16-bit bytes -> float32 in [-1, 1)."""
    if len(data) % 2:
        raise ValueError("PCM16 data must have an even number of bytes")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / PCM16_MAX


def float_to_pcm16(samples: np.ndarray) -> bytes:
    """float32 in [-1, 1] -> little-endian signed 16-bit bytes (clipped)."""
    return (np.clip(samples, -1.0, 32767 / PCM16_MAX) * PCM16_MAX).astype("<i2").tobytes()


def resample(samples: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """One-shot high-quality resampling of float32 samples."""
    if rate_in == rate_out:
        return samples.astype(np.float32, copy=False)
    return soxr.resample(samples.astype(np.float32, copy=False), rate_in, rate_out, quality="HQ")


class StreamResampler:
    """Resamples a stream chunk by chunk with filter state carried across chunks."""

    def __init__(self, rate_in: int, rate_out: int) -> None:
        self.rate_in, self.rate_out = rate_in, rate_out
        self._stream = None if rate_in == rate_out else soxr.ResampleStream(rate_in, rate_out, 1, dtype="float32", quality="HQ")

    def __call__(self, samples: np.ndarray, last: bool = False) -> np.ndarray:
        if self._stream is None:
            return samples.astype(np.float32, copy=False)
        return self._stream.resample_chunk(samples.astype(np.float32, copy=False), last=last)


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples)))) if len(samples) else 0.0
