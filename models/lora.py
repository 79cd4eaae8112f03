"""Merge a saved LoRA adapter (PEFT's format) into a model folder's weights, without needing PEFT."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def is_adapter(path: Path) -> bool:
    return (Path(path) / ADAPTER_CONFIG).exists()


def lora_config(adapter: Path) -> dict:
    """The adapter's PEFT config, which must be plain LoRA (no DoRA, transposed weights or saved modules)."""
    config = json.loads((Path(adapter) / ADAPTER_CONFIG).read_text())
    unsupported = [k for k in ("use_dora", "fan_in_fan_out", "modules_to_save") if config.get(k)]
    if config.get("peft_type", "LORA") != "LORA" or unsupported:
        raise ValueError(f"{adapter}: only plain LoRA adapters can be merged (found {config.get('peft_type')} {unsupported})")
    return config


def lora_scale(config: dict) -> float:
    """What B @ A is multiplied by: alpha / r, or alpha / sqrt(r) with rsLoRA."""
    r, alpha = config["r"], config["lora_alpha"]
    return alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r


def lora_deltas(adapter: Path) -> dict[str, torch.Tensor]:
    """Base weight name -> scale * B @ A, in float32, for every LoRA pair of the adapter."""
    scale = lora_scale(lora_config(adapter))
    weights = load_file(adapter / ADAPTER_WEIGHTS)
    deltas = {}
    for key, a in weights.items():
        if ".lora_A." not in key:
            continue
        b = weights[key.replace(".lora_A.", ".lora_B.")]
        module = key.split(".lora_A.")[0].removeprefix("base_model.model.")
        deltas[f"{module}.weight"] = scale * (b.float() @ a.float())  # [out, r] @ [r, in] -> [out, in]
    if not deltas:
        raise ValueError(f"{adapter}: no LoRA weights in {ADAPTER_WEIGHTS}")
    return deltas


def merge_lora(base: Path, adapter: Path, out: Path) -> Path:
    """Write `out`: the base model folder (config, tokenizer) with the adapter merged into model.safetensors."""
    base, adapter, out = Path(base), Path(adapter), Path(out)
    state = load_file(base / "model.safetensors")
    for name, delta in lora_deltas(adapter).items():
        if name not in state:
            raise ValueError(f"{adapter}: adapter targets {name}, which {base} does not have")
        if state[name].shape != delta.shape:
            raise ValueError(f"{adapter}: {name} is {tuple(delta.shape)} in the adapter, {tuple(state[name].shape)} in the model")
        state[name] = (state[name].float() + delta).to(state[name].dtype)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(base, tmp, ignore=shutil.ignore_patterns("model.safetensors", "*.tmp*"))
    save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
    (tmp / "model.safetensors").chmod(0o644)
    if (out / "model.safetensors").exists():  # another process merged it first and may be loading it now
        shutil.rmtree(tmp, ignore_errors=True)
        return out
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
