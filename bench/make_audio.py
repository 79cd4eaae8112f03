"""Write the caller-question WAVs under bench/audio (Piper joe at several speeds; espeak-ng voices when installed)."""

from __future__ import annotations

import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np

from pipeline.audio import resample
from pipeline.profile import VoiceSettings
from pipeline.tts import PiperTTS

OUT = Path(__file__).resolve().parent / "audio"

QUESTIONS = [
    "How much does it cost to check a bag?",
    "When does online check-in open?",
    "Can I bring a carry-on bag for free?",
    "How much is it to change my flight?",
    "What are your customer service hours?",
    "I would like to talk to a person please.",
    "What does a booking code look like?",
    "How much is a second checked bag?",
    "When does check-in close before my flight?",
    "Will I get a refund if I cancel?",
    "Is a personal item free?",
    "How late can I check in online?",
    "Can I change a Flex fare for free?",
    "What time do you open in the morning?",
    "How heavy can my carry-on be?",
    "Do you have wifi on board?",
]
PIPER_SPEEDS = [1.0, 0.85, 1.15]
ESPEAK_VOICES = ["en-us", "en-us+f3", "en-gb+m3"]


def write_wav(path: Path, samples: np.ndarray, rate: int = 16000) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())


def main() -> None:
    OUT.mkdir(exist_ok=True)
    tts = PiperTTS()
    for i, text in enumerate(QUESTIONS):
        speed = PIPER_SPEEDS[i % len(PIPER_SPEEDS)]
        audio = np.concatenate(tts.synthesize(text, VoiceSettings(length_scale=speed)))
        write_wav(OUT / f"q{i:02d}_piper_joe_x{speed}.wav", resample(audio, tts.sample_rate, 16000))
    if shutil.which("espeak-ng"):
        for i, text in enumerate(QUESTIONS[:8]):
            voice = ESPEAK_VOICES[i % len(ESPEAK_VOICES)]
            raw = OUT / "tmp.wav"
            subprocess.run(["espeak-ng", "-v", voice, "-s", str(150 + 15 * (i % 3)), "-w", str(raw), text], check=True)
            with wave.open(str(raw), "rb") as w:
                audio = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
                rate = w.getframerate()
            raw.unlink()
            write_wav(OUT / f"q{i:02d}_espeak_{voice.replace('+', '_')}.wav", resample(audio, rate, 16000))


if __name__ == "__main__":
    main()
