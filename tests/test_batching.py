"""Continuous batching: packed forwards give every session exactly its own logits; concurrent replies are unchanged."""

from __future__ import annotations

import threading

import pytest
import torch

from models.batching import ForwardBatcher, Job
from models.eagle3 import random_drafter
from models.engine import Engine
from models.invariance import RowStableLinear
from models.packed import MAX_PACKED_ROWS, packed_forward
from models.quantize import Int8Linear
from server.settings import Settings

QUESTIONS = [
    "How much does it cost to check a bag?",
    "What time do you open on Sundays?",
    "Can I bring my dog on the ferry?",
    "I'd like to speak to a person, please.",
]
AUX_LAYERS = [1, 14, 26]


@pytest.fixture(scope="module")
def alone(stages) -> Engine:
    """The served model without a batcher: every forward alone."""
    return Engine(stages.llm.engine.model, stages.llm.engine.tokenizer)


def chat(engine: Engine, question: str) -> list[int]:
    return engine.encode_chat([{"role": "user", "content": question}])


@pytest.fixture(scope="module")
def batched(alone) -> Engine:
    return Engine(alone.model, alone.tokenizer, batching=True)


def test_batching_is_a_setting_on_by_default(monkeypatch):
    monkeypatch.delenv("TALKLINE_LLM_BATCHING", raising=False)
    assert Settings().llm_batching is True
    monkeypatch.setenv("TALKLINE_LLM_BATCHING", "0")
    assert Settings().llm_batching is False


@pytest.mark.parametrize("kind", ["bf16", "bf16-prepacked", "int8"])
@pytest.mark.parametrize(("fan_in", "fan_out"), [(576, 576), (576, 192), (576, 1536), (1536, 576)])
def test_a_linear_gives_each_row_the_same_bits_in_any_gemm_up_to_the_packed_limit(kind, fan_in, fan_out):
    torch.manual_seed(0)
    linear = torch.nn.Linear(fan_in, fan_out, bias=False).to(torch.bfloat16)
    if kind.startswith("bf16"):
        linear.__class__ = RowStableLinear
        assert linear.prepack() if kind == "bf16-prepacked" else linear.packed is None
    else:
        linear = Int8Linear(linear)
    rows = torch.randn(MAX_PACKED_ROWS, fan_in, dtype=torch.bfloat16)
    with torch.inference_mode():
        alone = torch.cat([linear(rows[i : i + 1]) for i in range(MAX_PACKED_ROWS)])
        for m in (2, 3, 5, 8, 17, MAX_PACKED_ROWS):
            assert torch.equal(linear(rows[:m]), alone[:m])


def test_a_packed_forward_gives_each_session_the_logits_and_features_of_its_own_forward(alone):
    steps = [[100], [7, 8, 9, 10, 11], [42]]
    reference, packed = [], []
    for question in QUESTIONS:
        for sessions in (reference, packed):
            session = alone.new_session()
            session.aux_layers = AUX_LAYERS
            session.forward(alone.model, chat(alone, question))
            sessions.append(session)
    with torch.inference_mode():
        want = [[s.forward(alone.model, ids) for ids in steps] for s in reference]
        got = [packed_forward(alone.model, [(s, ids) for s in packed]) for ids in steps]
    for i, (ref, mine) in enumerate(zip(reference, packed)):
        assert mine.ids == ref.ids
        assert torch.equal(mine.aux, ref.aux)
        for step in range(len(steps)):
            assert torch.equal(got[step][i], want[i][step])  # bit for bit, every row


def test_a_packed_forward_refuses_what_would_not_be_exact(alone):
    sessions = [alone.new_session() for _ in range(3)]
    with pytest.raises(ValueError, match="run it alone"):
        packed_forward(alone.model, [(sessions[0], list(range(100, 120)))])
    with pytest.raises(ValueError, match="at most 32"):
        packed_forward(alone.model, [(s, list(range(100, 112))) for s in sessions])


def test_concurrent_speculative_replies_are_unchanged_and_share_forwards(stages, alone):
    model, tokenizer = alone.model, alone.tokenizer
    drafter = random_drafter(model.config, 8192, seed=0)
    batched = Engine(model, tokenizer, drafter, draft_tokens=4, batching=True)
    prompts = [chat(alone, q) for q in QUESTIONS]
    want = [list(alone.generate(alone.new_session(), p, 40)) for p in prompts]
    got: dict[int, list[int]] = {}

    def reply(i: int) -> None:
        got[i] = list(batched.generate(batched.new_session(), prompts[i], 40))

    threads = [threading.Thread(target=reply, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(prompts))] == want
    assert batched.batcher.stats.packed_forwards > 0


def test_a_prefill_runs_in_the_callers_thread_and_a_failed_forward_reaches_its_caller(batched):
    engine = batched
    jobs = engine.batcher.stats.jobs
    session = engine.new_session()
    engine.prefill(session, chat(engine, QUESTIONS[0]))
    assert engine.batcher.stats.jobs == jobs  # a long prompt never waits for the worker
    before = list(session.ids)
    with torch.inference_mode(), pytest.raises(IndexError):
        session.forward(engine.model, [engine.model.config.vocab_size + 5])
    assert session.ids == before
    with torch.inference_mode():
        after = session.forward(engine.model, [100])  # the worker is still serving, the cache still whole
        fresh = engine.new_session()
        fresh.forward(engine.model, before)
        assert torch.equal(after, fresh.forward(engine.model, [100]))


def test_repair_drops_what_a_half_written_forward_left_in_some_layers(alone):
    prompt = chat(alone, QUESTIONS[1])
    session, fresh = alone.new_session(), alone.new_session()
    with torch.inference_mode():
        session.forward(alone.model, prompt)
        fresh.forward(alone.model, prompt)
        layer = session.cache.layers[3]
        layer.update(layer.keys[:, :, -2:], layer.values[:, :, -2:])  # as if layers up to 3 had taken two rows
        session.repair()
        assert all(cached.get_seq_length() == len(prompt) for cached in session.cache.layers)
        assert torch.equal(session.forward(alone.model, [100]), fresh.forward(alone.model, [100]))


def test_the_worker_packs_waiting_jobs_in_order_up_to_the_row_limit(alone):
    batcher = ForwardBatcher(alone.model)
    jobs = [Job(alone.new_session(), [1, 2, 3, 4, 5]) for _ in range(8)]
    batcher._queue.extend(jobs)
    first = batcher._next_batch()
    assert first == jobs[:6] and sum(len(j.ids) for j in first) <= MAX_PACKED_ROWS
    assert batcher._next_batch() == jobs[6:]
