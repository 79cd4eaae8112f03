"""The composed brand data: pools load, train and held-out share no sector, fact wording or caller line, the held-out
scenario file is what the generator writes, and every scenario's value sits in exactly one fact."""

from __future__ import annotations

import json
import random
import re

import pytest

from pipeline.profile import parse_profile
from pipeline.spoken import speakable
from training.checks import run_checks
from training.data.brands import brand_names
from training.data.callers import lower_first
from training.data.generate import write_jsonl
from training.data.realistic.brands import make_real_brand, value_gen
from training.data.realistic.callers import caller_pool, caller_turn, person_request
from training.data.realistic.generate import (
    SCENARIOS_PATH,
    TRAIN_KINDS,
    BrandDataConfig,
    conversations,
    kind_weights_from,
    make_brands,
)
from training.data.realistic.generate import heldout_scenarios as brand_heldout_scenarios  # the fixture below has the name
from training.data.realistic.pools import PoolError, load_pools, parse_pool
from training.textnorm import contains, normalize

TRAIN, HELDOUT = load_pools("train"), load_pools("heldout")


def skeleton(text: str) -> str:
    """A line with its slots and punctuation dropped, lowercased: two writers' lines compare on this."""
    return " ".join(re.sub(r"\{[a-z_]+\}", " ", text.lower()).replace("'", "").split()).strip(" ?.!,")


def lines(pools, field: str) -> set[str]:
    out = set()
    for pool in pools:
        if field == "unknowns":
            out |= {skeleton(u) for u in pool.unknowns}
        for topic in pool.topics:
            if field == "facts":
                out |= {skeleton(f) for f in topic.facts}
            if field == "asks":
                out |= {skeleton(a) for asks in topic.asks.values() for a in asks}
                out |= {skeleton(r) for k, v in (topic.choice or {}).items() if k != "question" for r in v}
    return out


def test_there_are_enough_sectors_on_each_side():
    assert len(TRAIN) >= 40 and len(HELDOUT) >= 8
    assert all(len(p.topics) >= 12 for p in TRAIN + HELDOUT)


def test_train_and_heldout_share_no_sector_fact_wording_or_caller_line():
    assert not {p.name for p in TRAIN} & {p.name for p in HELDOUT}
    for field in ("facts", "asks", "unknowns"):
        assert not lines(TRAIN, field) & lines(HELDOUT, field), field
    assert not caller_pool("train").strings() & caller_pool("heldout").strings()


def test_the_realistic_dev_sectors_are_in_neither_split():
    dev = {"dental practice", "bicycle repair shop", "cinema", "airport parking", "holiday park", "driving school"}
    assert not dev & {p.name for p in TRAIN + HELDOUT}


def test_committed_brand_scenarios_match_the_generator_whatever_the_training_seed():
    for cfg in (BrandDataConfig(), BrandDataConfig(seed=2035)):
        _, rows = brand_heldout_scenarios(cfg)
        written = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        assert SCENARIOS_PATH.read_text(encoding="utf-8") == written, cfg.seed


@pytest.fixture(scope="module")
def heldout_scenarios() -> list[dict]:
    return [json.loads(line) for line in SCENARIOS_PATH.read_text().splitlines()]


def test_the_heldout_file_covers_every_kind_and_sector(heldout_scenarios):
    assert len(heldout_scenarios) >= 300
    assert {s["meta"]["kind"] for s in heldout_scenarios} == {"fact", "two_fact", "slot", "unknown", "human", "small_talk"}
    assert len({s["meta"]["sector"] for s in heldout_scenarios}) >= 8
    assert all(8 <= len(s["profile"]["facts"]) <= 14 for s in heldout_scenarios)


def test_each_required_value_is_in_exactly_one_fact(heldout_scenarios):
    for s in heldout_scenarios:
        facts = parse_profile(s["profile"]).facts
        for value in s["checks"]["must_include_all"]:
            if not re.search(r"\d", normalize(value)):
                continue
            holding = [f for f in facts if contains(f, value) or contains(speakable(f), value)]
            assert len(holding) == 1, (s["id"], value, holding)


def test_every_reference_reply_passes_its_own_checks(heldout_scenarios):
    for s in heldout_scenarios:
        assert all(run_checks(s["reference"], s["checks"]).values()), s["id"]


def test_a_wrong_number_next_to_the_right_one_fails(heldout_scenarios):
    fact = next(s for s in heldout_scenarios if s["meta"]["kind"] == "fact" and len(s["checks"]["must_not_include"]) > 10)
    wrong = fact["checks"]["must_not_include"][-1]
    assert not all(run_checks(f"{fact['reference']} Or {wrong}.", fact["checks"]).values())


def test_an_unknown_reply_with_a_neighbouring_number_fails(heldout_scenarios):
    unknown = next(s for s in heldout_scenarios if s["meta"]["kind"] == "unknown")
    number = next(v for v in unknown["checks"]["must_not_include"] if re.search(r"\d", v))
    assert all(run_checks(unknown["reference"], unknown["checks"]).values())
    assert not all(run_checks(f"I don't have that, but it's {number}.", unknown["checks"]).values())


def test_value_specs_render_as_a_company_writes_them():
    rng = random.Random(0)
    assert re.fullmatch(r"£\d+|\d+ pounds", value_gen("pounds 10-20")(rng).written)
    assert value_gen("count 2-2 working days")(rng).written in ("2 working days", "two working days")
    assert value_gen("clock 7:30")(rng).spoken == "seven thirty a.m."
    assert value_gen("count 60-60 step 5")(rng).checks == ("60",)
    assert value_gen("words Gate B|Gate C")(rng).written in ("Gate B", "Gate C")


def test_a_brand_states_unique_values_and_leaves_topics_out():
    pool = TRAIN[0]
    brand = make_real_brand(random.Random(1), pool, brand_names(pool)[0], (6, 16), 1.0)
    checks = [normalize(c) for s in brand.stated for v in s.values.values() for c in v.checks]
    assert len(checks) == len(set(checks)) and len(brand.absent) >= 2
    assert {t.name for t in brand.profile.tools} <= {"transfer_to_human", "end_call"}


def test_a_pool_that_breaks_the_schema_is_refused_with_its_place():
    raw = {
        "sector": "x",
        "brand_suffixes": ["X"],
        "roles": ["r"],
        "teams": ["t"],
        "policies": ["p"],
        "unknowns": ["a", "b", "c"],
        "topics": [
            {"key": "k", "values": {"a": "money 1-2"}, "facts": ["Costs {a} and {b}."], "asks": {"a": ["?"]}, "answers": {"a": ["{a}"]}}
        ],
    }
    with pytest.raises(PoolError, match="topic k"):
        parse_pool(raw, "train", "x.yaml")


def test_the_transfer_phrasings_are_new_and_the_committed_file_is_their_output(tmp_path):
    from training.data import generic
    from training.data.transfer_phrasings import PHRASINGS
    from training.data.transfer_phrasings import SCENARIOS_PATH as TRANSFER_PATH
    from training.data.transfer_phrasings import scenarios as transfer_scenarios

    train = caller_pool("train")
    composed = {ask.format(who=who) for ask in train.person_asks for who in train.person_who}
    trained = {skeleton(line) for line in [*train.human, *composed]} | {skeleton(line) for line in generic.HUMAN_ASKS}
    assert len(PHRASINGS) == 20 and len({skeleton(p) for p in PHRASINGS}) == 20
    assert not {skeleton(p) for p in PHRASINGS} & trained
    rows = transfer_scenarios(SCENARIOS_PATH)
    write_jsonl(tmp_path / "transfer.jsonl", rows)
    assert TRANSFER_PATH.read_text(encoding="utf-8") == (tmp_path / "transfer.jsonl").read_text(encoding="utf-8")
    for r in rows:
        assert r["checks"]["action"] == "transfer_to_human" and "transfer_to_human" in {t["name"] for t in r["profile"]["tools"]}


def test_training_callers_frame_questions_in_composed_remarks_and_heldout_callers_never_do():
    train, heldout = caller_pool("train"), caller_pool("heldout")
    assert set(train.before) == set(train.after) == set(train.tones)
    assert not heldout.before and not heldout.asides
    openers = {b for bs in train.before.values() for b in bs}
    ask = "How much is a day pass?"
    rng = random.Random(5)
    lines = [caller_turn(rng, train, tone, ask, asr_share=0) for tone in train.tones for _ in range(40)]
    composed = [line for line in lines if any(line.startswith(b) for b in openers)]
    assert 0.25 < len(composed) / len(lines) < 0.75
    assert all(ask in line or lower_first(ask) in line for line in lines)
    asks = [ask] + [f"{c} {ask}" for c in heldout.context]
    for tone in heldout.tones:
        wrapped = {w.format(ask=a, ask_lc=lower_first(a)) for w in heldout.wraps[tone] for a in asks}
        assert all(caller_turn(rng, heldout, tone, ask, asr_share=0) in wrapped for _ in range(10))


def test_training_callers_ask_for_a_person_in_composed_words_and_heldout_callers_only_in_their_lines():
    train, heldout = caller_pool("train"), caller_pool("heldout")
    rng = random.Random(3)
    asked = [person_request(rng, train, tone, "the head baker") for tone in train.tones for _ in range(60)]
    composed = [line for line in asked if line not in train.human]
    assert 0.3 < len(composed) / len(asked) < 0.7
    assert any("head baker" in line for line in composed)
    assert any(reason in line for line in composed for reason in train.person_reasons)
    assert any(line == line.lower() and "?" not in line for line in composed)  # as speech recognition writes it
    assert not heldout.person_asks
    assert all(person_request(rng, heldout, tone, "the head baker") in heldout.human for tone in heldout.tones for _ in range(10))


def test_training_replies_to_angry_callers_never_open_like_a_refusal_and_heldout_ones_keep_the_shared_openers():
    from training.data.callers import OPENERS
    from training.data.realistic.dialogues import fact

    train, heldout = caller_pool("train"), caller_pool("heldout")
    assert heldout.openers == OPENERS
    assert train.openers["angry"] != OPENERS["angry"] and not any(o.startswith(("I'm sorry", "Sorry")) for o in train.openers["angry"])
    brand = make_brands(BrandDataConfig(seed=3), "train")[0]
    replies = [fact(random.Random(i), brand, "angry", train).history[-1].content for i in range(30)]
    assert all(r.startswith(train.openers["angry"]) for r in replies)


def test_an_unanswerable_twin_asks_the_same_words_of_the_brand_without_the_fact():
    cfg = BrandDataConfig(seed=7, conversations=60, twin_share=1.0)
    brands = make_brands(cfg, "train")[:40]
    rows = conversations(cfg, brands, None)
    pairs = [(a, b) for a, b in zip(rows, rows[1:]) if b["meta"]["intent"].startswith("absent_")]
    assert pairs and all(a["meta"]["kind"] == "fact" for a, _ in pairs)
    for answered, twin in pairs:
        assert answered["messages"][1:-1] == twin["messages"][1:-1]
        assert twin["meta"]["kind"] == "unknown" and all(run_checks(twin["messages"][-1]["content"], twin["meta"]["checks"]).values())
        stated = answered["meta"]["checks"]["must_include_all"]
        assert all(contains(answered["messages"][0]["content"], c) for c in stated)
        assert not any(contains(twin["messages"][0]["content"], c) for c in stated)
        assert set(stated) <= set(twin["meta"]["checks"]["must_not_include"])
        assert not all(run_checks(answered["messages"][-1]["content"], twin["meta"]["checks"]).values())
    plain = conversations(BrandDataConfig(seed=7, conversations=60), brands, None)
    assert plain == [r for r in rows if not r["meta"]["intent"].startswith("absent_")]


def test_kind_weights_name_kinds_and_keep_the_others():
    weights = kind_weights_from("unknown:0.1,two_fact:0.3")
    assert dict(zip(TRAIN_KINDS, weights))["unknown"] == 0.1 and weights[0] == BrandDataConfig.train_kind_weights[0]
    with pytest.raises(ValueError, match="unknown kind 'facts'"):
        kind_weights_from("facts:1")
