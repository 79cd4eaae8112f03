"""The easy-to-hard curriculum: an ordered list of phases, each mostly its own stage plus replay of earlier ones."""

from __future__ import annotations

import random
from dataclasses import dataclass

STAGES = ("facts", "multi_turn", "tones", "escalation")
MIXED = "mixed"  # a review phase: every stage, in proportion to the data (ends a curriculum without recency bias)


@dataclass(frozen=True)
class Phase:
    stage: str  # a value of meta.curriculum_stage
    share: float  # fraction of all training examples spent in this phase


DEFAULT_SCHEDULE = (Phase("facts", 0.25), Phase("multi_turn", 0.25), Phase("tones", 0.25), Phase("escalation", 0.25))


def parse_schedule(text: str) -> tuple[Phase, ...]:
    """ "facts:0.25,multi_turn:0.25,tones:0.25,escalation:0.25" -> phases, in order."""
    phases = []
    for item in text.split(","):
        stage, _, share = item.strip().partition(":")
        if stage not in (*STAGES, MIXED):
            raise ValueError(f"curriculum stage '{stage}' is not one of {', '.join((*STAGES, MIXED))}")
        phases.append(Phase(stage, float(share)))
    return tuple(phases)


def order_examples(rows: list[dict], schedule: tuple[Phase, ...], total: int, replay: float, seed: int) -> tuple[list[dict], list[dict]]:
    """`total` examples in curriculum order, and the plan (per phase: stage, first example, count, replayed)."""
    rng = random.Random(seed)
    pools = {stage: [r for r in rows if r["meta"]["curriculum_stage"] == stage] for stage in STAGES}
    pools[MIXED] = list(rows)
    for stage in (p.stage for p in schedule):
        if not pools[stage]:
            raise ValueError(f"no training examples for curriculum stage '{stage}'")
    cursors = {stage: 0 for stage in pools}
    for pool in pools.values():
        rng.shuffle(pool)

    def draw(stage: str) -> dict:
        pool = pools[stage]
        if cursors[stage] == len(pool):  # pool used up: start a new shuffled pass
            rng.shuffle(pool)
            cursors[stage] = 0
        cursors[stage] += 1
        return pool[cursors[stage] - 1]

    weight = sum(p.share for p in schedule)
    ordered, plan, seen = [], [], []
    for i, phase in enumerate(schedule):
        n = total - len(ordered) if i == len(schedule) - 1 else round(total * phase.share / weight)
        n_replay = round(n * replay) if seen and phase.stage != MIXED else 0
        chunk = [draw(phase.stage) for _ in range(n - n_replay)] + [draw(rng.choice(seen)) for _ in range(n_replay)]
        rng.shuffle(chunk)
        plan.append({"stage": phase.stage, "start": len(ordered), "examples": n, "replayed": n_replay})
        ordered += chunk
        seen.append(phase.stage)
    return ordered, plan
