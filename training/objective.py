"""The mixed objective's second term: KL(student || frozen base) on general prompts answered by the base model."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from training.modeling import assistant_mask


@torch.no_grad()
def base_answers(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompts: list[str], max_new_tokens: int = 48, batch: int = 16
) -> list[str]:
    """The base model's own greedy answers to general prompts, batched (left padding)."""
    tokenizer.padding_side, answers = "left", []
    for start in tqdm(range(0, len(prompts), batch), desc="base answers", unit="batch"):
        chats = [[{"role": "user", "content": p}] for p in prompts[start : start + batch]]
        enc = tokenizer.apply_chat_template(chats, add_generation_prompt=True, padding=True, return_tensors="pt", return_dict=True).to(
            model.device
        )
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        answers += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    tokenizer.padding_side = "right"
    return [a.strip() for a in answers]


def general_set(path: Path, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, max_new_tokens: int = 48) -> list[list[dict]]:
    """general.jsonl's prompts with the base model's answers, generated once and cached next to it."""
    cache = path.with_name("general_answers.jsonl")
    prompts = [json.loads(line)["prompt"] for line in path.read_text().splitlines() if line.strip()]
    rows = [json.loads(line) for line in cache.read_text().splitlines()] if cache.exists() else []
    if [r["prompt"] for r in rows] != prompts:
        answers = base_answers(model, tokenizer, prompts, max_new_tokens)
        rows = [{"prompt": p, "answer": a} for p, a in zip(prompts, answers)]
        cache.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [[{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["answer"]}] for r in rows]


def general_batches(
    chats: list[list[dict]], tokenizer: PreTrainedTokenizerBase, batch: int, seed: int = 0
) -> Iterator[dict[str, torch.Tensor]]:
    """Endless right-padded batches of general chats with a mask on the answer tokens."""
    encoded = [assistant_mask(tokenizer, chat) for chat in chats]
    rng = random.Random(seed)
    for _ in itertools.count():
        order = list(range(len(encoded)))
        rng.shuffle(order)
        for start in range(0, len(order) - batch + 1, batch):
            rows = [encoded[i] for i in order[start : start + batch]]
            width = max(len(ids) for ids, _ in rows)
            pad = tokenizer.pad_token_id
            yield {
                "input_ids": torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in rows]),
                "attention_mask": torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows]),
                "answer_mask": torch.tensor([mask + [0] * (width - len(mask)) for _, mask in rows]),
            }


def kl_to_base(model, peft_model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean over answer tokens of KL(student || base). `model` may be a DDP wrapper of `peft_model`; the base is
    `peft_model` with its adapters disabled."""
    inputs = {k: batch[k].to(peft_model.device) for k in ("input_ids", "attention_mask")}
    with torch.no_grad(), peft_model.disable_adapter():
        ref = F.log_softmax(peft_model(**inputs).logits[:, :-1].float(), dim=-1)
    student = F.log_softmax(model(**inputs).logits[:, :-1].float(), dim=-1)
    mask = batch["answer_mask"][:, 1:].to(peft_model.device).float()  # position t predicts token t + 1
    kl = (student.exp() * (student - ref)).sum(-1)  # [B, T-1]
    return (kl * mask).sum() / mask.sum().clamp(min=1)
