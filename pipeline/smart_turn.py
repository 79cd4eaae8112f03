"""Smart Turn v3.2, an audio end-of-turn classifier (ONNX, ~8M parameters): the probability that the caller is done."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort

from models import assets

RATE = 16000
WINDOW_S = 8  # the model reads the last 8 s of the turn, zero-padded in front when shorter
NORM_EPS = 1e-7


class SmartTurn:
    """One ONNX session shared by every call (one thread); `probability` is blocking, run it off the event loop."""

    def __init__(self, path: Path | None = None, threads: int = 1) -> None:
        from faster_whisper.feature_extractor import FeatureExtractor

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(str(path or assets.smart_turn_onnx()), sess_options=opts, providers=["CPUExecutionProvider"])
        self.features = FeatureExtractor(feature_size=80, sampling_rate=RATE, chunk_length=WINDOW_S)
        self._lock = threading.Lock()

    def input_features(self, audio: np.ndarray) -> np.ndarray:
        """Whisper log-mel features (1, 80, 800) of the turn's last 8 s, the waveform normalized to unit variance."""
        window = WINDOW_S * RATE
        clip = np.asarray(audio, np.float32)[-window:]
        clip = np.pad(clip, (window - len(clip), 0))
        clip = (clip - clip.mean()) / np.sqrt(clip.var() + NORM_EPS)
        mel = self.features(clip, padding=0)[:, : WINDOW_S * 100]
        return mel[None].astype(np.float32)

    def probability(self, audio: np.ndarray) -> float:
        """P(the turn is complete) for 16 kHz float audio of the turn so far, trailing silence included."""
        features = self.input_features(audio)
        with self._lock:
            (out,) = self.session.run(None, {"input_features": features})
        return float(np.asarray(out).reshape(-1)[0])
