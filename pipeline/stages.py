"""The shared speech and language models one server process loads once, with a thread budget for two cores."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.asr import WhisperASR
from pipeline.audio import resample
from pipeline.llm import LLMBackend
from pipeline.retrieval import Retriever
from pipeline.tts import PiperTTS
from pipeline.turn_models import TurnModels
from pipeline.turns import EndpointRule
from pipeline.vad import SileroVAD

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ThreadBudget:
    """Intra-op threads per stage; on two cores the LLM gets one so TTS and ASR can run beside it."""

    asr: int = 2
    llm: int = 1
    tts: int = 1


@dataclass
class Stages:
    vad: SileroVAD
    asr: WhisperASR
    tts: PiperTTS
    llm: LLMBackend
    retriever: Retriever
    turn_models: TurnModels = field(default_factory=TurnModels)  # loaded for the turn rules that read them

    async def warmup(self) -> None:
        """Run each model once so the first call is as fast as the tenth."""
        t0 = time.perf_counter()
        speech = await self.tts.synthesize_async("Hello, this is a warm up.")
        await self.asr.atranscribe(np.concatenate([resample(speech, self.tts.sample_rate, 16000), np.zeros(8000, np.float32)]))
        await self.llm.warmup()
        if self.retriever.encoder is not None:
            await asyncio.to_thread(self.retriever.encoder.embed, ["Hello, this is a warm up."])
        log.info("models warmed up in %.1f s", time.perf_counter() - t0)

    async def aclose(self) -> None:
        """Stop the model workers (queued jobs are cancelled)."""
        self.asr.close()
        self.tts.close()
        await self.llm.aclose()


def load_stages(
    llm: LLMBackend, threads: ThreadBudget = ThreadBudget(), asr_window_s: float = 10.0, rules: Sequence[EndpointRule] = ()
) -> Stages:
    """Load VAD, ASR, TTS and the fact retriever's sentence embeddings beside an already built LLM backend, and the
    end-of-turn models that `rules` (the turn rules of the profiles served) read."""
    from models.embedder import Embedder

    turn_models = TurnModels()
    turn_models.load(rules)
    return Stages(
        vad=SileroVAD(),
        asr=WhisperASR(threads=threads.asr, window_s=asr_window_s),
        tts=PiperTTS(threads=threads.tts),
        llm=llm,
        retriever=Retriever(Embedder()),
        turn_models=turn_models,
    )
