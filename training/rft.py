"""Rejection-sampling fine-tuning (RFT) data: sample several replies per training prompt from the current model, keep
the best one that passes the eval's own checks, and write them as SFT data that `talkline train sft --data-dir`
continues the adapter on. Prompts no sample answered keep their written reply, so the hard ones are not dropped.
Prompts where some reply fails also give a preference pair (`pairs.jsonl`, for `talkline train dpo`): the kept reply
against the failing one the rewards score lowest, so the model learns from its own mistakes.

The first reply per prompt is greedy (what a call gets), the rest sampled; the manifest reports the greedy pass rate
and pass@k per kind on the training prompts, which says where the model stands and what RFT can add.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

from training.checks import run_checks, word_count
from training.data.generate import write_jsonl
from training.rewards import REWARD_FUNCS, REWARD_WEIGHTS
from training.sft import read_jsonl


@dataclass
class RFTConfig:
    data_dir: Path = Path("runs/brands")  # SFT data whose rows carry meta.kind and meta.checks
    out: Path = Path("runs/rft")
    model: str = "tuned"  # tuned, or an adapter/model folder (models.assets.llm_dir)
    prompts: int = 600
    samples: int = 4  # replies per prompt: one greedy, the rest sampled
    temperature: float = 0.8
    max_new_tokens: int = 60
    workers: int = 2  # processes of one torch thread each
    seed: int = 0


def score(reply: str, kind: str, checks: dict) -> float:
    """The GRPO rewards' weighted sum for one reply (a reward that does not apply counts 0)."""
    total = 0.0
    for func in REWARD_FUNCS:
        value = func([reply], kind=[kind], checks=[checks])[0]
        total += REWARD_WEIGHTS[func.__name__] * (value or 0.0)
    return total


def passes(reply: str, checks: dict) -> bool:
    return all(run_checks(reply, checks).values())


def best_passing(replies: list[str], kind: str, checks: dict) -> str | None:
    """The passing reply with the highest reward (then the fewest words), or None if none passes."""
    ok = [r for r in replies if passes(r, checks)]
    return max(ok, key=lambda r: (score(r, kind, checks), -word_count(r))) if ok else None


def pick_prompts(rows: list[dict], n: int, seed: int) -> list[dict]:
    """A seeded sample of rows that end on a checked assistant reply."""
    usable = [r for r in rows if r.get("meta", {}).get("checks") and r["messages"][-1]["role"] == "assistant"]
    return random.Random(seed).sample(usable, min(n, len(usable)))


def sample_rows(model_path: str, rows: list[tuple[int, dict]], cfg: RFTConfig) -> list[dict]:
    """One worker's share of (prompt index, row): each row's replies, greedy first. Runs in its own process; a sampled
    reply's seed comes from the run's seed, the prompt index and the sample, so no two replies share one."""
    import torch

    from models.engine import Engine

    torch.set_num_threads(1)
    engine = Engine.load(Path(model_path))
    out = []
    for index, row in rows:
        prompt = engine.encode_chat(row["messages"][:-1])
        session = engine.new_session()
        replies = []
        for j in range(cfg.samples):
            temperature, seed = (0.0, None) if j == 0 else (cfg.temperature, (cfg.seed * cfg.prompts + index) * cfg.samples + j)
            text = engine.generate_text(session, prompt, cfg.max_new_tokens, temperature=temperature, seed=seed)
            replies.append("".join(text).strip())
        out.append({"row": row, "replies": replies})
    return out


def worst_failing(replies: list[str], kind: str, checks: dict) -> str | None:
    """The failing reply with the lowest reward (then the most words), or None if every reply passes."""
    bad = [r for r in replies if not passes(r, checks)]
    return min(bad, key=lambda r: (score(r, kind, checks), -word_count(r))) if bad else None


def preference_pair(row: dict, replies: list[str]) -> dict | None:
    """A prompt's pair for preference training: the reply RFT keeps against its worst failing sample (None if all pass)."""
    meta = row["meta"]
    rejected = worst_failing(replies, meta["kind"], meta["checks"])
    if rejected is None:
        return None
    chosen = kept_row(row, replies)[0]["messages"][-1]["content"]
    return {"messages": row["messages"][:-1], "chosen": chosen, "rejected": rejected, "meta": meta}


def kept_row(row: dict, replies: list[str]) -> tuple[dict, dict]:
    """The SFT row RFT keeps for a prompt, and what happened to it (for the manifest)."""
    meta = row["meta"]
    chosen = best_passing(replies, meta["kind"], meta["checks"])
    outcome = {
        "kind": meta["kind"],
        "greedy_passed": passes(replies[0], meta["checks"]),
        "any_passed": chosen is not None,
        "kept": "sample" if chosen is not None else "written",
    }
    messages = row["messages"][:-1] + [{"role": "assistant", "content": chosen if chosen is not None else row["messages"][-1]["content"]}]
    return {"messages": messages, "meta": {**meta, "rft": outcome["kept"]}}, outcome


def summarize(outcomes: list[dict]) -> dict:
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for o in outcomes:
        by_kind[o["kind"]].append(o)

    def rates(group: list[dict]) -> dict:
        n = len(group)
        return {
            "prompts": n,
            "greedy_pass": round(sum(o["greedy_passed"] for o in group) / n, 4),
            "pass_at_k": round(sum(o["any_passed"] for o in group) / n, 4),
        }

    per_kind = {k: rates(v) for k, v in sorted(by_kind.items())}
    return {"all": rates(outcomes), "per_kind": per_kind, "kept": dict(Counter(o["kept"] for o in outcomes))}


def main(cfg: RFTConfig) -> dict:
    """Sample, keep, and write `out/train.jsonl`, `out/pairs.jsonl`, `out/general.jsonl` (copied) and
    `out/manifest.json`."""
    from models.assets import llm_dir

    model_path = str(llm_dir(cfg.model))  # merged once here, not raced by the workers
    rows = list(enumerate(pick_prompts(read_jsonl(cfg.data_dir / "train.jsonl"), cfg.prompts, cfg.seed)))
    shards = [rows[w :: cfg.workers] for w in range(cfg.workers)]
    with ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn")) as pool:
        done = list(pool.map(sample_rows, [model_path] * cfg.workers, shards, [cfg] * cfg.workers))
    kept, outcomes, pairs = [], [], []
    for sampled in (s for shard in done for s in shard):
        row, outcome = kept_row(sampled["row"], sampled["replies"])
        kept.append(row)
        outcomes.append(outcome)
        if pair := preference_pair(sampled["row"], sampled["replies"]):
            pairs.append(pair)
    write_jsonl(cfg.out / "train.jsonl", kept)
    write_jsonl(cfg.out / "pairs.jsonl", pairs)
    if (cfg.data_dir / "general.jsonl").exists():
        shutil.copyfile(cfg.data_dir / "general.jsonl", cfg.out / "general.jsonl")
    config = {**asdict(cfg), "data_dir": str(cfg.data_dir), "out": str(cfg.out)}
    manifest = {"config": config, "model_path": model_path, **summarize(outcomes), "pairs": len(pairs)}
    (cfg.out / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest
