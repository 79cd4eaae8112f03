"""Concurrent replies on the embedded engine, each forward alone against continuous batching, side by side."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import torch

from bench.latency import percentile
from bench.spec import load_prompts
from models.embedder import Embedder
from models.engine import Engine
from models.spec_config import SpecConfig
from pipeline.retrieval import Retriever, served_messages

WARM_ALL_BUT = 64  # prompt tokens a reply prefills itself; the rest is warmed first, as a call warms a turn while the caller speaks


def run_level(engine: Engine, prompts: list[list[int]], streams: int, max_new: int) -> dict:
    """`streams` threads answer `prompts` between them (stream i takes i, i+streams, ...), each on a new session
    whose cache holds the prompt but its last `WARM_ALL_BUT` tokens when the clock starts."""
    replies: dict[int, list[int]] = {}
    ttft, reply_s = [], []
    lock = threading.Lock()

    def stream(first: int) -> None:
        for index in range(first, len(prompts), streams):
            session = engine.new_session()
            engine.prefill(session, prompts[index][:-WARM_ALL_BUT])
            tokens, t0, first_at = [], time.perf_counter(), 0.0
            for token in engine.generate(session, prompts[index], max_new):
                first_at = first_at or time.perf_counter() - t0
                tokens.append(token)
            with lock:
                replies[index] = tokens
                ttft.append(first_at)
                reply_s.append(time.perf_counter() - t0)

    forwards_before = engine.batcher.stats.forwards if engine.batcher else 0
    packed_before = engine.batcher.stats.packed_forwards if engine.batcher else 0
    t0 = time.perf_counter()
    threads = [threading.Thread(target=stream, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(len(r) for r in replies.values())
    return {
        "streams": streams,
        "replies": len(replies),
        "tokens": tokens,
        "wall_s": round(wall, 2),
        "tok_s": round(tokens / wall, 1),
        **{
            f"{name}_p{q}_ms": percentile([v * 1000 for v in values], q)
            for name, values in (("ttft", ttft), ("reply", reply_s))
            for q in (50, 95)
        },
        "packed_share": (
            round((engine.batcher.stats.packed_forwards - packed_before) / max(1, engine.batcher.stats.forwards - forwards_before), 2)
            if engine.batcher
            else None
        ),
        "outputs": [replies[i] for i in range(len(prompts))],
    }


def main(prompts_file: Path, levels: list[int], rounds: int, max_new_tokens: int, out: Path | None, threads: int = 1) -> dict:
    """At each level of concurrent streams, `rounds` alternating runs without and with batching (the served engine:
    the tuned model, speculative decoding), on enough prompts for four replies a stream. Print and return."""
    torch.set_num_threads(threads)
    retriever = Retriever(Embedder())
    config = SpecConfig()
    alone, batched = Engine.load(spec=config), Engine.load(spec=config, batching=True)
    chats = [alone.encode_chat(served_messages(profile, history, retriever)) for profile, history in load_prompts(prompts_file)]
    rows, lossless = [], True
    for streams in levels:
        prompts = [chats[i % len(chats)] for i in range(max(len(chats), 4 * streams))]
        for _ in range(rounds):
            for mode, engine in (("alone", alone), ("batched", batched)):
                result = run_level(engine, prompts, streams, max_new_tokens)
                rows.append({"mode": mode, **result})
            lossless &= rows[-1]["outputs"] == rows[-2]["outputs"]
    report = {
        "prompts_file": str(prompts_file),
        "threads": threads,
        "max_new_tokens": max_new_tokens,
        "lossless": lossless,
        "levels": [{k: v for k, v in row.items() if k != "outputs"} for row in rows],
    }
    print(f"{'streams':>7} {'mode':<8} {'replies':>7} {'tokens/s':>9} {'first token p50/p95':>20} {'reply p50/p95':>16} {'packed':>7}")
    for row in report["levels"]:
        packed = "" if row["packed_share"] is None else f"{row['packed_share']:.0%}"
        print(
            f"{row['streams']:>7} {row['mode']:<8} {row['replies']:>7} {row['tok_s']:>9} "
            f"{row['ttft_p50_ms']:>9.0f} / {row['ttft_p95_ms']:<8.0f} {row['reply_p50_ms']:>7.0f} / {row['reply_p95_ms']:<7.0f} {packed:>7}"
        )
    print(f"outputs identical with and without batching: {lossless}")
    if out:
        out.write_text(json.dumps(report, indent=2))
    return report
