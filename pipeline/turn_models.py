"""The end-of-turn models (Smart Turn, the turn LM), loaded only for the turn rules that read them.

The default rule reads the turn LM (a MiniLM classifier, ~50 MB, a second to load); a server whose profiles all use
`text` or `vad` loads neither, and only `smart_turn` and `combined_audio` load Smart Turn. A server loads at start-up
what its profiles on disk need; a call whose rule needs a model not loaded yet (a profile added later) starts its load
in the background, and until it is ready that cue counts as "not done" (the longer wait), so a caller is never cut off
for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import numpy as np

from pipeline.smart_turn import SmartTurn
from pipeline.turn_lm import TurnLM
from pipeline.turns import EndpointRule

log = logging.getLogger(__name__)
Model = TypeVar("Model")


class OnDemand(Generic[Model]):
    """One model built once, at `load` (blocking) or by the first `request` (in a thread); `model` is None until then."""

    def __init__(self, name: str, build: Callable[[], Model], warm: Callable[[Model], object], model: Model | None = None) -> None:
        self.name, self._build, self._warm = name, build, warm
        self.model = model
        self._lock = threading.Lock()
        self._loading: threading.Thread | None = None

    def load(self) -> Model:
        with self._lock:
            if self.model is None:
                t0 = time.perf_counter()
                model = self._build()
                self._warm(model)
                self.model = model
                log.info("%s loaded in %.1f s", self.name, time.perf_counter() - t0)
            return self.model

    def request(self) -> None:
        """Start loading in the background unless loaded or on its way."""
        if self.model is not None or self._loading is not None:
            return
        self._loading = threading.Thread(target=self._load_logged, name=f"load-{self.name}", daemon=True)
        self._loading.start()

    def wait(self, timeout: float | None = None) -> Model | None:
        """Block until a requested load is done (tests, benchmarks)."""
        if self._loading is not None:
            self._loading.join(timeout)
        return self.model

    def _load_logged(self) -> None:
        try:
            self.load()
        except Exception:
            log.exception("%s could not be loaded: its end-of-turn cue stays 'not done'", self.name)


class TurnModels:
    """Smart Turn and the turn LM, each loaded when a rule that reads it is first needed."""

    def __init__(self, smart_turn: SmartTurn | None = None, turn_lm: TurnLM | None = None) -> None:
        self.smart_turn = OnDemand("Smart Turn", SmartTurn, lambda m: m.probability(np.zeros(16000, np.float32)), smart_turn)
        self.turn_lm = OnDemand("turn LM", TurnLM, lambda m: m.log10_done("Hello, this is a warm up."), turn_lm)

    def needed(self, rules: Iterable[EndpointRule]) -> list[OnDemand]:
        rules = list(rules)
        wanted = [(self.smart_turn, any(r.reads_audio for r in rules)), (self.turn_lm, any(r.reads_lm for r in rules))]
        return [holder for holder, wants in wanted if wants]

    def load(self, rules: Iterable[EndpointRule]) -> None:
        """Load now (blocking) what these rules read: a server's start-up, for the profiles it has."""
        for holder in self.needed(rules):
            holder.load()

    def request(self, rule: EndpointRule) -> None:
        """A call with this rule starts: load in the background what it reads and is not loaded yet."""
        for holder in self.needed([rule]):
            holder.request()
