"""Rejection-sampling fine-tuning data: which reply is kept, which pair is written, and a tiny real sampling run with the tuned model."""

from __future__ import annotations

import json

import pytest

from training.data.generate import DataConfig, generate
from training.rft import RFTConfig, best_passing, kept_row, main, passes, preference_pair

pytest.importorskip("trl")

FEE = {"must_include_all": ["$47"], "must_include_any": [], "must_not_include": ["as an ai", "71 dollars"], "max_words": 40}


def test_the_best_passing_reply_is_kept_and_the_written_one_when_none_passes():
    replies = [
        "Sorry, I don't have that information.",
        "It's forty seven dollars, or seventy one dollars for a long vehicle.",  # right value beside a forbidden one
        "Sure, a car costs forty seven dollars each way, and that includes the driver, so you only pay once for both.",
        "It's forty seven dollars each way.",
    ]
    assert [passes(r, FEE) for r in replies] == [False, False, True, True]
    assert best_passing(replies, "fact", FEE) == "It's forty seven dollars each way."  # same rewards: the shorter
    assert best_passing(replies[:2], "fact", FEE) is None

    row = {
        "messages": [{"role": "user", "content": "What's it cost to take my car over?"}, {"role": "assistant", "content": "It's $47."}],
        "meta": {"kind": "fact", "checks": FEE},
    }
    kept, outcome = kept_row(row, replies[:2])
    assert kept["messages"][-1]["content"] == "It's $47." and kept["meta"]["rft"] == "written"
    assert outcome == {"kind": "fact", "greedy_passed": False, "any_passed": False, "kept": "written"}
    kept, outcome = kept_row(row, replies)
    assert kept["messages"][-1]["content"] == replies[3] and kept["messages"][:-1] == row["messages"][:-1]
    assert outcome["any_passed"] and not outcome["greedy_passed"]


def test_a_pair_sets_the_kept_reply_against_the_worst_failing_one():
    row = {
        "messages": [{"role": "user", "content": "What's it cost to take my car over?"}, {"role": "assistant", "content": "It's $47."}],
        "meta": {"kind": "fact", "checks": FEE},
    }
    refusal, both = "Sorry, I don't have that information.", "It's forty seven dollars, or seventy one dollars for a long vehicle."
    right = "It's forty seven dollars each way."
    pair = preference_pair(row, [both, right, refusal])
    assert pair["chosen"] == right and pair["rejected"] == refusal  # the refusal scores lowest: -1 for a false "I don't have that"
    assert pair["messages"] == row["messages"][:-1] and pair["meta"] == row["meta"]
    assert preference_pair(row, [both])["chosen"] == "It's $47."  # nothing passed: the written reply
    assert preference_pair(row, [right, right]) is None


def test_a_tiny_rft_run_samples_the_tuned_model_and_writes_sft_data(tmp_path):
    data = tmp_path / "data"
    generate(data, DataConfig(brands_per_sector=5, train_conversations=40, heldout_conversations=4, scenarios=4, general_prompts=2))
    cfg = RFTConfig(data_dir=data, out=tmp_path / "rft", prompts=4, samples=2, max_new_tokens=40, workers=1)
    manifest = main(cfg)
    kept = [json.loads(line) for line in (cfg.out / "train.jsonl").read_text().splitlines()]
    assert len(kept) == 4 and manifest["all"]["prompts"] == 4
    assert sum(manifest["kept"].values()) == 4 and (cfg.out / "general.jsonl").exists()
    assert manifest["all"]["pass_at_k"] >= manifest["all"]["greedy_pass"]
    pairs = [json.loads(line) for line in (cfg.out / "pairs.jsonl").read_text().splitlines()]
    assert manifest["pairs"] == len(pairs)
    for pair in pairs:
        assert not passes(pair["rejected"], pair["meta"]["checks"]) and pair["chosen"] != pair["rejected"]
    for row in kept:
        assert row["messages"][-1]["role"] == "assistant" and row["meta"]["rft"] in ("sample", "written")
        if row["meta"]["rft"] == "sample":
            assert passes(row["messages"][-1]["content"], row["meta"]["checks"])
