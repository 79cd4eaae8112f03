"""Streaming speech recognition with faster-whisper: interim transcripts while the caller speaks, a final one at end of turn."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

from models import assets
from pipeline.deadlines import DeadlineWorker

log = logging.getLogger(__name__)
RATE = 16000


WHISPER_WINDOW_S = 30.0  # what Whisper was trained on
FRAMES_PER_S = 100  # log-mel frames


class WhisperASR:
    """A faster-whisper model shared by all calls; decodes run one at a time off the event loop, the one whose caller
    waits first (a final transcript before interims: `DeadlineWorker`).

    Whisper pads every clip to 30 s, and the encoder's cost follows that length: ~250 ms of a ~300 ms decode
    for a two-second question. Clips shorter than `window_s` minus a second are encoded in a `window_s` window
    instead (10 s: the encoder runs ~8x faster), longer ones in the full 30 s.
    """

    def __init__(self, model_dir: Path | None = None, threads: int = 2, compute_type: str = "int8", window_s: float = 10.0) -> None:
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer

        self.model = WhisperModel(
            str(model_dir or assets.whisper_tiny_en_dir()), device="cpu", compute_type=compute_type, cpu_threads=threads
        )
        self.window_s = min(window_s, WHISPER_WINDOW_S)
        self._tokenizer = Tokenizer(self.model.hf_tokenizer, self.model.model.is_multilingual, task="transcribe", language="en")
        self._prompt = [*self._tokenizer.sot_sequence, self._tokenizer.no_timestamps]
        self._lock = threading.Lock()
        self._worker = DeadlineWorker("asr")

    def transcribe(self, audio: np.ndarray) -> str:
        """Blocking decode of 16 kHz float32 audio."""
        audio = audio.astype(np.float32, copy=False)
        with self._lock:
            if len(audio) <= (self.window_s - 1.0) * RATE:
                return self._windowed(audio)
            segments, _ = self.model.transcribe(
                audio, language="en", beam_size=1, condition_on_previous_text=False, without_timestamps=True, vad_filter=False
            )
            return " ".join(s.text.strip() for s in segments).strip()

    def close(self) -> None:
        self._worker.close()

    def _windowed(self, audio: np.ndarray) -> str:
        """Greedy decode of a clip padded with silence to `window_s` (not 30 s)."""
        import ctranslate2

        frames = int(self.window_s * FRAMES_PER_S)
        padded = np.pad(audio, (0, int(self.window_s * RATE) - len(audio)))
        features = self.model.feature_extractor(padded)[:, :frames]
        max_length = min(int(12 * len(audio) / RATE) + 16, 224)  # a bound on runaway repetition
        result = self.model.model.generate(
            ctranslate2.StorageView.from_array(np.ascontiguousarray(features[None])),
            [self._prompt],
            beam_size=1,
            max_length=max_length,
            suppress_blank=True,
        )
        return self._tokenizer.decode(result[0].sequences_ids[0]).strip()

    async def atranscribe(self, audio: np.ndarray, slack_s: float = 0.0) -> str:
        """A decode in the worker thread, due `slack_s` seconds from now (0: the caller is waiting for it)."""
        return await self._worker.run(slack_s, self.transcribe, audio)


class TurnTranscriber:
    """One call's utterance buffer: periodic interim decodes while speech grows, then the final decode."""

    def __init__(
        self,
        asr: WhisperASR,
        on_interim: Callable[[str], Awaitable[None]],
        interim_interval_ms: int = 700,
        preroll_ms: int = 300,
    ) -> None:
        self.asr = asr
        self.on_interim = on_interim
        self.interval = interim_interval_ms * RATE // 1000
        self.preroll = preroll_ms * RATE // 1000
        self._recent = np.zeros(0, np.float32)  # rolling pre-roll while nobody speaks
        self._buffer: list[np.ndarray] = []
        self._buffered = 0
        self._last_interim_at = 0
        self._interim: asyncio.Task | None = None
        self.active = False

    def add(self, samples: np.ndarray) -> None:
        if self.active:
            self._buffer.append(samples)
            self._buffered += len(samples)
        else:
            self._recent = np.concatenate([self._recent, samples])[-self.preroll :]

    def begin(self) -> None:
        """Speech started: the utterance starts with the pre-roll."""
        self._buffer, self._buffered = [self._recent], len(self._recent)
        self._last_interim_at, self.active = 0, True

    def audio(self) -> np.ndarray:
        return np.concatenate(self._buffer) if self._buffer else np.zeros(0, np.float32)

    def maybe_interim(self, speaking: bool) -> None:
        """Start an interim decode if enough new speech arrived and none is in flight."""
        if not (self.active and speaking) or (self._interim and not self._interim.done()):
            return
        if self._buffered - self._last_interim_at < self.interval:
            return
        self._last_interim_at = self._buffered
        self._interim = asyncio.create_task(self._run_interim(self.audio()))

    async def _run_interim(self, audio: np.ndarray) -> None:
        """An interim decode; a failure only costs this hypothesis (the final decode reports its own)."""
        try:
            text = await self.asr.atranscribe(audio, slack_s=self.interval / RATE)  # due by the next interim
        except Exception as e:  # noqa: BLE001 - nothing awaits this task
            log.warning("interim ASR failed: %r", e)
            return
        if text and self.active:
            await self.on_interim(text)

    def take(self) -> np.ndarray:
        """End of utterance: hand over its audio for the final decode and stop interims."""
        audio = self.audio()
        self.cancel()
        self._buffer, self._buffered = [], 0
        return audio

    def cancel(self) -> None:
        self.active = False
        if self._interim and not self._interim.done():
            self._interim.cancel()
