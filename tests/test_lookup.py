"""Prompt-lookup drafts: the n-gram table, and speculative chains that draft from the context, losslessly."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from bench.spec import load_prompts
from models.eagle3 import random_drafter
from models.engine import Engine
from models.lookup import LONG_MATCH, VETO, VETO_LONG, ContextLookup, Proposal
from models.session import GenerationStats
from models.speculative import draft_chain
from pipeline.prompt import build_messages
from pipeline.retrieval import without_retrieval

ROOT = Path(__file__).resolve().parent.parent


def test_the_longest_earlier_n_gram_gives_the_next_token():
    lookup = ContextLookup([5, 6, 7, 8, 1, 6, 7, 9, 2, 5, 6, 7])
    assert lookup.propose([]) == Proposal(8, 3, VETO)  # "6 7" was last followed by 9, but "5 6 7" by 8: the longer match wins...
    lookup = ContextLookup([5, 6, 7, 8, 1, 6, 7, 9, 2, 4, 6, 7])
    assert lookup.propose([]) == Proposal(9, 2, VETO)  # ...while here only "6 7" matches, most recently followed by 9
    assert lookup.propose([3]) is None  # "7 3" never occurred
    assert lookup.propose([8]).token == 1  # drafts extend the tail: "7 8" was followed by 1


def test_a_proposal_counts_how_far_back_its_context_agrees():
    lookup = ContextLookup([1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 2, 3, 4, 5, 6, 7])
    assert lookup.propose([]) == Proposal(8, LONG_MATCH, VETO_LONG)  # "2 .. 7" agree: 6 tokens, past the 4-gram itself
    assert lookup.propose([8, 0]) == Proposal(9, LONG_MATCH, VETO_LONG)
    assert ContextLookup([3, 4, 5, 6, 7, 8, 1, 4, 5, 6, 7]).propose([]) == Proposal(8, 4, VETO)


def test_a_tail_never_matches_itself_and_new_tokens_are_indexed_once_continued():
    lookup = ContextLookup([1, 2, 3])
    assert lookup.propose([]) is None  # "2 3" occurred only as the tail itself
    lookup.extend([1, 2])
    assert lookup.propose([]).token == 3  # "1 2" was followed by 3
    lookup.extend([4])
    assert lookup.propose([1, 2]).token == 4  # the most recent occurrence wins


@pytest.fixture(scope="module")
def engine(stages):
    return stages.llm.engine


def generate(engine: Engine, chat: list[dict], **kw) -> tuple[list[int], GenerationStats]:
    stats = GenerationStats()
    tokens = list(engine.generate(engine.new_session(), engine.encode_chat(chat), 48, stats=stats, **kw))
    return tokens, stats


def sure_of(token: int, confidence: float, vocab: int = 8192) -> torch.Tensor:
    """Drafter logits [1, 1, vocab] whose top draft id `token` has this probability."""
    logits = torch.zeros(1, 1, vocab)
    logits[0, 0, token] = math.log(confidence * (vocab - 1) / (1 - confidence))
    return logits


@pytest.mark.parametrize(
    ("context", "confidence", "drafted"),
    [
        ([5, 6, 7, 8, 1, 6, 7], 0.98, 8),  # a 2-token match against a fairly sure drafter: the lookup's token
        ([5, 6, 7, 8, 1, 6, 7], 0.995, 9),  # a drafter past VETO overrides it
        ([1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 2, 3, 4, 5, 6, 7], 0.995, 8),  # a LONG_MATCH needs more...
        ([1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 2, 3, 4, 5, 6, 7], 0.9995, 9),  # ...past VETO_LONG
        ([5, 6, 7, 9, 1, 6, 7], 0.9995, 9),  # agreeing with the lookup is no veto
    ],
)
def test_a_drafter_sure_of_another_token_vetoes_the_lookup(engine, context, confidence, drafted):
    drafter = random_drafter(engine.model.config, 8192, seed=0)  # identity draft vocabulary: draft id 9 is token 9
    drafts, _ = draft_chain(drafter, None, sure_of(9, confidence), None, len(context), 1, 0.0, None, 0.0, ContextLookup(context))
    assert drafts == [drafted]


def test_chains_drafted_from_the_context_are_lossless_and_accepted(engine):
    plain = Engine(engine.model, engine.tokenizer)
    drafter = random_drafter(engine.model.config, 8192, seed=0)  # never right: accepted drafts come from the lookup
    without = Engine(engine.model, engine.tokenizer, drafter, draft_tokens=4, min_draft_confidence=0.5)
    with_lookup = Engine(engine.model, engine.tokenizer, drafter, draft_tokens=4, min_draft_confidence=0.5, prompt_lookup=True)
    prompts = load_prompts(ROOT / "bench" / "prompts.jsonl")
    accepted, forwards, base_accepted, base_forwards = 0, 0, 0, 0
    for profile, messages in (prompts[3], prompts[11]):  # answers that repeat a profile fact
        chat = build_messages(without_retrieval(profile), messages)  # every fact in the prompt to copy from
        want, _ = generate(plain, chat)
        got, stats = generate(with_lookup, chat)
        base, base_stats = generate(without, chat)
        assert got == want == base
        accepted, forwards = accepted + stats.accepted_tokens, forwards + stats.target_forwards
        base_accepted, base_forwards = base_accepted + base_stats.accepted_tokens, base_forwards + base_stats.target_forwards
    assert base_accepted <= 1 and accepted >= 12, (accepted, base_accepted)  # measured: 20 accepted
    assert forwards < base_forwards * 0.7
