"""G.711 mu-law / A-law against Python's reference (audioop) and the 8 kHz resampling a phone call goes through."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pipeline.audio import StreamResampler, alaw_decode, alaw_encode, mulaw_decode, mulaw_encode, resample, rms

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop  # the stdlib G.711 reference, removed in Python 3.13

ALL_INT16 = np.arange(-32768, 32768, dtype="<i2")
ALL_CODES = bytes(range(256))
CODECS = [
    (mulaw_encode, mulaw_decode, audioop.lin2ulaw, audioop.ulaw2lin),
    (alaw_encode, alaw_decode, audioop.lin2alaw, audioop.alaw2lin),
]


@pytest.mark.parametrize("encode, decode, ref_encode, ref_decode", CODECS)
def test_encode_matches_reference_for_every_int16_value(encode, decode, ref_encode, ref_decode):
    expected = ref_encode(ALL_INT16.tobytes(), 2)
    assert encode(ALL_INT16) == expected
    assert encode(ALL_INT16.astype(np.float32) / 32768) == expected  # float input: the same PCM16 scaling


@pytest.mark.parametrize("encode, decode, ref_encode, ref_decode", CODECS)
def test_decode_matches_reference_for_every_code(encode, decode, ref_encode, ref_decode):
    out = decode(ALL_CODES)
    assert out.dtype == np.float32 and len(out) == 256
    np.testing.assert_array_equal((out * 32768).astype("<i2"), np.frombuffer(ref_decode(ALL_CODES, 2), "<i2"))


def test_codes_round_trip_exactly():
    assert alaw_encode(alaw_decode(ALL_CODES)) == ALL_CODES
    assert mulaw_encode(mulaw_decode(ALL_CODES)) == ALL_CODES.replace(b"\x7f", b"\xff")  # mu-law's two zeros
    for encode, decode, _, _ in CODECS:
        assert encode(decode(encode(ALL_INT16))) == encode(ALL_INT16)


def test_mulaw_known_values_and_quantization_error():
    assert mulaw_encode(np.array([0, -1, 32767, -32768], np.int16)) == bytes([0xFF, 0x7E, 0x80, 0x00])
    assert mulaw_decode(bytes([0xFF, 0x7F])).tolist() == [0.0, 0.0]
    t = np.arange(8000) / 8000
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    err = mulaw_decode(mulaw_encode(tone)) - tone
    assert 10 * np.log10(np.sum(tone**2) / np.sum(err**2)) > 35  # G.711's ~38 dB SQNR for a loud tone


def test_empty_input():
    assert mulaw_encode(np.zeros(0, np.float32)) == b"" and len(mulaw_decode(b"")) == 0


def tone(freq: float, rate: int, seconds: float = 1.0, amp: float = 0.5) -> np.ndarray:
    return (amp * np.sin(2 * np.pi * freq * np.arange(int(rate * seconds)) / rate)).astype(np.float32)


def band_energy(x: np.ndarray, rate: int, lo: float, hi: float) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x)))) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / rate)
    return float(spectrum[(freqs >= lo) & (freqs < hi)].sum())


@pytest.mark.parametrize("rate_in, freq", [(16000, 5000.0), (22050, 6000.0), (22050, 7900.0)])
def test_downsampling_to_8k_does_not_alias(rate_in, freq):
    """Agent audio (Piper at 22.05 kHz) to the phone: content above 4 kHz is removed, not folded back."""
    out = resample(tone(freq, rate_in), rate_in, 8000)
    assert rms(out[400:-400]) < 0.01 * rms(tone(freq, rate_in))
    kept = resample(tone(1000.0, rate_in), rate_in, 8000)
    assert abs(rms(kept[400:-400]) - 0.5 / np.sqrt(2)) < 0.01


def test_upsampling_8k_caller_audio_in_20ms_chunks_has_no_images():
    """Caller audio (8 kHz, 20 ms frames) to the 16 kHz recognizer: no mirror image above 4 kHz."""
    x = tone(3000.0, 8000)
    stream = StreamResampler(8000, 16000)
    out = np.concatenate([stream(x[i : i + 160], last=i + 160 >= len(x)) for i in range(0, len(x), 160)])
    body = out[1600:-1600]
    assert band_energy(body, 16000, 4100, 8000) < 1e-4 * band_energy(body, 16000, 2900, 3100)
    assert abs(rms(body) - 0.5 / np.sqrt(2)) < 0.01
