"""Preference training (DPO) on the model's own mistakes: `talkline train rft` writes, per training prompt where a
sampled reply failed the eval's checks, the best passing (or written) reply against the worst failing one
(`pairs.jsonl`); this continues the adapter those replies were sampled from, so it is also the reference.

loss = -log sigmoid(beta * ((log pi(chosen) - log ref(chosen)) - (log pi(rejected) - log ref(rejected))))
       + sft_coef * per-token NLL of the chosen reply,
the NLL term (as in RPO) keeping the chosen reply's likelihood from falling with the rejected one's. Log-probs sum over
the reply's tokens and its <|im_end|>; the reference's are computed once, before the first step.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from training.modeling import load_base
from training.runlog import write_config
from training.schedule import warmup_cosine
from training.sft import read_jsonl


@dataclass
class DPORunConfig:
    pairs: Path = Path("runs/rft/pairs.jsonl")  # {"messages", "chosen", "rejected", "meta"} (`talkline train rft`)
    run_dir: Path = Path("runs/dpo")
    init_adapter: Path = Path("models/adapters/talkline")  # the adapter the pairs were sampled from: start and reference
    device: str = "cpu"
    max_steps: int = 100
    batch_size: int = 4  # pairs a step (two sequences each)
    lr: float = 2e-5
    warmup_steps: int = 5
    beta: float = 0.1
    sft_coef: float = 0.2
    max_length: int = 1024  # longer pairs are skipped, never cut (the facts sit at the start)
    logging_steps: int = 5
    seed: int = 0
    threads: int = 2  # CPU only


@dataclass
class EncodedPair:
    chosen: list[int]
    rejected: list[int]
    prompt_len: int


def encode_reply(tokenizer: PreTrainedTokenizerBase, messages: list[dict], reply: str) -> tuple[list[int], int]:
    """Token ids of the prompt plus the reply through its <|im_end|>, and the prompt's length."""
    prompt = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
    full = list(
        tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": reply}], tokenize=True, return_dict=True)["input_ids"]
    )
    if full[: len(prompt)] != prompt:
        raise ValueError("the chat template renders the prompt differently once a reply follows it")
    end = full.index(tokenizer.convert_tokens_to_ids("<|im_end|>"), len(prompt))
    return full[: end + 1], len(prompt)


def encode_pairs(tokenizer: PreTrainedTokenizerBase, rows: list[dict], max_length: int) -> list[EncodedPair]:
    out = []
    for row in rows:
        chosen, n = encode_reply(tokenizer, row["messages"], row["chosen"])
        rejected, _ = encode_reply(tokenizer, row["messages"], row["rejected"])
        if max(len(chosen), len(rejected)) <= max_length:
            out.append(EncodedPair(chosen, rejected, n))
    return out


def pair_logprobs(model, pair: EncodedPair, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[2]: the summed log-probs of the pair's chosen and rejected reply, and their token counts.

    The two share their prompt, so it runs once, without gradient, up to its last token; that token and both replies
    run on its cache with gradient. The log-probs are exact; the gradient reaches every position that predicts a reply
    token (the first one included), not the prompt's keys and values.
    """
    decoder = model.get_base_model() if hasattr(model, "get_base_model") else model
    device = next(model.parameters()).device
    head = pair.prompt_len - 1
    with torch.no_grad():
        cache = decoder.model(input_ids=torch.tensor([pair.chosen[:head]], device=device), use_cache=True).cache
    cache.batch_repeat_interleave(2)
    tails = [pair.chosen[head:], pair.rejected[head:]]
    width = max(len(t) for t in tails)
    ids = torch.tensor([t + [pad_id] * (width - len(t)) for t in tails], device=device)
    real = torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in tails], device=device)
    attention = torch.cat([torch.ones(2, head, dtype=real.dtype, device=device), real], 1)
    positions = torch.arange(head, head + width, device=device).expand(2, -1)
    hidden = decoder.model(input_ids=ids, attention_mask=attention, position_ids=positions, cache=cache, use_cache=True).last_hidden_state
    mask = real[:, 1:].bool()  # position t predicts token t + 1: every tail token after the prompt's last is reply
    logits = decoder.lm_head(hidden[:, :-1][mask])
    token_lp = torch.gather(F.log_softmax(logits.float(), dim=-1), 1, ids[:, 1:][mask].unsqueeze(-1)).squeeze(-1)
    sums = torch.zeros(2, device=device, dtype=token_lp.dtype).index_add(0, mask.nonzero()[:, 0], token_lp)
    return sums, mask.sum(1)


def batch_logprobs(model, pairs: list[EncodedPair], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[pairs, 2] log-probs (chosen, rejected) and [pairs, 2] token counts."""
    out = [pair_logprobs(model, p, pad_id) for p in pairs]
    return torch.stack([lp for lp, _ in out]), torch.stack([n for _, n in out])


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean DPO loss over pairs, and each pair's implicit reward margin."""
    margin = beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected))
    return -F.logsigmoid(margin).mean(), margin


@torch.no_grad()
def reference_logprobs(model, pairs: list[EncodedPair], pad_id: int, batch: int) -> torch.Tensor:
    """[pairs, 2]: the starting model's log-probs of each chosen and rejected reply."""
    model.eval()
    return torch.cat([batch_logprobs(model, pairs[i : i + batch], pad_id)[0].cpu() for i in range(0, len(pairs), batch)])


def lr_at(step: int, cfg: DPORunConfig) -> float:
    return warmup_cosine(step, cfg.lr, cfg.warmup_steps, cfg.max_steps)


def main(cfg: DPORunConfig) -> Path:
    """Train and write `run_dir/adapter`, `config.json` and `metrics.jsonl`; returns the adapter folder."""
    from peft import PeftModel

    if cfg.device == "cpu":
        torch.set_num_threads(cfg.threads)
    model, tokenizer = load_base(cfg.device)
    model = PeftModel.from_pretrained(model, str(cfg.init_adapter), is_trainable=True)
    rows = read_jsonl(cfg.pairs)
    pairs = encode_pairs(tokenizer, rows, cfg.max_length)
    if not pairs:
        raise ValueError(f"{cfg.pairs} holds no pair of at most {cfg.max_length} tokens; run `talkline train rft` first")
    pad = tokenizer.pad_token_id
    ref = reference_logprobs(model, pairs, pad, cfg.batch_size)
    write_config(cfg.run_dir, cfg, pairs_read=len(rows), pairs_used=len(pairs))
    metrics = cfg.run_dir / "metrics.jsonl"
    metrics.unlink(missing_ok=True)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    order: list[int] = []
    rng = random.Random(cfg.seed)
    model.train()
    window: dict[str, list[float]] = {}
    started = time.perf_counter()
    for step in range(cfg.max_steps):
        while len(order) < cfg.batch_size:
            epoch = list(range(len(pairs)))
            rng.shuffle(epoch)
            order += epoch
        picked, order = order[: cfg.batch_size], order[cfg.batch_size :]
        chunk = [pairs[i] for i in picked]
        lp, counts = batch_logprobs(model, chunk, pad)
        loss_dpo, margin = dpo_loss(lp[:, 0], lp[:, 1], ref[picked, 0].to(lp.device), ref[picked, 1].to(lp.device), cfg.beta)
        nll = -(lp[:, 0] / counts[:, 0]).mean()
        loss = loss_dpo + cfg.sft_coef * nll
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        for key, value in (
            ("loss", loss.item()),
            ("dpo", loss_dpo.item()),
            ("nll_chosen", nll.item()),
            ("margin", margin.mean().item()),
            ("accuracy", (margin > 0).float().mean().item()),
        ):
            window.setdefault(key, []).append(value)
        if (step + 1) % cfg.logging_steps == 0 or step + 1 == cfg.max_steps:
            record = {"step": step + 1, "lr": lr_at(step, cfg), **{k: round(sum(v) / len(v), 4) for k, v in window.items()}}
            record["s_per_step"] = round((time.perf_counter() - started) / len(window["loss"]), 2)
            with metrics.open("a") as f:
                f.write(json.dumps(record) + "\n")
            window, started = {}, time.perf_counter()
    adapter = cfg.run_dir / "adapter"
    model.save_pretrained(str(adapter))
    return adapter
