"""Two questions in one caller turn: told apart from one question with remarks, each asked with its own facts."""

from __future__ import annotations

import pytest
from test_retrieval import MUSEUM

from models.embedder import Embedder
from pipeline.prompt import RELEVANT_HEADER, Message, build_messages
from pipeline.questions import Asked, ask, asked_messages, asks_about_fact, awarm_messages, is_question
from pipeline.retrieval import Retriever

GREETING = Message("assistant", MUSEUM.greeting)
BAGS_AND_CHECK_IN = "What do you charge to put a suitcase in the hold? And when does online check-in open?"  # Skyways
TWO = [  # two questions about different facts -> (the first question's fact, the second's)
    ("What do I pay to get two kids through the door? And is there somewhere to grab a sandwich at midday?", (0, 7)),
    ("Sorry, bad line. Where do I leave the car, and how late can we turn up and still get in?", (3, 1)),
    ("how much is a go on the steam train also birthday party price", (2, 5)),
]
ONE = [  # one question, with remarks or two asks about the same fact
    "Hello, I'm ringing from the car park. How much is it to get in for two adults?",
    "I've been on hold for ages. Is there somewhere to eat lunch? Thanks so much.",
    "Hi, my son is mad about trains. Can he ride the steam train, and what does that cost?",
]


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    return Retriever(Embedder())


def asked(retriever: Retriever, text: str, before: tuple[Message, ...] = (GREETING,)) -> Asked:
    return ask(retriever, MUSEUM, [*before, Message("user", text)])


def test_questions_are_told_from_remarks():
    for text in ("how late are you open", "Is there a cafe?", "so can I bring the dog", "I wondered whether kids go free"):
        assert is_question(text), text
    for text in ("Sorry, bad line.", "I'm ringing from the car park.", "birthday party price", "Thanks so much."):
        assert not is_question(text), text


def test_a_part_asks_about_a_fact_as_a_question_or_as_keywords():
    for part in ("how late are you open", "while I have you, free delivery minimum", "screen repair price I", "baguette price"):
        assert asks_about_fact(part, best=0.6, lead=0.4), part
    for part in ("I'm not parking.", "Sorry, I'm ringing from the car park.", "apparently it will not fit under the roof of the car park"):
        assert not asks_about_fact(part, best=0.6, lead=0.4), part
    assert not asks_about_fact("baguette price", best=0.4, lead=0.3)  # keywords need a closer fact than a question
    assert asks_about_fact("how late are you open", best=0.4, lead=0.3)
    assert not asks_about_fact("how late are you open", best=0.6, lead=0.05)  # no fact stands out


def test_a_turn_of_two_questions_asks_each_with_its_own_fact(retriever):
    """Each question's fact is in its own block, and first there for all but one of the six."""
    firsts = 0
    for text, facts in TWO:
        got = asked(retriever, text)
        assert got.split is not None, text
        first, second = got.split
        assert text.startswith(first.text) and text.rstrip().endswith(second.text), got.split
        for question, fact in zip(got.split, facts):
            assert MUSEUM.facts[fact] in question.facts, (question.text, question.facts)
            firsts += question.facts[0] == MUSEUM.facts[fact]
        assert len(first.facts) == len(second.facts) == len(got.facts) == MUSEUM.llm.retrieved_facts
    assert firsts >= 5


def test_one_question_with_remarks_is_asked_whole(retriever):
    for text in ONE:
        got = asked(retriever, text)
        assert got.split is None, (text, got.split)
        assert got.facts == tuple(retriever.relevant(MUSEUM, [GREETING, Message("user", text)]))


def test_a_profile_can_turn_the_split_off(retriever):
    off = MUSEUM.model_copy(update={"llm": MUSEUM.llm.model_copy(update={"split_questions": False})})
    got = ask(retriever, off, [GREETING, Message("user", TWO[0][0])])
    assert got.split is None and got.facts == asked(retriever, TWO[0][0]).facts


def test_an_answer_to_the_agents_question_is_never_split(retriever):
    question = Message("assistant", "Is the ticket for an adult or a child?")
    assert asked(retriever, "A child, and where do I leave the car and how late can we get in?", (GREETING, question)).split is None


def test_the_second_question_follows_the_first_answer_with_its_own_block(retriever):
    text, _ = TWO[0]
    got = asked(retriever, text)
    history = [GREETING, Message("user", text)]
    first, then = asked_messages(MUSEUM, history, got)
    assert first[-1] == {"role": "user", "content": got.split[0].text}
    assert first[-2]["content"].startswith(RELEVANT_HEADER)
    second = then("Adults are eighteen dollars.")
    assert second[: len(first)] == first  # the first prompt is the second's cached prefix
    assert second[len(first)] == {"role": "assistant", "content": "Adults are eighteen dollars."}
    assert second[-2]["content"].startswith(RELEVANT_HEADER) and "lunch" in second[-2]["content"].split("\n- ")[1]
    assert second[-1] == {"role": "user", "content": got.split[1].text}
    whole, none = asked_messages(MUSEUM, [GREETING, Message("user", ONE[0])], asked(retriever, ONE[0]))
    assert none is None and whole[-1]["content"] == ONE[0]


async def test_the_warm_up_for_words_heard_so_far_is_the_prompt_of_a_turn_that_says_them(retriever):
    """Up to the caller's words: the history alone before any are heard, then the block ranked for them (for two
    questions, the first question's)."""
    history = [GREETING, Message("user", ONE[1]), Message("assistant", "Yes, the cafe serves lunch.")]
    assert await awarm_messages(retriever, MUSEUM, history, " ") == build_messages(MUSEUM, history)
    for text in (ONE[0], TWO[0][0]):
        prior = [*history, Message("user", text)]
        turn, _ = asked_messages(MUSEUM, prior, ask(retriever, MUSEUM, prior))
        warm = await awarm_messages(retriever, MUSEUM, history, text)
        assert warm == turn[:-1] and warm[-1]["content"].startswith(RELEVANT_HEADER)
        assert warm[: len(build_messages(MUSEUM, history))] == build_messages(MUSEUM, history)


async def test_a_call_answers_both_questions_in_one_reply_and_keeps_the_turn_whole(stages, tmp_path):
    """Over a call to an OpenAI-compatible backend: two requests for the turn, one reply heard, one exchange kept."""
    import dataclasses

    from llm_standin import StandInLLM
    from servers import quick_profiles, serving

    from bench.wsclient import CallClient
    from pipeline.llm import OpenAICompatLLM

    async with StandInLLM() as llm:
        llm.script = [["Bags cost ", "thirty dollars."], ["Check-in opens ", "a day before."], ["Goodbye."]]
        backend = OpenAICompatLLM(llm.url, timeout=5.0)
        with serving(dataclasses.replace(stages, llm=backend), tmp_path, profiles_dir=quick_profiles(tmp_path / "p")) as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                await client.send_json({"type": "text", "text": BAGS_AND_CHECK_IN})
                await client.wait_for(lambda got: len(client.agent_finals()) >= 2, timeout=60)
                heard = client.agent_finals()[-1]
                await client.send_json({"type": "text", "text": "Thanks."})
                await client.wait_for(lambda got: len(client.agent_finals()) >= 3, timeout=60)
        await backend.aclose()
    first, second, later = (r["messages"] for r in llm.requests[-3:])
    assert BAGS_AND_CHECK_IN.startswith(first[-1]["content"]) and first[-1]["content"] != BAGS_AND_CHECK_IN
    assert second[-3] == {"role": "assistant", "content": "Bags cost thirty dollars."}
    assert BAGS_AND_CHECK_IN.endswith(second[-1]["content"]) and second[-2]["content"].startswith(RELEVANT_HEADER)
    assert heard == "Bags cost thirty dollars. Check-in opens a day before."
    kept = [m for m in later if m["role"] != "system"][-3:]
    assert kept == [
        {"role": "user", "content": BAGS_AND_CHECK_IN},
        {"role": "assistant", "content": heard},
        {"role": "user", "content": "Thanks."},
    ]


def test_the_retrieval_benchmark_times_what_a_call_runs_and_counts_split_turns(retriever):
    from bench.retrieval import measure

    def scenario(text: str, kind: str, value: str) -> dict:
        messages = [{"role": "assistant", "content": MUSEUM.greeting}, {"role": "user", "content": text}]
        return {
            "id": kind,
            "profile": MUSEUM.model_dump(mode="json"),
            "messages": messages,
            "meta": {"kind": kind},
            "checks": {"must_include_all": [value]},
        }

    report = measure([scenario(TWO[0][0], "two_fact", "18 dollars"), scenario(ONE[1], "fact", "12 pm")], retriever)
    assert report["asked_as_two_per_kind"] == {"fact": 0.0, "two_fact": 1.0}
    assert report["turn_ms"]["turns"] == 2 and report["turn_ms"]["max"] > 0


async def test_a_tool_call_in_the_first_answer_leaves_the_second_question_to_the_turn(stages, tmp_path):
    """The first answer calls a tool: the second question is never asked apart; the next round sees the whole turn."""
    from llm_standin import StandInLLM, sglang_call
    from test_tool_calls import LOOKUP_CALL, ToolEndpoint, tool_server, turn

    from bench.wsclient import CallClient

    async with StandInLLM() as llm, ToolEndpoint() as endpoint:
        llm.script = [sglang_call(LOOKUP_CALL.name, LOOKUP_CALL.arguments), ["Bags are thirty dollars."]]
        with tool_server(stages, tmp_path, llm, endpoint.url + "/lookup") as server:
            async with CallClient(server.ws_url, "quick") as client:
                await client.wait_for(lambda got: client.agent_finals(), timeout=60)
                await turn(client, {"type": "text", "text": BAGS_AND_CHECK_IN})
    first, after_tool = (r["messages"] for r in llm.requests[-2:])
    assert BAGS_AND_CHECK_IN.startswith(first[-1]["content"]) and first[-1]["content"] != BAGS_AND_CHECK_IN
    assert [m["content"] for m in after_tool if m["role"] == "user"][-1] == BAGS_AND_CHECK_IN
    assert after_tool[-1]["role"] == "tool"


def test_eval_asks_a_turn_of_two_questions_as_a_call_does(stages, retriever):
    """`talkline eval` answers the first question, then the second after it, and reports the turn as two."""
    from training.eval import answer

    engine = stages.llm.engine

    def scenario(text: str) -> dict:
        messages = [{"role": "assistant", "content": MUSEUM.greeting}, {"role": "user", "content": text}]
        return {"id": "museum", "profile": MUSEUM.model_dump(mode="json"), "messages": messages}

    reply, questions = answer(engine, scenario(TWO[0][0]), 24, retriever)
    first, then = asked_messages(MUSEUM, [GREETING, Message("user", TWO[0][0])], asked(retriever, TWO[0][0]))
    alone = "".join(engine.generate_text(engine.new_session(), engine.encode_chat(first), 24)).strip()
    assert questions == 2 and then is not None
    assert reply.startswith(alone + " ") and len(reply) > len(alone) + 1
    assert answer(engine, scenario(ONE[0]), 24, retriever)[1] == 1
