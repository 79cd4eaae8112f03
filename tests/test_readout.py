"""Reading out the closest fact when the model declines: which replies decline, what the caller hears, which turns
get a fact to read, and a call over an OpenAI-compatible backend that declines."""

from __future__ import annotations

import re

import pytest
from test_retrieval import MUSEUM

from models.embedder import Embedder
from pipeline.prompt import Message
from pipeline.questions import ask
from pipeline.readout import READOUT_FLOOR, DeclineGuard, declines, may_decline, readout_fact
from pipeline.retrieval import Retriever

FACT = "Steam train rides cost seven dollars per person."
DECLINED = "I'm sorry, I don't have that information. I can connect you with the visitor desk, who can help."


def tokens(text: str) -> list[str]:
    """The text in pieces as the model streams it: each word with the space before it, cut before an apostrophe
    ("I", "'m", " don", "'t"), punctuation on its own."""
    return re.findall(r" ?[A-Za-z]+|'[a-z]+|[^\sA-Za-z']", text)


def stream(guard: DeclineGuard, text: str) -> list[str]:
    """What the guard lets out after each piece, then at the end."""
    return [guard.feed(piece) for piece in tokens(text)] + [guard.flush()]


def test_refusal_openings_are_told_from_replies_that_start_alike():
    for text in (DECLINED, "I'm afraid I don't have that.", "Sorry, I don't know.", "Unfortunately I'm not sure."):
        assert declines(text), text
    for text in ("I'm sorry for the frustration.", "I can help with that.", "Sorry, the train is seven dollars.", "We don't have a cafe."):
        assert not declines(text), text
    assert tokens("I'm sorry, I don't.") == ["I", "'m", " sorry", ",", " I", " don", "'t", "."]
    assert may_decline("I'm sorry,") and may_decline("I") and may_decline("") and may_decline("I'm sorry, I don")
    assert not may_decline("I'm sorry for") and not may_decline("The train")


def test_a_refusal_is_never_let_out_and_the_fact_is_said_instead():
    guard = DeclineGuard(FACT)
    assert "".join(stream(guard, DECLINED)) == "" and guard.declined
    assert guard.speech == FACT


def test_what_came_before_the_refusal_is_kept():
    guard = DeclineGuard(FACT)
    out = stream(guard, "I'm sorry for the frustration. I'm afraid I don't have that information.")
    assert "".join(out) == "I'm sorry for the frustration." and guard.declined
    assert guard.speech == f"I'm sorry for the frustration. {FACT}"
    assert "".join(out) + guard.finish() == guard.speech, "the fact streams as its own sentence"


def test_an_answer_goes_out_a_word_behind_at_most_and_whole():
    reply = "I'm sorry for the wait, the steam train is seven dollars. I can help with anything else."
    guard = DeclineGuard(FACT)
    out = stream(guard, reply)
    assert "".join(out) == reply and not guard.declined and guard.speech == reply
    assert out[:5] == ["", "", "", "I'm sorry for", " the"], "held only while the opening could still be a refusal"
    assert DeclineGuard(FACT).apply(reply) == reply and DeclineGuard(FACT).apply("I") == "I"


def test_only_a_close_fact_is_read_and_never_a_policy():
    fact, policy = MUSEUM.facts[2], MUSEUM.policies[0]
    spoken = "Steam train rides on the heritage line cost seven dollars per person and leave every forty minutes on weekends."
    assert readout_fact(MUSEUM, fact, READOUT_FLOOR) == spoken, "as the block says it"
    assert readout_fact(MUSEUM, fact, READOUT_FLOOR - 0.01) is None
    assert readout_fact(MUSEUM, policy, 0.9) is None and readout_fact(MUSEUM, None, None) is None
    off = MUSEUM.model_copy(update={"llm": MUSEUM.llm.model_copy(update={"read_out_facts": False})})
    assert readout_fact(off, fact, 0.9) is None


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    return Retriever(Embedder())


def test_a_question_close_to_a_fact_gets_it_to_read_and_a_far_one_none(retriever):
    greeting = Message("assistant", MUSEUM.greeting)
    close = ask(retriever, MUSEUM, [greeting, Message("user", "How much is a ride on the steam train?")])
    assert close.readout is not None and close.readout.startswith("Steam train rides")
    far = ask(retriever, MUSEUM, [greeting, Message("user", "Do you sell gift vouchers for Christmas?")])
    assert far.readout is None
    two = ask(retriever, MUSEUM, [greeting, Message("user", "how much is a go on the steam train also birthday party price")])
    assert two.split is not None and two.readout is None, "a turn of two questions reads nothing out"


def test_a_refusal_after_a_sentence_let_out_piece_by_piece_is_one():
    guard = DeclineGuard(FACT)
    out = [guard.feed(piece) for piece in ("Sure", ".", " I'm", " sorry", ",", " I don't", " have that.")]
    assert "".join(out) == "Sure." and guard.declined and guard.speech == f"Sure. {FACT}"


def test_a_refusal_inside_a_sentence_is_not_one():
    reply = "Sure, I don't have the exact platform, but the steam train is seven dollars."
    guard = DeclineGuard(FACT)
    assert "".join(stream(guard, reply)) == reply and not guard.declined


async def test_a_call_whose_model_declines_a_close_question_hears_the_fact(stages, tmp_path):
    """Over a call to an OpenAI-compatible backend: a refusal of a question close to a fact is replaced by the fact,
    heard and kept in the history; a refusal of a question no fact is close to is heard as the model said it."""
    import dataclasses

    from llm_standin import StandInLLM
    from servers import quick_profiles, serving

    from bench.wsclient import CallClient
    from pipeline.llm import OpenAICompatLLM

    refusal = tokens("I'm sorry, I don't have that information. I can connect you with our team.")
    async with StandInLLM() as llm:
        llm.script = [refusal, refusal, ["Goodbye."]]
        backend = OpenAICompatLLM(llm.url, timeout=5.0)
        with serving(dataclasses.replace(stages, llm=backend), tmp_path, profiles_dir=quick_profiles(tmp_path / "p")) as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                for n, text in enumerate(("When can I check in online?", "Can I bring my dog?", "Thanks."), start=2):
                    await client.send_json({"type": "text", "text": text})
                    await client.wait_for(lambda got, n=n: len(client.agent_finals()) >= n, timeout=60)
                heard = client.agent_finals()[1:3]
            readouts = server.state.metrics.registry.get_sample_value("talkline_fact_readouts_total")
        await backend.aclose()
    assert heard[0] == "Online check-in opens twenty four hours before departure and closes one hour before."
    assert heard[1] == "I'm sorry, I don't have that information. I can connect you with our team."
    kept = [m for m in llm.requests[-1]["messages"] if m["role"] == "assistant"][-2:]
    assert [m["content"] for m in kept] == heard
    assert readouts == 1, "counted for the operator"
