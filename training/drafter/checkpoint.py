"""Drafter training state on disk: a resumable checkpoint folder and the final SGLang-format drafter."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from models.eagle3 import Eagle3Drafter, load_drafter, save_drafter

CHECKPOINT = "checkpoint"
TRAINER_STATE = "trainer.pt"


def save_final(drafter: Eagle3Drafter, out: Path, dtype: torch.dtype) -> None:
    """A plain SGLang `LlamaForCausalLMEagle3` folder (config.json + model.safetensors) in `dtype`."""
    copy = Eagle3Drafter(drafter.config)
    copy.load_state_dict(drafter.state_dict())
    save_drafter(copy.to(dtype), drafter.config, out)


def save_checkpoint(run_dir: Path, drafter: Eagle3Drafter, optimizer: torch.optim.Optimizer, step: int) -> None:
    """run_dir/checkpoint: the fp32 drafter in SGLang format plus trainer.pt (optimizer state, step); replaced atomically."""
    tmp, final = run_dir / (CHECKPOINT + ".tmp"), run_dir / CHECKPOINT
    shutil.rmtree(tmp, ignore_errors=True)
    save_final(drafter, tmp, torch.float32)
    torch.save({"step": step, "optimizer": optimizer.state_dict()}, tmp / TRAINER_STATE)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def has_checkpoint(run_dir: Path) -> bool:
    """Whether run_dir holds a complete checkpoint."""
    return (run_dir / CHECKPOINT / TRAINER_STATE).exists()


def load_checkpoint(run_dir: Path) -> tuple[Eagle3Drafter, dict, int]:
    """(fp32 drafter, optimizer state dict, step) from run_dir/checkpoint."""
    folder = run_dir / CHECKPOINT
    drafter, _ = load_drafter(folder, dtype=torch.float32)
    state = torch.load(folder / TRAINER_STATE, map_location="cpu", weights_only=True)
    return drafter, state["optimizer"], int(state["step"])
