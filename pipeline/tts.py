"""Streaming speech synthesis with Piper: one clause in, PCM chunks out, off the event loop."""

from __future__ import annotations

import json
import threading

import numpy as np
import onnxruntime as ort

from models import assets
from pipeline.audio import PCM16_MAX
from pipeline.deadlines import DeadlineWorker
from pipeline.profile import VoiceSettings


class PiperTTS:
    """A bundled Piper voice (the profiles' `voice.voice`); one synthesis at a time (espeak-ng is not re-entrant), the
    call whose queued audio runs out first goes first (`DeadlineWorker`)."""

    def __init__(self, threads: int = 1, voice: str = VoiceSettings().voice) -> None:
        from piper import PiperVoice
        from piper.config import PiperConfig

        files = assets.piper_voice(voice)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        session = ort.InferenceSession(str(files.model), sess_options=opts, providers=["CPUExecutionProvider"])
        config = PiperConfig.from_dict(json.loads(files.config.read_text(encoding="utf-8")))
        self.voice = PiperVoice(session=session, config=config)
        self.sample_rate = config.sample_rate
        self._lock = threading.Lock()
        self._worker = DeadlineWorker("tts")

    def synthesize(self, text: str, settings: VoiceSettings | None = None) -> list[np.ndarray]:
        """Blocking: float32 audio at `sample_rate`, one array per sentence Piper finds."""
        from piper.config import SynthesisConfig

        s = settings or VoiceSettings()
        config = SynthesisConfig(length_scale=s.length_scale, noise_scale=s.noise_scale, noise_w_scale=s.noise_w_scale, volume=s.volume)
        with self._lock:
            return [c.audio_int16_array.astype(np.float32) / PCM16_MAX for c in self.voice.synthesize(text, syn_config=config)]

    def close(self) -> None:
        self._worker.close()

    async def synthesize_async(self, text: str, settings: VoiceSettings | None = None, slack_s: float = 0.0) -> np.ndarray:
        """One clause's audio, synthesized in the worker thread, due `slack_s` seconds from now (the audio the call
        still has queued; 0: the caller hears nothing until it is ready)."""
        chunks = await self._worker.run(slack_s, self.synthesize, text, settings)
        return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
