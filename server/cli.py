"""The `talkline` command: serve (and, as they land, engine, bench, train, eval, export)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from models.spec_config import SpecConfig

app = typer.Typer(help="Talkline: a self-hostable real-time voice agent server.", no_args_is_help=True)
SERVING_COMMANDS = ("serve", "engine", "bench")  # the commands that never import the training stack
MODEL_HELP = "embedded LLM: tuned (SmolLM2 + the committed adapter; base until one exists), base, or a model/adapter folder"


SPEC_HELP = "speculative decoding (lossless) with --drafter or the committed drafter, models/drafters/talkline, if any"
DRAFTER_HELP = "EAGLE3 drafter folder (SGLang format) [TALKLINE_DRAFTER, models/drafters/talkline when one is committed]"
Spec = Annotated[bool | None, typer.Option("--spec/--no-spec", help=SPEC_HELP + " [TALKLINE_SPEC, on]")]
Drafter = Annotated[Path | None, typer.Option(help=DRAFTER_HELP)]
DraftTokens = Annotated[
    int | None, typer.Option(help=f"longest draft chain per target forward [TALKLINE_DRAFT_TOKENS, {SpecConfig.draft_tokens}]")
]
MinDraftConfidence = Annotated[
    float | None,
    typer.Option(
        help="after its first draft, a chain ends once the drafter's top probability drops below this "
        f"[TALKLINE_MIN_DRAFT_CONFIDENCE, {SpecConfig.min_confidence}]"
    ),
]
Weights = Annotated[
    str,
    typer.Option(envvar="TALKLINE_LLM_WEIGHTS", help="embedded LLM linear weights: bf16, or int8 (weight-only, models/quantize.py)"),
]
Batching = Annotated[
    bool | None,
    typer.Option(
        "--batching/--no-batching",
        help="concurrent conversations share the embedded engine's decode forwards (continuous batching; output "
        "unchanged) [TALKLINE_LLM_BATCHING, on]",
    ),
]
Slots = Annotated[
    int | None,
    typer.Option(
        "--llm-slots",
        help="embedded engine without batching (--no-batching): at most this many decode forwards at once, the call "
        "whose caller has the least speech queued first (0: every forward at once) [TALKLINE_LLM_SLOTS, 0]",
    ),
]
PROMPT_LOOKUP_HELP = (
    "greedy chains also draft what followed the same tokens earlier in the conversation, else in the "
    "target's past replies (the drafter's phrases.json, grown by each reply)"
)
PromptLookup = Annotated[
    bool | None,
    typer.Option(
        "--prompt-lookup/--no-prompt-lookup",
        help=PROMPT_LOOKUP_HELP + " [TALKLINE_PROMPT_LOOKUP, on]",
    ),
]


def _settings(**flags: object):
    """Settings from TALKLINE_* variables, with the flags that were given (not None) on top."""
    from server.settings import Settings

    return Settings(**{k: v for k, v in flags.items() if v is not None})


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="listen address [TALKLINE_HOST, 127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(help="listen port [TALKLINE_PORT, 8000]")] = None,
    profiles: Annotated[Path | None, typer.Option(help="folder of profile YAML files [TALKLINE_PROFILES]")] = None,
    db: Annotated[str | None, typer.Option(help="SQLAlchemy database URL [TALKLINE_DB]")] = None,
    llm: Annotated[str | None, typer.Option(help="LLM backend: embedded or sglang [TALKLINE_LLM]")] = None,
    llm_url: Annotated[str | None, typer.Option(help="http://HOST:PORT of an OpenAI-compatible server [TALKLINE_LLM_URL]")] = None,
    llm_timeout: Annotated[float | None, typer.Option(help="seconds to wait for the LLM server [TALKLINE_LLM_TIMEOUT]")] = None,
    model: Annotated[str, typer.Option(envvar="TALKLINE_MODEL", help=MODEL_HELP)] = "tuned",
    spec: Spec = None,
    drafter: Drafter = None,
    draft_tokens: DraftTokens = None,
    min_draft_confidence: MinDraftConfidence = None,
    prompt_lookup: PromptLookup = None,
    weights: Weights = "bf16",
    batching: Batching = None,
    llm_slots: Slots = None,
    log_level: Annotated[str, typer.Option(envvar="TALKLINE_LOG_LEVEL")] = "info",
) -> None:
    """Run the voice server on HOST:PORT; a flag overrides its TALKLINE_* variable, which Settings reads."""
    import uvicorn

    from models.assets import llm_dir
    from server.app import create_app
    from server.drain import DrainingServer
    from server.settings import spec_from_env
    from server.telemetry import configure_tracing

    _logging(log_level)
    settings = _settings(
        host=host,
        port=port,
        profiles_dir=profiles,
        db_url=db,
        llm=llm,
        llm_url=llm_url,
        llm_timeout=llm_timeout,
        llm_weights=weights,
        llm_batching=batching,
        llm_slots=llm_slots,
    )
    settings.spec = spec_from_env(
        spec, drafter=drafter, draft_tokens=draft_tokens, min_confidence=min_draft_confidence, prompt_lookup=prompt_lookup
    )  # set after: None (--no-spec) is a value here
    settings.model_path = llm_dir(model) if settings.llm == "embedded" else None
    configure_tracing()
    web = create_app(settings)
    config = uvicorn.Config(web, host=settings.host, port=settings.port, log_level=log_level, ws_max_size=1 << 20)
    DrainingServer(config, web, settings.drain_s).run()


@app.command("engine")
def engine_command(
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 30000,
    drafter: Drafter = None,
    spec: Spec = None,
    model: Annotated[str, typer.Option(envvar="TALKLINE_MODEL", help=MODEL_HELP)] = "tuned",
    draft_tokens: DraftTokens = None,
    min_draft_confidence: MinDraftConfidence = None,
    prompt_lookup: PromptLookup = None,
    weights: Weights = "bf16",
    batching: Batching = None,
    cache_tokens: Annotated[
        int,
        typer.Option(
            envvar="TALKLINE_ENGINE_CACHE_TOKENS", help="KV cache tokens kept across requests for prefix reuse (0: none; ~23 KB each)"
        ),
    ] = 32768,
    threads: Annotated[
        int,
        typer.Option(
            envvar="TALKLINE_ENGINE_THREADS",
            help="torch threads: 1 (as `talkline serve` gives its LLM) beside voice servers; a host of its own may use every core",
        ),
    ] = 1,
    log_level: Annotated[str, typer.Option(envvar="TALKLINE_LOG_LEVEL")] = "info",
) -> None:
    """Serve the embedded LLM engine as an OpenAI-compatible API (/v1/chat/completions) on HOST:PORT."""
    import torch
    import uvicorn

    from models.assets import llm_dir
    from models.engine import Engine
    from server.openai_api import create_engine_app
    from server.settings import spec_from_env

    _logging(log_level)
    config = spec_from_env(
        spec, drafter=drafter, draft_tokens=draft_tokens, min_confidence=min_draft_confidence, prompt_lookup=prompt_lookup
    )
    torch.set_num_threads(threads)
    engine = Engine.load(llm_dir(model), spec=config, weights=weights, batching=_settings(llm_batching=batching).llm_batching)
    web = create_engine_app(engine, config and config.drafter, cache_tokens=cache_tokens)
    uvicorn.run(web, host=host, port=port, log_level=log_level)


bench_app = typer.Typer(help="Benchmarks that print a table and write JSON.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.command("latency")
def bench_latency(
    audio: Annotated[list[Path], typer.Option("--audio", help="caller turns as WAV files, one per turn")],
    url: Annotated[str | None, typer.Option(help="ws://HOST:PORT of a running server; default: start one")] = None,
    profile: Annotated[str, typer.Option()] = "skyways",
    calls: Annotated[int, typer.Option(help="simultaneous calls")] = 1,
    out: Annotated[Path | None, typer.Option(help="write the JSON report here")] = None,
    transport: Annotated[
        list[str] | None, typer.Option(help="websocket or webrtc; given twice, both in one run, side by side (default websocket)")
    ] = None,
) -> None:
    """Voice-to-voice latency at the client over real-time streamed WAV turns."""
    from bench import latency

    latency.main(audio, url, profile, calls, out, tuple(transport or ["websocket"]))


@bench_app.command("capacity")
def bench_capacity(
    url: Annotated[str | None, typer.Option(help="ws://HOST:PORT of a running server; default: start one")] = None,
    profile: Annotated[str, typer.Option()] = "skyways",
    max_calls: Annotated[int, typer.Option(help="the highest level: 1, 2, 4, 6, 8, ... up to this many calls")] = 8,
    seconds: Annotated[float, typer.Option(help="how long each level runs")] = 60.0,
    audio: Annotated[list[Path] | None, typer.Option("--audio", help="caller turns as WAV files; default: bench/audio")] = None,
    out: Annotated[Path | None, typer.Option(help="folder for capacity.json and capacity.png")] = None,
    lockstep: Annotated[
        bool, typer.Option(help="every caller starts at once and speaks 0.3 s after each answer; default: callers arrive apart")
    ] = False,
) -> None:
    """Concurrent simulated callers, level by level: voice-to-voice, underruns and CPU per level, and the capacity."""
    from bench import capacity

    capacity.main(url, profile, max_calls, seconds, out, audio, lockstep)


@bench_app.command("endpointing")
def bench_endpointing(
    out: Annotated[Path, typer.Option(help="folder for report.json, events.csv, pauses.csv and curve.png")] = Path("runs/endpointing"),
    seed: Annotated[int, typer.Option(help="the pause lengths and the line noise")] = 2026,
    wav: Annotated[list[Path] | None, typer.Option("--wav", help="a recording of one speaker's turn to add (real speech)")] = None,
) -> None:
    """End-of-turn policies on a labelled set of caller turns with pauses: false cut-offs, wait after a finished turn."""
    from bench import endpointing

    endpointing.main(out, seed, wav or [])


@bench_app.command("batching")
def bench_batching(
    prompts: Annotated[Path, typer.Option(help="JSONL: {profile, messages} per line")] = Path("bench/prompts.jsonl"),
    streams: Annotated[list[int] | None, typer.Option("--streams", help="concurrent replies per level; repeat it")] = None,
    rounds: Annotated[int, typer.Option(help="alternating runs without and with batching per level")] = 1,
    max_new_tokens: Annotated[int, typer.Option()] = 64,
    out: Annotated[Path | None, typer.Option(help="write the JSON report here")] = None,
) -> None:
    """Concurrent replies on the served engine, each forward alone against continuous batching: tokens/s, first
    token and reply time, and whether the outputs are the same."""
    from bench import batching

    batching.main(prompts, streams or [1, 2, 4, 8], rounds, max_new_tokens, out)


@bench_app.command("spec")
def bench_spec(
    prompts: Annotated[Path, typer.Option(help="JSONL: {profile, messages} per line")] = Path("bench/prompts.jsonl"),
    drafter: Annotated[Path | None, typer.Option(help="EAGLE3 drafter folder; default: the one served")] = None,
    untrained: Annotated[bool, typer.Option(help="draft with an untrained drafter (seed 0) instead")] = False,
    max_new_tokens: Annotated[int, typer.Option()] = 64,
    out: Annotated[Path | None, typer.Option(help="write the JSON report here")] = None,
    draft_tokens: DraftTokens = None,
    min_confidence: MinDraftConfidence = None,
    limit: Annotated[int | None, typer.Option(help="a seeded sample of this many prompts")] = None,
    prompt_lookup: PromptLookup = None,
    phrases: Annotated[bool, typer.Option(help="with prompt lookup, also draft from the drafter folder's phrases.json")] = True,
    learn_phrases: Annotated[bool, typer.Option(help="each reply joins the phrase memory, as when serving")] = True,
    retrieval: Annotated[bool, typer.Option(help="the facts retrieved for the turn before its last message, as served")] = True,
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "tuned",
    weights: Weights = "bf16",
    batching: Batching = None,
    reference: Annotated[
        str | None, typer.Option(help="llama-cpp: llama.cpp on the bundled GGUF beside it, same prompts (pip install llama-cpp-python)")
    ] = None,
) -> None:
    """Plain greedy vs speculative greedy on the embedded engine: speed, acceptance, losslessness. Without flags it
    measures what `talkline serve` runs; flags switch parts off for comparisons."""
    from bench import spec
    from bench.llamacpp import ReferenceUnavailable
    from server.settings import spec_from_env

    if reference not in (None, "llama-cpp"):
        raise typer.BadParameter(f"unknown reference {reference!r}: use llama-cpp", param_hint="--reference")

    config = spec_from_env(
        True,
        drafter=drafter,
        draft_tokens=draft_tokens,
        min_confidence=min_confidence,
        prompt_lookup=prompt_lookup,
        phrases=phrases,
        learn_phrases=learn_phrases,
    )
    try:
        spec.main(
            prompts,
            config,
            max_new_tokens,
            out,
            limit=limit,
            retrieval=retrieval,
            untrained=untrained,
            model=model,
            weights=weights,
            batching=_settings(llm_batching=batching).llm_batching,
            llama_cpp=reference is not None,
        )
    except ReferenceUnavailable as e:
        raise typer.BadParameter(str(e), param_hint="--reference") from e


@bench_app.command("retrieval")
def bench_retrieval(
    scenarios: Annotated[list[Path], typer.Option("--scenarios", help="scenario JSONL files (talkline eval's format)")] = [  # noqa: B006
        Path("training/scenarios_brands_heldout.jsonl")
    ],
    out: Annotated[Path | None, typer.Option(help="write the JSON report here")] = None,
    top_layers: Annotated[Path | None, typer.Option(help="fine-tuned MiniLM layers to compare; default: the shipped ones")] = None,
) -> None:
    """Fact retrieval: recall@k of the facts a right reply needs (embedding, BM25, hybrid), bundled vs fine-tuned
    encoder, and time per turn."""
    from bench import retrieval

    retrieval.main(scenarios, out, top_layers)


MULTI_VALUE_OPTIONS = ("--audio", "--scenarios", "--wav")


def expand_multi_value(argv: list[str]) -> list[str]:
    """Let `--audio a.wav b.wav` mean `--audio a.wav --audio b.wav`, as the docs write it."""
    out, current = [], None
    for arg in argv:
        if arg.startswith("-"):
            current = arg if arg in MULTI_VALUE_OPTIONS else None
            out.append(arg)
        elif current and out[-1] != current:
            out += [current, arg]
        else:
            out.append(arg)
    return out


def command_app(argv: list[str]) -> typer.Typer:
    """The app for these arguments: the training commands (`train`, `eval`, `export`) join it unless a serving
    command runs, so `talkline serve` never imports training code."""
    if (not argv or argv[0] not in SERVING_COMMANDS) and not any(c.name == "eval" for c in app.registered_commands):
        from training.cli import eval_command, export_command, train_app
        from training.drafter.cli import train_drafter_command

        train_app.command("drafter")(train_drafter_command)
        app.add_typer(train_app, name="train")
        app.command("eval")(eval_command)
        app.command("export")(export_command)
    return app


def main() -> None:
    argv = expand_multi_value(sys.argv[1:])
    command_app(argv)(args=argv, prog_name="talkline")


if __name__ == "__main__":
    main()
