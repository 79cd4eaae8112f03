"""Streaming speech recognition with faster-whisper: interim transcripts while the caller speaks, a final one at end of turn."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from models import assets

log = logging.getLogger(__name__)
RATE = 16000


class WhisperASR:
    """A faster-whisper model shared by all calls; decodes run one at a time off the event loop."""

    def __init__(self, model_dir: Path | None = None, threads: int = 2, compute_type: str = "int8") -> None:
        from faster_whisper import WhisperModel

        self.model = WhisperModel(
            str(model_dir or assets.whisper_tiny_en_dir()), device="cpu", compute_type=compute_type, cpu_threads=threads
        )
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="asr")

    def transcribe(self, audio: np.ndarray) -> str:
        """Blocking decode of 16 kHz float32 audio."""
        with self._lock:
            segments, _ = self.model.transcribe(
                audio.astype(np.float32, copy=False),
                language="en",
                beam_size=1,
                condition_on_previous_text=False,
                without_timestamps=True,
                vad_filter=False,
            )
            return " ".join(s.text.strip() for s in segments).strip()

    async def atranscribe(self, audio: np.ndarray) -> str:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.transcribe, audio)


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
            self._recent = np.concatenate([self._recent, samples])[-self.preroll:]

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
            text = await self.asr.atranscribe(audio)
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
