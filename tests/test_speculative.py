"""Speculative decoding: lossless greedy output, the rejection-sampling rule, cache reuse and crop, cancellation."""

from __future__ import annotations

import pytest
import torch

from models.eagle3 import random_drafter
from models.engine import Engine
from models.session import GenerationStats
from models.speculative import accept_drafts

PROMPTS = [
    "How much does it cost to check a bag?",
    "Tell me a short story about a cat.",
    "What is two plus two?",
    "List three colors and explain why you like them.",
]


@pytest.fixture(scope="module")
def engines(stages):
    plain = stages.llm.engine
    spec = Engine(plain.model, plain.tokenizer, random_drafter(plain.model.config, 8192, seed=0), draft_tokens=4)
    return plain, spec


def run(engine: Engine, messages, session=None, max_new=48, **kw) -> tuple[list[int], GenerationStats]:
    stats = GenerationStats()
    session = session or engine.new_session()
    return list(engine.generate(session, engine.encode_chat(messages), max_new, stats=stats, **kw)), stats


@pytest.mark.parametrize("question", PROMPTS)
def test_greedy_speculative_output_equals_plain_greedy(engines, question):
    plain, spec = engines
    messages = [{"role": "user", "content": question}]
    want, plain_stats = run(plain, messages)
    got, spec_stats = run(spec, messages)
    assert got == want
    assert spec_stats.drafted_tokens > 0 and plain_stats.drafted_tokens == 0


@pytest.mark.parametrize("rows", [2, 5, 8])
def test_a_verify_forward_gives_each_row_the_logits_of_decoding_it_alone(engines, rows):
    plain, _ = engines
    prompt = plain.encode_chat([{"role": "user", "content": PROMPTS[1]}])
    drafts = plain.encode_chat([{"role": "user", "content": PROMPTS[3]}])[-rows:]
    one_by_one, together = plain.new_session(), plain.new_session()
    one_by_one.forward(plain.model, prompt)
    together.forward(plain.model, prompt)
    decoded = torch.cat([one_by_one.forward(plain.model, [t]) for t in drafts])
    assert torch.equal(together.forward(plain.model, drafts), decoded)  # bit for bit, every row


def test_an_unsure_drafter_drafts_shorter_chains_and_stays_lossless(engines):
    plain, spec = engines
    unsure = Engine(plain.model, plain.tokenizer, spec.drafter, draft_tokens=4, min_draft_confidence=0.5)
    messages = [{"role": "user", "content": PROMPTS[0]}]
    want, _ = run(plain, messages)
    got, stats = run(unsure, messages)
    full, full_stats = run(spec, messages)
    assert got == want == full
    assert stats.drafted_tokens == stats.target_forwards - 1  # the random drafter is never sure: one draft a round
    assert full_stats.drafted_tokens == 4 * (full_stats.target_forwards - 1)


def test_follow_up_turn_reuses_cache_and_stays_lossless(engines):
    plain, spec = engines
    for engine in engines:
        engine._session = engine.new_session()
    first = [
        {"role": "system", "content": "You are a helpful airline agent. A bag costs 30 dollars."},
        {"role": "user", "content": "How much is a bag?"},
    ]
    outputs = {}
    for name, engine in (("plain", plain), ("spec", spec)):
        reply, _ = run(engine, first, session=engine._session)
        follow = first + [
            {"role": "assistant", "content": engine.tokenizer.decode(reply, skip_special_tokens=True)},
            {"role": "user", "content": "And a second bag?"},
        ]
        again, stats = run(engine, follow, session=engine._session)
        assert stats.reused_tokens >= len(engine.encode_chat(first))
        assert stats.prompt_tokens - stats.reused_tokens < 40
        outputs[name] = (reply, again)
    assert outputs["plain"] == outputs["spec"]


def test_truncated_history_crops_the_cache_to_the_common_prefix(engines):
    for engine in engines:
        session = engine.new_session()
        messages = [{"role": "user", "content": "Describe your baggage rules in detail."}]
        reply, _ = run(engine, messages, session=session)
        text = engine.tokenizer.decode(reply, skip_special_tokens=True)
        cut = messages + [
            {"role": "assistant", "content": " ".join(text.split()[:3])},
            {"role": "user", "content": "Sorry, what about pets?"},
        ]
        prompt = engine.encode_chat(cut)
        cached = list(session.ids)
        common = next(i for i, (a, b) in enumerate(zip(cached + [-1], prompt + [-2])) if a != b)
        assert 0 < common < len(cached)
        with torch.inference_mode():
            logits, reused = session.prefill(engine.model, prompt)
            fresh_logits, _ = engine.new_session().prefill(engine.model, prompt)
        assert reused == common
        assert session.ids == prompt and session.cache.get_seq_length() == len(prompt)
        if session.aux is not None:
            assert session.aux.shape[0] == len(prompt) and session.draft_cache.length <= len(prompt) - 1
        # what stayed cached is the same prefix a fresh prefill computes (up to bf16 rounding)
        assert torch.nn.functional.cosine_similarity(logits, fresh_logits, dim=0) > 0.995


def test_cancellation_stops_within_one_step(engines):
    for engine in engines:
        emitted: list[int] = []
        stats = GenerationStats()
        prompt = engine.encode_chat([{"role": "user", "content": "Count from one to fifty."}])
        for token in engine.generate(engine.new_session(), prompt, 64, stats=stats, cancelled=lambda out=emitted: len(out) >= 3):
            emitted.append(token)
        assert len(emitted) == 3


def test_sampling_with_a_drafter_runs_and_is_reproducible(engines):
    _, spec = engines
    messages = [{"role": "user", "content": "Say something nice."}]
    a, _ = run(spec, messages, temperature=0.8, seed=7)
    b, _ = run(spec, messages, temperature=0.8, seed=7)
    assert a == b and len(a) > 0


def test_rejection_sampling_matches_the_target_distribution():
    """On a 5-token vocabulary the first and the bonus token follow the target's distribution, whatever the drafter."""
    gen = torch.Generator().manual_seed(0)
    target_logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0], [0.0, 1.5, -0.5, 1.0, 0.2]])
    p = torch.softmax(target_logits, dim=-1)
    q = torch.tensor([[0.05, 0.6, 0.05, 0.25, 0.05]])  # a poor drafter
    counts_first = torch.zeros(5)
    counts_second = torch.zeros(5)
    trials = 40000
    for _ in range(trials):
        draft = int(torch.multinomial(q[0], 1, generator=gen))
        accepted, token = accept_drafts(target_logits, [draft], q, temperature=1.0, generator=gen)
        first = draft if accepted == 1 else token
        counts_first[first] += 1
        if accepted == 1:
            counts_second[token] += 1
    assert torch.allclose(counts_first / trials, p[0], atol=0.01), (counts_first / trials, p[0])
    assert torch.allclose(counts_second / counts_second.sum(), p[1], atol=0.015)


def test_greedy_acceptance_rule():
    logits = torch.tensor([[0.0, 5.0, 0.0], [0.0, 0.0, 5.0], [5.0, 0.0, 0.0]])
    assert accept_drafts(logits, [1, 2], None, 0.0) == (2, 0)
    assert accept_drafts(logits, [1, 0], None, 0.0) == (1, 2)
    assert accept_drafts(logits, [2, 2], None, 0.0) == (0, 1)


def test_prefill_warms_the_next_prompt_and_changes_nothing(engines):
    history = [
        {"role": "system", "content": "You are a helpful airline agent. A bag costs 30 dollars."},
        {"role": "assistant", "content": "Hi, this is Ava. How can I help?"},
    ]
    turn = history + [{"role": "user", "content": "How much is a bag?"}]
    outputs = []
    for engine in engines:
        warmed = engine.new_session()
        prefix = engine.encode_chat(history, add_generation_prompt=False)
        assert engine.encode_chat(turn)[: len(prefix)] == prefix, "the warmed prompt is a prefix of the turn's"
        engine.prefill(warmed, prefix)
        assert warmed.ids == prefix
        engine.prefill(warmed, prefix, cancelled=lambda: True)  # a cancelled prefill leaves the cache as it is
        got, stats = run(engine, turn, session=warmed)
        assert stats.reused_tokens == len(prefix) and got
        outputs.append(got)
        engine.prefill(warmed, prefix)  # the next warm-up crops the reply and the question away
        assert warmed.ids == prefix
    # A prefill in two pieces is not bit-identical to one in bf16, so the reference is the plain engine on the
    # same warmed path: speculative decoding reads the drafter features the warm-up captured, and stays lossless.
    assert outputs[0] == outputs[1]


def test_serve_engine_and_bench_share_one_set_of_speculative_defaults(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import bench.spec
    import server.app
    from models.assets import default_drafter_dir
    from models.spec_config import SpecConfig
    from server.cli import app

    loads, settings, benched = [], [], []
    monkeypatch.setattr("models.engine.Engine.load", lambda *a, **kw: loads.append(kw["spec"]))
    monkeypatch.setattr("server.openai_api.create_engine_app", lambda engine, drafter, **kw: None)
    monkeypatch.setattr(server.app, "create_app", lambda s: settings.append(s))
    monkeypatch.setattr("server.drain.DrainingServer.run", lambda self: None)
    monkeypatch.setattr(bench.spec, "main", lambda prompts, config, *a, **kw: benched.append(config))
    monkeypatch.setattr("uvicorn.run", lambda *a, **kw: None)
    runner = CliRunner()
    for command in (["engine"], ["serve"], ["bench", "spec"]):
        assert runner.invoke(app, command).exit_code == 0
    shipped = SpecConfig()
    assert shipped.drafter == default_drafter_dir() and (shipped.min_confidence, shipped.prompt_lookup) == (0.6, True)
    assert loads[0] == settings[0].spec == benched[0] == shipped  # without flags, all three run the shipped configuration

    monkeypatch.setenv("TALKLINE_MIN_DRAFT_CONFIDENCE", "0.3")
    assert runner.invoke(app, ["engine", "--drafter", str(tmp_path), "--draft-tokens", "2"]).exit_code == 0
    assert loads[-1] == SpecConfig(drafter=tmp_path, draft_tokens=2, min_confidence=0.3)
    assert runner.invoke(app, ["engine", "--no-spec"]).exit_code == 0 and loads[-1] is None
    assert runner.invoke(app, ["serve", "--no-spec"]).exit_code == 0 and settings[-1].spec is None
    assert runner.invoke(app, ["engine", "--no-prompt-lookup"]).exit_code == 0 and loads[-1].prompt_lookup is False
    monkeypatch.setenv("TALKLINE_PROMPT_LOOKUP", "0")
    result = runner.invoke(app, ["serve", "--drafter", str(tmp_path), "--draft-tokens", "3"])
    assert result.exit_code == 0, result.output
    assert settings[-1].spec == SpecConfig(drafter=tmp_path, draft_tokens=3, min_confidence=0.3, prompt_lookup=False)
    assert runner.invoke(app, ["bench", "spec", "--min-confidence", "0", "--no-phrases"]).exit_code == 0
    assert benched[-1] == SpecConfig(min_confidence=0.0, prompt_lookup=False, phrases=False)
    monkeypatch.setenv("TALKLINE_SPEC", "off")
    assert runner.invoke(app, ["serve"]).exit_code == 0 and settings[-1].spec is None
    threads = torch.get_num_threads()
    try:
        server.app.build_llm(settings[-2])
    finally:
        torch.set_num_threads(threads)
    assert loads[-1] == settings[-2].spec


def test_the_engine_decodes_on_one_torch_thread_unless_told(monkeypatch):
    """Beside voice servers on the same cores, an engine on every core slows their ASR and TTS (docs/performance.md)."""
    from typer.testing import CliRunner

    from server.cli import app

    seen = []
    monkeypatch.setattr("models.engine.Engine.load", lambda *a, **kw: seen.append(torch.get_num_threads()))
    monkeypatch.setattr("server.openai_api.create_engine_app", lambda engine, drafter, **kw: None)
    monkeypatch.setattr("uvicorn.run", lambda *a, **kw: None)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert CliRunner().invoke(app, ["engine"]).exit_code == 0
        monkeypatch.setenv("TALKLINE_ENGINE_THREADS", "2")
        assert CliRunner().invoke(app, ["engine"]).exit_code == 0
        torch.set_num_threads(1)
        assert CliRunner().invoke(app, ["engine", "--threads", "3"]).exit_code == 0
    finally:
        torch.set_num_threads(threads)
    assert seen == [1, 2, 3]


def test_the_committed_drafter_is_lossless_and_drafts_for_the_tuned_model(stages):
    from pathlib import Path

    from bench.spec import load_prompts
    from models.assets import default_drafter_dir
    from models.eagle3 import load_drafter
    from pipeline.retrieval import served_messages

    plain = stages.llm.engine  # the tuned default model
    drafter_dir = default_drafter_dir()
    assert drafter_dir is not None, "models/drafters/talkline is missing: `make train-drafter` and commit it"
    spec = Engine(plain.model, plain.tokenizer, load_drafter(drafter_dir)[0], draft_tokens=4, min_draft_confidence=0.6)
    totals = GenerationStats()
    for profile, messages in load_prompts(Path("bench/prompts.jsonl"))[:3]:
        chat = served_messages(profile, messages, stages.retriever)  # as a call prompts it
        want, _ = run(plain, chat, max_new=40)
        got, stats = run(spec, chat, max_new=40)
        assert got == want
        totals.new_tokens += stats.new_tokens - 1
        totals.target_forwards += stats.target_forwards - 1
    assert totals.new_tokens / totals.target_forwards > 1.4  # a random drafter: ~1.0; measured 1.77 on 12 prompts


def test_bench_spec_takes_a_seeded_sample_of_the_prompts():
    from pathlib import Path

    from bench.spec import load_prompts, sample_prompts

    prompts = load_prompts(Path("training/scenarios_heldout.jsonl"))
    picked = sample_prompts(prompts, 5)
    assert len(picked) == 5 and picked == sample_prompts(prompts, 5) and picked != prompts[:5]
    assert len({p.id for p, _ in picked}) > 1  # across the file, not its first brand
    assert sample_prompts(prompts, None) == prompts == sample_prompts(prompts, 10_000)
