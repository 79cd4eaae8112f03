"""Plain greedy vs speculative greedy on the embedded engine, side by side in one process."""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.llamacpp import LlamaCppReference
from models.eagle3 import random_drafter
from models.embedder import Embedder
from models.engine import Engine
from models.session import GenerationStats, Session
from models.spec_config import SpecConfig
from pipeline.profile import DEFAULT_PROFILES, Profile, load_profiles, parse_profile
from pipeline.prompt import Message
from pipeline.retrieval import Retriever, served_messages

FOLLOW_UP = "Thanks. Could you say that again more briefly?"


@dataclass
class Run:
    tokens: list[int]
    ttft_s: float
    decode_s: float
    stats: GenerationStats


def timed(engine: Engine, session: Session, prompt: list[int], max_new: int) -> Run:
    """Generate greedily; time to first token and the decode time after it."""
    stats, tokens = GenerationStats(), []
    t0 = time.perf_counter()
    ttft = 0.0
    for token in engine.generate(session, prompt, max_new, stats=stats):
        if not tokens:
            ttft = time.perf_counter() - t0
        tokens.append(token)
    return Run(tokens, ttft, time.perf_counter() - t0 - ttft, stats)


def load_prompts(path: Path, profiles_dir: Path = DEFAULT_PROFILES) -> list[tuple[Profile, list[Message]]]:
    """JSONL lines {"profile": <id or object>, "messages": [{"role", "content"}, ...]}."""
    known = load_profiles(profiles_dir)
    prompts = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        ref = row["profile"]
        profile = known[ref] if isinstance(ref, str) else parse_profile(ref, f"{path}:{n}")
        prompts.append((profile, [Message(m["role"], m["content"]) for m in row["messages"]]))
    return prompts


def sample_prompts(prompts: list, limit: int | None) -> list:
    """A seeded sample of `limit` prompts (all of them without a limit)."""
    return prompts if limit is None or limit >= len(prompts) else random.Random(0).sample(prompts, limit)


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1) if values else 0.0


def compare(
    plain: Engine, spec: Engine, prompts, max_new: int, retriever: Retriever | None = None, reference: LlamaCppReference | None = None
) -> dict:
    """Per prompt, interleaved: plain greedy, speculative greedy (then a follow-up turn on its cache), and the reference
    on the same prompt tokens."""
    rows, lossless = [], True
    plain_tokens = plain_time = spec_tokens = spec_time = ref_tokens = ref_time = 0.0
    verify, emitted_after_prefill = 0, 0
    plain_ttft, ttft, followup, ref_ttft = [], [], [], []
    for profile, history in prompts:
        prompt = plain.encode_chat(served_messages(profile, history, retriever))
        a = timed(plain, plain.new_session(), prompt, max_new)
        plain_ttft.append(a.ttft_s)
        if reference is not None:
            tokens, first_s, decode_s = reference.timed(prompt, max_new)
            ref_tokens, ref_time = ref_tokens + max(len(tokens) - 1, 0), ref_time + decode_s
            ref_ttft.append(first_s)
        session = spec.new_session()
        b = timed(spec, session, prompt, max_new)
        same = a.tokens == b.tokens
        lossless &= same
        plain_tokens, plain_time = plain_tokens + len(a.tokens) - 1, plain_time + a.decode_s
        spec_tokens, spec_time = spec_tokens + len(b.tokens) - 1, spec_time + b.decode_s
        verify += b.stats.target_forwards - 1
        emitted_after_prefill += b.stats.new_tokens - 1
        ttft.append(b.ttft_s)
        reply = spec.tokenizer.decode(b.tokens, skip_special_tokens=True)
        more = history + [Message("assistant", reply), Message("user", FOLLOW_UP)]
        c = timed(spec, session, spec.encode_chat(served_messages(profile, more, retriever)), 1)
        followup.append(c.ttft_s)
        rows.append(
            {
                "profile": profile.id,
                "prompt": history[-1].content,
                "identical": same,
                "plain_tokens": len(a.tokens),
                "spec_accept_len": round(b.stats.mean_accept_len, 2),
                "followup_new_tokens": c.stats.prompt_tokens - c.stats.reused_tokens,
            }
        )
    plain_tok_s = plain_tokens / plain_time if plain_time else 0.0
    spec_tok_s = spec_tokens / spec_time if spec_time else 0.0
    report = {
        "n": len(rows),
        "plain_tok_s": round(plain_tok_s, 1),
        "spec_tok_s": round(spec_tok_s, 1),
        "speedup": round(spec_tok_s / plain_tok_s, 2) if plain_tok_s else 0.0,
        "mean_accept_len": round(emitted_after_prefill / verify, 2) if verify else 0.0,
        "lossless": lossless,
        "plain_ttft_ms": median_ms(plain_ttft),
        "ttft_ms": median_ms(ttft),
        "followup_ttft_ms": median_ms(followup),
        "draft_tokens": spec.draft_tokens,
        "prompts": rows,
    }
    if reference is not None:
        tok_s = ref_tokens / ref_time if ref_time else 0.0
        report["reference"] = {"name": reference.name, "plain_tok_s": round(tok_s, 1), "ttft_ms": median_ms(ref_ttft)}
    return report


def main(
    prompts_file: Path,
    config: SpecConfig,
    max_new_tokens: int,
    out: Path | None,
    threads: int = 1,
    limit: int | None = None,
    retrieval: bool = True,
    untrained: bool = False,
    model: str = "tuned",
    weights: str = "bf16",
    batching: bool = False,
    llama_cpp: bool = False,
) -> dict:
    """Compare on the prompts of `prompts_file` (a seeded sample of `limit` of them), each with the facts retrieved for
    its last turn as a call has them; `untrained` (or a config without a drafter) drafts with a random drafter;
    `batching` runs the forwards through the engine's batcher, as served; `llama_cpp` adds llama.cpp on the bundled GGUF
    (`bench/llamacpp.py`). Print and return the report."""
    torch.set_num_threads(threads)
    retriever = Retriever(Embedder()) if retrieval else None
    prompts = sample_prompts(load_prompts(prompts_file), limit)
    plain = Engine.load(model=model, weights=weights, batching=batching)
    anchor = LlamaCppReference(threads, plain.stop_ids) if llama_cpp else None
    untrained = untrained or config.drafter is None
    if untrained:
        draft = random_drafter(plain.model.config, 8192, seed=0)
        spec = Engine(
            plain.model, plain.tokenizer, draft, config.draft_tokens, config.min_confidence, config.prompt_lookup, batching=batching
        )
    else:
        spec = Engine.load(model=model, spec=config, weights=weights, batching=batching)
    report = {
        "model": model,
        "weights": weights,
        "batching": batching,
        "drafter": "random (untrained, seed 0)" if untrained else str(config.drafter),
        "threads": threads,
        "prompts_file": str(prompts_file),
        "retrieval": retrieval,
        "min_confidence": config.min_confidence,
        "prompt_lookup": config.prompt_lookup,
        "phrases": len(spec.phrases) if spec.phrases is not None else None,
        "learn_phrases": config.learn_phrases,
        **compare(plain, spec, prompts, max_new_tokens, retriever, anchor),
    }
    print(f"weights: {weights}   drafter: {report['drafter']}   prompts: {report['n']}   max new tokens: {max_new_tokens}")
    for key in ("plain_tok_s", "spec_tok_s", "speedup", "mean_accept_len", "lossless", "plain_ttft_ms", "ttft_ms", "followup_ttft_ms"):
        print(f"  {key:<18} {report[key]}")
    if ref := report.get("reference"):
        print(f"{ref['name']}, plain greedy:")
        for key in ("plain_tok_s", "ttft_ms"):
            print(f"  {key:<18} {ref[key]}")
    if out:
        out.write_text(json.dumps(report, indent=2))
    return report
