"""Fact retrieval: hybrid ranking with the bundled MiniLM, the turn's query, and where the facts go in the prompt."""

from __future__ import annotations

import pytest

from models.embedder import Embedder
from pipeline.profile import parse_profile
from pipeline.prompt import RELEVANT_HEADER, Message, build_messages, system_prompt
from pipeline.retrieval import BM25, Retriever, served_messages, turn_query
from pipeline.spoken import speakable

MUSEUM = parse_profile(
    {
        "id": "harbour-rail-museum",
        "brand": "Harbour Rail Museum",
        "persona": "You are Ines, the visitor desk assistant of the Harbour Rail Museum.",
        "greeting": "Harbour Rail Museum, Ines speaking.",
        "facts": [
            "General admission is $18 for adults and $9 for children aged 4 to 15; under 4s go free.",
            "The museum is open Tuesday to Sunday from 10 am to 5 pm; last entry is at 4:15 pm.",
            "Steam train rides on the heritage line cost $7 per person and leave every 40 minutes on weekends.",
            "Our car park behind the engine shed costs $6 for the whole day.",
            "Guided tours of the signal box run at 11 am and 2 pm and last 45 minutes.",
            "Birthday parties for up to 15 children cost $240, including a cab ride on the shunter.",
            "Wheelchairs can be borrowed free of charge from the ticket office.",
            "The cafe in the old booking hall serves lunch from 12 pm to 3 pm.",
        ],
        "policies": ["Never promise that the steam train runs on a given day; it depends on the volunteers."],
    }
)

PARAPHRASES = [  # the caller's words, away from the fact's words -> the fact that answers
    ("What do I pay to get my two kids and myself through the door?", 0),
    ("How late can we turn up and still get in?", 1),
    ("Can my son have a go on the old puffer, and what does that cost?", 2),
    ("Where do I leave the car and is there a charge?", 3),
    ("Is there someone who can walk us around and explain how the points and levers worked?", 4),
    ("My lad turns seven next month, could we do his party there?", 5),
    ("My mum can't walk far, do you have anything to help her get around?", 6),
    ("Is there somewhere to grab a sandwich at midday?", 7),
]


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    return Retriever(Embedder())


def ranks(retriever: Retriever, question: str) -> list[str]:
    return retriever.relevant(MUSEUM, [Message("assistant", MUSEUM.greeting), Message("user", question)], 3)


def test_the_fact_that_answers_a_paraphrase_ranks_high(retriever):
    """Hand-written paraphrases: the answering fact is in the three placed before the question for all but one (the
    steam train called "the old puffer"), and first for five of eight; docs/retrieval.md has the held-out figures."""
    tops = [ranks(retriever, question) for question, _ in PARAPHRASES]
    in_three = sum(MUSEUM.facts[fact] in top for top, (_, fact) in zip(tops, PARAPHRASES))
    first = sum(MUSEUM.facts[fact] == top[0] for top, (_, fact) in zip(tops, PARAPHRASES))
    assert in_three >= 7 and first >= 5, (in_three, first)


def test_the_tuned_encoder_beats_the_bundled_one_and_words_alone(retriever):
    bundled = Retriever(Embedder(top_layers=None))
    index = retriever.index(MUSEUM)

    def reciprocal_ranks(rank) -> float:
        return sum(1 / (rank(q).index(MUSEUM.facts[fact]) + 1) for q, fact in PARAPHRASES if MUSEUM.facts[fact] in rank(q))

    tuned = reciprocal_ranks(lambda q: ranks(retriever, q))
    assert retriever.encoder.tuned and not bundled.encoder.tuned
    assert tuned > reciprocal_ranks(lambda q: ranks(bundled, q))
    assert tuned > reciprocal_ranks(lambda q: index.top(q, None, 3))


def test_the_index_is_built_once_per_profile(retriever):
    assert retriever.index(MUSEUM) is retriever.index(MUSEUM)
    other = parse_profile(MUSEUM.model_dump() | {"facts": MUSEUM.facts[:2]})
    assert retriever.index(other).items == tuple(MUSEUM.facts[:2]) + tuple(MUSEUM.policies)


def test_nothing_is_retrieved_before_the_caller_speaks_or_when_turned_off(retriever):
    assert retriever.relevant(MUSEUM, [Message("assistant", MUSEUM.greeting)]) == []
    off = parse_profile(MUSEUM.model_dump() | {"llm": {"retrieved_facts": 0}})
    assert retriever.relevant(off, [Message("user", "What are your hours?")]) == []


def test_the_query_carries_the_agents_question_for_a_short_answer():
    history = [
        Message("user", "How much is it to get in?"),
        Message("assistant", "Sure. Is that for an adult or a child?"),
        Message("user", "for my daughter she's six"),
    ]
    assert turn_query(history) == "Is that for an adult or a child? for my daughter she's six"
    assert turn_query(history[:1]) == "How much is it to get in?"


def test_bm25_prefers_the_rare_word():
    scores = BM25(["The cafe serves lunch.", "The cafe serves coffee.", "Lunch boxes for schools."]).scores("school lunch")
    assert scores.argmax() == 2 and scores[1] == 0


def test_the_facts_sit_right_before_the_callers_last_message_and_the_system_prompt_stays_the_prefix():
    history = [
        Message("assistant", MUSEUM.greeting),
        Message("user", "hi"),
        Message("assistant", "Hello!"),
        Message("user", "How much to park?"),
    ]
    plain = build_messages(MUSEUM, history)
    messages = build_messages(MUSEUM, history, relevant=[MUSEUM.facts[3]])
    assert messages[0] == plain[0] == {"role": "system", "content": system_prompt(MUSEUM)}
    assert messages[:-2] == plain[:-1]
    assert messages[-2]["role"] == "system" and messages[-2]["content"].startswith(RELEVANT_HEADER)
    assert "six dollars" in messages[-2]["content"]  # numbers spoken, as in the system prompt
    assert messages[-1] == {"role": "user", "content": "How much to park?"}
    assert build_messages(MUSEUM, history[:1], relevant=[MUSEUM.facts[3]]) == build_messages(MUSEUM, history[:1])


def test_each_caller_message_keeps_the_block_it_was_answered_with(retriever):
    """The prompt only grows: an earlier turn's block stays before its caller message, so the next turn's prompt
    starts with the last one's (the KV cache reuses it) and a follow-up can still read the earlier facts."""
    history = [Message("assistant", MUSEUM.greeting), Message("user", "How much to park?")]
    first = build_messages(MUSEUM, retriever.with_facts(MUSEUM, history))
    reply = [Message("assistant", "Parking is six dollars."), Message("user", "And for a coach?")]
    answered = retriever.with_facts(MUSEUM, history) + reply
    second = served_messages(MUSEUM, answered, retriever)
    assert second[: len(first)] == first
    blocks = [m for m in second if m["role"] == "system" and m["content"].startswith(RELEVANT_HEADER)]
    assert len(blocks) == 2 and "six dollars" in blocks[0]["content"]
    assert second[-2] == blocks[1] and second[-1] == {"role": "user", "content": "And for a coach?"}


def test_without_retrieval_every_fact_is_in_the_system_prompt_and_no_block(retriever):
    history = [Message("assistant", MUSEUM.greeting), Message("user", "How much to park?")]
    messages = served_messages(MUSEUM, history, None)
    assert [m["role"] for m in messages] == ["system", "assistant", "user"]
    assert all(speakable(f) in messages[0]["content"] for f in MUSEUM.facts)
    assert not any(speakable(f) in build_messages(MUSEUM, history)[0]["content"] for f in MUSEUM.facts)


async def test_a_call_sends_the_retrieved_facts_to_the_sglang_backend(stages, tmp_path):
    """The retrieval runs in the call loop, so an OpenAI-compatible backend (SGLang) gets the same prompt."""
    import dataclasses

    from llm_standin import StandInLLM
    from servers import quick_profiles, serving

    from bench.wsclient import CallClient
    from pipeline.llm import OpenAICompatLLM

    async with StandInLLM() as llm:
        backend = OpenAICompatLLM(llm.url, timeout=5.0)
        with serving(dataclasses.replace(stages, llm=backend), tmp_path, profiles_dir=quick_profiles(tmp_path / "p")) as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                await client.send_json({"type": "text", "text": "What do you charge to put a suitcase in the hold?"})
                await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=60)
                first = llm.requests[-1]["messages"]
                await client.send_json({"type": "text", "text": "And what time do you open?"})
                await client.wait_for(lambda got: len(client.agent_finals()) >= 3, timeout=60)
        await backend.aclose()
    messages = first
    profile = server.state.profiles["quick"]
    assert messages[-1] == {"role": "user", "content": "What do you charge to put a suitcase in the hold?"}
    assert messages[-2]["role"] == "system" and messages[-2]["content"].startswith(RELEVANT_HEADER)
    assert messages[-2]["content"].count("\n- ") == profile.llm.retrieved_facts
    assert "bag" in messages[-2]["content"].split("\n- ")[1].lower()
    later = llm.requests[-1]["messages"]
    assert later[: len(messages)] == messages  # the first question keeps its block: the prompt only grows
    assert later[-1]["content"] == "And what time do you open?" and later[-2]["content"].startswith(RELEVANT_HEADER)


def test_retriever_training_writes_top_layers_the_embedder_loads(tmp_path):
    import random

    from training.data.realistic.pools import load_pools
    from training.retriever import RetrieverTrainConfig, draw_batch, kept_out_sectors, train

    batch = draw_batch(random.Random(0), load_pools("train")[0], 6, 0.5)
    assert len(batch.facts) == 6 and batch.positives[:6] == [(i,) for i in range(6)]
    assert [len(p) for p in batch.positives[6:]] == [2, 2, 2]
    record = train(RetrieverTrainConfig(out=tmp_path, steps=2, batch_size=6, validation_sectors=1))
    assert [row["step"] for row in record["history"]] == [0, 2]
    tuned = Embedder(top_layers=tmp_path / "minilm_top_layers.safetensors")
    bundled = Embedder(top_layers=None)
    text = ["How much to bring the car over?"]
    assert tuned.tuned and float((tuned.embed(text) @ bundled.embed(text).T)[0, 0]) < 0.99999
    assert kept_out_sectors(tmp_path / "run.json") == record["validation_sectors"]


def test_validation_sectors_are_the_ones_the_shipped_encoder_never_saw():
    from training.data.realistic.pools import load_pools
    from training.retriever import RetrieverTrainConfig, kept_out_sectors, split_pools

    kept = kept_out_sectors()
    assert len(kept) == 5 and set(kept) <= {p.name for p in load_pools("train")}
    # a retrained encoder keeps them out too (the shuffle alone moved with every pool added)
    assert {p.name for p in split_pools(RetrieverTrainConfig())[:5]} == set(kept)
