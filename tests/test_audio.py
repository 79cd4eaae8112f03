"""PCM16 conversion and resampling (one-shot with soxr, streamed with the low-delay polyphase filter)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.audio import StreamResampler, float_to_pcm16, pcm16_to_float, resample, rms, trim_leading_silence


def tones(rate: int, seconds: float = 1.0, freqs=(440.0, 1000.0), amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return sum(amp * np.sin(2 * np.pi * f * t) for f in freqs).astype(np.float32)


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    noise = reference - test
    return 10 * np.log10(np.sum(reference**2) / max(np.sum(noise**2), 1e-20))


def best_aligned_snr(reference: np.ndarray, test: np.ndarray, edge: int, max_shift: int = 8) -> float:
    """SNR after trimming `edge` samples each side, over small shifts (in case of a residual delay)."""
    best = -np.inf
    n = min(len(reference), len(test))
    for shift in range(-max_shift, max_shift + 1):
        lo, hi = edge, n - edge
        ref = reference[lo:hi]
        seg = test[lo + shift : hi + shift]
        if len(seg) != len(ref):
            continue
        best = max(best, snr_db(ref, seg))
    return best


def test_pcm16_round_trip_is_exact_for_every_int16_value():
    values = np.arange(-32768, 32768, dtype="<i2")
    data = values.tobytes()
    floats = pcm16_to_float(data)
    assert floats.dtype == np.float32
    assert floats.min() == -1.0 and floats.max() < 1.0
    assert float_to_pcm16(floats) == data


def test_pcm16_is_little_endian():
    assert pcm16_to_float(b"\x00\x40").tolist() == [0.5]  # 0x4000 = 16384
    assert float_to_pcm16(np.array([0.5, -0.5], dtype=np.float32)) == b"\x00\x40\x00\xc0"


def test_float_to_pcm16_clips_out_of_range():
    out = np.frombuffer(float_to_pcm16(np.array([2.0, -2.0, 1.0, -1.0], dtype=np.float32)), dtype="<i2")
    assert out.tolist() == [32767, -32768, 32767, -32768]


@pytest.mark.parametrize("n", [1, 3, 641])
def test_odd_byte_count_raises(n):
    with pytest.raises(ValueError):
        pcm16_to_float(b"\x00" * n)


def test_empty_pcm16():
    assert len(pcm16_to_float(b"")) == 0
    assert float_to_pcm16(np.zeros(0, dtype=np.float32)) == b""


@pytest.mark.parametrize("mid_rate", [8000, 22050, 24000, 48000])
def test_resample_round_trip_keeps_band_limited_signal(mid_rate):
    x = tones(16000)
    mid = resample(x, 16000, mid_rate)
    assert abs(len(mid) - len(x) * mid_rate / 16000) <= 2
    back = resample(mid, mid_rate, 16000)
    assert abs(len(back) - len(x)) <= 2
    assert best_aligned_snr(x, back, edge=800) > 30


def test_resample_downsampled_content_matches_direct_synthesis():
    x = tones(16000)
    mid = resample(x, 16000, 8000)
    expected = tones(8000)
    assert best_aligned_snr(expected, mid, edge=400) > 30


def test_resample_identity_returns_input():
    x = tones(16000)
    out = resample(x, 16000, 16000)
    np.testing.assert_array_equal(out, x)
    assert out.dtype == np.float32
    ident = StreamResampler(16000, 16000)
    np.testing.assert_array_equal(ident(x[:320]), x[:320])


def test_resample_accepts_float64_and_returns_float32():
    x = tones(16000).astype(np.float64)
    assert resample(x, 16000, 8000).dtype == np.float32
    assert resample(x, 16000, 16000).dtype == np.float32


def test_downsampling_does_not_alias_above_nyquist():
    x = tones(16000, freqs=(6000.0,), amp=0.5)
    out = resample(x, 16000, 8000)
    assert rms(out[200:-200]) < 0.01 * rms(x)
    stream = StreamResampler(16000, 8000)
    chunks = [stream(x[i : i + 320], last=i + 320 >= len(x)) for i in range(0, len(x), 320)]
    streamed = np.concatenate(chunks)
    assert rms(streamed[200:-200]) < 0.01 * rms(x)


@pytest.mark.parametrize("rate_out", [8000, 22050, 24000, 48000])
def test_stream_resampler_in_20ms_chunks_matches_one_shot(rate_out):
    x = tones(16000)
    one_shot = resample(x, 16000, rate_out)
    stream = StreamResampler(16000, rate_out)
    chunk = 320  # 20 ms at 16 kHz
    starts = range(0, len(x), chunk)
    pieces = [stream(x[i : i + chunk], last=(i + chunk >= len(x))) for i in starts]
    streamed = np.concatenate(pieces)
    assert streamed.dtype == np.float32
    assert abs(len(streamed) - len(one_shot)) <= 4
    edge = rate_out // 20
    assert best_aligned_snr(one_shot, streamed, edge=edge) > 30
    # and the streamed signal is also the right signal, not just similar to the one-shot one
    assert best_aligned_snr(tones(rate_out), streamed, edge=edge) > 30


def test_stream_resampler_round_trip():
    x = tones(16000)
    down, up = StreamResampler(16000, 8000), StreamResampler(8000, 16000)
    out = []
    for i in range(0, len(x), 320):
        last = i + 320 >= len(x)
        out.append(up(down(x[i : i + 320], last=last), last=last))
    back = np.concatenate(out)
    assert abs(len(back) - len(x)) <= 4
    assert best_aligned_snr(x, back, edge=800) > 30


def test_rms():
    assert rms(np.zeros(0, dtype=np.float32)) == 0.0
    assert rms(np.full(100, 0.5, dtype=np.float32)) == pytest.approx(0.5)
    assert rms(tones(16000, freqs=(1000.0,), amp=1.0)) == pytest.approx(1 / np.sqrt(2), rel=1e-3)


def test_trim_leading_silence_keeps_a_short_lead_in():
    rate = 16000
    tone = 0.5 * np.cos(np.arange(rate // 4) * 2 * np.pi * 220 / rate).astype(np.float32)
    lead = np.full(rate * 60 // 1000, 1e-4, np.float32)  # 60 ms of near silence
    trimmed = trim_leading_silence(np.concatenate([lead, tone]), rate)
    assert len(trimmed) == len(tone) + rate * 20 // 1000
    assert len(trim_leading_silence(np.zeros(100, np.float32), rate)) == 100
    assert len(trim_leading_silence(tone, rate)) == len(tone)


def test_first_clause_of_a_piper_reply_starts_at_once(stages):
    audio = np.concatenate(stages.tts.synthesize("A checked bag costs thirty five dollars."))
    loud = np.abs(audio) >= np.abs(audio).max() / 100
    assert np.argmax(loud) > stages.tts.sample_rate * 0.03, "Piper's own lead-in, which the trim is for"
    trimmed = trim_leading_silence(audio, stages.tts.sample_rate)
    assert np.argmax(np.abs(trimmed) >= np.abs(audio).max() / 100) <= stages.tts.sample_rate * 0.021


@pytest.mark.parametrize(("rate_in", "rate_out"), [(48000, 16000), (8000, 16000), (16000, 48000), (44100, 16000)])
def test_stream_resampler_hands_each_chunk_on_at_once(rate_in, rate_out):
    """Caller audio reaches VAD with at most 5 ms held back (soxr's streams hold 20-110 ms at these rates)."""
    stream, chunk = StreamResampler(rate_in, rate_out), rate_in // 50
    x = tones(rate_in)
    given = 0
    for k in range(len(x) // chunk):
        given += len(stream(x[k * chunk : (k + 1) * chunk]))
        assert (k + 1) * chunk * rate_out / rate_in - given <= rate_out * 0.005
