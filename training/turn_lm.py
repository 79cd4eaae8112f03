"""`talkline train turn-lm`: fine-tune the words' end-of-turn model (`pipeline/turn_lm.py`), the top layers of the
bundled MiniLM and a one-logit head, to tell a caller's finished turn from the same turn cut off at a word.

Turns come from the training data's generators only. Half are the realistic train pools' caller turns, composed as
the brand data composes them (tone wrappers and remarks, lead-ins, two questions, corrections, speech-recognition
style): a question, a slot reply, a request for a person, small talk or an off-topic line; half are the caller turns
of the templated generator's training brands (record lookups with their codes and numbers, goodbyes, questions about
the agent). Half the examples are cut at a random word and labelled "goes on". Some realistic train sectors are kept
out to report validation; the held-out pools and brands and the endpointing benchmark's lines are never read."""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from pipeline.turn_lm import HEAD, TurnLM, words_only
from training.data.callers import TONES
from training.data.dialogues import KINDS
from training.data.generate import DataConfig, conversation, make_brands, with_some_tools
from training.data.realistic.callers import CallerPool, caller_pool, caller_turn, corrected, two_questions
from training.data.realistic.pools import SectorPool, load_pools


@dataclass(frozen=True)
class TurnLMTrainConfig:
    out: Path = Path("runs/turn-lm")
    steps: int = 1200
    batch_size: int = 32
    lr: float = 5e-5  # the encoder's top layers
    head_lr: float = 1e-3
    train_layers: int = 3
    cut_share: float = 0.5  # examples cut at a random word ("goes on")
    templated_share: float = 0.5  # examples from the templated generator's training brands
    validation_sectors: int = 5
    validation_examples: int = 1000
    seed: int = 0
    threads: int = 2


def caller_line(rng: random.Random, pool: SectorPool, callers: CallerPool) -> str:
    """One whole caller turn in a sector of the train pools."""
    topics = [t for t in pool.topics if t.asks]

    def ask() -> str:
        topic = rng.choice(topics)
        line = rng.choice(topic.asks[rng.choice(sorted(topic.asks))])
        return line.format(brand="you", **{k: rng.choice(v) for k, v in pool.names.items()})

    tone, kind = rng.choice(callers.tones), rng.random()
    if kind < 0.45:
        return caller_turn(rng, callers, tone, ask())
    if kind < 0.55:
        return caller_turn(rng, callers, tone, two_questions(rng, callers, ask(), ask()), 0.15)
    if kind < 0.6:
        return caller_turn(rng, callers, tone, corrected(rng, callers, ask(), ask()))
    if kind < 0.72 and (choices := [t.choice for t in topics if t.choice]):
        choice = rng.choice(choices)
        return rng.choice(choice[rng.choice(sorted(k for k in choice if k != "question"))])
    if kind < 0.8:
        return caller_turn(rng, callers, tone, rng.choice(pool.unknowns))
    if kind < 0.88:
        return rng.choice(callers.human)
    if kind < 0.96:
        return rng.choice(rng.choice(list(callers.small_talk.values())))
    return rng.choice(callers.off_topic)


def templated_line(rng: random.Random, brands: list, data: DataConfig) -> str:
    """One caller turn of a conversation the templated generator makes for one of its training brands."""
    record = conversation(rng, rng.choice(brands), rng.choices(KINDS, data.kind_weights)[0], rng.choice(TONES))
    return rng.choice([m["content"] for m in record["messages"] if m["role"] == "user"])


def cut_or_whole(rng: random.Random, line: str, cut_share: float) -> tuple[str, int]:
    """(the words as the model reads them, 1 for the finished turn or 0 for it cut at a word)."""
    words = words_only(line).split()
    if len(words) >= 2 and rng.random() < cut_share:
        return " ".join(words[: rng.randrange(1, len(words))]), 0
    return " ".join(words), 1


def example(rng: random.Random, pool: SectorPool, callers: CallerPool, cut_share: float) -> tuple[str, int]:
    return cut_or_whole(rng, caller_line(rng, pool, callers), cut_share)


def area_under_roc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a finished turn scores above a cut one (ties count half)."""
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for value in np.unique(scores):
        tied = scores == value
        ranks[tied] = ranks[tied].mean()
    done = labels.astype(bool)
    return float((ranks[done].sum() - done.sum() * (done.sum() + 1) / 2) / (done.sum() * (~done).sum()))


def train(cfg: TurnLMTrainConfig) -> dict:
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    callers = caller_pool("train")
    pools = list(load_pools("train"))
    random.Random(f"turn-lm-split-{cfg.seed}").shuffle(pools)
    val_pools, train_pools = pools[: cfg.validation_sectors], pools[cfg.validation_sectors :]
    val_rng = random.Random(f"turn-lm-val-{cfg.seed}")
    validation = [example(val_rng, val_rng.choice(val_pools), callers, cfg.cut_share) for _ in range(cfg.validation_examples)]
    data = DataConfig()
    templated = with_some_tools(data, make_brands(data)["train"])
    model = TurnLM(weights=None)
    model.train_mode(cfg.train_layers)
    opt = torch.optim.AdamW(
        [
            {"params": model.trainable_encoder_parameters(cfg.train_layers), "lr": cfg.lr},
            {"params": model.head.parameters(), "lr": cfg.head_lr},
        ],
        weight_decay=0.01,
    )

    def validate() -> dict:
        model.encoder.eval()  # no dropout
        with torch.inference_mode():
            scores = np.concatenate(
                [model.logits([t for t, _ in validation[i : i + 64]]).float().numpy() for i in range(0, len(validation), 64)]
            )
        model.encoder.train()
        labels = np.array([y for _, y in validation])
        return {"val_auc": round(area_under_roc(scores, labels), 4), "val_accuracy": round(float(((scores > 0) == labels).mean()), 4)}

    history = [{"step": 0, **validate()}]
    print(history[-1])
    t0 = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        batch = [
            cut_or_whole(rng, templated_line(rng, templated, data), cfg.cut_share)
            if rng.random() < cfg.templated_share
            else example(rng, rng.choice(train_pools), callers, cfg.cut_share)
            for _ in range(cfg.batch_size)
        ]
        target = torch.tensor([y for _, y in batch], dtype=torch.float32)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model.logits([t for t, _ in batch]).float(), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == cfg.steps:
            per_step = round((time.perf_counter() - t0) / step, 2)
            history.append({"step": step, "loss": round(loss.item(), 4), **validate(), "s_per_step": per_step})
            print(history[-1])
    cfg.out.mkdir(parents=True, exist_ok=True)
    save_file(model.trained_weights(cfg.train_layers), str(cfg.out / HEAD.name))
    record = {"config": {k: str(v) for k, v in asdict(cfg).items()}, "validation_sectors": [p.name for p in val_pools], "history": history}
    (cfg.out / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
