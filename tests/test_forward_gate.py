"""Forwards taken in order of urgency: a free slot goes to the conversation whose listener has least speech queued."""

from __future__ import annotations

import threading
import time

import pytest

from models.engine import Engine
from models.forward_gate import WARM_UP_SLACK_S, ForwardGate
from server.settings import Settings


def _waiting(gate: ForwardGate, n: int) -> None:
    deadline = time.monotonic() + 5
    while gate.waiting < n:
        assert time.monotonic() < deadline, "the forwards never queued"
        time.sleep(0.005)


def test_a_free_slot_goes_to_the_least_slack_whatever_the_order_of_asking():
    gate, started, held, release = ForwardGate(1), [], threading.Event(), threading.Event()

    def forward(name: str, slack: float) -> None:
        with gate.forward(slack):
            started.append(name)
            if name == "holder":
                held.set()
                release.wait(5)

    holder = threading.Thread(target=forward, args=("holder", 0.0))
    holder.start()
    held.wait(5)
    threads = []
    for n, (name, slack) in enumerate([("warm-up", WARM_UP_SLACK_S), ("three seconds queued", 3.0), ("waiting caller", 0.0)]):
        threads.append(threading.Thread(target=forward, args=(name, slack)))
        threads[-1].start()
        _waiting(gate, n + 1)
    release.set()
    for t in [holder, *threads]:
        t.join(5)
    assert started == ["holder", "waiting caller", "three seconds queued", "warm-up"]
    assert gate.running == 0 and gate.waiting == 0


def test_forwards_run_side_by_side_up_to_the_slots():
    gate, inside, most, lock = ForwardGate(2), [0], [0], threading.Lock()

    def forward() -> None:
        with gate.forward(0.0):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=forward) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert most[0] == 2


def test_slots_are_a_setting_and_at_least_one(monkeypatch):
    monkeypatch.delenv("TALKLINE_LLM_SLOTS", raising=False)
    assert Settings().llm_slots == 0
    monkeypatch.setenv("TALKLINE_LLM_SLOTS", "2")
    assert Settings().llm_slots == 2
    with pytest.raises(ValueError, match="at least 1"):
        ForwardGate(0)


def test_scheduled_replies_are_the_replies_of_each_conversation_alone(stages):
    served = stages.llm.engine
    alone = Engine(served.model, served.tokenizer, served.drafter, served.draft_tokens)
    gated = Engine(served.model, served.tokenizer, served.drafter, served.draft_tokens, slots=1)
    assert gated.gate is not None and alone.gate is None
    questions = ["How much does it cost to check a bag?", "Can I bring my dog on the ferry?", "What time do you open on Sundays?"]
    prompts = [alone.encode_chat([{"role": "user", "content": q}]) for q in questions]
    want = [list(alone.generate(alone.new_session(), p, 24)) for p in prompts]
    got: list[list[int]] = [[] for _ in prompts]

    def reply(i: int) -> None:
        got[i] = list(gated.generate(gated.new_session(), prompts[i], 24, slack=lambda: float(i)))

    threads = [threading.Thread(target=reply, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert got == want


def test_a_conversation_reports_its_slack_and_a_failed_read_counts_as_none(stages):
    assert stages.llm.open_session(slack=lambda: 2.5).slack() == 2.5
    assert stages.llm.open_session(slack=lambda: 1 / 0).slack() == 0.0
    assert stages.llm.open_session().slack() == 0.0
