"""`talkline train retriever`: fine-tune the top layers of the bundled MiniLM so a caller's own words land on the fact
that answers them. Pairs come from the train pools only (caller question -> the fact as a company writes it, with
drawn values); each batch is one sector's topics, so the other facts in it are the near misses to push away. Some
train sectors are kept out of the pairs to choose the step count; the held-out pools are never read."""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from models.embedder import TUNED_LAYERS, Embedder, pooled, top_layer_weights
from training.data.brands import brand_names
from training.data.realistic.brands import make_real_brand
from training.data.realistic.callers import caller_pool, caller_turn, two_questions
from training.data.realistic.pools import SectorPool, load_pools


@dataclass(frozen=True)
class RetrieverTrainConfig:
    out: Path = Path("runs/retriever")
    steps: int = 600
    batch_size: int = 24  # topics of one sector per step
    lr: float = 5e-5
    train_layers: int = 3  # the top encoder layers that learn; the rest stay as bundled
    scale: float = 20.0  # cosine similarity -> logits
    two_share: float = 0.0  # two-question turns per topic in a batch (0.3 did not help: docs/retrieval.md)
    validation_sectors: int = 5  # train sectors kept out of the pairs, to watch recall on
    seed: int = 0
    threads: int = 1


@dataclass(frozen=True)
class Batch:
    """One drawn brand's facts and caller turns; a turn's positives are the facts it asks for (two for a turn that
    asks two questions). The first len(facts) turns ask for the facts in order."""

    facts: list[str]
    queries: list[str]
    positives: list[tuple[int, ...]]


def draw_batch(rng: random.Random, pool: SectorPool, size: int, two_share: float) -> Batch:
    """Up to `size` topics of a freshly drawn brand: one question for each, then two-question turns."""
    every = len(pool.topics) - 2  # all but the two a brand always leaves out
    brand = make_real_brand(rng, pool, rng.choice(brand_names(pool)), (every, every), 0.0)
    callers = caller_pool("train")
    stated = rng.sample(brand.stated, min(size, len(brand.stated)))

    def ask(i: int) -> str:
        topic = stated[i].topic
        return rng.choice(topic.asks[rng.choice(sorted(topic.asks))]).format(**brand.names, brand=brand.name)

    queries = [caller_turn(rng, callers, rng.choice(callers.tones), ask(i)) for i in range(len(stated))]
    positives: list[tuple[int, ...]] = [(i,) for i in range(len(stated))]
    for _ in range(round(two_share * len(stated))):
        i, j = rng.sample(range(len(stated)), 2)
        queries.append(caller_turn(rng, callers, rng.choice(callers.tones), two_questions(rng, callers, ask(i), ask(j)), 0.15))
        positives.append((i, j))
    return Batch([s.fact for s in stated], queries, positives)


def _vectors(model, tokenizer, texts: list[str]) -> torch.Tensor:
    enc = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    return pooled(model(**enc).last_hidden_state, enc["attention_mask"])


def batch_loss(model, tokenizer, batch: Batch, scale: float) -> torch.Tensor:
    """Each turn against the facts (a two-question turn once per asked fact, the other one masked), and each fact
    against the single-question turns: in-batch cross-entropy, the sector's other facts as negatives."""
    logits = scale * _vectors(model, tokenizer, batch.queries) @ _vectors(model, tokenizer, batch.facts).T
    rows, targets = [], []
    for row, positives in enumerate(batch.positives):
        for p in positives:
            mask = torch.zeros(logits.shape[1], dtype=torch.bool)
            mask[[o for o in positives if o != p]] = True
            rows.append(logits[row].masked_fill(mask, -1e4))
            targets.append(p)
    n = len(batch.facts)
    turn_loss = torch.nn.functional.cross_entropy(torch.stack(rows), torch.tensor(targets))
    fact_loss = torch.nn.functional.cross_entropy(logits[:n].T, torch.arange(n))
    return (turn_loss + fact_loss) / 2


def recall_at(model, tokenizer, batches: list[Batch], k: int = 3) -> dict[str, float]:
    """Share of turns whose asked facts all rank in the top k among the brand's facts: one question, two questions."""
    hits: dict[str, list[bool]] = {"one": [], "two": []}
    with torch.inference_mode():
        for batch in batches:
            scores = _vectors(model, tokenizer, batch.queries) @ _vectors(model, tokenizer, batch.facts).T
            top = scores.topk(min(k, len(batch.facts)), dim=1).indices.tolist()
            for row, positives in zip(top, batch.positives):
                hits["one" if len(positives) == 1 else "two"].append(set(positives) <= set(row))
    return {f"val_recall_at_{k}_{name}": round(sum(v) / len(v), 4) for name, v in hits.items() if v}


SHIPPED_RECORD = TUNED_LAYERS.with_name("run.json")


def kept_out_sectors(record: Path = SHIPPED_RECORD) -> list[str]:
    """The train sectors the shipped encoder's pairs left out (its run.json), where ranking choices are validated;
    read from the record, so pools added since cannot slip into the list."""
    return list(json.loads(record.read_text())["validation_sectors"])


def split_pools(cfg: RetrieverTrainConfig) -> list[SectorPool]:
    """The train pools in the order that keeps the first `validation_sectors` out of the retriever's pairs: the
    sectors the shipped encoder kept out come first, so a retrained encoder is validated where the ranking choices are
    made and never trains on them (pools added since would otherwise change the shuffle), then the rest shuffled."""
    pools = list(load_pools("train"))
    random.Random(f"retriever-split-{cfg.seed}").shuffle(pools)
    kept = kept_out_sectors() if SHIPPED_RECORD.exists() else []
    return sorted(pools, key=lambda p: p.name not in kept)


def train(cfg: RetrieverTrainConfig) -> dict:
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    pools = split_pools(cfg)
    val_pools, train_pools = pools[: cfg.validation_sectors], pools[cfg.validation_sectors :]
    val_sets = [draw_batch(random.Random(f"val-{i}-{j}"), p, 99, cfg.two_share) for i, p in enumerate(val_pools) for j in range(4)]
    embedder = Embedder(top_layers=None)  # from the bundled weights, whatever is shipped
    model, tokenizer = embedder.model.float().train(), embedder.tokenizer
    layers = model.encoder.layer[-cfg.train_layers :]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in layers.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW([p for p in layers.parameters()], lr=cfg.lr, weight_decay=0.01)
    history = [{"step": 0, **recall_at(model.eval(), tokenizer, val_sets)}]
    print(history[-1])
    t0 = time.perf_counter()
    model.train()
    for step in range(1, cfg.steps + 1):
        loss = batch_loss(model, tokenizer, draw_batch(rng, rng.choice(train_pools), cfg.batch_size, cfg.two_share), cfg.scale)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == cfg.steps:
            row = {
                "step": step,
                "loss": round(loss.item(), 4),
                **recall_at(model.eval(), tokenizer, val_sets),
                "s_per_step": round((time.perf_counter() - t0) / step, 2),
            }
            model.train()
            history.append(row)
            print(row)
    cfg.out.mkdir(parents=True, exist_ok=True)
    save_file(top_layer_weights(model, cfg.train_layers), str(cfg.out / "minilm_top_layers.safetensors"))
    record = {"config": {k: str(v) for k, v in asdict(cfg).items()}, "validation_sectors": [p.name for p in val_pools], "history": history}
    (cfg.out / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
