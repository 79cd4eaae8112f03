"""`talkline bench endpointing`: how often each end-of-turn policy cuts a caller off mid-thought, and how long it waits
after a finished turn. Every pause is seen as the call loop sees it: the same Silero VAD segmentation, the same
Whisper transcript of the turn so far, the same Smart Turn model, each decision due when its model has answered."""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.endpointing_set import RATE, Utterance, build, from_recording
from pipeline.turns import Cues, EndpointRule, looks_complete
from pipeline.vad import CHUNK, SpeechDetector

MIN_PAUSE_MS = 150  # no policy ends a turn on a shorter silence
PREROLL = int(0.3 * RATE)
CUTOFF_PAUSE_MS = 1200  # the "caller continues" pauses the headline counts


@dataclass
class Pause:
    """A silence inside or after a turn as the VAD sees it, with what each model said at its start."""

    utterance: str
    event: int  # the labelled event it falls in: index of a "caller continues" pause, or -1 for "caller is done"
    start: int  # sample just past the last voiced chunk
    silence_ms: float  # until the voice came back (inf: the turn's end)
    text: str
    asr_ms: float
    p_audio: float
    smart_turn_ms: float
    lm_log10: float
    lm_ms: float

    @property
    def cues(self) -> Cues:
        return Cues(self.text, self.p_audio, self.lm_log10)


def scan(utterance: Utterance, vad, asr, smart_turn, turn_lm, threshold: float = 0.5) -> list[Pause]:
    """Segment the turn with the VAD (never ending it) and read every pause long enough to matter."""
    detector = SpeechDetector(vad, threshold, endpoint_silence_ms=60_000)
    events = []
    for i in range(0, len(utterance.audio), CHUNK):
        events += detector.feed(utterance.audio[i : i + CHUNK], 0.0)
    starts = [e.sample for e in events if e.kind == "start"]
    if not starts:
        return []
    begin = max(starts[0] - PREROLL, 0)
    out = []
    for k, event in enumerate(events):
        if event.kind != "pause":
            continue
        resume = next((e for e in events[k + 1 :] if e.kind == "resume"), None)
        silence = (resume.sample - CHUNK - event.sample) * 1000 / RATE if resume else math.inf
        if silence < MIN_PAUSE_MS:
            continue
        audio = utterance.audio[begin : event.sample + CHUNK]
        t0 = time.perf_counter()
        text = asr.transcribe(audio)
        t1 = time.perf_counter()
        p = smart_turn.probability(audio)
        t2 = time.perf_counter()
        lm = turn_lm.log10_done(text)
        t3 = time.perf_counter()
        labelled = next((j for j, (_, end) in enumerate(utterance.pauses) if event.sample <= end), -1)
        ms = [(b - a) * 1000 for a, b in ((t0, t1), (t1, t2), (t2, t3))]
        out.append(Pause(utterance.id, labelled, event.sample, silence, text, ms[0], p, ms[1], lm, ms[2]))
    return out


def wait_ms(rule: EndpointRule, pause: Pause) -> float:
    """Silence after which this rule ends the turn at this pause: its wait, or later if its model answers later."""
    words = pause.asr_ms + (pause.lm_ms if rule.reads_lm else 0.0) if rule.reads_text else 0.0
    ready = max(words, pause.smart_turn_ms if rule.reads_audio else 0.0)
    chunk_ms = CHUNK * 1000 / RATE
    return math.ceil(max(rule.wait_ms(pause.cues), ready) / chunk_ms) * chunk_ms


@dataclass
class Outcome:
    """One labelled event under one rule."""

    utterance: str
    event: int
    label: str  # continues | done
    pause_ms: float  # the labelled pause (continues) or 0
    cut_off: bool
    wait_ms: float | None  # done, not cut off: from the last word's end to the turn's end


def judge(rule: EndpointRule, utterance: Utterance, pauses: list[Pause]) -> list[Outcome]:
    out = []
    for k, (a, b) in enumerate(utterance.pauses):
        cut = any(wait_ms(rule, p) <= p.silence_ms for p in pauses if p.event == k)
        out.append(Outcome(utterance.id, k, "continues", (b - a) * 1000 / RATE, cut, None))
    done = [p for p in pauses if p.event == -1]
    inner = [p for p in done if math.isfinite(p.silence_ms)]
    cut = any(wait_ms(rule, p) <= p.silence_ms for p in inner)
    last = next((p for p in done if not math.isfinite(p.silence_ms)), None)
    wait = None
    if not cut and last is not None:
        wait = round((last.start - utterance.speech_end) * 1000 / RATE + wait_ms(rule, last), 1)
    out.append(Outcome(utterance.id, -1, "done", 0.0, cut, wait))
    return out


def summary(outcomes: list[Outcome]) -> dict:
    cont = [o for o in outcomes if o.label == "continues"]
    short = [o for o in cont if o.pause_ms <= CUTOFF_PAUSE_MS]
    done = [o for o in outcomes if o.label == "done"]
    waits = [o.wait_ms for o in done if o.wait_ms is not None]
    return {
        "continues": len(cont),
        "false_cut_offs": round(sum(o.cut_off for o in cont) / max(len(cont), 1), 3),
        "false_cut_offs_to_1200ms": round(sum(o.cut_off for o in short) / max(len(short), 1), 3),
        "done": len(done),
        "done_cut_early": round(sum(o.cut_off for o in done) / max(len(done), 1), 3),
        "wait_mean_ms": round(float(np.mean(waits)), 1) if waits else None,
        "wait_p95_ms": round(float(np.percentile(waits, 95)), 1) if waits else None,
    }


def evaluate(rule: EndpointRule, utterances: list[Utterance], pauses: dict[str, list[Pause]]) -> tuple[dict, list[Outcome]]:
    outcomes = [o for u in utterances for o in judge(rule, u, pauses[u.id])]
    return summary(outcomes), outcomes


def curves(utterances: list[Utterance], pauses: dict[str, list[Pause]], rules: dict[str, EndpointRule]) -> dict[str, list[dict]]:
    """Each rule over its threshold (`EndpointRule.sweep`)."""
    return {
        name: [{"knob": knob, **evaluate(rule.with_knob(knob), utterances, pauses)[0]} for knob in rule.sweep()]
        for name, rule in rules.items()
    }


def plot(curve: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for detector, points in curve.items():
        pts = [p for p in points if p["wait_mean_ms"] is not None]
        ax.plot([p["wait_mean_ms"] for p in pts], [100 * p["false_cut_offs"] for p in pts], marker="o", label=detector)
    ax.set_xlabel("mean wait after a finished turn (ms)")
    ax.set_ylabel("false cut-offs of a caller who goes on (%)")
    ax.set_title("End-of-turn policies over their thresholds")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def load_models(threads: int = 1):
    from pipeline.asr import WhisperASR
    from pipeline.smart_turn import SmartTurn
    from pipeline.turn_lm import TurnLM
    from pipeline.vad import SileroVAD

    return SileroVAD(), WhisperASR(threads=threads), SmartTurn(), TurnLM()


def held_out_half(utterance: Utterance) -> bool:
    """The odd-numbered lines: the shipped rule's thresholds were chosen on the even ones."""
    return utterance.id[0] in "cd" and int(utterance.id[1:3]) % 2 == 1


def run(out_dir: Path, seed: int = 2026, recordings: list[Path] | None = None, lines: int | None = None) -> dict:
    """Build the set (its first `lines` of each kind; and add real recordings), scan it once, judge every rule; write
    report.json, events.csv, pauses.csv and curve.png to `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    utterances = build(seed, lines=lines) + [from_recording(path) for path in recordings or []]
    built_s = time.monotonic() - t0
    vad, asr, smart_turn, turn_lm = load_models()
    pauses = {u.id: scan(u, vad, asr, smart_turn, turn_lm) for u in utterances}
    asr.close()
    rules = EndpointRule.named()
    results, rows = {}, []
    half = [u for u in utterances if held_out_half(u)]
    real = [u for u in utterances if u.voice == "recording"]
    for name, rule in rules.items():
        results[name], outcomes = evaluate(rule, utterances, pauses)
        results[name]["held_out_half"] = evaluate(rule, half, pauses)[0]
        if real:
            results[name]["recordings"] = evaluate(rule, real, pauses)[0]
        rows += [{"rule": name, **asdict(o)} for o in outcomes]
    curve = curves(utterances, pauses, rules)
    every = [p for ps in pauses.values() for p in ps]
    report = {
        "seed": seed,
        "utterances": len(utterances),
        "voices": sorted({u.voice for u in utterances}),
        "labelled_pauses": sum(len(u.pauses) for u in utterances),
        "build_s": round(built_s, 1),
        "asr_ms_mean": round(float(np.mean([p.asr_ms for p in every])), 1),
        "smart_turn_ms_mean": round(float(np.mean([p.smart_turn_ms for p in every])), 1),
        "turn_lm_ms_mean": round(float(np.mean([p.lm_ms for p in every])), 1),
        "rules": {name: {"rule": rules[name].describe(), **stats} for name, stats in results.items()},
        "curves": curve,
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    write_csv(out_dir / "events.csv", rows)
    write_csv(out_dir / "pauses.csv", [{**asdict(p), "complete": looks_complete(p.text)} for p in every])
    plot(curve, out_dir / "curve.png")
    return report


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def table(report: dict) -> str:
    lines = [
        f"{report['utterances']} turns, {report['labelled_pauses']} pauses where the caller goes on, voices: {', '.join(report['voices'])}",
        f"decision times (mean): Whisper {report['asr_ms_mean']} ms, Smart Turn {report['smart_turn_ms_mean']} ms, "
        f"turn LM {report['turn_lm_ms_mean']} ms",
        f"{'policy':<14}{'cut off (all)':>14}{'cut off <=1.2 s':>17}{'done cut early':>16}{'wait mean':>11}{'wait p95':>10}  rule",
    ]
    for name, r in report["rules"].items():
        lines.append(
            f"{name:<14}{100 * r['false_cut_offs']:>13.1f}%{100 * r['false_cut_offs_to_1200ms']:>16.1f}%"
            f"{100 * r['done_cut_early']:>15.1f}%{r['wait_mean_ms']:>9} ms{r['wait_p95_ms']:>7} ms  {r['rule']}"
        )
    return "\n".join(lines)


def main(out: Path, seed: int, recordings: list[Path]) -> None:
    report = run(out, seed, recordings)
    print(table(report))
    half = {name: r["held_out_half"] for name, r in report["rules"].items()}
    print("\nodd-numbered lines only (the combined rule's thresholds were chosen on the even ones):")
    for name, r in half.items():
        print(f"{name:<14}{100 * r['false_cut_offs_to_1200ms']:>13.1f}% cut off <=1.2 s, wait mean {r['wait_mean_ms']} ms")
    print(f"\nwritten: {out}/report.json, events.csv, pauses.csv, curve.png")
