"""One call's end-of-turn decision at each pause: the profile's rule sets the silence the VAD waits for, and resets it
as each cue comes in (Smart Turn on the audio at once, the turn LM once the pause's transcript is there)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from pipeline.turn_models import TurnModels
from pipeline.turns import Cues, EndpointRule
from pipeline.vad import SpeechDetector

log = logging.getLogger(__name__)


class Endpointer:
    """Feeds the VAD the wait `rule` gives for the current pause. A cue whose model is not loaded (yet), or fails, counts
    as "not done" (the longer wait), so a missing model never cuts a caller off."""

    def __init__(self, rule: EndpointRule, detector: SpeechDetector, models: TurnModels) -> None:
        self.rule, self.detector, self.models = rule, detector, models
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
        model = self.models.smart_turn.model
        await self._cue("p_audio", model and model.probability, audio, 0.0)

    async def _lm_cue(self, text: str) -> None:
        model = self.models.turn_lm.model
        await self._cue("lm_log10", model and model.log10_done, text, None)  # no reading: the rule waits as for unfinished words

    async def _cue(self, name: str, model: Callable | None, given: object, not_done: float | None) -> None:
        """Run a cue's model off the event loop; `not_done` stands in when it is missing or fails."""
        value = not_done
        if model is not None:
            try:
                value = await asyncio.to_thread(model, given)
            except Exception as e:  # noqa: BLE001 - the longer wait stands
                log.warning("end-of-turn cue %s failed: %r", name, e)
        self.cues = replace(self.cues, **{name: value})
        self._apply()

    def _apply(self) -> None:
        self.detector.set_endpoint_ms(self.rule.wait_ms(self.cues))
