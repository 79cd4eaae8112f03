"""The model side shared by SFT, RL and export: base model, LoRA config, training chat template, loss mask check."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models import assets

TRAIN_TEMPLATE = Path(__file__).resolve().parent / "chat_template_train.jinja"


def load_base(device: str = "cpu", base: Path | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """SmolLM2-135M-Instruct (bf16 safetensors converted from the bundled GGUF) and its tokenizer, on `device`."""
    path = base or assets.smollm2_safetensors_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).to(device)
    return model, tokenizer


def lora_config(r: int = 16, alpha: int = 32, dropout: float = 0.05):
    """LoRA on every linear layer of the decoder (the LM head, tied to the embeddings, stays frozen)."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules="all-linear", task_type="CAUSAL_LM")


def assistant_mask(tokenizer: PreTrainedTokenizerBase, messages: list[dict]) -> tuple[list[int], list[int]]:
    """Token ids of a conversation under the training template, and its loss mask (1 on assistant tokens)."""
    encoded = tokenizer.apply_chat_template(
        messages,
        chat_template=TRAIN_TEMPLATE.read_text(),
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    return list(encoded["input_ids"]), list(encoded["assistant_masks"])


def check_training_template(tokenizer: PreTrainedTokenizerBase, messages: list[dict]) -> None:
    """Fail unless the training template renders exactly like the model's own template and masks exactly
    each assistant reply plus its <|im_end|>."""
    ours = tokenizer.apply_chat_template(messages, chat_template=TRAIN_TEMPLATE.read_text(), tokenize=False)
    theirs = tokenizer.apply_chat_template(messages, tokenize=False)
    if ours != theirs:
        raise ValueError("training chat template renders differently from the model's chat template")
    ids, mask = assistant_mask(tokenizer, messages)
    masked = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    expected = "".join(m["content"] + "<|im_end|>" for m in messages if m["role"] == "assistant")
    if masked != expected:
        raise ValueError(f"assistant loss mask covers {masked!r}, expected {expected!r}")
