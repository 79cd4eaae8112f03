"""ASR window benchmark: word error rate and decode time of the bench questions, for each encoder window.

python -m bench.asr [--windows 10 30] [--threads 2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

from bench.latency import read_wav
from bench.make_audio import OUT as AUDIO
from bench.make_audio import QUESTIONS
from pipeline.asr import WhisperASR


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).split()


def edit_distance(a: list[str], b: list[str]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def wer(refs: list[str], hyps: list[str]) -> float:
    """Corpus word error rate."""
    errors = sum(edit_distance(words(r), words(h)) for r, h in zip(refs, hyps))
    return errors / max(sum(len(words(r)) for r in refs), 1)


def run(windows: list[float], threads: int, repeats: int) -> dict:
    files = sorted(AUDIO.glob("q*.wav"))
    refs = [QUESTIONS[int(f.name[1:3])] for f in files]
    clips = [read_wav(f) for f in files]
    report = {"files": len(files), "threads": threads, "windows": {}}
    for window in windows:
        asr = WhisperASR(threads=threads, window_s=window)
        asr.transcribe(clips[0])
        hyps, times = [], []
        for clip in clips:
            for _ in range(repeats):
                t0 = time.perf_counter()
                text = asr.transcribe(clip)
                times.append((time.perf_counter() - t0) * 1000)
            hyps.append(text)
        report["windows"][str(window)] = {
            "wer": round(wer(refs, hyps), 4),
            "decode_ms_p50": round(statistics.median(times), 1),
            "decode_ms_max": round(max(times), 1),
            "transcripts": dict(zip([f.name for f in files], hyps)),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=float, nargs="+", default=[10.0, 30.0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = run(args.windows, args.threads, args.repeats)
    print(f"{'window s':>9} {'WER':>7} {'p50 ms':>8} {'max ms':>8}   ({report['files']} clips, {args.threads} threads)")
    for window, r in report["windows"].items():
        print(f"{window:>9} {r['wer']:>7.1%} {r['decode_ms_p50']:>8} {r['decode_ms_max']:>8}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
