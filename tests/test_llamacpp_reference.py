"""`talkline bench spec --reference llama-cpp`: llama.cpp on the bundled GGUF beside the embedded engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from server.cli import app


def test_the_reference_says_what_to_install_when_llama_cpp_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp raises ImportError
    monkeypatch.setattr("models.engine.Engine.load", lambda *a, **kw: type("E", (), {"stop_ids": {2}})())
    monkeypatch.setattr("bench.spec.Embedder", lambda: None)
    result = CliRunner().invoke(app, ["bench", "spec", "--reference", "llama-cpp"])
    assert result.exit_code == 2 and "pip install llama-cpp-python" in result.output
    result = CliRunner().invoke(app, ["bench", "spec", "--reference", "vllm"])
    assert result.exit_code == 2 and "use llama-cpp" in result.output


def test_llama_cpp_decodes_the_served_prompt_tokens_from_a_cold_cache(stages):
    pytest.importorskip("llama_cpp")
    from bench.llamacpp import LlamaCppReference
    from bench.spec import compare, load_prompts

    engine = stages.llm.engine
    reference = LlamaCppReference(1, engine.stop_ids)
    prompts = load_prompts(Path("bench/prompts.jsonl"))[:2]
    report = compare(engine, engine, prompts, 24, stages.retriever, reference)
    assert report["reference"]["plain_tok_s"] > 0 and report["reference"]["ttft_ms"] > 0
    assert "Q4_1" in report["reference"]["name"]

    prompt = engine.encode_chat([{"role": "user", "content": "What is two plus two?"}])
    first, _, _ = reference.timed(prompt, 12)
    again, _, _ = reference.timed(prompt, 12)
    assert first == again and engine.tokenizer.decode(first).strip()  # same greedy tokens: nothing left from the last prompt
