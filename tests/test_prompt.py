"""The prompt builder: system prompt content and the chat message list."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.profile import load_profiles, parse_profile
from pipeline.prompt import NO_FACT_IN_BLOCK, VOICE_STYLE, Message, build_messages, system_prompt
from pipeline.retrieval import without_retrieval
from pipeline.spoken import speakable

PROFILES = load_profiles(Path(__file__).resolve().parent.parent / "profiles")

BASE = {
    "id": "acme",
    "brand": "Acme Tools",
    "persona": "You are Al, the cheerful phone assistant of Acme Tools.",
    "greeting": "Hi, this is Al.",
    "facts": ["Shops open at 9 am.", "Delivery costs 5 dollars.", "Returns are free within 30 days."],
    "policies": ["Never ask for a password.", "Ask for the order number first."],
    "llm": {"history_turns": 2},
    "escalation": {"target": "+18005550100", "description": "an Acme workshop expert"},
}


def profile(**changes):
    return parse_profile({**BASE, **changes})


def exchanges(n: int) -> list[Message]:
    history = []
    for i in range(n):
        history += [Message("user", f"question {i}"), Message("assistant", f"answer {i}")]
    return history


# --- system prompt ------------------------------------------------------------------------


@pytest.mark.parametrize("pid", sorted(PROFILES))
def test_system_prompt_of_shipped_profiles_has_everything(pid):
    p = PROFILES[pid]
    text = system_prompt(p)
    assert p.brand in text
    assert p.persona.strip() in text
    for item in p.policies:
        assert speakable(item) in text
    for item in p.facts:  # they come per turn, ranked for the caller's words
        assert speakable(item) not in text
        assert speakable(item) in system_prompt(without_retrieval(p))
    assert p.escalation is not None and p.escalation.description in text
    assert VOICE_STYLE in text


def test_system_prompt_contents_and_order():
    p = without_retrieval(profile())
    text = system_prompt(p)
    lines = text.split("\n")
    assert lines[0] == BASE["persona"]
    assert "Acme Tools" in text
    assert VOICE_STYLE in lines
    spoken = ["Shops open at nine a.m.", "Delivery costs five dollars.", "Returns are free within thirty days."]
    for fact in spoken:
        assert f"- {fact}" in lines
    for policy in BASE["policies"]:
        assert f"- {policy}" in lines
    assert "an Acme workshop expert" in text
    # facts keep their order, and facts come before policies
    positions = [text.index(item) for item in [*spoken, *BASE["policies"]]]
    assert positions == sorted(positions)


def test_voice_style_rule_is_about_short_spoken_answers():
    lowered = VOICE_STYLE.lower()
    assert "phone" in lowered and "markdown" in lowered and "short" in lowered


def test_system_prompt_does_not_leak_internal_settings():
    text = system_prompt(profile())
    assert "+18005550100" not in text  # the transfer target is for the server, not the model
    assert BASE["greeting"] not in text


def test_with_retrieval_the_system_prompt_lists_no_fact_and_says_where_they_come():
    text = system_prompt(profile())
    assert "Facts you may state" not in text and "nine a.m." not in text
    assert NO_FACT_IN_BLOCK in text
    assert "Facts you may state" in system_prompt(without_retrieval(profile()))
    assert NO_FACT_IN_BLOCK not in system_prompt(without_retrieval(profile()))


def test_system_prompt_without_optional_parts():
    p = without_retrieval(profile(facts=[], policies=[], escalation=None))
    text = system_prompt(p)
    assert "Facts you may state" not in text
    assert "Policies" not in text
    assert "transfer" not in text
    assert BASE["persona"] in text and "Acme Tools" in text and VOICE_STYLE in text


def test_system_prompt_strips_persona_whitespace():
    text = system_prompt(profile(persona="  You are Al.\n"))
    assert text.startswith("You are Al.\n")


def test_system_prompt_is_deterministic():
    assert system_prompt(profile()) == system_prompt(profile())


# --- build_messages -------------------------------------------------------------------------


def test_build_messages_starts_with_system_message():
    p = profile()
    messages = build_messages(p, [Message("user", "hello")])
    assert messages[0] == {"role": "system", "content": system_prompt(p)}
    assert messages[1:] == [{"role": "user", "content": "hello"}]
    assert all(set(m) == {"role", "content"} for m in messages)


def test_build_messages_with_empty_history():
    messages = build_messages(profile(), [])
    assert [m["role"] for m in messages] == ["system"]


def test_build_messages_keeps_between_half_and_all_of_the_window():
    p = profile()  # history_turns: 2 -> at most 4 messages, dropped in blocks of 2
    history = exchanges(5) + [Message("user", "latest")]
    messages = build_messages(p, history)
    assert [m["content"] for m in messages[1:]] == ["question 4", "answer 4", "latest"]
    assert messages[-1] == {"role": "user", "content": "latest"}
    for n in range(1, 40):
        kept = len(build_messages(p, exchanges(n))) - 1
        assert kept == 2 * n if 2 * n <= 4 else 2 < kept <= 4


def test_build_messages_window_start_moves_in_blocks():
    """Consecutive turns share their prompt prefix except once per block: the KV cache stays reusable."""
    p = profile(llm={"history_turns": 4})
    firsts = [build_messages(p, exchanges(n) + [Message("user", "latest")])[1]["content"] for n in range(4, 24)]
    changes = sum(a != b for a, b in zip(firsts, firsts[1:]))
    assert changes <= len(firsts) // 2  # the first kept message moves every other exchange, not every one


def test_build_messages_uses_profile_history_turns_and_override():
    history = exchanges(10)
    assert 1 + 3 < len(build_messages(profile(llm={"history_turns": 3}), history)) <= 1 + 6
    assert len(build_messages(profile(llm={"history_turns": 3}), history, history_turns=1)) == 1 + 2
    assert len(build_messages(profile(llm={"history_turns": 64}), history)) == 1 + 20
    assert 1 + 8 < len(build_messages(profile(llm={}), history)) <= 1 + 16  # default: 8 exchanges


def test_build_messages_keeps_short_history_whole():
    history = exchanges(1)
    messages = build_messages(profile(), history)
    assert messages[1:] == [{"role": "user", "content": "question 0"}, {"role": "assistant", "content": "answer 0"}]


def test_build_messages_drops_empty_messages_before_counting():
    history = [
        Message("user", "q1"),
        Message("assistant", "a1"),
        Message("user", "q2"),
        Message("assistant", ""),
        Message("user", "   "),
        Message("assistant", "\n"),
        Message("user", "q3"),
        Message("assistant", "a3"),
    ]
    messages = build_messages(profile(), history)  # 5 non-empty, window 4 dropped in blocks of 2
    assert [m["content"] for m in messages[1:]] == ["q2", "q3", "a3"]
    assert all(m["content"].strip() for m in messages)


def test_build_messages_preserves_order_roles_and_content():
    history = [
        Message("user", "Hi, how much is a bag?"),
        Message("assistant", "A checked bag costs 30 dollars."),
        Message("user", "And a second one?"),
    ]
    messages = build_messages(profile(llm={"history_turns": 8}), history)
    assert [(m["role"], m["content"]) for m in messages[1:]] == [(m.role, m.content) for m in history]


def test_build_messages_does_not_mutate_history():
    history = exchanges(6)
    copy = list(history)
    build_messages(profile(), history)
    assert history == copy


def test_message_is_immutable():
    m = Message("user", "hi")
    with pytest.raises(AttributeError):
        m.content = "changed"  # type: ignore[misc]


def test_prompt_rendered_through_chat_template_is_what_the_model_gets(stages):
    profile = PROFILES["skyways"]
    history = [Message("assistant", profile.greeting), Message("user", "How much is a bag?")]
    engine = stages.llm.engine
    text = engine.tokenizer.decode(engine.encode_chat(build_messages(profile, history)))
    assert text.startswith("<|im_start|>system\n" + system_prompt(profile) + "<|im_end|>")
    assert "SmolLM" not in text  # our system message replaces the template's default one
    assert text.endswith("<|im_start|>user\nHow much is a bag?<|im_end|>\n<|im_start|>assistant\n")
