"""The target model the drafter learns from, as a plain batched HF model on any device."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models import assets
from models.engine import STOP_TOKENS


def load_target(model: str | Path, dtype: torch.dtype, device: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model `Engine.load(model=...)` serves (tuned by default), frozen, with SDPA attention for batches."""
    folder = assets.llm_dir(model)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa").to(device).eval()
    lm.requires_grad_(False)
    return lm, AutoTokenizer.from_pretrained(folder)


def stop_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The tokens that end a reply, as the engine stops: EOS and the chat format's end-of-turn token."""
    ids = {tokenizer.eos_token_id, *tokenizer.convert_tokens_to_ids(list(STOP_TOKENS))} - {tokenizer.unk_token_id}
    return sorted(i for i in ids if isinstance(i, int) and i >= 0)


def fingerprint(model: PreTrainedModel) -> str:
    """Short hash of the weight files, so cached replies of another model are never reused."""
    digest = hashlib.sha256()
    for file in sorted(Path(model.name_or_path).glob("*.safetensors")):
        with file.open("rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def encode_chat(tokenizer: PreTrainedTokenizerBase, chat: list[dict], generation_prompt: bool = True) -> list[int]:
    """Chat ids exactly as the engine encodes them (template, and the generation prompt unless told otherwise)."""
    encoded = tokenizer.apply_chat_template(chat, add_generation_prompt=generation_prompt, tokenize=True, return_dict=True)
    return list(encoded["input_ids"])
