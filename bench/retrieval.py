"""Fact retrieval on scenario files: recall@k of the facts a right reply needs, per ranker, and time per turn."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from models.embedder import TUNED_LAYERS, Embedder
from pipeline.profile import LLMSettings, parse_profile
from pipeline.prompt import Message
from pipeline.questions import ask
from pipeline.retrieval import BM25_WEIGHT, FactIndex, Retriever, turn_query
from pipeline.spoken import speakable
from training.eval import load_scenarios
from training.textnorm import contains

KS = (1, 2, 3, 4, 5)
SERVED_K = LLMSettings().retrieved_facts  # the facts a call places before the question
FACT_KINDS = ("fact", "two_fact", "slot", "multi_fact")  # scenarios whose checks name the values of facts
RANKERS = ("embedding", "bm25", "served")  # served: hybrid with a pick per question part, as calls rank


def needed(profile_items: tuple[str, ...], checks: dict) -> set[int] | None:
    """The items holding the values a right reply must say (as written or as spoken); None if a value is in none."""

    def holding(value: str) -> set[int]:
        return {i for i, item in enumerate(profile_items) if contains(item, value) or contains(speakable(item), value)}

    out = set()
    for value in checks.get("must_include_all") or []:
        if not (hits := holding(value)):
            return None
        out |= hits
    if not out:  # one of several accepted values
        out = set().union(*(holding(v) for v in checks.get("must_include_any") or []))
    return out or None


def ranked(index: FactIndex, query: str, vector: np.ndarray, ranker: str) -> list[int]:
    scores = index.vectors @ vector if ranker == "embedding" else index.scores(query, None)
    return list(np.argsort(-scores, kind="stable"))


def measure(scenarios: list[dict], retriever: Retriever) -> dict:
    hits = {r: {k: [] for k in KS} for r in RANKERS}
    per_kind: dict[str, list[bool]] = {}
    split: dict[str, list[bool]] = {}
    turn_ms = []
    for s in scenarios:
        profile = parse_profile(s["profile"], s["id"])
        history = [Message(m["role"], m["content"]) for m in s["messages"] if m["role"] in ("user", "assistant", "tool")]
        index = retriever.index(profile)
        asks_facts = s.get("meta", {}).get("kind", "fact") in FACT_KINDS
        want = needed(index.items, s["checks"]) if asks_facts else None
        t0 = time.perf_counter()
        asked = ask(retriever, profile, history)  # what a call runs: the turn's facts, its two questions if it asks two
        turn_ms.append((time.perf_counter() - t0) * 1000)
        split.setdefault(s.get("meta", {}).get("kind", ""), []).append(asked.split is not None)
        served = retriever.relevant(profile, history, max(KS))
        if not want:
            continue
        query = turn_query(history)
        vector = retriever.encoder.embed([query])[0]
        for ranker in RANKERS[:-1]:
            order = ranked(index, query, vector, ranker)
            for k in KS:
                hits[ranker][k].append(want <= set(order[:k]))
        for k in KS:
            hits["served"][k].append(want <= {index.items.index(item) for item in served[:k]})
        per_kind.setdefault(s.get("meta", {}).get("kind", ""), []).append(hits["served"][SERVED_K][-1])
    rate = lambda flags: round(sum(flags) / len(flags), 4) if flags else 0.0  # noqa: E731
    return {
        "questions": len(hits["served"][SERVED_K]),
        "recall": {r: {f"@{k}": rate(hits[r][k]) for k in KS} for r in RANKERS},
        "served_recall_per_kind": {k: rate(v) for k, v in sorted(per_kind.items())},
        "asked_as_two_per_kind": {k: rate(v) for k, v in sorted(split.items())},
        "turn_ms": {
            "median": round(statistics.median(turn_ms), 2),
            "p95": round(float(np.percentile(turn_ms, 95)), 2),
            "max": round(max(turn_ms), 2),
            "turns": len(turn_ms),
        },
    }


def main(scenario_files: list[Path], out: Path | None, top_layers: Path | None = None) -> dict:
    """The bundled and the fine-tuned encoder side by side, one thread as in a call; a profile's fact vectors are
    built once per profile, outside the per-turn time."""
    torch.set_num_threads(1)
    tuned = top_layers or TUNED_LAYERS
    encoders = {"bundled": Embedder(top_layers=None)} | ({"tuned": Embedder(top_layers=tuned)} if tuned.exists() else {})
    report = {"bm25_weight": BM25_WEIGHT, "tuned_layers": str(tuned) if tuned.exists() else None, "files": {}}
    for path in scenario_files:
        scenarios = load_scenarios(path)
        report["files"][str(path)] = results = {}
        for name, encoder in encoders.items():
            encoder.embed(["warm up"])
            results[name] = measure(scenarios, Retriever(encoder))
        first = next(iter(results.values()))
        print(f"\n{path}: {first['questions']} questions that need facts, {first['turn_ms']['turns']} turns")
        print(f"{'encoder':<10}{'ranker':<12}" + "".join(f"{'recall@' + str(k):>11}" for k in KS) + f"{'turn ms p50/p95':>18}")
        for name, result in results.items():
            ms = result["turn_ms"]
            for ranker in RANKERS:
                timing = f"{ms['median']:.1f} / {ms['p95']:.1f}" if ranker == "served" else ""
                print(f"{name:<10}{ranker:<12}" + "".join(f"{result['recall'][ranker][f'@{k}']:>11.1%}" for k in KS) + f"{timing:>18}")
            kinds = ", ".join(f"{k} {v:.1%}" for k, v in result["served_recall_per_kind"].items())
            print(f"{'':<10}served recall@{SERVED_K} per kind: {kinds}")
            twos = ", ".join(f"{k} {v:.1%}" for k, v in result["asked_as_two_per_kind"].items())
            print(f"{'':<10}turns asked as two questions, per kind: {twos}")
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    return report
