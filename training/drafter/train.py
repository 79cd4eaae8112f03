"""Train an EAGLE3 drafter on the target's own replies (SpecForge-style, online features, TTT unroll).

Stage "broad": general prompts (`prompts.py`); stage "domain": dialogs JSONL (`conversations.py`), usually
from a stage-1 drafter via `init`. Writes `out` (a plain SGLang drafter, plus phrases.json: the regenerated
replies, for the engine's phrase memory) and `run_dir` (config.json, metrics.jsonl, replies.jsonl, checkpoint/
to resume from).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from models.eagle3 import Eagle3Drafter, load_drafter, random_drafter
from models.phrases import PHRASES_NAME, PhraseMemory
from training.drafter.checkpoint import has_checkpoint, load_checkpoint, save_checkpoint, save_final
from training.drafter.conversations import DialogSample, load_dialog_samples, load_dialogs
from training.drafter.features import target_features
from training.drafter.prompts import broad_prompts
from training.drafter.regenerate import RegenSettings, Sample, regenerate
from training.drafter.target import load_target, stop_ids
from training.drafter.ttt import draft_head, ttt_loss, unroll_hidden
from training.drafter.vocab import draft_vocab
from training.schedule import warmup_cosine

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


@dataclass
class DrafterTrainConfig:
    # what to train on
    stage: str = "broad"  # "broad": generated general prompts; "domain": the dialogs JSONL
    out: Path = Path("runs/drafter/generic")  # final SGLang-format drafter
    run_dir: Path | None = None  # config, metrics, reply cache, checkpoint; default: <out>-run
    init: Path | None = None  # start from this drafter (keeps its draft vocabulary)
    model: str = "tuned"  # the target, as `--model` of the engine: tuned, base, or a model/adapter folder
    dialogs: Path = Path("runs/data/train.jsonl")  # stage "domain": JSONL of {"messages"} or {"profile", "messages"}
    num_prompts: int = 400  # prompts to answer: generated (broad) or a seeded sample of the dialogs' turns (domain)
    replies: str = "regenerated"  # "regenerated": the target answers; "dialogs" (domain): num_prompts whole dialogs as written
    replies_cache: Path | None = None  # default: <run_dir>/replies.jsonl
    # regeneration (the target answers every prompt)
    max_new_tokens: int = 160
    temperature: float = 0.0  # 0: greedy, as served; > 0: sampled replies
    regen_batch_size: int = 16
    # drafter and TTT
    draft_vocab: int = 8192
    ttt_steps: int = 7
    step_decay: float = 0.8
    # optimisation
    steps: int = 1000
    batch_size: int = 8
    max_seq_len: int = 256  # drafter window: the last tokens of prompt + reply
    lr: float = 3e-4
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1  # cosine decay down to lr * min_lr_ratio
    weight_decay: float = 0.0
    grad_clip: float = 0.5
    dtype: str = "bfloat16"  # target weights and drafter autocast; the drafter's master weights stay float32
    save_dtype: str = "bfloat16"  # dtype of the final drafter
    device: str = "cpu"
    threads: int = 2  # torch threads on CPU
    seed: int = 0
    save_every: int = 100
    resume: bool = False
    train_minutes: float | None = None  # wall-clock budget of the step loop: the step count shrinks to what fits

    def resolved_run_dir(self) -> Path:
        """run_dir, or <out>-run next to the drafter."""
        return self.run_dir or self.out.with_name(self.out.name + "-run")


def load_chats(cfg: DrafterTrainConfig) -> list[list[dict]]:
    """The stage's prompts as chat message lists."""
    if cfg.stage == "broad":
        return broad_prompts(cfg.num_prompts, cfg.seed)
    if cfg.stage == "domain":
        return load_dialogs(cfg.dialogs, cfg.num_prompts, cfg.seed)
    raise ValueError(f"unknown stage {cfg.stage!r}: use 'broad' or 'domain'")


def load_samples(cfg: DrafterTrainConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[Sample | DialogSample]:
    """The stage's training sequences: the target's own replies, or (`replies="dialogs"`) the dialogs as written."""
    if cfg.replies == "dialogs":
        if cfg.stage != "domain":
            raise ValueError("--replies dialogs needs --stage domain (the broad prompts have no written replies)")
        return load_dialog_samples(cfg.dialogs, tokenizer, set(stop_ids(tokenizer)), cfg.num_prompts, cfg.seed)
    if cfg.replies != "regenerated":
        raise ValueError(f"unknown replies {cfg.replies!r}: use 'regenerated' or 'dialogs'")
    regen = RegenSettings(cfg.max_new_tokens, cfg.temperature, cfg.seed, cfg.regen_batch_size)
    return regenerate(model, tokenizer, load_chats(cfg), regen, cfg.replies_cache or cfg.resolved_run_dir() / "replies.jsonl")


def new_drafter(model: torch.nn.Module, samples: list[Sample | DialogSample], cfg: DrafterTrainConfig) -> Eagle3Drafter:
    """Random drafter whose draft vocab is the most frequent reply tokens."""
    drafter = random_drafter(model.config, cfg.draft_vocab, seed=cfg.seed)
    drafter.set_vocab_mapping(*draft_vocab(samples, model.config.vocab_size, cfg.draft_vocab))
    return drafter


def start_drafter(
    model: torch.nn.Module, samples: list[Sample | DialogSample], cfg: DrafterTrainConfig
) -> tuple[Eagle3Drafter, dict | None, int]:
    """(fp32 drafter, optimizer state or None, first step): resumed, from `init`, or new."""
    run = cfg.resolved_run_dir()
    if cfg.resume and has_checkpoint(run):
        return load_checkpoint(run)
    if cfg.init is not None:
        drafter, config = load_drafter(cfg.init, dtype=torch.float32)
        if (config.hidden_size, config.vocab_size) != (model.config.hidden_size, model.config.vocab_size):
            raise ValueError(f"{cfg.init} was built for another model (hidden {config.hidden_size}, vocab {config.vocab_size})")
        return drafter, None, 0
    return new_drafter(model, samples, cfg), None, 0


def lr_at(step: int, cfg: DrafterTrainConfig) -> float:
    """Linear warmup, then cosine decay to lr * min_lr_ratio at the last step."""
    return warmup_cosine(step, cfg.lr, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio)


def batch_at(step: int, samples: list[Sample | DialogSample], cfg: DrafterTrainConfig) -> list[Sample | DialogSample]:
    """The step's samples: epochs of seeded shuffles, so a resumed run sees the same order."""
    n, picked = len(samples), []
    for g in range(step * cfg.batch_size, (step + 1) * cfg.batch_size):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(cfg.seed * 100_003 + g // n))
        picked.append(samples[int(order[g % n])])
    return picked


@dataclass
class StepBudget:
    """Fits a run into a wall-clock budget: every `window` steps (after two warm-ups), the step count becomes what
    the last window's pace fits in the time left, up to `most`. Early steps can be several times slower (a GPU's
    first shapes), so one early estimate would stop a run far too soon."""

    minutes: float
    start: int  # the first step of this run (a resumed run starts past 0)
    most: int  # the configured step count, never exceeded
    window: int = 10
    began: float = field(default_factory=lambda: time.perf_counter())
    mark: tuple[int, float] | None = None  # (step, time) where the current window began

    def steps_after(self, step: int, steps: int) -> int:
        """The run's step count once `step` steps are done (10% over the budget stops it at once)."""
        now = time.perf_counter()
        elapsed = now - self.began
        if elapsed > self.minutes * 60 * 1.1:
            return min(steps, step)
        if step - self.start < 2:
            return steps
        if self.mark is None:
            self.mark = (step, now)
            return steps
        if step - self.mark[0] < self.window:
            return steps
        pace = (now - self.mark[1]) / (step - self.mark[0])
        self.mark = (step, now)
        return min(self.most, step + max(0, int((self.minutes * 60 - elapsed) / pace)))


def _jsonable(cfg: DrafterTrainConfig) -> dict:
    return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}


def _keep_metrics_until(path: Path, step: int) -> None:
    """Drop metric rows past `step` (logged after the checkpoint a resumed run restarts from)."""
    if path.exists():
        rows = [line for line in path.read_text(encoding="utf-8").splitlines() if line and json.loads(line)["step"] <= step]
        path.write_text("".join(row + "\n" for row in rows), encoding="utf-8")


def train_step(
    drafter: Eagle3Drafter,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: list[Sample | DialogSample],
    step: int,
    cfg: DrafterTrainConfig,
) -> dict:
    """One optimizer step on the step's batch; its metrics row."""
    t0 = time.perf_counter()
    lr = lr_at(step, cfg)
    for group in optimizer.param_groups:
        group["lr"] = lr
    batch = target_features(model, batch_at(step, samples, cfg), drafter.config.aux_layer_ids, drafter.t2d, cfg.max_seq_len)
    with torch.autocast(torch.device(cfg.device).type, dtype=torch.bfloat16, enabled=cfg.dtype == "bfloat16"):
        result = ttt_loss(unroll_hidden(drafter, batch, cfg.ttt_steps), batch, cfg.step_decay, draft_head(drafter))
    optimizer.zero_grad(set_to_none=True)
    result.loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(drafter.parameters(), cfg.grad_clip)
    optimizer.step()
    return {
        "step": step + 1,
        "loss": round(float(result.loss.detach()), 4),
        "lr": lr,
        "grad_norm": round(float(grad_norm), 3),
        "step_loss": [round(x, 4) for x in result.step_losses],
        "step_acc": [round(x, 4) for x in result.step_accuracy],
        "tokens": int(batch.loss_mask.sum()),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def train(cfg: DrafterTrainConfig) -> Path:
    """Run one stage; returns the folder of the final drafter."""
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    run = cfg.resolved_run_dir()
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(_jsonable(cfg), indent=2) + "\n")
    model, tokenizer = load_target(cfg.model, DTYPES[cfg.dtype], cfg.device)
    samples = [s for s in load_samples(cfg, model, tokenizer) if len(s.reply_ids) >= 2]  # first guess: a reply's 2nd token
    if not samples:
        raise ValueError("no usable replies: every reply is shorter than two tokens")

    drafter, optimizer_state, start = start_drafter(model, samples, cfg)
    drafter.to(cfg.device).train()
    drafter.set_embedding(model.get_input_embeddings())  # shared and frozen, never saved
    optimizer = torch.optim.AdamW(drafter.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    if optimizer_state is not None:
        optimizer.load_state_dict(optimizer_state)
    _keep_metrics_until(run / "metrics.jsonl", start)

    bar = tqdm(total=cfg.steps, initial=start, desc=f"drafter {cfg.stage}", unit="step")
    budget, step = StepBudget(cfg.train_minutes, start, cfg.steps) if cfg.train_minutes else None, start
    with (run / "metrics.jsonl").open("a", encoding="utf-8") as metrics:
        while step < cfg.steps:
            row = train_step(drafter, model, optimizer, samples, step, cfg)
            step += 1
            bar.update(1)
            if budget and (fitted := budget.steps_after(step, cfg.steps)) != cfg.steps:
                cfg.steps = bar.total = fitted
                (run / "config.json").write_text(json.dumps(_jsonable(cfg), indent=2) + "\n")
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()
            bar.set_postfix(loss=f"{row['loss']:.3f}", acc0=f"{row['step_acc'][0]:.2f}", acc_last=f"{row['step_acc'][-1]:.2f}")
            if step % cfg.save_every == 0 and step < cfg.steps:
                save_checkpoint(run, drafter, optimizer, step)
    save_checkpoint(run, drafter, optimizer, max(start, cfg.steps))
    save_final(drafter, cfg.out, DTYPES[cfg.save_dtype])
    if cfg.replies == "regenerated":  # the target's own phrasing, for drafting beside the drafter (models/phrases.py)
        PhraseMemory([s.reply_ids for s in samples]).save(cfg.out / PHRASES_NAME)
    else:  # written dialogs are not the target's phrasing: leave no earlier run's behind
        (cfg.out / PHRASES_NAME).unlink(missing_ok=True)
    return cfg.out
