"""`talkline train average`: two LoRA adapters of one base model as one adapter whose change to each weight is the
weighted mean of theirs (WiSE-FT's interpolation between a fine-tuned model and the one it started from). Exact: the
two ranks sit side by side, each B scaled by its weight and its own alpha/r, so the new B @ A is w1 dW1 + w2 dW2."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from models.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS, lora_config, lora_scale

PER_MODULE = ("rank_pattern", "alpha_pattern")  # per-module ranks or alphas: not averaged here


def _config(adapter: Path) -> dict:
    config = lora_config(adapter)
    if any(config.get(k) for k in PER_MODULE):
        raise ValueError(f"{adapter}: only LoRA adapters with one rank and alpha can be averaged")
    return config


def average_adapters(first: Path, second: Path, weight: float, out: Path) -> Path:
    """Write `out`: an adapter whose delta is `weight` x first's + (1 - weight) x second's (0 < weight < 1)."""
    if not 0.0 < weight < 1.0:
        raise ValueError(f"weight must lie strictly between 0 and 1, got {weight}")
    configs = [_config(first), _config(second)]
    if configs[0]["base_model_name_or_path"] != configs[1]["base_model_name_or_path"]:
        raise ValueError(f"{first} and {second} adapt different base models")
    tensors = [load_file(str(Path(a) / ADAPTER_WEIGHTS)) for a in (first, second)]
    if set(tensors[0]) != set(tensors[1]):
        raise ValueError(f"{first} and {second} adapt different modules")
    factors = (weight * lora_scale(configs[0]), (1.0 - weight) * lora_scale(configs[1]))
    merged = {}
    for key in tensors[0]:
        if ".lora_A." in key:
            merged[key] = torch.cat([t[key].float() for t in tensors]).to(tensors[0][key].dtype)
        elif ".lora_B." in key:
            merged[key] = torch.cat([f * t[key].float() for f, t in zip(factors, tensors)], dim=1).to(tensors[0][key].dtype)
        else:
            raise ValueError(f"{first}: {key} is not a LoRA weight")
    rank = configs[0]["r"] + configs[1]["r"]
    out.mkdir(parents=True, exist_ok=True)
    save_file(merged, str(out / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    (out / ADAPTER_CONFIG).write_text(json.dumps(configs[0] | {"r": rank, "lora_alpha": rank, "use_rslora": False}, indent=2) + "\n")
    record = {"first": str(first), "second": str(second), "weight": weight}
    (out / "config.json").write_text(json.dumps(record, indent=2) + "\n")
    return out
