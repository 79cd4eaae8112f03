"""Write the SFT/RL conversations, the held-out eval scenarios and the general prompts, all from one seed."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from pipeline.profile import Profile
from pipeline.prompt import Message
from pipeline.retrieval import Retriever, served_messages
from training.data import tooluse
from training.data.brands import SECTORS, TRAIN_ONLY_SECTORS, Brand, brand_names, make_brand
from training.data.callers import TONES
from training.data.dialogues import (
    BUILDERS,
    KINDS,
    Dialogue,
    catalog_intents,
    curriculum_stage,
    fact,
    human,
    slot_request,
    tool,
    with_actions,
)
from training.data.general import general_prompts
from training.data.realistic.brands import RealBrand
from training.textnorm import normalize

DOUBLE_STOP = re.compile(r"(?<!\.)\.\.(?!\.)")  # "Co..", not an ellipsis

SCENARIOS_PATH = Path(__file__).resolve().parent.parent / "scenarios_heldout.jsonl"
TOOL_SCENARIOS_PATH = Path(__file__).resolve().parent.parent / "scenarios_tools_heldout.jsonl"
SCENARIO_KINDS = KINDS[:6]  # the tool-free scenario file; tool scenarios have their own
TOOL_SCENARIO_KINDS = ("tool_call", "tool_result", "transfer", "end_call", "no_call")


@dataclass(frozen=True)
class DataConfig:
    seed: int = 1234
    brands_per_sector: int = 30
    heldout_sectors: tuple[str, ...] = ("car rental", "fitness club")
    heldout_brand_fraction: float = 0.2  # of the other sectors' brands
    train_only_sectors: tuple[str, ...] = TRAIN_ONLY_SECTORS  # every brand trains; () leaves them out
    train_conversations: int = 9000
    heldout_conversations: int = 400
    scenarios: int = 200
    tool_scenarios: int = 150
    tool_brand_fraction: float = 0.5  # of training brands whose profile declares tools
    general_prompts: int = 200
    kind_weights: tuple[float, ...] = (0.32, 0.12, 0.18, 0.14, 0.11, 0.13, 0.14)  # in dialogues.KINDS order


def make_brands(cfg: DataConfig) -> dict[str, list[Brand]]:
    """Brands per split: held-out sectors entirely, plus a fraction of every other sector's brands.

    Train-only sectors come last and draw from their own random streams, so adding one leaves the held-out
    brands, conversations and scenario files exactly as they were."""
    rng = random.Random(f"brands-{cfg.seed}")
    splits: dict[str, list[Brand]] = {"train": [], "heldout": []}

    def add(sector_name: str, names_rng: random.Random, n_heldout: int) -> None:
        sector = SECTORS[sector_name]
        for i, brand in enumerate(names_rng.sample(brand_names(sector), cfg.brands_per_sector)):
            split = "heldout" if i < n_heldout else "train"
            splits[split].append(make_brand(random.Random(f"{cfg.seed}-{brand}"), sector, brand, split))

    for name in sorted(set(SECTORS) - set(TRAIN_ONLY_SECTORS)):
        all_out = name in cfg.heldout_sectors
        add(name, rng, cfg.brands_per_sector if all_out else round(cfg.brands_per_sector * cfg.heldout_brand_fraction))
    for name in cfg.train_only_sectors:
        add(name, random.Random(f"brands-{cfg.seed}-{name}"), 0)
    return splits


def tool_brand(cfg: DataConfig, brand: Brand) -> Brand:
    return tooluse.with_tools(random.Random(f"tools-{cfg.seed}-{brand.name}"), brand)


def with_some_tools(cfg: DataConfig, brands: list[Brand]) -> list[Brand]:
    """Each brand, given tools with probability tool_brand_fraction (decided per brand, from the seed)."""
    pick = random.Random(f"tool-brands-{cfg.seed}")
    return [tool_brand(cfg, b) if pick.random() < cfg.tool_brand_fraction else b for b in brands]


def rivals(rng: random.Random, brand: Brand | RealBrand) -> list[str]:
    """Three other brand names of the same sector, which the reply must never mention."""
    stem = brand.name.split()[0]
    return rng.sample([n for n in brand_names(brand.sector) if not n.startswith(stem + " ")], 3)


def conversation(rng: random.Random, brand: Brand, kind: str, tone: str, retriever: Retriever | None = None) -> dict:
    """One chat-format training record: system prompt via build_messages, then the dialogue."""
    if kind == "slot" and brand.profile.tools:
        kind = "tool"  # a brand that can look records up does
    build = BUILDERS[kind]
    if kind == "human" and brand.profile.tools:
        build = partial(human, offer_share=0.0)  # a brand that can transfer does, when asked, without offering first
    dialogue = with_actions(build(rng, brand, tone), brand)
    return _record(brand, dialogue, rivals(rng, brand), retriever)


def _record(brand: Brand, dialogue: Dialogue, rivals: list[str], retriever: Retriever | None = None) -> dict:
    meta = {
        "sector": brand.sector.name,
        "intent": dialogue.intent,
        "tone": dialogue.tone,
        "kind": dialogue.kind,
        "brand": brand.name,
        "split": brand.split,
        "curriculum_stage": curriculum_stage(dialogue.kind, dialogue.tone),
        "checks": dialogue.checks(rivals),
    }
    return {"messages": training_messages(brand.profile, dialogue.history, retriever), "meta": meta}


def training_messages(profile: Profile, history: list[Message], retriever: Retriever | None) -> list[dict]:
    """A conversation as the model sees it (each caller turn with the facts the retriever ranks for it), with one full
    stop where a brand that ends in an abbreviation ("Co.") ends a templated sentence."""
    return [{**m, "content": DOUBLE_STOP.sub(".", m["content"])} for m in served_messages(profile, history, retriever)]


def grounded(messages: list[dict]) -> bool:
    """Whether every number an agent reply says stands in what the model saw before it (system prompt, fact blocks,
    the dialogue): a reply whose fact retrieval missed would teach the model to invent it."""
    seen: set[str] = set()
    for m in messages:
        said = normalize(m["content"]).split()
        if m["role"] == "assistant" and any(t.isdigit() and t not in seen for t in said):
            return False
        seen.update(said)
    return True


def conversations(cfg: DataConfig, brands: list[Brand], n: int, salt: str, retriever: Retriever | None = None) -> list[dict]:
    """n conversations, less those whose replies state a number the model could not see (`grounded`)."""
    rng = random.Random(f"{salt}-{cfg.seed}")
    made = (conversation(rng, rng.choice(brands), rng.choices(KINDS, cfg.kind_weights)[0], rng.choice(TONES), retriever) for _ in range(n))
    return [r for r in made if grounded(r["messages"])]


def _scenario(i: int, brand: Brand, dialogue: Dialogue, rivals: list[str], kind: str | None = None) -> dict:
    """An eval scenario: the history up to the agent's last reply, which becomes the reference, and its checks."""
    history = [{"role": m.role, "content": m.content} for m in dialogue.history]
    target = history.pop()
    return {
        "id": f"{brand.profile.id}-{dialogue.intent}-{i}",
        "profile": brand.profile.model_dump(mode="json", exclude_defaults=True),
        "messages": history,
        "checks": dialogue.checks(rivals),
        "reference": target["content"],
        "meta": {"sector": brand.sector.name, "intent": dialogue.intent, "tone": dialogue.tone, "kind": kind or dialogue.kind},
    }


def scenarios(cfg: DataConfig, brands: list[Brand]) -> list[dict]:
    """Eval scenarios from held-out brands: the history up to the caller's last turn, and its checks."""
    rng = random.Random(f"scenarios-{cfg.seed}")
    brands = rng.sample(brands, len(brands))  # mixed sectors, so a --limit run still covers many
    out = []
    for i in range(cfg.scenarios):
        brand = brands[i % len(brands)]
        kind = rng.choices(SCENARIO_KINDS + ("slot_request",), cfg.kind_weights[: len(SCENARIO_KINDS)] + (0.06,))[0]
        build = slot_request if kind == "slot_request" else BUILDERS[kind]
        out.append(_scenario(i, brand, build(rng, brand, rng.choice(TONES)), rivals(rng, brand)))
    return out


def tool_dialogue(rng: random.Random, brand: Brand, kind: str, tone: str) -> Dialogue:
    """One held-out tool scenario's dialogue, ending at the reply under test."""
    if kind in ("tool_call", "tool_result"):
        while (d := tool(rng, brand, tone)).intent == "goodbye":
            pass
        if kind == "tool_result":
            return d
        call = json.loads(d.history[4].content.removeprefix("<tool_call>").removesuffix("</tool_call>"))
        return Dialogue(d.history[:5], d.intent, "tool", tone, tools=True, action=call["name"], arguments=call["arguments"])
    if kind == "end_call":
        while (d := tool(rng, brand, tone)).intent != "goodbye":
            pass
        return d
    return with_actions((human if kind == "transfer" else fact)(rng, brand, tone), brand)


def tool_scenarios(cfg: DataConfig, brands: list[Brand]) -> list[dict]:
    """Held-out tool scenarios: call the lookup with the code, speak its result, transfer, hang up, or call nothing."""
    rng = random.Random(f"tool-scenarios-{cfg.seed}")
    brands = [b for b in rng.sample(brands, len(brands)) if b.team]
    out = []
    for i in range(cfg.tool_scenarios):
        brand, kind = brands[i % len(brands)], TOOL_SCENARIO_KINDS[i % len(TOOL_SCENARIO_KINDS)]
        dialogue = tool_dialogue(rng, brand, kind, rng.choice(TONES))
        out.append(_scenario(i, brand, dialogue, rivals(rng, brand), kind))
    return out


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def generate(
    out: Path,
    cfg: DataConfig = DataConfig(),
    scenarios_path: Path | None = None,
    tool_scenarios_path: Path | None = None,
    retriever: Retriever | None = None,
) -> dict:
    """Write train.jsonl, heldout.jsonl, general.jsonl and manifest.json under `out` (and both scenario files); with a
    retriever, each conversation's last caller turn carries the facts it ranks, as calls do."""
    splits = make_brands(cfg)
    train = conversations(cfg, with_some_tools(cfg, splits["train"]), cfg.train_conversations, "train", retriever)
    heldout = conversations(cfg, with_some_tools(cfg, splits["heldout"]), cfg.heldout_conversations, "heldout", retriever)
    evals = scenarios(cfg, splits["heldout"])
    tool_evals = tool_scenarios(cfg, [tool_brand(cfg, b) for b in splits["heldout"]])
    general = [{"prompt": p} for p in general_prompts(cfg.seed, cfg.general_prompts)]
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "heldout.jsonl", heldout)
    write_jsonl(out / "general.jsonl", general)
    write_jsonl(scenarios_path or out / "scenarios_heldout.jsonl", evals)
    write_jsonl(tool_scenarios_path or out / "scenarios_tools_heldout.jsonl", tool_evals)
    manifest = {
        "config": asdict(cfg),
        "counts": {
            "train": len(train),
            "heldout": len(heldout),
            "scenarios": len(evals),
            "tool_scenarios": len(tool_evals),
            "general": len(general),
            "train_brands": len(splits["train"]),
            "heldout_brands": len(splits["heldout"]),
            "intents": len(catalog_intents()),
            "intents_seen": len({r["meta"]["intent"].removeprefix("unknown_") for r in train + heldout}),
            "by_kind": dict(Counter(r["meta"]["kind"] for r in train)),
            "with_tools": sum("action" in r["meta"]["checks"] for r in train),
            "by_stage": dict(Counter(r["meta"]["curriculum_stage"] for r in train)),
            "by_tone": dict(Counter(r["meta"]["tone"] for r in train)),
        },
        "train_sectors": sorted({b.sector.name for b in splits["train"]}),
        "heldout_sectors": sorted(cfg.heldout_sectors),
        "heldout_brands": sorted(b.name for b in splits["heldout"]),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
