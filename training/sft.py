"""SFT: a LoRA adapter on SmolLM2-135M-Instruct, assistant tokens only, easy-to-hard curriculum, plus KL to the base
model on general prompts so it stays a general assistant. Reads top to bottom: config, data, model, trainer, run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from trl import SFTConfig, SFTTrainer

from training.curriculum import DEFAULT_SCHEDULE, Phase, order_examples
from training.modeling import TRAIN_TEMPLATE, check_training_template, load_base, lora_config
from training.objective import general_batches, general_set, kl_to_base
from training.runlog import MetricsLog, write_config


@dataclass
class SFTRunConfig:
    data_dir: Path = Path("runs/data")  # train.jsonl, general.jsonl, manifest.json (`talkline train data`)
    run_dir: Path = Path("runs/sft")
    device: str = "cpu"  # "cuda": bf16 on the GPU(s); under `accelerate launch`, one process per GPU
    max_steps: int = 300
    batch_size: int = 8
    grad_accum: int = 1
    lr: float = 1e-3  # LoRA on a 135M model: 2e-4 learned ~3x slower per step here
    warmup_steps: int = 10
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    max_length: int = 512
    schedule: tuple[Phase, ...] = field(default_factory=lambda: DEFAULT_SCHEDULE)
    replay: float = 0.3  # share of each later phase drawn from the earlier stages
    kl_coef: float = 0.1  # loss = domain CE + kl_coef * KL(student || base) on general prompts; 0 turns it off
    general_batch: int = 2
    general_answer_tokens: int = 48
    save_steps: int = 50
    logging_steps: int = 5
    seed: int = 0
    threads: int = 2  # CPU only
    init_adapter: Path | None = None  # continue training this adapter (e.g. a review phase) instead of a new one


class MixedSFTTrainer(SFTTrainer):
    """SFTTrainer with a plain-logits cross-entropy (faster than TRL's fused head on CPU) plus the KL term."""

    def __init__(self, *args, general=None, kl_coef: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.general, self.kl_coef = general, kl_coef

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs["labels"][:, 1:]
        trained = labels != -100
        cols = trained.any(0).nonzero().squeeze(1)  # LM head only where some row has a label: ~half the positions
        logits = model(
            input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), use_cache=False, logits_to_keep=cols
        ).logits
        ce_sum = F.cross_entropy(logits.flatten(0, 1).float(), labels[:, cols].flatten(), ignore_index=-100, reduction="sum")
        tokens = trained.sum() if num_items_in_batch is None else num_items_in_batch
        ce = ce_sum / torch.as_tensor(tokens, device=ce_sum.device).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            ce = ce * self.accelerator.num_processes
        loss = ce
        mode = "train" if model.training else "eval"
        self._metrics[mode]["domain_ce"].append(ce_sum.item() / max(int(trained.sum()), 1))
        if self.kl_coef and model.training:
            kl = kl_to_base(model, self.accelerator.unwrap_model(model), next(self.general))
            steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
            loss = loss + self.kl_coef * kl / steps
            self._metrics[mode]["kl_general"].append(kl.item())
        return (loss, None) if return_outputs else loss


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def last_checkpoint(run_dir: Path, resume: bool) -> str | None:
    """The newest checkpoint under run_dir/checkpoints when resuming, else None (a fresh start)."""
    from transformers.trainer_utils import get_last_checkpoint

    folder = run_dir / "checkpoints"
    return get_last_checkpoint(str(folder)) if resume and folder.is_dir() else None


def sft_args(cfg: SFTRunConfig) -> SFTConfig:
    on_cpu = cfg.device == "cpu"
    return SFTConfig(
        output_dir=str(cfg.run_dir / "checkpoints"),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        learning_rate=cfg.lr,
        lr_scheduler_type="cosine",
        warmup_steps=cfg.warmup_steps,
        logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps,
        save_total_limit=2,
        use_cpu=on_cpu,
        bf16=True,
        activation_checkpointing=False,
        assistant_only_loss=True,
        chat_template_path=str(TRAIN_TEMPLATE),
        max_length=cfg.max_length,
        train_sampling_strategy="sequential",
        report_to="none",
        seed=cfg.seed,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )


def main(cfg: SFTRunConfig, resume: bool = False) -> Path:
    """Train, checkpointing every `save_steps`; returns the adapter folder (run_dir/adapter)."""
    from accelerate import PartialState

    if cfg.device == "cpu":
        torch.set_num_threads(cfg.threads)
    state = PartialState(cpu=cfg.device == "cpu")
    args = sft_args(cfg)
    total = cfg.max_steps * cfg.batch_size * cfg.grad_accum * state.num_processes
    rows = read_jsonl(cfg.data_dir / "train.jsonl")
    ordered, plan = order_examples(rows, cfg.schedule, total, cfg.replay, cfg.seed)

    from datasets import Dataset

    model, tokenizer = load_base(str(state.device))
    check_training_template(tokenizer, ordered[0]["messages"])
    general = None
    if cfg.kl_coef:
        with state.main_process_first():
            chats = general_set(cfg.data_dir / "general.jsonl", model, tokenizer, cfg.general_answer_tokens)
        general = general_batches(chats, tokenizer, cfg.general_batch, cfg.seed)
    manifest = json.loads((cfg.data_dir / "manifest.json").read_text())
    if state.is_main_process:
        if not resume:
            (cfg.run_dir / "metrics.jsonl").unlink(missing_ok=True)
        write_config(
            cfg.run_dir,
            cfg,
            curriculum_plan=plan,
            data_manifest=manifest,
            steps_per_phase=[{"stage": p["stage"], "first_step": p["start"] // (total // cfg.max_steps)} for p in plan],
        )
    if cfg.init_adapter:
        from peft import PeftModel

        model, peft_config = PeftModel.from_pretrained(model, str(cfg.init_adapter), is_trainable=True), None
    else:
        peft_config = lora_config(cfg.lora_r, cfg.lora_alpha, cfg.lora_dropout)
    trainer = MixedSFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list([{"messages": r["messages"]} for r in ordered]),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[MetricsLog(cfg.run_dir / "metrics.jsonl")],
        general=general,
        kl_coef=cfg.kl_coef,
    )
    trainer.train(resume_from_checkpoint=last_checkpoint(cfg.run_dir, resume))
    adapter = cfg.run_dir / "adapter"
    if trainer.is_world_process_zero():
        trainer.accelerator.unwrap_model(trainer.model).save_pretrained(str(adapter))
    return adapter
