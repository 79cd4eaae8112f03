"""One call's end-of-turn decision at each pause: the profile's rule sets the silence the VAD waits for, and resets it
as each cue comes in (Smart Turn on the audio at once, the turn LM once the pause's transcript is there)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import numpy as np

from pipeline.smart_turn import SmartTurn
from pipeline.turn_lm import FLOOR, TurnLM
from pipeline.turns import Cues, EndpointRule
from pipeline.vad import SpeechDetector

log = logging.getLogger(__name__)


class Endpointer:
    """Feeds the VAD the wait `rule` gives for the current pause. A cue whose model is not loaded, or fails, counts as
    "not done" (the longer wait), so a missing model never cuts a caller off."""

    def __init__(self, rule: EndpointRule, detector: SpeechDetector, smart_turn: SmartTurn | None, turn_lm: TurnLM | None) -> None:
        self.rule, self.detector, self.smart_turn, self.turn_lm = rule, detector, smart_turn, turn_lm
        self.cues = Cues()
        self._tasks: list[asyncio.Task] = []

    def pause(self, audio: np.ndarray) -> None:
        """The caller went quiet; `audio` is the turn so far (16 kHz)."""
        self.cancel()
        self._apply()
        if self.rule.reads_audio:
            self._start(self._audio_cue(audio))

    def heard(self, text: str) -> None:
        """The transcript of the turn up to this pause."""
        self.cues = replace(self.cues, text=text)
        self._apply()
        if self.rule.reads_lm:
            self._start(self._lm_cue(text))

    def cancel(self) -> None:
        """The caller spoke again, or the turn ended: this pause's cues are moot."""
        for task in self._tasks:
            task.cancel()
        self._tasks, self.cues = [], Cues()

    def _start(self, cue) -> None:
        self._tasks.append(asyncio.create_task(cue))

    async def _audio_cue(self, audio: np.ndarray) -> None:
        p = 0.0
        if self.smart_turn is not None:
            try:
                p = await asyncio.to_thread(self.smart_turn.probability, audio)
            except Exception as e:  # noqa: BLE001 - the longer wait stands
                log.warning("Smart Turn failed: %r", e)
        self.cues = replace(self.cues, p_audio=p)
        self._apply()

    async def _lm_cue(self, text: str) -> None:
        score = FLOOR
        if self.turn_lm is not None:
            try:
                score = await asyncio.to_thread(self.turn_lm.log10_done, text)
            except Exception as e:  # noqa: BLE001 - the longer wait stands
                log.warning("turn LM failed: %r", e)
        self.cues = replace(self.cues, lm_log10=score)
        self._apply()

    def _apply(self) -> None:
        self.detector.set_endpoint_ms(self.rule.wait_ms(self.cues))
