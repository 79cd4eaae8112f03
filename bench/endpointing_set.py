"""The labelled endpointing set: caller turns spoken by Piper and espeak-ng voices, with pauses inside the turn where
people pause (before a code or a number, after "um", "so", "and", in a list), each labelled "caller continues", and
the turn's end followed by silence, labelled "caller is done". Rebuilt from a seed, byte for byte."""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.audio import resample

RATE = 16000
LEAD_S, TAIL_S = 0.4, 2.5  # silence before the turn, and after it (longer than any policy waits)
PAUSE_MS = (200, 1500)
NOISE_DBFS = -62.0  # a quiet line's hiss, so silence is not digital zero
TRIM_FLOOR = 0.004  # quieter than this is silence to the synthesizers

# "|" marks a pause inside the turn: the caller goes on after it.
CONTINUED = [
    "My booking code is | K 7, Q 2, Z P.",
    "I'd like to, um, | change the date of my trip.",
    "I'm calling because | my card was charged twice.",
    "How much will it cost to bring | a musical instrument on board?",
    "So | I was wondering if you could help me with my order.",
    "I need a table for | four people on Friday night.",
    "My phone number is | four one five, | five five five, oh one three two.",
    "I have a question about | the, uh, | the parking.",
    "And | what time do you close on Sundays?",
    "I want to book a cleaning, | a check-up, | and an x-ray.",
    "The order number is | four eight two one, | nine three seven.",
    "Can you tell me | how long the crossing takes?",
    "I was hoping to, um, | bring my dog along.",
    "It's for my daughter, she's | seven.",
    "Well, | the thing is, | I already paid for it.",
    "My name is | Sarah Johnson.",
    "We're arriving on | the twelfth of March.",
    "I'd like two tickets for the evening show, | and | one for the matinee.",
    "Yes, so I booked a room last week, | and | I need to cancel it.",
    "Is it possible to | pay in cash when I arrive?",
    "My address is | twenty two Baker Street.",
    "Could you check if | there's any space on the morning ferry?",
    "I'm looking for | something for my mother's birthday.",
    "The problem is | the heater isn't working again.",
    "Hi, um, | I got a letter from you about | a late fee.",
    "What I really want to know is | whether the price includes breakfast.",
    "The card ends in | four four seven one.",
    "I'm a member, | my number is | A B, two nine, six.",
    "We have two adults, | two kids, | and a baby.",
    "Could I change the delivery to | Thursday morning instead?",
    "I think it was | last Tuesday, | or maybe Wednesday.",
    "So the reference is | R, as in Romeo, | four five.",
    "I'd like to know if | you deliver to | the north side of town.",
    "My flight lands at | half past nine.",
    "Uh, | do you have anything | a bit cheaper?",
    "It says here that | the fee is | fifty dollars, is that right?",
    "I was charged for | two nights, | but I only stayed one.",
    "Can I bring | a stroller, | or does it have to be folded?",
    "The postcode is | S W one, | A one A A.",
    "I'm calling about, | um, | my daughter's appointment.",
]
COMPLETE = [
    "What time do you open tomorrow?",
    "Do you take credit cards?",
    "I'd like to speak to someone, please.",
    "How much is a day pass?",
    "Yes, that's right.",
    "No, thank you.",
    "Okay, great, thanks.",
    "Can I bring my dog?",
    "Where do I park?",
    "That's all, goodbye.",
    "Is there a student discount?",
    "How long does the tour take?",
    "Yes.",
    "Tuesday works for me.",
    "I need to cancel my appointment.",
    "Are you open on public holidays?",
    "Can I get a refund?",
    "Sure, go ahead.",
    "What's the cheapest option?",
    "Do I need to book in advance?",
]


@dataclass(frozen=True)
class Voice:
    name: str
    engine: str  # piper | espeak
    setting: str  # Piper length scale, or the espeak-ng voice
    speed: float = 1.0


PIPER_VOICES = [
    Voice("piper_joe_x1.0", "piper", "1.0"),
    Voice("piper_joe_x0.85", "piper", "0.85"),
    Voice("piper_joe_x1.15", "piper", "1.15"),
]
ESPEAK_VOICES = [
    Voice("espeak_en-us", "espeak", "en-us", 150),
    Voice("espeak_en-us+f3", "espeak", "en-us+f3", 165),
    Voice("espeak_en-gb+m3", "espeak", "en-gb+m3", 140),
]


@dataclass
class Utterance:
    """One caller turn: `pauses` are the labelled silences inside it (start, end samples; caller continues),
    `speech_end` is where its last word ends (caller is done)."""

    id: str
    voice: str
    text: str
    audio: np.ndarray
    pauses: list[tuple[int, int]] = field(default_factory=list)
    speech_end: int = 0


class Speaker:
    """Speaks a whole turn in one go, so the words before a pause keep the voice's mid-sentence prosody, and
    stretches the pause points to the wanted silences: after a comma's phoneme for Piper (its alignments), an SSML
    break for espeak-ng. Returns 16 kHz audio and each pause's (start, end) sample."""

    SENTINEL_MS = 4000  # an espeak-ng break no natural pause comes near, found again in the audio

    def __init__(self) -> None:
        self._piper = None

    def say(self, voice: Voice, parts: list[str], gaps_ms: list[float]) -> tuple[np.ndarray, list[tuple[int, int]]]:
        say = self._piper_say if voice.engine == "piper" else self._espeak_say
        audio, pauses = say(voice, parts, gaps_ms)
        loud = np.nonzero(np.abs(audio) > TRIM_FLOOR)[0]
        first, last = (int(loud[0]), int(loud[-1]) + 1) if len(loud) else (0, 0)
        return audio[first:last], [(a - first, b - first) for a, b in pauses]

    def _piper_say(self, voice: Voice, parts: list[str], gaps_ms: list[float]):
        from piper import PiperVoice
        from piper.config import SynthesisConfig

        from models import assets

        if self._piper is None:
            files = assets.piper_voice("en_US-joe-medium")
            self._piper = PiperVoice.load(str(files.model), config_path=str(files.config), include_alignments=True)
        text, marks = "", []
        for k, part in enumerate(parts):
            text += ("" if not text else " ") + part
            if k < len(parts) - 1:
                text += "" if part.endswith(",") else ","
                marks.append(text.count(","))  # the pause follows the text's n-th comma
        config = SynthesisConfig(length_scale=float(voice.setting), noise_scale=0.0, noise_w_scale=0.0)  # the same take every run
        chunks, commas, offset = [], [], 0
        for chunk in self._piper.synthesize(text, syn_config=config, include_alignments=True):
            for a in chunk.phoneme_alignments or []:
                if a.phoneme == ",":
                    commas.append((offset, offset + int(a.num_samples)))
                offset += int(a.num_samples)
            chunks.append(chunk.audio_float_array.astype(np.float32))
            rate = chunk.sample_rate
        audio = np.concatenate(chunks)
        if len(commas) != text.count(","):
            raise ValueError(f"Piper read {len(commas)} commas in {text!r}")
        pieces, pauses, pos, last = [], [], 0, 0
        for mark, gap_ms in zip(marks, gaps_ms):
            a, b = commas[mark - 1]
            pieces.append(resample(audio[last:b], rate, RATE))
            pos += len(pieces[-1])
            start = pos - int((b - a) * RATE / rate)
            extra = max(int(gap_ms * RATE / 1000) - (pos - start), 0)
            pieces.append(np.zeros(extra, np.float32))
            pos += extra
            pauses.append((start, pos))
            last = b
        pieces.append(resample(audio[last:], rate, RATE))
        return np.concatenate(pieces), pauses

    def _espeak_say(self, voice: Voice, parts: list[str], gaps_ms: list[float]):
        ssml = f" <break time='{self.SENTINEL_MS}ms'/> ".join(parts)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "say.wav"
            subprocess.run(["espeak-ng", "-m", "-v", voice.setting, "-s", str(int(voice.speed)), "-w", str(out), ssml], check=True)
            with wave.open(str(out), "rb") as w:
                audio = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
                audio = resample(audio, w.getframerate(), RATE)
        runs = silent_runs(audio, int(0.8 * self.SENTINEL_MS * RATE / 1000))
        if len(runs) != len(gaps_ms):
            raise ValueError(f"espeak-ng made {len(runs)} long breaks for {len(gaps_ms)} pauses")
        pieces, pauses, pos, last = [], [], 0, 0
        for (a, b), gap_ms in zip(runs, gaps_ms):
            pieces += [audio[last:a], np.zeros(int(gap_ms * RATE / 1000), np.float32)]
            pos += a - last
            pauses.append((pos, pos + len(pieces[-1])))
            pos += len(pieces[-1])
            last = b
        pieces.append(audio[last:])
        return np.concatenate(pieces), pauses


def silent_runs(audio: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    """(start, end) of every stretch at least `min_len` samples long with no sample above TRIM_FLOOR."""
    loud = np.nonzero(np.abs(audio) > TRIM_FLOOR)[0]
    edges = np.concatenate([[-1], loud, [len(audio)]])
    return [(int(a) + 1, int(b)) for a, b in zip(edges[:-1], edges[1:]) if b - a - 1 >= min_len]


def voices() -> list[Voice]:
    """Piper at three speeds, and three espeak-ng voices when espeak-ng is installed."""
    return PIPER_VOICES + (ESPEAK_VOICES if shutil.which("espeak-ng") else [])


def build(seed: int = 2026, speaker: Speaker | None = None, lines: int | None = None) -> list[Utterance]:
    """Every turn (or the first `lines` of each list) in every voice; each labelled pause's length drawn from PAUSE_MS."""
    rng, speaker = random.Random(seed), speaker or Speaker()
    noise = np.random.default_rng(seed)
    out = []
    for voice in voices():
        for i, line in enumerate(CONTINUED[:lines] + COMPLETE[:lines]):
            parts = [p.strip() for p in line.split("|")]
            gaps = [rng.uniform(*PAUSE_MS) for _ in parts[1:]]
            spoken, pauses = speaker.say(voice, parts, gaps)
            lead = int(LEAD_S * RATE)
            audio = np.concatenate([np.zeros(lead, np.float32), spoken, np.zeros(int(TAIL_S * RATE), np.float32)])
            audio = audio + noise.normal(0, 10 ** (NOISE_DBFS / 20), len(audio)).astype(np.float32)
            kind = "c" if len(parts) > 1 else "d"
            labelled = [(a + lead, b + lead) for a, b in pauses]
            out.append(Utterance(f"{kind}{i:02d}_{voice.name}", voice.name, " ".join(parts), audio, labelled, lead + len(spoken)))
    return out


def from_recording(path: Path, min_pause_ms: int = 200, floor_db: float = -25.0) -> Utterance:
    """A recording of one speaker's turn (real speech): every silence inside it of at least `min_pause_ms`, where its
    10 ms frames stay `floor_db` below the loudest, is a "caller continues" pause; its end is "caller is done"."""
    with wave.open(str(path), "rb") as w:
        audio = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
        if w.getnchannels() > 1:
            audio = audio.reshape(-1, w.getnchannels()).mean(axis=1)
        audio = resample(audio, w.getframerate(), RATE)
    n = RATE // 100
    frames = audio[: len(audio) // n * n].reshape(-1, n)
    db = 20 * np.log10(np.sqrt(np.mean(frames**2, axis=1)) + 1e-9)
    loud = np.nonzero(db > db.max() + floor_db)[0]
    pauses = []
    for a, b in zip(loud[:-1], loud[1:]):
        if (b - a - 1) * 10 >= min_pause_ms:
            pauses.append((int(a + 1) * n, int(b) * n))
    lead = int(LEAD_S * RATE)
    spoken = audio[loud[0] * n : (loud[-1] + 1) * n]
    first = int(loud[0]) * n
    audio = np.concatenate([np.zeros(lead, np.float32), spoken, np.zeros(int(TAIL_S * RATE), np.float32)])
    labelled = [(a - first + lead, b - first + lead) for a, b in pauses]
    return Utterance(f"r_{path.stem}", "recording", path.name, audio, labelled, lead + len(spoken))
