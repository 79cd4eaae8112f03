"""Silero VAD (ONNX, shared model, per-call state) and start/end-of-speech detection at 16 kHz."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort

from models import assets

RATE = 16000
CHUNK = 512  # 32 ms: the window Silero expects at 16 kHz
CONTEXT = 64


class SileroVAD:
    """One ONNX session shared by every call; each call keeps its own recurrent state."""

    def __init__(self, path: Path | None = None) -> None:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path or assets.silero_vad_onnx()), sess_options=opts, providers=["CPUExecutionProvider"])

    def new_state(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((2, 1, 128), np.float32), np.zeros((1, CONTEXT), np.float32)

    def probability(self, chunk: np.ndarray, state: tuple[np.ndarray, np.ndarray]) -> tuple[float, tuple]:
        """Speech probability of one 512-sample chunk, and the next state."""
        rnn, context = state
        x = np.concatenate([context, chunk.reshape(1, CHUNK).astype(np.float32)], axis=1)
        prob, rnn = self.session.run(None, {"input": x, "state": rnn, "sr": np.array(RATE, np.int64)})
        return float(prob[0, 0]), (rnn, x[:, -CONTEXT:])


@dataclass(frozen=True)
class SpeechEvent:
    """start: speech began; pause: the first silent chunk after voice; resume: voice again before the
    endpoint; end: the endpoint silence passed. `sample`/`time`: the first (start) or last voiced sample."""

    kind: Literal["start", "pause", "resume", "end"]
    sample: int  # 16 kHz stream index
    time: float  # wall-clock arrival time of that sample's chunk


class SpeechDetector:
    """Per-call speech segmentation: `start` after min_speech_ms of voice, `pause`/`resume` around silent
    stretches, `end` once the silence reaches the endpoint (which the call may shorten mid-pause)."""

    def __init__(
        self,
        model: SileroVAD,
        threshold: float = 0.5,
        endpoint_silence_ms: int = 500,
        min_speech_ms: int = 96,
    ) -> None:
        self.model = model
        self.state = model.new_state()
        self.on, self.off = threshold, max(threshold - 0.15, 0.05)
        self.default_endpoint_ms = endpoint_silence_ms
        self.endpoint_samples = endpoint_silence_ms * RATE // 1000
        self.min_speech_samples = min_speech_ms * RATE // 1000
        self._pending = np.zeros(0, np.float32)
        self.position = 0  # samples consumed so far
        self.speaking = False
        self.voiced_run = 0  # voiced samples since the current candidate start
        self.run_start = 0
        self.speech_start = 0
        self.last_voiced = 0
        self.last_voiced_time = 0.0
        self.silence = 0  # trailing unvoiced samples while speaking

    @property
    def speech_ms(self) -> float:
        """How long the current utterance has been going, in ms (0 when not speaking)."""
        return (self.last_voiced - self.speech_start) * 1000 / RATE if self.speaking else 0.0

    @property
    def paused(self) -> bool:
        return self.speaking and self.silence > 0

    def set_endpoint_ms(self, ms: int) -> None:
        """Silence that ends the current pause; back to the default when the caller speaks again."""
        self.endpoint_samples = ms * RATE // 1000

    def feed(self, samples: np.ndarray, now: float) -> list[SpeechEvent]:
        """Consume 16 kHz float samples; return the speech events they complete."""
        self._pending = np.concatenate([self._pending, samples.astype(np.float32, copy=False)])
        events: list[SpeechEvent] = []
        while len(self._pending) >= CHUNK:
            chunk, self._pending = self._pending[:CHUNK], self._pending[CHUNK:]
            prob, self.state = self.model.probability(chunk, self.state)
            event = self._step(prob, now)
            self.position += CHUNK
            if event:
                events.append(event)
        return events

    def _step(self, prob: float, now: float) -> SpeechEvent | None:
        end = self.position + CHUNK
        voiced = prob >= (self.off if self.speaking else self.on)
        if not self.speaking:
            if not voiced:
                self.voiced_run = 0
                return None
            if self.voiced_run == 0:
                self.run_start = self.position
            self.voiced_run += CHUNK
            self.last_voiced, self.last_voiced_time = end, now
            if self.voiced_run >= self.min_speech_samples:
                self.speaking, self.speech_start, self.silence = True, self.run_start, 0
                self.set_endpoint_ms(self.default_endpoint_ms)
                return SpeechEvent("start", self.run_start, now)
            return None
        if voiced:
            resumed = self.silence > 0
            self.last_voiced, self.last_voiced_time, self.silence = end, now, 0
            if not resumed:
                return None
            self.set_endpoint_ms(self.default_endpoint_ms)  # a shortened endpoint was for the words before the pause
            return SpeechEvent("resume", end, now)
        self.silence += CHUNK
        if self.silence >= self.endpoint_samples:
            self.speaking, self.voiced_run = False, 0
            return SpeechEvent("end", self.last_voiced, self.last_voiced_time)
        if self.silence == CHUNK:
            return SpeechEvent("pause", self.last_voiced, self.last_voiced_time)
        return None
