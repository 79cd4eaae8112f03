"""`talkline train drafter`: options -> DrafterTrainConfig; the heavy imports happen inside the command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def train_drafter_command(
    stage: Annotated[str, typer.Option(help="broad (generated general prompts) or domain (the dialogs JSONL)")] = "broad",
    out: Annotated[Path, typer.Option(help="folder for the final SGLang-format drafter")] = Path("runs/drafter/generic"),
    init: Annotated[Path | None, typer.Option(help="start from this drafter (keeps its draft vocabulary)")] = None,
    steps: Annotated[int, typer.Option()] = 1000,
    ttt_steps: Annotated[int, typer.Option(help="training-time-test unroll length")] = 7,
    draft_vocab: Annotated[int, typer.Option(help="draft vocabulary size (new drafters)")] = 8192,
    lr: Annotated[float, typer.Option()] = 3e-4,
    batch_size: Annotated[int, typer.Option(help="sequences per step")] = 8,
    max_seq_len: Annotated[int, typer.Option(help="drafter window: the last tokens of prompt + reply")] = 256,
    num_prompts: Annotated[int, typer.Option(help="prompts the target answers (dialogs with --replies dialogs)")] = 400,
    replies: Annotated[
        str, typer.Option(help="regenerated: the target's own replies; dialogs: the dialogs' replies as written")
    ] = "regenerated",
    max_new_tokens: Annotated[int, typer.Option(help="longest regenerated reply")] = 160,
    temperature: Annotated[float, typer.Option(help="0: greedy replies (as served); > 0: sampled")] = 0.0,
    regen_batch_size: Annotated[int, typer.Option(help="prompts answered per generate call")] = 16,
    dialogs: Annotated[Path, typer.Option(help="stage domain: JSONL of chat messages")] = Path("runs/data/train.jsonl"),
    model: Annotated[str, typer.Option(help="the target: tuned, base, or a model/adapter folder")] = "tuned",
    dtype: Annotated[str, typer.Option(help="bfloat16 or float32 (target weights, drafter autocast)")] = "bfloat16",
    device: Annotated[str, typer.Option(help="cpu or cuda")] = "cpu",
    threads: Annotated[int, typer.Option(help="torch threads on CPU")] = 2,
    run_dir: Annotated[Path | None, typer.Option(help="config, metrics, reply cache, checkpoint; default OUT-run")] = None,
    replies_cache: Annotated[Path | None, typer.Option(help="JSONL cache of regenerated replies; default RUN_DIR/replies.jsonl")] = None,
    save_every: Annotated[int, typer.Option(help="checkpoint every N steps")] = 100,
    seed: Annotated[int, typer.Option()] = 0,
    resume: Annotated[bool, typer.Option("--resume", help="continue from RUN_DIR/checkpoint")] = False,
    train_minutes: Annotated[float | None, typer.Option(help="wall-clock budget of the steps: fewer steps if STEPS would not fit")] = None,
) -> None:
    """Train an EAGLE3 drafter on the target's own replies (SGLang LlamaForCausalLMEagle3 format)."""
    from training.drafter.train import DrafterTrainConfig, train

    cfg = DrafterTrainConfig(
        stage=stage,
        out=out,
        init=init,
        steps=steps,
        ttt_steps=ttt_steps,
        draft_vocab=draft_vocab,
        lr=lr,
        batch_size=batch_size,
        max_seq_len=max_seq_len,
        num_prompts=num_prompts,
        replies=replies,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        regen_batch_size=regen_batch_size,
        dialogs=dialogs,
        model=model,
        dtype=dtype,
        device=device,
        threads=threads,
        run_dir=run_dir,
        replies_cache=replies_cache,
        save_every=save_every,
        seed=seed,
        resume=resume,
        train_minutes=train_minutes,
    )
    typer.echo(f"drafter: {train(cfg)}")
