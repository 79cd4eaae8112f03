"""The caller's audio in, for one call: resampled to 16 kHz, kept for Whisper, cut into speech by the VAD, each pause
judged by the endpointer. The call loop decides what the events mean (a draft, a turn, a barge-in)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np

from pipeline.asr import RATE as ASR_RATE
from pipeline.asr import TurnTranscriber
from pipeline.audio import StreamResampler
from pipeline.endpointing import Endpointer
from pipeline.profile import TurnSettings
from pipeline.stages import Stages
from pipeline.vad import SpeechDetector, SpeechEvent

CONTINUE_S = 2.0  # speech this soon after the caller's last turn ended may be its continuation
GAP = np.zeros(ASR_RATE * 3 // 10, np.float32)  # between a turn and its continuation, for Whisper


class CallerAudio:
    """`continue_previous` makes the utterance under way the continuation of the last one: its audio comes first."""

    def __init__(self, stages: Stages, settings: TurnSettings, input_rate: int, on_interim: Callable[[str], Awaitable[None]]) -> None:
        self.detector = SpeechDetector(stages.vad, settings.vad_threshold, settings.endpoint_silence_ms)
        rule = settings.endpoint_rule()
        stages.turn_models.request(rule)
        self.endpointer = Endpointer(rule, self.detector, stages.turn_models)
        self.transcriber = TurnTranscriber(stages.asr, on_interim, settings.interim_interval_ms)
        self.resampler = StreamResampler(input_rate, ASR_RATE)
        self.started_at = 0.0  # when the utterance under way began
        self.last: tuple[np.ndarray, float] | None = None  # the last utterance that made a turn, and when it ended
        self.prefix: np.ndarray | None = None

    def feed(self, samples: np.ndarray, arrived: float) -> list[SpeechEvent]:
        """One frame of caller audio; the speech events it completes."""
        samples = self.resampler(samples)
        self.transcriber.add(samples)
        events = self.detector.feed(samples, arrived)
        for event in events:
            if event.kind == "start":
                self.transcriber.begin()
                self.started_at = event.time
            elif event.kind == "pause":
                self.endpointer.pause(self.transcriber.audio())
            else:
                self.endpointer.cancel()
        return events

    @property
    def speaking(self) -> bool:
        return self.detector.speaking

    @property
    def speech_ms(self) -> float:
        return self.detector.speech_ms

    def continue_previous(self) -> bool:
        """Join the utterance under way to the last one if it began within CONTINUE_S of that one's end."""
        if self.last is not None and self.speaking and self.started_at - self.last[1] <= CONTINUE_S:
            self.prefix = np.concatenate([self.last[0], GAP])
        return self.prefix is not None

    @property
    def continuing(self) -> bool:
        return self.prefix is not None

    def audio(self) -> np.ndarray:
        """The utterance so far (after the one it continues)."""
        audio = self.transcriber.audio()
        return audio if self.prefix is None else np.concatenate([self.prefix, audio])

    def take(self) -> np.ndarray:
        """The utterance ended: its audio, for the final transcript."""
        audio = self.audio()
        self.transcriber.take()
        self.prefix = None
        return audio

    def maybe_interim(self) -> None:
        self.transcriber.maybe_interim(speaking=not self.detector.paused)

    def close(self) -> None:
        self.transcriber.cancel()
        self.endpointer.cancel()
