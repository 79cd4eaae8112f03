"""Numbers as a person says them: the speakers, and profile facts rewritten for the prompt."""

from __future__ import annotations

import random

import pytest

from pipeline.spoken import number_words, say_money, say_phone, say_time, speakable
from training.data.brands import SECTORS
from training.data.values import tidy


@pytest.mark.parametrize(
    ("written", "spoken"),
    [
        ("A checked bag costs $450.", "A checked bag costs four hundred fifty dollars."),
        ("Delivery costs $6.99 below the minimum.", "Delivery costs six dollars ninety nine below the minimum."),
        ("Roaming costs 7 dollars a day.", "Roaming costs seven dollars a day."),
        ("A fee of €1,200 applies.", "A fee of one thousand two hundred euros applies."),
        ("Call 1-888-555-3047 any time.", "Call one, eight eight eight, five five five, three zero four seven any time."),
        ("Open from 9 am to 5:30 p.m.", "Open from nine a.m. to five thirty p.m."),
        ("Open from 10:00 am to 8:00 pm.", "Open from ten a.m. to eight p.m."),
        ("Check-in closes at 12 pm.", "Check-in closes at twelve p.m."),
        ("Late payments add 15% interest.", "Late payments add fifteen percent interest."),
        ("Refunds take 5 business days, or 2.5 weeks abroad.", "Refunds take five business days, or two point five weeks abroad."),
        ("Quote code HX-48213 or gate A4 on the 21st.", "Quote code HX-48213 or gate A4 on the 21st."),
        ("No numbers here.", "No numbers here."),
    ],
)
def test_speakable_says_numbers_as_a_person_would(written, spoken):
    assert speakable(written) == spoken


def test_speakers():
    assert number_words(2500) == "two thousand five hundred"
    assert say_money(1) == "one dollar" and say_money(4.5) == "four dollars fifty"
    assert say_time(0) == "twelve a.m." and say_time(13, 5) == "one oh five p.m."
    assert say_phone("1-800-555-0199") == "one, eight zero zero, five five five, zero one nine nine"


def test_every_generated_fact_reads_in_the_prompt_as_the_agent_says_it():
    """The prompt shows each fact's value exactly as the training replies speak it, so the model can copy it."""
    for sector in SECTORS.values():
        for intent in sector.facts:
            for seed in range(30):
                value = intent.value(random.Random(seed))
                assert tidy(value.spoken) in speakable(tidy(intent.fact.format(v=value.written))), (intent.name, value)
