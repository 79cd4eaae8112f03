"""Training subtree: data determinism and splits, the eval matcher, rewards, and tiny SFT and GRPO runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pipeline.profile import Profile
from pipeline.prompt import Message
from training.checks import failure, has_markdown, run_checks
from training.data.brands import TRAIN_ONLY_SECTORS
from training.data.generate import SCENARIOS_PATH, TOOL_SCENARIOS_PATH, DataConfig, generate, grounded, training_messages
from training.rewards import action, brevity, escalation, fact, near_miss, no_markdown, persona
from training.textnorm import contains, normalize

pytest.importorskip("trl")
pytest.importorskip("peft")
torch.set_num_threads(1)

TINY = DataConfig(brands_per_sector=5, train_conversations=120, heldout_conversations=10, scenarios=10, general_prompts=4)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data")
    generate(out, TINY)
    return out


def test_generator_is_deterministic(tiny_data, tmp_path):
    generate(tmp_path, TINY)
    files = ("train.jsonl", "heldout.jsonl", "general.jsonl", "scenarios_heldout.jsonl", "scenarios_tools_heldout.jsonl", "manifest.json")
    for name in files:
        assert (tmp_path / name).read_bytes() == (tiny_data / name).read_bytes(), name


def test_committed_scenarios_match_the_generator(tmp_path):
    manifest = generate(tmp_path, DataConfig(train_conversations=10, heldout_conversations=10))
    assert (tmp_path / "scenarios_heldout.jsonl").read_bytes() == SCENARIOS_PATH.read_bytes()
    assert (tmp_path / "scenarios_tools_heldout.jsonl").read_bytes() == TOOL_SCENARIOS_PATH.read_bytes()
    assert manifest["counts"]["tool_scenarios"] >= 150
    assert manifest["counts"]["scenarios"] >= 150 and manifest["counts"]["intents"] >= 60
    assert len(manifest["train_sectors"]) >= 10


@pytest.mark.parametrize("path", [SCENARIOS_PATH, TOOL_SCENARIOS_PATH])
def test_every_reference_reply_passes_its_own_checks(path):
    for scenario in rows(path):
        results = run_checks(scenario["reference"], scenario["checks"])
        assert all(results.values()), (scenario["id"], scenario["reference"], results)


def test_splits_hold_out_brands_and_sectors(tiny_data):
    manifest = json.loads((tiny_data / "manifest.json").read_text())
    train = rows(tiny_data / "train.jsonl")
    train_brands = {r["meta"]["brand"] for r in train}
    train_sectors = {r["meta"]["sector"] for r in train}
    assert not train_brands & set(manifest["heldout_brands"])
    assert not train_sectors & set(manifest["heldout_sectors"])
    assert set(TRAIN_ONLY_SECTORS) <= train_sectors
    for s in rows(tiny_data / "scenarios_heldout.jsonl") + rows(tiny_data / "heldout.jsonl"):
        brand = s["profile"]["brand"] if "profile" in s else s["meta"]["brand"]
        assert brand not in train_brands
    assert {r["meta"]["split"] for r in train} == {"train"}
    assert train[0]["messages"][0]["role"] == "system" and "Facts you may state:" in train[0]["messages"][0]["content"]


def test_a_reply_is_grounded_only_when_every_number_it_says_was_shown_before_it():
    def chat(reply: str, caller: str = "how much to check a bag") -> list[dict]:
        block = "Facts for the caller's question (answer from these if one fits):\n- Checked bags cost thirty dollars."
        return [
            {"role": "system", "content": "You are Ana."},
            {"role": "system", "content": block},
            {"role": "user", "content": caller},
            {"role": "assistant", "content": reply},
        ]

    assert grounded(chat("A checked bag is $30."))
    assert grounded(chat("Two bags are thirty dollars each.", caller="I have 2 bags, what do they cost"))
    assert not grounded(chat("A checked bag is forty dollars."))  # its fact was not retrieved: left out of training
    assert not grounded(chat("Bags are thirty dollars, or 35 at the gate."))


def test_a_brand_ending_in_an_abbreviation_ends_a_sentence_with_one_full_stop():
    profile = Profile(id="keystone", brand="Keystone Grooming Co.", persona="You are Ravi at Keystone Grooming Co..", greeting="Hi.")
    history = [Message("assistant", "Hello, you've reached Keystone Grooming Co.. I'm Ravi..."), Message("user", "hi")]
    messages = training_messages(profile, history, None)
    assert all(".." not in m["content"].replace("...", "") for m in messages), messages
    assert "You work for Keystone Grooming Co." in messages[0]["content"] and "I'm Ravi..." in messages[1]["content"]


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("It costs thirty dollars.", "$30"),
        ("A bag is $30!", "thirty dollars"),
        ("We open at nine a.m. sharp", "9 am"),
        ("We open at 9:00 AM.", "nine a.m."),
        ("That's four dollars ninety nine.", "4.99 dollars"),
        ("Call one eight hundred, five five five, zero one four two.", "1-800-555-0142"),
        ("I have K 7 Q 2 Z P.", "K7Q2ZP"),
        ("Students get FIFTEEN percent off.", "15%"),
        ("Claims take twenty-one business days", "21 business days"),
    ],
)
def test_matcher_normalizes_numbers_times_and_punctuation(reply, needle):
    assert contains(reply, needle)


def test_matcher_does_not_overmatch():
    assert not contains("It costs thirteen dollars.", "$30")
    assert not contains("We open at nine p.m.", "9 am")
    assert not contains("Some transfers", "transfer")
    assert normalize("Hello, WORLD!") == "hello world"


def test_tool_conversations_call_declared_tools_with_the_callers_code(tiny_data):
    from pipeline.profile import parse_profile
    from pipeline.tools import split_reply

    seen = set()
    for row in rows(tiny_data / "train.jsonl") + rows(tiny_data / "scenarios_tools_heldout.jsonl"):
        messages = row["messages"] + ([{"role": "assistant", "content": row["reference"]}] if "reference" in row else [])
        tools_declared = "Tools:" in messages[0]["content"] if messages[0]["role"] == "system" else bool(row["profile"].get("tools"))
        for m in messages:
            if m["role"] == "assistant" and "<tool_call>" in m["content"]:
                assert tools_declared
                tools = parse_profile(row["profile"]).tools if "profile" in row else None
                if tools:
                    reply = split_reply(m["content"], tools)
                    assert reply.call and not reply.error, m["content"]
                seen.add(m["content"].split('"name": "')[1].split('"')[0].split("_")[0])
    assert seen == {"lookup", "transfer", "end"}
    kinds = {r["meta"]["kind"] for r in rows(tiny_data / "scenarios_tools_heldout.jsonl")}
    assert kinds == {"tool_call", "tool_result", "transfer", "end_call", "no_call"}


def test_brands_with_tools_transfer_when_asked_without_offering_first(tiny_data):
    asked = [r for r in rows(tiny_data / "train.jsonl") if r["meta"]["kind"] == "human" and "action" in r["meta"]["checks"]]
    assert asked
    for r in asked:
        assert r["meta"]["intent"] == "human_request", r["messages"][-3:]
        assert r["messages"][-1]["content"].endswith('<tool_call>{"name": "transfer_to_human", "arguments": {}}</tool_call>')


def test_action_checks_read_the_tool_call():
    checks = {"action": "lookup_booking", "arguments": {"booking_code": "HX-48213"}, "max_words": 40}
    call = '<tool_call>{"name": "lookup_booking", "arguments": {"booking_code": "hx 48213"}}</tool_call>'
    assert run_checks(call, checks) == {"max_words": True, "action": True, "arguments": True}
    assert run_checks(call.replace("48213", "48214"), checks)["arguments"] is False
    assert run_checks("Sure, one moment.", checks) == {"max_words": True, "action": False, "arguments": False}
    assert run_checks('<tool_call>{"name": "lookup_booking", "arguments": {}</tool_call>', checks)["action"] is False
    assert run_checks("Goodbye!", {"action": None}) == {"action": True}
    words = "word " * 39 + '<tool_call>{"name": "end_call", "arguments": {}}</tool_call>'
    assert run_checks(words, {"action": "end_call", "max_words": 40}) == {"max_words": True, "action": True}
    right, wrong = call, '<tool_call>{"name": "end_call", "arguments": {}}</tool_call>'
    assert action([right, wrong, "One moment."], checks=[checks] * 3) == [1.0, -1.0, 0.0]
    assert action(["Bye."], checks=[{"max_words": 40}]) == [None]
    assert brevity([right]) == [1.0]


def test_run_checks():
    checks = {
        "must_include_any": ["transfer"],
        "must_include_all": ["$30"],
        "must_not_include": ["as an ai"],
        "max_words": 6,
        "no_markdown": True,
    }
    ok = run_checks("Thirty dollars; I can transfer you.", checks)
    assert ok == {"must_include_any": True, "must_include_all": True, "must_not_include": True, "max_words": True, "no_markdown": True}
    bad = run_checks("As an AI, **the fee** is something I do not know at all.", checks)
    assert not any(bad.values())
    assert has_markdown("- first\n- second") and has_markdown("see https://x.example") and has_markdown("great 😀")
    assert not has_markdown("It's nine a.m. to five p.m., every day.")


def test_failures_say_why_a_reply_failed():
    fact = {"must_include_all": ["$47"], "must_not_include": ["$71"], "max_words": 40}
    reason = lambda kind, reply, checks=fact: failure(kind, reply, run_checks(reply, checks))  # noqa: E731
    assert reason("fact", "Car deck tickets are forty seven dollars one way.") is None
    assert reason("fact", "It's seventy one dollars.") == "forbidden"
    assert reason("fact", "It's forty seven dollars, or seventy one dollars for long vehicles.") == "forbidden", "wrong next to right"
    assert reason("two_fact", "I'm sorry, I don't have that information.") == "refused"
    assert reason("slot", "Let me check that for you.") == "missed"
    unknown = {"must_include_any": ["don't have"], "must_not_include": ["$47"]}
    assert reason("unknown", "That's forty seven dollars.", unknown) == "forbidden", "a neighbouring fact's number"
    assert reason("unknown", "Sure, we do that.", unknown) == "must_include_any"


def test_rewards_on_hand_made_replies():
    fact_checks = {"must_include_all": ["$30"], "must_include_any": [], "must_not_include": ["as an ai", "Apex Air"]}
    human_checks = {
        "must_include_all": ["Skyways customer care specialist"],
        "must_include_any": ["transfer", "connect"],
        "must_not_include": [],
    }
    replies = ["A checked bag costs thirty dollars.", "Sorry, I don't have that information.", "As an AI, Apex Air charges 40 dollars."]
    kinds, checks = ["fact"] * 3, [fact_checks] * 3
    assert fact(replies, kind=kinds, checks=checks) == [1.0, 0.0, 0.0]
    assert escalation(replies, kind=kinds, checks=checks) == [0.0, -1.0, 0.0]
    assert persona(replies, checks=checks) == [0.0, 0.0, -1.0]
    assert escalation(["Sorry, I don't have that information."], kind=["out_of_knowledge"], checks=[fact_checks]) == [1.0]
    human = ["I'll transfer you to a Skyways customer care specialist now.", "Let me connect you.", "The fee is ten dollars."]
    assert escalation(human, kind=["human"] * 3, checks=[human_checks] * 3) == [1.0, 0.5, 0.0]
    assert fact(["Hello!"], kind=["small_talk"], checks=[fact_checks]) == [None]
    long = " ".join(["word"] * 70) + "."
    assert brevity(["Sure, it costs thirty dollars.", long, "It costs thirty"]) == [1.0, 0.0, 0.5]
    assert brevity([[{"role": "assistant", "content": "One. Two. Three."}]]) == [0.5]
    assert no_markdown(["**Fee**: $30", "The fee is thirty dollars."]) == [0.0, 1.0]


def test_near_miss_and_unknown_rewards_on_hand_made_replies():
    fee = {"must_include_all": ["$47"], "must_not_include": ["as an ai", "Gannet Ferries", "71 dollars", "12 dollars"]}
    replies = [
        "It's forty seven dollars each way.",
        "Forty seven dollars, or seventy one dollars for a long vehicle.",
        "It's twelve dollars.",
        "As an AI I think forty seven dollars.",
    ]
    assert near_miss(replies, checks=[fee] * 4) == [0.0, -1.0, -1.0, 0.0]
    assert persona(replies, checks=[fee] * 4) == [0.0, 0.0, 0.0, -1.0]
    assert fact(replies, kind=["two_fact"] * 4, checks=[fee] * 4) == [1.0, 1.0, 0.0, 1.0]
    assert near_miss(["Sure."], checks=[{"must_not_include": ["as an ai"]}]) == [None]
    unknown = {"must_include_any": ["don't have"], "must_not_include": ["47 dollars", "6 am"]}
    said = ["I'm sorry, I don't have that information.", "I don't have that, but the car fare is forty seven dollars."]
    assert escalation(said, kind=["unknown"] * 2, checks=[unknown] * 2) == [1.0, 1.0]
    assert near_miss(said, checks=[unknown] * 2) == [0.0, -1.0]


def _loss(model, tokenizer, conversations: list[list[dict]]) -> float:
    """Mean assistant-token cross-entropy, one conversation at a time (batch 1 suits the engine's kernels)."""
    from training.modeling import assistant_mask

    total, count = 0.0, 0
    with torch.no_grad():
        for messages in conversations:
            ids, mask = assistant_mask(tokenizer, messages)
            labels = torch.tensor([[t if m else -100 for t, m in zip(ids, mask)]])
            out = model(input_ids=torch.tensor([ids]), labels=labels)
            n = int((labels[:, 1:] != -100).sum())
            total, count = total + out.loss.item() * n, count + n
    return total / count


def _isolated_cache(monkeypatch, tmp_path: Path) -> Path:
    """Merged models go to tmp_path; the converted base model stays where it is. Returns the base folder."""
    from models import assets

    base_dir = assets.smollm2_safetensors_dir()
    monkeypatch.setattr(assets, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(assets, "smollm2_safetensors_dir", lambda: base_dir)
    return base_dir


@pytest.fixture(scope="module")
def sft_run(tiny_data, tmp_path_factory):
    from training.sft import SFTRunConfig, main

    run_dir = tmp_path_factory.mktemp("sft")
    cfg = SFTRunConfig(
        data_dir=tiny_data,
        run_dir=run_dir,
        max_steps=4,
        batch_size=4,
        lr=2e-3,
        warmup_steps=0,
        general_batch=2,
        general_answer_tokens=8,
        logging_steps=1,
        save_steps=2,
        threads=1,
    )
    return cfg, main(cfg)


def test_sft_lowers_the_loss_and_the_adapter_loads_in_the_engine(sft_run, monkeypatch, tmp_path):
    from models import assets
    from models.engine import Engine
    from models.lora import merge_lora
    from training.curriculum import order_examples
    from training.modeling import load_base
    from training.sft import read_jsonl

    cfg, adapter = sft_run
    ordered, _ = order_examples(read_jsonl(cfg.data_dir / "train.jsonl"), cfg.schedule, 16, cfg.replay, cfg.seed)
    seen = [r["messages"] for r in ordered[:4]]
    base_dir = _isolated_cache(monkeypatch, tmp_path)
    monkeypatch.setattr(assets, "TUNED_ADAPTER_DIR", tmp_path / "no-adapter-yet")
    assert assets.llm_dir("tuned") == assets.llm_dir("base") == base_dir
    monkeypatch.setattr(assets, "TUNED_ADAPTER_DIR", adapter)
    engine = Engine.load()  # the default: base + the "committed" adapter, merged once into the cache
    assert assets.llm_dir("tuned") == assets.llm_dir(str(adapter)) != base_dir
    merged = assets.llm_dir("tuned") / "model.safetensors"
    first = merged.stat().st_ino
    merge_lora(base_dir, adapter, merged.parent)  # a second process that merged at the same time: the first copy stays
    assert merged.stat().st_ino == first and not list(merged.parent.parent.glob("*.tmp*"))
    base, tokenizer = load_base(base=base_dir)
    assert _loss(engine.model, tokenizer, seen) < _loss(base, tokenizer, seen)

    metrics = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = [m for m in metrics if "domain_ce" in m]
    assert len(logged) == 4 and all("kl_general" in m for m in logged)
    config = json.loads((cfg.run_dir / "config.json").read_text())
    assert [p["stage"] for p in config["curriculum_plan"]] == ["facts", "multi_turn", "tones", "escalation"]
    assert (cfg.run_dir / "checkpoints" / "checkpoint-4").is_dir()


def test_grpo_runs_from_the_sft_adapter(sft_run, tmp_path, monkeypatch):
    from models.engine import Engine
    from training.rl import RLRunConfig, main

    sft_cfg, sft_adapter = sft_run
    cfg = RLRunConfig(
        data_dir=sft_cfg.data_dir,
        sft_adapter=sft_adapter,
        run_dir=tmp_path / "rl",
        max_steps=2,
        prompts_per_step=1,
        num_generations=2,
        max_completion_length=8,
        prompt_pool=8,
        threads=1,
    )
    adapter = main(cfg)
    metrics = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("rewards/brevity/mean" in m for m in metrics)
    _isolated_cache(monkeypatch, tmp_path)
    engine = Engine.load(model=str(adapter))
    reply = "".join(engine.generate_text(engine.new_session(), engine.encode_chat([{"role": "user", "content": "Hi"}]), 4))
    assert isinstance(reply, str)


def test_ship_copies_the_adapter_with_its_record(tmp_path):
    from training.ship import ship

    adapter, run, out = tmp_path / "adapter", tmp_path / "sft", tmp_path / "shipped"
    adapter.mkdir()
    run.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    (run / "config.json").write_text(json.dumps({"config": {"max_steps": 3}}))
    (run / "metrics.jsonl").write_text('{"step": 3, "loss": 0.5}\n{"step": 3, "train_loss": 0.7}\n')
    report = tmp_path / "eval_sft.json"
    report.write_text(json.dumps({"pass_rate": 0.9, "per_check": {}, "results": []}))
    ship(adapter, [run], [report], "make train", out)
    assert (out / "adapter_model.safetensors").read_bytes() == b"weights"
    record = json.loads((out / "run.json").read_text())
    assert record["stages"] == ["sft"] and record["runs"]["sft"]["config"]["config"]["max_steps"] == 3
    assert record["runs"]["sft"]["final_metrics"]["last_logged"]["loss"] == 0.5
    assert record["eval"]["eval_sft"] == {"pass_rate": 0.9, "per_check": {}}


def test_ship_drafter_copies_the_checkpoint_and_benchmark_figures(tmp_path):
    from training.ship import ship_drafter

    drafter, run, out = tmp_path / "domain", tmp_path / "domain-run", tmp_path / "drafters" / "talkline"
    drafter.mkdir()
    run.mkdir()
    (drafter / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"]}')
    (drafter / "model.safetensors").write_bytes(b"drafter")
    (run / "config.json").write_text(json.dumps({"stage": "domain", "steps": 7}))
    (run / "metrics.jsonl").write_text('{"step": 7, "loss": 1.5}\n')
    bench = tmp_path / "spec.json"
    bench.write_text(
        json.dumps(
            {"speedup": 1.1, "mean_accept_len": 1.8, "prompts": [{"identical": True}], "sweep": {"2": {"speedup": 1.2, "prompts": []}}}
        )
    )
    (drafter / "phrases.json").write_text('{"replies": [[1, 2, 3]]}')
    ship_drafter(drafter, [run], [bench], "make train-drafter", out)
    assert (out / "model.safetensors").read_bytes() == b"drafter" and (out / "config.json").is_file()
    assert (out / "phrases.json").read_text() == '{"replies": [[1, 2, 3]]}'
    (drafter / "phrases.json").unlink()  # a drafter without phrases leaves none of its predecessor's behind
    ship_drafter(drafter, [run], [bench], "make train-drafter", out)
    assert not (out / "phrases.json").exists()
    record = json.loads((out / "run.json").read_text())
    assert record["runs"]["domain-run"]["config"]["steps"] == 7
    assert record["eval"]["spec"] == {"speedup": 1.1, "mean_accept_len": 1.8, "sweep": {"2": {"speedup": 1.2}}}


def test_curriculum_review_phase_mixes_every_stage(tiny_data):
    from collections import Counter

    from training.curriculum import order_examples, parse_schedule

    schedule = parse_schedule("facts:0.5,mixed:0.5")
    ordered, plan = order_examples(rows(tiny_data / "train.jsonl"), schedule, 200, 0.3, 0)
    assert {r["meta"]["curriculum_stage"] for r in ordered[:100]} == {"facts"}
    review = Counter(r["meta"]["curriculum_stage"] for r in ordered[100:])
    assert set(review) == {"facts", "multi_turn", "tones", "escalation"}
    assert plan[1] == {"stage": "mixed", "start": 100, "examples": 100, "replayed": 0}
    with pytest.raises(ValueError, match="mixed"):
        parse_schedule("facts:0.5,recap:0.5")


def test_sft_continues_an_adapter(sft_run, tmp_path):
    """--init-adapter: a review phase starts from the trained adapter (its first loss is the trained model's)."""
    from dataclasses import replace

    from training.curriculum import parse_schedule
    from training.sft import main

    cfg, adapter = sft_run
    review = replace(cfg, run_dir=tmp_path / "review", max_steps=1, init_adapter=adapter, schedule=parse_schedule("mixed:1"))
    out = main(review)
    first = lambda run: next(json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if "domain_ce" in x)  # noqa: E731
    assert first(review.run_dir)["domain_ce"] < first(cfg.run_dir)["domain_ce"]
    assert (out / "adapter_model.safetensors").read_bytes() != (adapter / "adapter_model.safetensors").read_bytes()
