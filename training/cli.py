"""`talkline train data|sft|rl`, `talkline eval` and `talkline export`; the heavy imports happen inside each command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

train_app = typer.Typer(help="Build the training data, then SFT and RL a LoRA adapter.", no_args_is_help=True)

Device = Annotated[str, typer.Option(help="cpu, or cuda (bf16; wrap in `accelerate launch` for several GPUs)")]
Resume = Annotated[bool, typer.Option("--resume", help="continue from the newest checkpoint in RUN_DIR")]


@train_app.command("data")
def train_data(
    out: Annotated[Path, typer.Option(help="folder for train/heldout/general JSONL and manifest.json")] = Path("runs/data"),
    seed: Annotated[int, typer.Option()] = 1234,
    conversations: Annotated[int, typer.Option(help="training conversations")] = 9000,
    scenarios: Annotated[Path, typer.Option(help="where the held-out eval scenarios go")] = Path("training/scenarios_heldout.jsonl"),
    tool_scenarios: Annotated[Path, typer.Option(help="where the held-out tool scenarios go")] = Path(
        "training/scenarios_tools_heldout.jsonl"
    ),
) -> None:
    """Generate the seeded conversations, held-out scenarios and general prompts."""
    import json

    from training.data.generate import DataConfig, generate

    manifest = generate(out, DataConfig(seed=seed, train_conversations=conversations), scenarios, tool_scenarios)
    typer.echo(json.dumps(manifest["counts"], indent=2))


@train_app.command("sft")
def train_sft(
    data_dir: Annotated[Path, typer.Option()] = Path("runs/data"),
    run_dir: Annotated[Path, typer.Option()] = Path("runs/sft"),
    device: Device = "cpu",
    steps: Annotated[int, typer.Option()] = 300,
    batch_size: Annotated[int, typer.Option()] = 8,
    grad_accum: Annotated[int, typer.Option()] = 1,
    lr: Annotated[float, typer.Option()] = 1e-3,
    kl_coef: Annotated[float, typer.Option(help="weight of KL(student || base) on general prompts; 0 = off")] = 0.1,
    curriculum: Annotated[str, typer.Option(help="ordered stage:share list; stage `mixed` reviews every stage")] = (
        "facts:0.25,multi_turn:0.25,tones:0.25,escalation:0.25"
    ),
    init_adapter: Annotated[Path | None, typer.Option(help="continue this adapter instead of starting a new one")] = None,
    save_steps: Annotated[int, typer.Option()] = 50,
    threads: Annotated[int, typer.Option(help="torch threads on CPU")] = 2,
    seed: Annotated[int, typer.Option(help="example order; a continued adapter takes a new seed to see new examples")] = 0,
    resume: Resume = False,
) -> None:
    """Supervised fine-tuning of a LoRA adapter (assistant tokens only, curriculum, KL to base)."""
    from training.curriculum import parse_schedule
    from training.sft import SFTRunConfig, main

    cfg = SFTRunConfig(
        data_dir=data_dir,
        run_dir=run_dir,
        device=device,
        max_steps=steps,
        batch_size=batch_size,
        grad_accum=grad_accum,
        lr=lr,
        kl_coef=kl_coef,
        schedule=parse_schedule(curriculum),
        save_steps=save_steps,
        threads=threads,
        init_adapter=init_adapter,
        seed=seed,
    )
    typer.echo(f"adapter: {main(cfg, resume)}")


@train_app.command("rl")
def train_rl(
    data_dir: Annotated[Path, typer.Option()] = Path("runs/data"),
    sft_adapter: Annotated[Path, typer.Option(help="the SFT run's adapter folder")] = Path("runs/sft/adapter"),
    run_dir: Annotated[Path, typer.Option()] = Path("runs/rl"),
    device: Device = "cpu",
    steps: Annotated[int, typer.Option()] = 50,
    prompts_per_step: Annotated[int, typer.Option()] = 2,
    num_generations: Annotated[int, typer.Option(help="completions per prompt")] = 4,
    max_completion_length: Annotated[int, typer.Option(help="room for a short sentence and a tool call")] = 64,
    lr: Annotated[float, typer.Option()] = 2e-5,
    beta: Annotated[float, typer.Option(help="KL to the SFT adapter")] = 0.02,
    save_steps: Annotated[int, typer.Option()] = 25,
    threads: Annotated[int, typer.Option()] = 2,
    resume: Resume = False,
) -> None:
    """GRPO from the SFT adapter with the programmatic rewards of training/rewards.py."""
    from training.rl import RLRunConfig, main

    cfg = RLRunConfig(
        data_dir=data_dir,
        sft_adapter=sft_adapter,
        run_dir=run_dir,
        device=device,
        max_steps=steps,
        prompts_per_step=prompts_per_step,
        num_generations=num_generations,
        max_completion_length=max_completion_length,
        lr=lr,
        beta=beta,
        save_steps=save_steps,
        threads=threads,
    )
    typer.echo(f"adapter: {main(cfg, resume)}")


@train_app.command("rft")
def train_rft(
    data_dir: Annotated[Path, typer.Option(help="SFT data whose rows carry meta.kind and meta.checks")] = Path("runs/brands"),
    out: Annotated[
        Path, typer.Option(help="folder for the kept replies as SFT data (train.jsonl, general.jsonl, manifest.json) and pairs.jsonl")
    ] = Path("runs/rft"),
    model: Annotated[str, typer.Option(help="tuned, or the adapter/model folder to sample from")] = "tuned",
    prompts: Annotated[int, typer.Option(help="training prompts to sample")] = 600,
    samples: Annotated[int, typer.Option(help="replies per prompt: one greedy, the rest sampled")] = 4,
    temperature: Annotated[float, typer.Option()] = 0.8,
    workers: Annotated[int, typer.Option(help="processes, one torch thread each")] = 2,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Rejection-sampling fine-tuning data: the best passing reply of several per prompt; then `train sft --data-dir OUT`."""
    from training.rft import RFTConfig, main

    cfg = RFTConfig(
        data_dir=data_dir, out=out, model=model, prompts=prompts, samples=samples, temperature=temperature, workers=workers, seed=seed
    )
    manifest = main(cfg)
    typer.echo(json.dumps({k: manifest[k] for k in ("all", "per_kind", "kept", "pairs")}, indent=2))


@train_app.command("dpo")
def train_dpo(
    pairs: Annotated[Path, typer.Option(help="pairs.jsonl from `talkline train rft`")] = Path("runs/rft/pairs.jsonl"),
    run_dir: Annotated[Path, typer.Option()] = Path("runs/dpo"),
    init_adapter: Annotated[Path, typer.Option(help="the adapter the pairs were sampled from: the start and the reference")] = Path(
        "models/adapters/talkline"
    ),
    device: Device = "cpu",
    steps: Annotated[int, typer.Option()] = 100,
    batch_size: Annotated[int, typer.Option(help="pairs a step")] = 4,
    lr: Annotated[float, typer.Option()] = 2e-5,
    beta: Annotated[float, typer.Option(help="how far the policy may move from the reference")] = 0.1,
    sft_coef: Annotated[float, typer.Option(help="weight of the chosen reply's per-token NLL")] = 0.2,
    threads: Annotated[int, typer.Option(help="torch threads on CPU")] = 2,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Preference training (DPO) on the model's own failed replies against its passing ones."""
    from training.dpo import DPORunConfig, main

    cfg = DPORunConfig(
        pairs=pairs,
        run_dir=run_dir,
        init_adapter=init_adapter,
        device=device,
        max_steps=steps,
        batch_size=batch_size,
        lr=lr,
        beta=beta,
        sft_coef=sft_coef,
        threads=threads,
        seed=seed,
    )
    typer.echo(f"adapter: {main(cfg)}")


@train_app.command("average")
def train_average(
    adapter: Annotated[list[Path], typer.Option(help="the two adapters, e.g. a fine-tuned one and the one it started from")],
    out: Annotated[Path, typer.Option(help="the averaged adapter's folder")],
    weight: Annotated[float, typer.Option(help="the first adapter's share of the change (the second gets the rest)")] = 0.5,
) -> None:
    """Average two LoRA adapters of the base model, exactly (their ranks side by side): WiSE-FT's interpolation."""
    from training.average import average_adapters

    if len(adapter) != 2:
        raise typer.BadParameter("give --adapter twice")
    typer.echo(f"adapter: {average_adapters(adapter[0], adapter[1], weight, out)}")


@train_app.command("ship")
def train_ship(
    run: Annotated[list[Path], typer.Option(help="run folders that made it, in order (config.json, metrics.jsonl)")],
    adapter: Annotated[Path | None, typer.Option(help="an adapter folder (an SFT or RL run's adapter) to ship")] = None,
    drafter: Annotated[Path | None, typer.Option(help="an EAGLE3 drafter folder to ship")] = None,
    eval_report: Annotated[list[Path], typer.Option("--eval", help="`talkline eval` or `talkline bench` JSON reports of it")] = [],  # noqa: B006
    reproduce: Annotated[str, typer.Option(help="the commands that reproduce it")] = "make train",
) -> None:
    """Copy an adapter into models/adapters/talkline (the tuned default), or a drafter into models/drafters/talkline
    (speculative decoding's default), with run.json: configs, metrics, evals."""
    from training.ship import ship, ship_drafter

    if (adapter is None) == (drafter is None):
        raise typer.BadParameter("give exactly one of --adapter and --drafter")
    shipped = ship(adapter, run, eval_report, reproduce) if adapter else ship_drafter(drafter, run, eval_report, reproduce)
    typer.echo(f"shipped: {shipped}")


@train_app.command("brands")
def brands_command(
    out: Annotated[Path, typer.Option(help="SFT data folder: train.jsonl, general.jsonl, manifest.json")] = Path("runs/brands"),
    scenarios: Annotated[Path, typer.Option(help="where the held-out scenarios go")] = Path("training/scenarios_brands_heldout.jsonl"),
    seed: Annotated[int, typer.Option()] = 2026,
    conversations: Annotated[int, typer.Option(help="conversations from the composed brand pools")] = 7000,
    templated: Annotated[int, typer.Option(help="conversations from `train data`'s generator (tools, codes)")] = 3000,
    retrieval: Annotated[bool, typer.Option(help="put the retrieved facts before each last caller turn, as calls do")] = True,
    twin_share: Annotated[float, typer.Option(help="one-fact conversations also written to the brand without the fact")] = 0.0,
    kind_weights: Annotated[str, typer.Option(help="kind:weight,... for the composed conversations (others keep theirs)")] = "",
    validation: Annotated[
        Path | None,
        typer.Option(help="also write 600 scenarios from the train sectors the retriever left out (ranking choices are made there)"),
    ] = None,
) -> None:
    """Composed-brand training data (74 sectors) and the held-out brand scenarios (10 other sectors, other writers)."""
    from training.data.realistic.generate import BrandDataConfig, generate_brands, kind_weights_from, validation_scenarios
    from training.retriever import kept_out_sectors

    retriever = None
    if retrieval:
        import torch

        from models.embedder import Embedder
        from pipeline.retrieval import Retriever

        torch.set_num_threads(1)
        retriever = Retriever(Embedder())
    cfg = BrandDataConfig(
        seed=seed,
        conversations=conversations,
        templated_conversations=templated,
        twin_share=twin_share,
        train_kind_weights=kind_weights_from(kind_weights),
    )
    if validation:
        validation_scenarios(BrandDataConfig(seed=seed, scenarios=600), kept_out_sectors(), validation)
    manifest = generate_brands(out, cfg, scenarios, retriever)
    typer.echo(json.dumps(manifest["counts"], indent=2))


@train_app.command("retriever")
def retriever_command(
    out: Annotated[Path, typer.Option(help="folder for minilm_top_layers.safetensors and run.json")] = Path("runs/retriever"),
    steps: Annotated[int, typer.Option()] = 600,
    batch_size: Annotated[int, typer.Option(help="topics of one sector per step")] = 24,
    lr: Annotated[float, typer.Option()] = 5e-5,
    train_layers: Annotated[int, typer.Option(help="top encoder layers that learn")] = 3,
    two_share: Annotated[float, typer.Option(help="two-question turns per topic in a batch")] = 0.0,
    threads: Annotated[int, typer.Option(help="torch threads")] = 1,
) -> None:
    """Fine-tune the fact retriever's MiniLM top layers on the train pools' caller questions and facts."""
    from training.retriever import RetrieverTrainConfig, train

    record = train(
        RetrieverTrainConfig(
            out=out, steps=steps, batch_size=batch_size, lr=lr, train_layers=train_layers, two_share=two_share, threads=threads
        )
    )
    typer.echo(json.dumps(record["history"][-1]))


@train_app.command("turn-lm")
def turn_lm_command(
    out: Annotated[Path, typer.Option(help="folder for minilm_turn.safetensors and run.json")] = Path("runs/turn-lm"),
    steps: Annotated[int, typer.Option()] = 1200,
    batch_size: Annotated[int, typer.Option()] = 32,
    train_layers: Annotated[int, typer.Option(help="top encoder layers that learn")] = 3,
    seed: Annotated[int, typer.Option()] = 0,
    threads: Annotated[int, typer.Option(help="torch threads")] = 2,
) -> None:
    """Fine-tune the words' end-of-turn model (MiniLM top layers and a head) on the train pools' caller turns."""
    from training.turn_lm import TurnLMTrainConfig, train

    record = train(TurnLMTrainConfig(out=out, steps=steps, batch_size=batch_size, train_layers=train_layers, seed=seed, threads=threads))
    typer.echo(json.dumps(record["history"][-1]))


def eval_command(
    scenarios: Annotated[Path, typer.Option(help="JSONL of {id, profile, messages, checks}")] = Path("training/scenarios_heldout.jsonl"),
    model: Annotated[str, typer.Option(help="base, tuned, gemma3-270m, or a model/adapter folder or .gguf file")] = "tuned",
    out: Annotated[Path | None, typer.Option(help="write the JSON report here")] = None,
    limit: Annotated[int | None, typer.Option(help="only the first N scenarios")] = None,
    max_new_tokens: Annotated[int, typer.Option()] = 60,
    rescore: Annotated[Path | None, typer.Option(help="re-check the replies of this saved report instead (no model)")] = None,
    retrieval: Annotated[bool, typer.Option(help="repeat the facts ranked for each turn before the question, as calls do")] = True,
    weights: Annotated[str, typer.Option(help="the model's linear weights: bf16, or int8 (weight-only)")] = "bf16",
    against: Annotated[Path | None, typer.Option(help="a saved report on the same scenarios to compare with, scenario by scenario")] = None,
    readout: Annotated[bool, typer.Option(help="read out the closest fact where the model declines, as calls do")] = True,
) -> None:
    """Answer held-out scenarios greedily with the embedded engine (1 thread) and report check pass rates."""
    from training.eval import main, main_rescore

    before = json.loads(against.read_text()) if against else None
    if rescore:
        main_rescore(scenarios, rescore, out, before)
    else:
        main(scenarios, model, out, limit, max_new_tokens, retrieval, weights, before, readout)


def export_command(
    out: Annotated[Path, typer.Option(help="folder for the merged safetensors model and tokenizer")],
    model: Annotated[str, typer.Option(help="tuned (the committed adapter), base, or an adapter folder")] = "tuned",
) -> None:
    """Merge base + LoRA adapter into a plain HF model folder that SGLang can serve."""
    from training.export import export

    typer.echo(f"exported: {export(out, model)}")
