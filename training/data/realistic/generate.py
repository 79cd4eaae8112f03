"""Composed brand data: training conversations from the train pools and held-out scenarios from the separately
written held-out pools (no shared sector, fact wording or caller line), both from one seed."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pipeline.retrieval import Retriever
from training.data import generate as templated
from training.data.brands import brand_names
from training.data.dialogues import curriculum_stage
from training.data.general import general_prompts
from training.data.generate import _scenario, grounded, rivals, training_messages, write_jsonl
from training.data.realistic.brands import RealBrand, make_real_brand
from training.data.realistic.callers import caller_pool
from training.data.realistic.dialogues import Dialogue, build, unanswerable_twin
from training.data.realistic.pools import load_pools

SCENARIOS_PATH = Path(__file__).resolve().parents[2] / "scenarios_brands_heldout.jsonl"
TRAIN_KINDS = ("fact", "two_fact", "slot", "unknown", "human", "small_talk", "follow_up", "correction")
SCENARIO_KINDS = ("fact", "two_fact", "slot", "unknown", "human", "small_talk")


@dataclass(frozen=True)
class BrandDataConfig:
    seed: int = 2026
    train_brands_per_sector: int = 14
    heldout_brands_per_sector: int = 8
    train_facts: tuple[int, int] = (6, 16)
    heldout_facts: tuple[int, int] = (8, 14)
    tools_share: float = 0.5  # brands that declare transfer_to_human and end_call
    conversations: int = 7000
    templated_conversations: int = 3000  # from `talkline train data`'s generator: record lookups, codes, tool calls
    scenarios: int = 320
    train_kind_weights: tuple[float, ...] = (0.26, 0.16, 0.08, 0.2, 0.08, 0.06, 0.1, 0.06)  # TRAIN_KINDS order
    scenario_kind_weights: tuple[float, ...] = (0.4, 0.15, 0.1, 0.15, 0.1, 0.1)  # SCENARIO_KINDS order
    twin_share: float = 0.0  # one-fact conversations also written to the brand without that fact ("I don't have that")


def kind_weights_from(spec: str, base: tuple[float, ...] = BrandDataConfig.train_kind_weights) -> tuple[float, ...]:
    """TRAIN_KINDS weights from "kind:weight,..." (kinds not named keep `base`'s)."""
    weights = dict(zip(TRAIN_KINDS, base))
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, _, weight = part.partition(":")
        if kind not in weights:
            raise ValueError(f"unknown kind {kind!r} in --kind-weights: use {', '.join(TRAIN_KINDS)}")
        weights[kind] = float(weight)
    return tuple(weights[k] for k in TRAIN_KINDS)


def make_brands(cfg: BrandDataConfig, split: str) -> list[RealBrand]:
    per_sector = cfg.train_brands_per_sector if split == "train" else cfg.heldout_brands_per_sector
    facts = cfg.train_facts if split == "train" else cfg.heldout_facts
    out = []
    for pool in load_pools(split):
        names = random.Random(f"{cfg.seed}-{split}-{pool.name}").sample(brand_names(pool), per_sector)
        out += [make_real_brand(random.Random(f"{cfg.seed}-{name}"), pool, name, facts, cfg.tools_share) for name in names]
    return out


def conversations(cfg: BrandDataConfig, brands: list[RealBrand], retriever: Retriever | None) -> list[dict]:
    """Training records in the served prompt format: system prompt, the dialogue, each caller turn's retrieved facts;
    a conversation whose reply states a number the model could not see is left out (`grounded`)."""
    rng = random.Random(f"brand-train-{cfg.seed}")
    twins = random.Random(f"brand-twins-{cfg.seed}")
    callers = caller_pool("train")
    out = []
    for _ in range(cfg.conversations):
        brand, kind, tone = rng.choice(brands), rng.choices(TRAIN_KINDS, cfg.train_kind_weights)[0], rng.choice(callers.tones)
        dialogue = build(rng, brand, kind, tone, callers)
        out += _record(rng, brand, dialogue, retriever)
        if cfg.twin_share and twins.random() < cfg.twin_share and (twin := unanswerable_twin(twins, brand, dialogue)):
            out += _record(twins, *twin, retriever)
    return out


def _record(rng: random.Random, brand: RealBrand, dialogue: Dialogue, retriever: Retriever | None) -> list[dict]:
    """A training record, or none where the reply states a number the model could not see (`grounded`)."""
    meta = {
        "sector": brand.pool.name,
        "intent": dialogue.intent,
        "tone": dialogue.tone,
        "kind": dialogue.kind,
        "brand": brand.name,
        "split": "train",
        "curriculum_stage": curriculum_stage(dialogue.kind, dialogue.tone),
        "checks": dialogue.checks(rivals(rng, brand)),
    }
    messages = training_messages(brand.profile, dialogue.history, retriever)
    return [{"messages": messages, "meta": meta}] if grounded(messages) else []


def heldout_scenarios(cfg: BrandDataConfig) -> tuple[list[RealBrand], list[dict]]:
    """The held-out brands and scenarios: drawn with the default seed whatever `cfg.seed` is, so fresh training data
    never changes the held-out file."""
    fixed = replace(cfg, seed=BrandDataConfig.seed)
    brands = make_brands(fixed, "heldout")
    return brands, scenarios(fixed, brands)


def scenarios(cfg: BrandDataConfig, brands: list[RealBrand], split: str = "heldout") -> list[dict]:
    """Scenarios: the history up to the caller's last turn, the checks, and a reference reply; callers speak in the
    lines of `split` (held-out ones for the held-out file, train ones for validation on kept-out train sectors)."""
    rng = random.Random(f"brand-scenarios-{cfg.seed}")
    callers = caller_pool(split)
    brands = rng.sample(brands, len(brands))
    quota = [k for k, w in zip(SCENARIO_KINDS, cfg.scenario_kind_weights) for _ in range(round(w * cfg.scenarios))]
    kinds = rng.sample(quota, len(quota)) + list(SCENARIO_KINDS) * cfg.scenarios  # exact shares; rounding topped up
    out = []
    for i in range(cfg.scenarios):
        brand = brands[i % len(brands)]
        kind, tone = kinds[i], rng.choice(callers.tones)
        dialogue = build(rng, brand, kind, tone, callers)
        out.append(_scenario(i, brand, dialogue, rivals(rng, brand), kind))
    return out


def generate_brands(
    out: Path, cfg: BrandDataConfig = BrandDataConfig(), scenarios_path: Path | None = None, retriever: Retriever | None = None
) -> dict:
    """Write an SFT data folder under `out` (train.jsonl: composed-brand and templated conversations, shuffled;
    general.jsonl; manifest.json) and the held-out scenario file. With a retriever every conversation's last caller
    turn carries the facts it ranks, as in a call."""
    train_brands = make_brands(cfg, "train")
    composed = conversations(cfg, train_brands, retriever)
    old_cfg = templated.DataConfig(seed=cfg.seed)
    old_brands = templated.with_some_tools(old_cfg, templated.make_brands(old_cfg)["train"])
    old = templated.conversations(old_cfg, old_brands, cfg.templated_conversations, "train", retriever)
    train = composed + old
    random.Random(f"brand-mix-{cfg.seed}").shuffle(train)
    heldout_brands, evals = heldout_scenarios(cfg)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "general.jsonl", [{"prompt": p} for p in general_prompts(cfg.seed, old_cfg.general_prompts)])
    write_jsonl(scenarios_path or out / "scenarios_brands_heldout.jsonl", evals)
    manifest = {
        "config": asdict(cfg),
        "counts": {
            "train": len(train),
            "composed": len(composed),
            "templated": len(old),
            "scenarios": len(evals),
            "train_brands": len(train_brands),
            "heldout_brands": len(heldout_brands),
            "train_sectors": len({b.pool.name for b in train_brands}),
            "heldout_sectors": len({b.pool.name for b in heldout_brands}),
            "by_kind": dict(Counter(r["meta"]["kind"] for r in train)),
            "by_stage": dict(Counter(r["meta"]["curriculum_stage"] for r in train)),
            "scenarios_by_kind": dict(Counter(s["meta"]["kind"] for s in evals)),
        },
        "retrieval": retriever is not None,
        "train_sectors": sorted({b.pool.name for b in train_brands}),
        "heldout_sectors": sorted({b.pool.name for b in heldout_brands}),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def validation_scenarios(cfg: BrandDataConfig, sectors: list[str], path: Path) -> list[dict]:
    """Scenarios from train sectors the retriever never trained on, in train callers' words: where ranking choices
    are made, so the held-out file only ever reports them."""
    brands = [b for b in make_brands(cfg, "train") if b.pool.name in sectors]
    rows = scenarios(cfg, brands, "train")
    write_jsonl(path, rows)
    return rows
