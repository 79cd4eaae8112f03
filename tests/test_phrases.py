"""Phrase memory: n-gram counts over the target's past replies, and chains drafted from them, losslessly."""

from __future__ import annotations

import threading

import pytest

from models.assets import DRAFTER_DIR
from models.eagle3 import random_drafter
from models.engine import Engine
from models.lookup import VETO, ContextLookup, Proposal
from models.phrases import PHRASE_VETO, PhraseMemory
from models.session import GenerationStats
from models.spec_config import SpecConfig
from models.speculative import draft_chain
from tests.test_lookup import sure_of


def test_the_most_frequent_continuation_of_the_longest_remembered_n_gram():
    memory = PhraseMemory([[1, 2, 3, 4], [1, 2, 3, 4], [9, 2, 3, 5]])
    assert memory.propose([7, 2, 3]) == Proposal(4, 2, PHRASE_VETO)  # "2 3" went on with 4 twice, 5 once
    assert memory.propose([9, 2, 3]) == Proposal(5, 3, PHRASE_VETO)  # "9 2 3" only ever with 5: the longer match wins
    assert memory.propose([3, 4]) is None  # "3 4" ended every reply
    assert memory.propose([8]) is None and memory.propose([]) is None


def test_a_continuation_short_of_the_minimum_share_is_not_proposed():
    memory = PhraseMemory([[1, 2, 3], [1, 2, 4]])
    assert memory.propose([1, 2]) is None  # 3 and 4 at half each
    memory.add([1, 2, 3])
    assert memory.propose([1, 2]).token == 3  # two thirds


def test_past_capacity_the_oldest_reply_is_forgotten_count_by_count():
    memory = PhraseMemory([[1, 2, 3], [1, 2, 4], [1, 2, 4]], capacity=2)
    assert len(memory) == 2 and memory.propose([1, 2]).token == 4
    memory.add([5, 6, 7])
    memory.add([5, 6, 7])
    assert memory.propose([1, 2]) is None and (1, 2) not in memory.counts  # no empty entries left behind
    assert memory.counts == PhraseMemory([[5, 6, 7], [5, 6, 7]]).counts


def test_replies_too_short_for_an_n_gram_and_its_continuation_are_skipped(tmp_path):
    memory = PhraseMemory([[1, 2], [3]])
    assert len(memory) == 0 and memory.counts == {}
    memory.add([1, 2, 3, 4])
    memory.save(tmp_path / "phrases.json")
    loaded = PhraseMemory.load(tmp_path / "phrases.json")
    assert list(loaded.replies) == [[1, 2, 3, 4]] and loaded.counts == memory.counts


def test_concurrent_calls_add_and_propose_safely():
    memory = PhraseMemory(capacity=50)
    errors = []

    def serve(offset: int) -> None:
        try:
            for i in range(300):
                memory.add([offset, i % 7, i % 5, i % 3])
                memory.propose([offset, i % 7])
        except Exception as error:  # noqa: BLE001 - any failure is the finding
            errors.append(error)

    threads = [threading.Thread(target=serve, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(memory) == 50


def test_the_context_outranks_the_phrase_memory():
    memory = PhraseMemory([[6, 7, 1], [6, 7, 1]])
    assert ContextLookup([6, 7, 8, 0, 6, 7], phrases=memory).propose([]) == Proposal(8, 2, VETO)
    assert ContextLookup([5, 0, 6, 7], phrases=memory).propose([]) == Proposal(1, 2, PHRASE_VETO)
    assert ContextLookup([5, 0, 6], phrases=memory).propose([7]).token == 1  # drafts extend the tail here too


@pytest.mark.parametrize(("confidence", "drafted"), [(0.9, 1), (0.96, 9)])
def test_a_drafter_past_the_phrase_veto_overrides_a_phrase(stages, confidence, drafted):
    engine = stages.llm.engine
    drafter = random_drafter(engine.model.config, 8192, seed=0)  # identity draft vocabulary: draft id 9 is token 9
    lookup = ContextLookup([5, 0, 6, 7], phrases=PhraseMemory([[6, 7, 1]]))
    drafts, _ = draft_chain(drafter, None, sure_of(9, confidence), None, 4, 1, 0.0, None, 0.0, lookup)
    assert drafts == [drafted]


def test_an_engine_learns_its_replies_and_drafts_them_next_call_losslessly(stages):
    engine = stages.llm.engine
    plain = Engine(engine.model, engine.tokenizer)
    drafter = random_drafter(engine.model.config, 8192, seed=0)  # never right: accepted drafts come from lookups
    memory = PhraseMemory()
    learning = Engine(engine.model, engine.tokenizer, drafter, 4, 0.5, prompt_lookup=True, phrases=memory)
    ids = engine.encode_chat([{"role": "user", "content": "Tell me a short story about a lighthouse keeper."}])
    want = list(plain.generate(plain.new_session(), ids, 40))
    first, second = GenerationStats(), GenerationStats()
    assert list(learning.generate(learning.new_session(), ids, 40, stats=first)) == want
    assert len(memory) == 1 and memory.replies[0][: len(want)] == want  # with its stop token, when it stopped
    assert list(learning.generate(learning.new_session(), ids, 40, stats=second)) == want  # now drafted from memory
    assert first.accepted_tokens <= 3 and second.accepted_tokens >= len(want) // 2, (first, second)
    frozen = Engine(engine.model, engine.tokenizer, drafter, 4, 0.5, prompt_lookup=True, phrases=memory, learn_phrases=False)
    list(frozen.generate(frozen.new_session(), ids, 40))
    assert len(memory) == 2  # the first engine learned both of its replies, the frozen one none


def test_the_engine_loads_the_committed_drafters_phrases_with_prompt_lookup_only():
    shipped = PhraseMemory.load(DRAFTER_DIR / "phrases.json")
    assert len(shipped) > 1000  # the target's regenerated replies of the drafter's last training stage
    assert len(Engine.load(spec=SpecConfig(drafter=DRAFTER_DIR)).phrases) == len(shipped)
    assert Engine.load(spec=SpecConfig(drafter=DRAFTER_DIR, phrases=False)).phrases is None
    assert Engine.load(spec=SpecConfig(drafter=DRAFTER_DIR, prompt_lookup=False)).phrases is None
