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

from models.embedder import Embedder, pooled
from training.data.realistic.brands import make_real_brand, brand_names
from training.data.realistic.callers import caller_pool, caller_turn
from training.data.realistic.pools import SectorPool, load_pools


@dataclass(frozen=True)
class RetrieverTrainConfig:
    out: Path = Path("runs/retriever")
    steps: int = 600
    batch_size: int = 24  # topics of one sector per step
    lr: float = 5e-5
    train_layers: int = 3  # the top encoder layers that learn; the rest stay as bundled
    scale: float = 20.0  # cosine similarity -> logits
    validation_sectors: int = 5  # train sectors kept out of the pairs, to watch recall on
    seed: int = 0
    threads: int = 1


def pairs(rng: random.Random, pool: SectorPool) -> list[tuple[str, str]]:
    """One (caller turn, fact) pair per topic of a freshly drawn brand: the turn asks for one of the fact's values."""
    every = len(pool.topics) - 2  # all but the two a brand always leaves out
    brand = make_real_brand(rng, pool, rng.choice(brand_names(pool)), (every, every), 0.0)
    callers = caller_pool("train")
    out = []
    for stated in brand.stated:
        slot = rng.choice(sorted(stated.topic.asks))
        ask = rng.choice(stated.topic.asks[slot]).format(**brand.names, brand=brand.name)
        out.append((caller_turn(rng, callers, rng.choice(callers.tones), ask), stated.fact))
    return out


def _step_loss(model, tokenizer, batch: list[tuple[str, str]], scale: float) -> torch.Tensor:
    queries = tokenizer([q for q, _ in batch], padding=True, truncation=True, max_length=128, return_tensors="pt")
    facts = tokenizer([f for _, f in batch], padding=True, truncation=True, max_length=128, return_tensors="pt")
    q = pooled(model(**queries).last_hidden_state, queries["attention_mask"])
    f = pooled(model(**facts).last_hidden_state, facts["attention_mask"])
    logits = scale * q @ f.T
    target = torch.arange(len(batch))
    return (torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.T, target)) / 2


def recall_at(model, tokenizer, sets: list[list[tuple[str, str]]], k: int = 3) -> float:
    """Share of caller turns whose fact ranks in the top k among its brand's facts."""
    hits = total = 0
    with torch.inference_mode():
        for batch in sets:
            enc = lambda texts: tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")  # noqa: E731
            qi, fi = enc([q for q, _ in batch]), enc([f for _, f in batch])
            q = pooled(model(**qi).last_hidden_state, qi["attention_mask"])
            f = pooled(model(**fi).last_hidden_state, fi["attention_mask"])
            top = (q @ f.T).topk(min(k, len(batch)), dim=1).indices
            hits += sum(int(i in row) for i, row in enumerate(top.tolist()))
            total += len(batch)
    return hits / max(total, 1)


def train(cfg: RetrieverTrainConfig) -> dict:
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    pools = list(load_pools("train"))
    random.Random(f"retriever-split-{cfg.seed}").shuffle(pools)
    val_pools, train_pools = pools[: cfg.validation_sectors], pools[cfg.validation_sectors :]
    val_sets = [pairs(random.Random(f"val-{i}"), p) for i, p in enumerate(val_pools) for _ in range(4)]
    embedder = Embedder(top_layers=None)  # from the bundled weights, whatever is shipped
    model, tokenizer = embedder.model.float().train(), embedder.tokenizer
    layers = model.encoder.layer[-cfg.train_layers :]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in layers.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW([p for p in layers.parameters()], lr=cfg.lr, weight_decay=0.01)
    history = [{"step": 0, "val_recall_at_3": round(recall_at(model.eval(), tokenizer, val_sets), 4)}]
    print(history[-1])
    t0 = time.perf_counter()
    model.train()
    for step in range(1, cfg.steps + 1):
        batch = pairs(rng, rng.choice(train_pools))
        batch = rng.sample(batch, min(cfg.batch_size, len(batch)))
        loss = _step_loss(model, tokenizer, batch, cfg.scale)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == cfg.steps:
            row = {"step": step, "loss": round(loss.item(), 4), "val_recall_at_3": round(recall_at(model.eval(), tokenizer, val_sets), 4),
                   "s_per_step": round((time.perf_counter() - t0) / step, 2)}
            model.train()
            history.append(row)
            print(row)
    cfg.out.mkdir(parents=True, exist_ok=True)
    first = len(model.encoder.layer) - cfg.train_layers
    weights = {f"encoder.layer.{first + i}.{k}": v.detach().to(torch.bfloat16).contiguous()
               for i, layer in enumerate(layers) for k, v in layer.state_dict().items()}
    save_file(weights, str(cfg.out / "minilm_top_layers.safetensors"))
    record = {"config": {k: str(v) for k, v in asdict(cfg).items()}, "validation_sectors": [p.name for p in val_pools], "history": history}
    (cfg.out / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
