"""PCM16 and G.711 (mu-law, A-law) conversions and resampling (one-shot with soxr, streamed with a low-delay polyphase
filter) for mono audio."""

from __future__ import annotations

import math

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
    return _int16(samples).astype("<i2").tobytes()


def _int16(samples: np.ndarray) -> np.ndarray:
    """int16 samples as they are; float samples in [-1, 1] scaled and clipped to int16."""
    if samples.dtype == np.int16:
        return samples
    return (np.clip(samples, -1.0, 32767 / PCM16_MAX) * PCM16_MAX).astype(np.int16)


# ---- G.711 (ITU-T), the segment tables of the reference implementation ------------------------
_ULAW_SEG_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])
_ALAW_SEG_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])
_ULAW_CLIP, _ULAW_BIAS = 8159, 0x84


def mulaw_encode(samples: np.ndarray) -> bytes:
    """float32 in [-1, 1] or int16 samples -> G.711 mu-law bytes (14-bit magnitude, bias 33, 8 segments)."""
    x = _int16(np.asarray(samples)).astype(np.int32) >> 2
    mask = np.where(x < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(x), _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    seg = np.searchsorted(_ULAW_SEG_END, magnitude)  # first segment whose end >= magnitude; 8 = past the last
    code = np.where(seg > 7, 0x7F, (seg << 4) | ((magnitude >> (seg + 1)) & 0xF))
    return (code ^ mask).astype(np.uint8).tobytes()


def _mulaw_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = (((u & 0xF) << 3) + _ULAW_BIAS) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, _ULAW_BIAS - t, t - _ULAW_BIAS).astype(np.int16)


def alaw_encode(samples: np.ndarray) -> bytes:
    """float32 in [-1, 1] or int16 samples -> G.711 A-law bytes (13-bit magnitude, even bits inverted)."""
    x = _int16(np.asarray(samples)).astype(np.int32) >> 3
    mask = np.where(x >= 0, 0xD5, 0x55)
    magnitude = np.where(x >= 0, x, -x - 1)
    seg = np.searchsorted(_ALAW_SEG_END, magnitude)  # 0..7: a 13-bit magnitude never passes 0xFFF
    code = (seg << 4) | ((magnitude >> np.maximum(seg, 1)) & 0xF)
    return (code ^ mask).astype(np.uint8).tobytes()


def _alaw_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    seg = (a & 0x70) >> 4
    t = ((a & 0xF) << 4) + np.where(seg == 0, 8, 0x108)
    t = t << np.maximum(seg - 1, 0)
    return np.where(a & 0x80, t, -t).astype(np.int16)


_MULAW_TO_PCM16, _ALAW_TO_PCM16 = _mulaw_table(), _alaw_table()


def mulaw_decode(data: bytes) -> np.ndarray:
    """G.711 mu-law bytes -> float32 in [-1, 1)."""
    return _MULAW_TO_PCM16[np.frombuffer(data, np.uint8)].astype(np.float32) / PCM16_MAX


def alaw_decode(data: bytes) -> np.ndarray:
    """G.711 A-law bytes -> float32 in [-1, 1)."""
    return _ALAW_TO_PCM16[np.frombuffer(data, np.uint8)].astype(np.float32) / PCM16_MAX


def resample(samples: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """One-shot high-quality resampling of float32 samples."""
    if rate_in == rate_out:
        return samples.astype(np.float32, copy=False)
    return soxr.resample(samples.astype(np.float32, copy=False), rate_in, rate_out, quality="HQ")


class StreamResampler:
    """Resamples a stream chunk by chunk, with 2-5 ms of delay: a polyphase Kaiser-windowed sinc (about 70 dB of
    stopband, passband to 0.44 of the lower rate: 3.5 kHz of a phone's 8) whose history carries across chunks. Each
    output sample is given as soon as the input it needs has arrived; `last` flushes the tail. soxr's streams hold
    back 20-110 ms in blocks, which a caller would wait for at the end of every turn."""

    def __init__(self, rate_in: int, rate_out: int, stopband_db: float = 70.0) -> None:
        self.rate_in, self.rate_out = rate_in, rate_out
        g = math.gcd(rate_in, rate_out)
        self.up, self.down = rate_out // g, rate_in // g
        low, fast = min(rate_in, rate_out), rate_in * self.up
        transition = 2 * np.pi * 0.06 * low / fast
        half = int(np.ceil((stopband_db - 8) / (2.285 * transition) / 2))
        n = np.arange(-half, half + 1)
        cutoff = 0.47 * low / fast  # cycles per upsampled sample
        h = 2 * cutoff * np.sinc(2 * cutoff * n) * np.kaiser(len(n), 0.1102 * (stopband_db - 8.7)) * self.up
        self.delay, self.taps = half, -(-len(h) // self.up)
        padded = np.zeros(self.taps * self.up)
        padded[: len(h)] = h
        self.phases = padded.reshape(self.taps, self.up).T.astype(np.float32)  # phases[p, t] = h[p + t * up]
        self.history = np.zeros(0, np.float32)  # input from absolute index `start`
        self.start = 0
        self.received = 0
        self.next = 0  # the next output sample

    def __call__(self, samples: np.ndarray, last: bool = False) -> np.ndarray:
        samples = samples.astype(np.float32, copy=False)
        if self.up == self.down:
            return samples
        self.history = np.concatenate([self.history, samples])
        self.received += len(samples)
        if last:
            end = -(-self.received * self.up // self.down)  # every output inside the input
        else:  # every output whose newest tap has arrived
            end = ((self.received - 1) * self.up - self.delay) // self.down + 1
        if end <= self.next:
            return np.zeros(0, np.float32)
        top = np.arange(self.next, end) * self.down + self.delay  # newest upsampled position each output reads
        index = (top // self.up)[:, None] - np.arange(self.taps)[None, :] - self.start
        inside = (index >= 0) & (index < len(self.history))
        x = np.where(inside, self.history[np.clip(index, 0, max(len(self.history) - 1, 0))], 0.0)
        out = np.einsum("ij,ij->i", self.phases[top % self.up], x).astype(np.float32)
        self.next = end
        keep_from = max((end * self.down + self.delay) // self.up - self.taps + 1 - self.start, 0)
        self.history, self.start = self.history[keep_from:], self.start + keep_from
        return out


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples)))) if len(samples) else 0.0


def trim_leading_silence(samples: np.ndarray, rate: int, below_peak_db: float = 40.0, keep_ms: float = 20.0) -> np.ndarray:
    """Drop the silence before the first sample within `below_peak_db` of the peak, keeping `keep_ms` of it: a voice's
    lead-in (Piper's is 40-65 ms) is time the caller waits for nothing."""
    if not len(samples):
        return samples
    level = np.abs(samples)
    onset = int(np.argmax(level >= level.max() * 10 ** (-below_peak_db / 20)))
    return samples[max(onset - int(rate * keep_ms / 1000), 0) :]
