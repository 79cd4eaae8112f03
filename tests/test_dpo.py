"""Preference training: the reply's tokens and their log-probs, the loss, and a tiny real run that prefers the chosen reply."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from training.dpo import DPORunConfig, dpo_loss, encode_pairs, encode_reply, main, pair_logprobs, reference_logprobs
from training.modeling import load_base

pytest.importorskip("peft")

FACTS = (
    "Facts for the caller's question (answer from these if one fits):\n"
    "- Car deck tickets cost forty seven pounds one way including the driver; vehicles longer than six metres pay seventy one pounds."
)
MESSAGES = [
    {"role": "system", "content": "You are the ferry line's assistant. Answer in one short sentence."},
    {"role": "system", "content": FACTS},
    {"role": "user", "content": "what does it cost to take my car over"},
]
CHOSEN, REJECTED = "A car with its driver is forty seven pounds one way.", "It's seventy one pounds one way."


@pytest.fixture(scope="module")
def base():
    torch.set_num_threads(1)
    return load_base()


def test_the_reply_tokens_are_the_reply_and_its_end_of_turn(base):
    _, tokenizer = base
    ids, prompt_len = encode_reply(tokenizer, MESSAGES, CHOSEN)
    assert tokenizer.decode(ids[prompt_len:]) == CHOSEN + "<|im_end|>"
    assert (
        ids[:prompt_len]
        == tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    )


def test_pair_logprobs_on_the_shared_prompt_equal_a_whole_forward_of_each_reply(base):
    model, tokenizer = base
    model = copy.deepcopy(model).float()  # in float32 the two ways agree to rounding; bf16 kernels differ by CPU
    (pair,) = encode_pairs(tokenizer, [{"messages": MESSAGES, "chosen": CHOSEN, "rejected": REJECTED}], 1024)
    with torch.no_grad():
        together, counts = pair_logprobs(model, pair, tokenizer.pad_token_id)
        for row, ids in enumerate((pair.chosen, pair.rejected)):
            full = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
            expected = sum(full[t - 1, ids[t]].item() for t in range(pair.prompt_len, len(ids)))
            assert counts[row].item() == len(ids) - pair.prompt_len
            assert together[row].item() == pytest.approx(expected, abs=1e-3)


def test_the_loss_is_log_two_at_the_reference_and_falls_as_the_chosen_reply_gains():
    zero = torch.zeros(3)
    loss, margin = dpo_loss(zero, zero, zero, zero, beta=0.1)
    assert loss.item() == pytest.approx(math.log(2)) and margin.abs().sum().item() == 0
    better, _ = dpo_loss(torch.full((3,), 2.0), torch.full((3,), -2.0), zero, zero, beta=0.1)
    assert better.item() < math.log(2)


def test_a_tiny_dpo_run_from_the_shipped_adapter_moves_toward_the_chosen_reply(tmp_path, base):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"messages": MESSAGES, "chosen": CHOSEN, "rejected": REJECTED, "meta": {"kind": "fact"}}) + "\n")
    cfg = DPORunConfig(
        pairs=pairs, run_dir=tmp_path / "dpo", max_steps=4, batch_size=1, lr=1e-3, warmup_steps=1, logging_steps=1, threads=1
    )
    adapter = main(cfg)
    assert (adapter / "adapter_model.safetensors").exists() and (cfg.run_dir / "config.json").exists()
    steps = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert steps[-1]["margin"] > steps[0]["margin"] and steps[-1]["dpo"] < math.log(2)

    from peft import PeftModel

    _, tokenizer = base
    encoded = encode_pairs(tokenizer, [json.loads(pairs.read_text())], 1024)
    trained = PeftModel.from_pretrained(load_base()[0], str(adapter))
    start = PeftModel.from_pretrained(load_base()[0], str(cfg.init_adapter))
    after, before = (reference_logprobs(m, encoded, tokenizer.pad_token_id, 1)[0] for m in (trained, start))
    assert (after[0] - after[1]).item() > (before[0] - before[1]).item()
