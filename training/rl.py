"""GRPO from the SFT adapter with programmatic rewards (training/rewards.py), generation in-process (no vLLM)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from training.modeling import load_base
from training.rewards import REWARD_FUNCS, REWARD_WEIGHTS
from training.runlog import MetricsLog, write_config
from training.sft import last_checkpoint, read_jsonl

RL_KINDS = ("fact", "multi_fact", "slot", "out_of_knowledge", "human", "small_talk", "tool")


@dataclass
class RLRunConfig:
    data_dir: Path = Path("runs/data")
    sft_adapter: Path = Path("runs/sft/adapter")
    run_dir: Path = Path("runs/rl")
    device: str = "cpu"
    max_steps: int = 50
    prompts_per_step: int = 2
    num_generations: int = 4  # completions per prompt; GRPO compares them with each other
    max_completion_length: int = 64  # room for a tool call after a short sentence
    temperature: float = 0.9
    lr: float = 2e-5
    beta: float = 0.02  # KL to the SFT adapter (a frozen copy), keeps RL from drifting
    prompt_pool: int = 1000
    save_steps: int = 25
    logging_steps: int = 1
    seed: int = 0
    threads: int = 2  # CPU only


def rl_dataset(rows: list[dict], n: int, seed: int):
    """Prompts (the conversation up to the caller's last turn) with the columns the rewards read."""
    from datasets import Dataset

    rng = random.Random(seed)
    picked = rng.sample([r for r in rows if r["meta"]["kind"] in RL_KINDS], min(n, len(rows)))
    return Dataset.from_list([{"prompt": r["messages"][:-1], "kind": r["meta"]["kind"], "checks": r["meta"]["checks"]} for r in picked])


def grpo_args(cfg: RLRunConfig):
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(cfg.run_dir / "checkpoints"),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.prompts_per_step * cfg.num_generations,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        learning_rate=cfg.lr,
        beta=cfg.beta,
        use_vllm=False,
        use_cpu=cfg.device == "cpu",
        bf16=True,
        activation_checkpointing=False,
        reward_weights=[REWARD_WEIGHTS[f.__name__] for f in REWARD_FUNCS],
        logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps,
        save_total_limit=2,
        report_to="none",
        seed=cfg.seed,
        disable_tqdm=False,
    )


def main(cfg: RLRunConfig, resume: bool = False) -> Path:
    """Train from the SFT adapter; returns the SFT+RL adapter folder (run_dir/adapter)."""
    from accelerate import PartialState
    from peft import PeftModel
    from trl import GRPOTrainer

    if cfg.device == "cpu":
        torch.set_num_threads(cfg.threads)
    state = PartialState(cpu=cfg.device == "cpu")
    base, tokenizer = load_base(str(state.device))
    model = PeftModel.from_pretrained(base, str(cfg.sft_adapter), is_trainable=True)
    dataset = rl_dataset(read_jsonl(cfg.data_dir / "train.jsonl"), cfg.prompt_pool, cfg.seed)
    if state.is_main_process:
        if not resume:
            (cfg.run_dir / "metrics.jsonl").unlink(missing_ok=True)
        write_config(cfg.run_dir, cfg, reward_weights=REWARD_WEIGHTS, prompts_by_kind=dict(Counter(dataset["kind"])))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=REWARD_FUNCS,
        args=grpo_args(cfg),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[MetricsLog(cfg.run_dir / "metrics.jsonl")],
    )
    trainer.train(resume_from_checkpoint=last_checkpoint(cfg.run_dir, resume))
    adapter = cfg.run_dir / "adapter"
    if trainer.is_world_process_zero():
        trainer.accelerator.unwrap_model(trainer.model).save_pretrained(str(adapter), selected_adapters=["default"])
    return adapter
