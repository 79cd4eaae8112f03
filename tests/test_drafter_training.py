"""Drafter training: TTT semantics and loss, vocab, dialogs, a tiny real run (SGLang format, acceptance, resume), CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from typer.testing import CliRunner

from models import assets
from models.eagle3 import DrafterCache, load_drafter, random_drafter
from models.engine import Engine
from models.phrases import PhraseMemory
from models.session import GenerationStats
from server.cli import command_app
from training.drafter.conversations import DialogSample, dialog_sample, dialog_samples, load_dialog_samples, load_dialogs, prompts_of
from training.drafter.features import Batch, target_features
from training.drafter.prompts import broad_prompts
from training.drafter.regenerate import Sample
from training.drafter.target import stop_ids
from training.drafter.train import DrafterTrainConfig, StepBudget, load_samples, train
from training.drafter.ttt import draft_head, step_targets, ttt_attention_mask, ttt_loss, unroll_hidden
from training.drafter.vocab import draft_vocab, reply_token_counts, target_to_draft

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent


def toy_batch(t: int, vocab: int, draft_vocab_size: int, h: int = 0) -> Batch:
    g = torch.Generator().manual_seed(0)
    return Batch(
        input_ids=torch.randint(0, vocab, (1, t), generator=g),
        position_ids=torch.arange(5, 5 + t)[None],
        aux=torch.randn(1, t, 3 * h, generator=g),
        target_logits=torch.randn(1, t, draft_vocab_size, generator=g),
        target_draft_ids=torch.randint(0, draft_vocab_size, (1, t), generator=g),
        loss_mask=torch.ones(1, t, dtype=torch.bool),
    )


def test_ttt_unroll_matches_drafting_with_the_inference_cache():
    """Row t of TTT step i equals the engine's chain drafted from verified position t (teacher-forced tokens)."""
    target = LlamaConfig(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=8,
        intermediate_size=96,
        vocab_size=512,
        rope_theta=5000.0,
        max_position_embeddings=256,
    )
    drafter = random_drafter(target, 128, seed=0)
    for p in drafter.parameters():
        if p.ndim == 1:
            torch.nn.init.uniform_(p, 0.5, 1.5)
    drafter.set_embedding(torch.nn.Embedding(512, 64))
    batch, steps = toy_batch(12, 512, 128, h=64), 4
    ids, aux, pos = batch.input_ids, batch.aux, batch.position_ids
    with torch.no_grad():
        head, outputs = draft_head(drafter.eval()), unroll_hidden(drafter, batch, steps)
        ttt = [head(h) for h in outputs]
        for t in range(12 - steps - 1):
            cache = DrafterCache()  # catch up on positions 0..t, then draft a chain as speculative.py does
            logits, hidden = drafter(drafter.embed(ids[:, 1 : t + 2]), aux[:, : t + 1], pos[:, : t + 1], cache)
            torch.testing.assert_close(logits[0, -1], ttt[0][0, t], atol=1e-5, rtol=1e-5)
            for i in range(1, steps):
                logits, hidden = drafter(drafter.embed(ids[:, t + 1 + i : t + 2 + i]), hidden[:, -1:], pos[:, t : t + 1] + i, cache)
                torch.testing.assert_close(logits[0, -1], ttt[i][0, t], atol=1e-5, rtol=1e-5)
        batch.loss_mask[0, :5] = False  # the head runs on reply rows only and gives the same loss
        lazy, full = ttt_loss(outputs, batch, head=head), ttt_loss(ttt, batch)
        assert float(lazy.loss) == pytest.approx(float(full.loss), rel=1e-5) and lazy.step_accuracy == full.step_accuracy
    mask = ttt_attention_mask(3, 2)
    assert mask.int().tolist() == [[1, 0, 0, 1, 0, 0, 1, 0, 0], [1, 1, 0, 0, 1, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 1]]


def test_ttt_loss_masks_prompt_and_out_of_vocab_targets_and_weights_steps():
    batch = toy_batch(6, 50, 3)
    batch.loss_mask = torch.tensor([[0, 0, 1, 1, 1, 1]], dtype=torch.bool)  # 2 prompt tokens, 4 reply tokens
    batch.target_draft_ids = torch.tensor([[0, 1, 2, -1, 1, 0]])  # the target's next token after row 3 is out of vocab
    _, ids0, reply0 = step_targets(batch, 0)  # step 0, row t predicts token t + 2 from target row t + 1
    assert reply0.int().tolist() == [[1, 1, 1, 1, 0, 0]] and ids0.tolist() == [[1, 2, -1, 1, 0, -1]]
    _, ids1, reply1 = step_targets(batch, 1)
    assert reply1.int().tolist() == [[1, 1, 1, 0, 0, 0]] and ids1.tolist() == [[2, -1, 1, 0, -1, -1]]

    logits = [torch.randn(1, 6, 3) for _ in range(3)]
    for step, rows in ((0, [2, 4, 5]), (1, [1, 3, 4, 5]), (2, [0, 2, 3, 4, 5])):  # masked rows get garbage
        logits[step][0, rows] = torch.tensor([1e4, -1e4, 0.0])
    result = ttt_loss(logits, batch, decay=0.8)

    def manual(step: int, rows: list[int]) -> float:
        p = torch.softmax(batch.target_logits[0, [r + 1 + step for r in rows]], -1)
        return float(-(p * torch.log_softmax(logits[step][0, rows], -1)).sum(-1).mean())

    expected = [manual(0, [0, 1, 3]), manual(1, [0, 2]), manual(2, [1])]
    assert result.step_losses == pytest.approx(expected, rel=1e-5)
    assert float(result.loss) == pytest.approx(expected[0] + 0.8 * expected[1] + 0.64 * expected[2], rel=1e-5)
    hits0 = sum(int(logits[0][0, r].argmax() == ids0[0, r]) for r in (0, 1, 3))
    assert result.step_accuracy[0] == pytest.approx(hits0 / 4)  # out-of-vocab targets count as misses


def tiny_target_config() -> LlamaConfig:
    """A four-layer Llama over a 100-token vocabulary: target features in milliseconds."""
    return LlamaConfig(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=4,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=64,
    )


def test_target_features_cut_windows_and_pad_on_the_right():
    config = tiny_target_config()
    model = LlamaForCausalLM(config).eval()
    samples = [Sample([1, 2, 3, 4, 5, 6], [7, 8, 9, 10]), Sample([11, 12], [13, 14, 15])]
    t2d = torch.zeros(100, dtype=torch.bool)
    t2d[::2] = True  # even ids are the draft vocab
    batch = target_features(model, samples, [0, 1, 2], t2d, window=6)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 15, 0]]
    assert batch.position_ids.tolist() == [[4, 5, 6, 7, 8, 9], [0, 1, 2, 3, 4, 0]]
    assert batch.loss_mask.int().tolist() == [[0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0]]
    with torch.no_grad():  # the second sequence alone, unpadded: the same features
        alone = model(input_ids=torch.tensor([samples[1].ids]), output_hidden_states=True)
    aux = torch.cat([alone.hidden_states[i + 1] for i in (0, 1, 2)], dim=-1)[0]
    torch.testing.assert_close(batch.aux[1, :5], aux, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batch.target_logits[1, :5], alone.logits[0][:, t2d], atol=1e-5, rtol=1e-5)
    argmax = alone.logits[0].argmax(-1)
    assert batch.target_draft_ids[1, :5].tolist() == [int(a) // 2 if a % 2 == 0 else -1 for a in argmax]
    assert batch.target_draft_ids[1, 5] == -1


def test_target_features_mask_every_reply_of_a_written_dialog():
    config = tiny_target_config()
    dialog = DialogSample([1, 2, 3, 4, 5, 6, 7], [False, True, True, False, False, True, False])
    model = LlamaForCausalLM(config).eval()
    batch = target_features(model, [dialog, Sample([8, 9], [10])], [0, 1, 2], torch.ones(100, dtype=torch.bool), 8)
    assert batch.loss_mask.int().tolist() == [[0, 1, 1, 0, 0, 1, 0], [0, 0, 1, 0, 0, 0, 0]]
    assert dialog.reply_ids == [2, 3, 6]


def test_dialog_samples_mark_each_answering_reply_through_its_stop_token(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(assets.llm_dir("base"))
    chat = [
        {"role": "system", "content": "You are Ava."},
        {"role": "assistant", "content": "Hello, Ava here."},
        {"role": "user", "content": "Is delivery free?"},
        {"role": "assistant", "content": "Yes, over forty dollars."},
        {"role": "user", "content": "And returns?"},
        {"role": "assistant", "content": "Returns are free for thirty days."},
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps({"messages": c}) for c in (chat, chat[:2])) + "\n")
    [sample] = load_dialog_samples(path, tokenizer, set(stop_ids(tokenizer)))  # a greeting alone answers no one
    encode = lambda c, prompt: tokenizer.apply_chat_template(c, add_generation_prompt=prompt, tokenize=True, return_dict=True)["input_ids"]  # noqa: E731
    assert sample.ids == list(encode(chat, False))
    assert tokenizer.decode(sample.reply_ids) == "Yes, over forty dollars.<|im_end|>Returns are free for thirty days.<|im_end|>"
    first = len(encode(chat[:3], True))  # the engine's prompt for the first answer ends where its reply's loss starts
    assert sample.reply_mask[first] and not any(sample.reply_mask[:first])
    cfg = DrafterTrainConfig(stage="domain", replies="dialogs", dialogs=path, num_prompts=5)
    assert load_samples(cfg, None, tokenizer) == [sample]
    with pytest.raises(ValueError, match="--stage domain"):
        load_samples(DrafterTrainConfig(stage="broad", replies="dialogs"), None, tokenizer)


def test_many_dialogs_are_tokenized_in_worker_processes_in_order(monkeypatch):
    tokenizer = AutoTokenizer.from_pretrained(assets.llm_dir("base"))
    chats = [
        [{"role": "user", "content": f"Is order {n} shipped?"}, {"role": "assistant", "content": f"Order {n} ships today."}]
        for n in range(6)
    ]
    stops = set(stop_ids(tokenizer))
    monkeypatch.setattr("training.drafter.conversations.PARALLEL_FROM", 2)
    in_workers = dialog_samples(chats, tokenizer, stops, workers=2)
    assert in_workers == [dialog_sample(chat, tokenizer, stops) for chat in chats] and len(set(map(str, in_workers))) == 6


def test_draft_vocab_counts_reply_tokens_only():
    samples = [Sample([7, 7, 7, 7], [3, 3, 5]), Sample([7], [5, 9, 3])]
    counts = reply_token_counts(samples, 12)
    assert counts[7] == 0 and counts[3] == 3 and counts[5] == 2 and counts[9] == 1
    d2t, t2d = draft_vocab(samples, 12, 2)
    assert t2d.nonzero().flatten().tolist() == [3, 5] and (torch.arange(2) + d2t).tolist() == [3, 5]
    assert target_to_draft(t2d)[[3, 5, 7]].tolist() == [0, 1, -1]


def test_dialogs_give_one_prompt_per_answered_user_turn(tmp_path):
    chat = [
        {"role": "system", "content": "S"},
        {"role": "assistant", "content": "Hi"},
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2"},
    ]
    assert [p[-1]["content"] for p in prompts_of(chat)] == ["Q1", "Q2"]
    assert prompts_of(chat)[1] == chat[:5]
    bench = load_dialogs(ROOT / "bench" / "prompts.jsonl")
    assert len(bench) == 12 and bench[0][0]["role"] == "system" and "Skyways" in bench[0][0]["content"]
    assert len(load_dialogs(ROOT / "bench" / "prompts.jsonl", limit=5)) == 5
    assert len(broad_prompts(300)) == 300 and broad_prompts(300) == broad_prompts(300)
    assert len({p[-1]["content"] for p in broad_prompts(300)}) == 300


TINY = dict(
    stage="broad",
    model="base",
    num_prompts=8,
    max_new_tokens=40,
    regen_batch_size=8,
    draft_vocab=1024,
    ttt_steps=3,
    steps=40,
    batch_size=4,
    lr=1e-3,
    warmup_steps=5,
    save_every=20,
    threads=1,
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("drafter") / "generic"
    return train(DrafterTrainConfig(out=out, **TINY))


SGLANG_KEYS = {
    "fc.weight": (576, 3 * 576),
    "midlayer.self_attn.q_proj.weight": (576, 1152),
    "midlayer.self_attn.k_proj.weight": (192, 1152),
    "midlayer.self_attn.v_proj.weight": (192, 1152),
    "midlayer.self_attn.o_proj.weight": (576, 576),
    "midlayer.mlp.gate_proj.weight": (1536, 576),
    "midlayer.mlp.up_proj.weight": (1536, 576),
    "midlayer.mlp.down_proj.weight": (576, 1536),
    "midlayer.hidden_norm.weight": (576,),
    "midlayer.input_layernorm.weight": (576,),
    "midlayer.post_attention_layernorm.weight": (576,),
    "norm.weight": (576,),
    "lm_head.weight": (1024, 576),
    "d2t": (1024,),
    "t2d": (49152,),
}


def test_checkpoint_is_sglang_llama_eagle3(tiny_run):
    assert sorted(p.name for p in tiny_run.iterdir()) == ["config.json", "model.safetensors", "phrases.json"]
    tensors = load_file(tiny_run / "model.safetensors")
    assert {k: tuple(v.shape) for k, v in tensors.items()} == SGLANG_KEYS
    assert tensors["fc.weight"].dtype == torch.bfloat16 and tensors["d2t"].dtype == torch.int64 and tensors["t2d"].dtype == torch.bool
    config = json.loads((tiny_run / "config.json").read_text())
    assert config.pop("rms_norm_eps") == pytest.approx(1e-5)
    assert config == {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "num_hidden_layers": 1,
        "hidden_size": 576,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "intermediate_size": 1536,
        "rope_theta": 100000.0,
        "rope_scaling": None,
        "max_position_embeddings": 8192,
        "hidden_act": "silu",
        "vocab_size": 49152,
        "draft_vocab_size": 1024,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "eagle_config": {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 14, 26]},
    }
    drafter, cfg = load_drafter(tiny_run)
    assert set(drafter.state_dict()) == set(SGLANG_KEYS) and cfg.to_hf_dict()["draft_vocab_size"] == 1024
    assert int(drafter.t2d.sum()) == 1024 and (torch.arange(1024) + drafter.d2t).tolist() == drafter.t2d.nonzero().flatten().tolist()
    run = tiny_run.with_name("generic-run")
    assert json.loads((run / "config.json").read_text())["ttt_steps"] == 3
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 41)) and len(metrics[0]["step_acc"]) == 3
    assert sorted(p.name for p in (run / "checkpoint").iterdir()) == ["config.json", "model.safetensors", "trainer.pt"]
    replies = [json.loads(line)["reply_ids"] for line in (run / "replies.jsonl").read_text().splitlines()]
    assert sorted(PhraseMemory.load(tiny_run / "phrases.json").replies) == sorted(r for r in replies if len(r) >= 3)


def mean_acceptance(engine: Engine, chats: list[list[dict]]) -> float:
    lengths = []
    for chat in chats:
        stats = GenerationStats()
        list(engine.generate(engine.new_session(), engine.encode_chat(chat), 40, stats=stats))
        lengths.append(stats.mean_accept_len)
    return sum(lengths) / len(lengths)


def test_trained_drafter_is_accepted_more_than_a_random_one(tiny_run):
    plain = Engine.load(model="base")
    chats = broad_prompts(TINY["num_prompts"], seed=0)  # its own training prompts
    random_len = mean_acceptance(Engine(plain.model, plain.tokenizer, random_drafter(plain.model.config, 1024, seed=0)), chats)
    trained_len = mean_acceptance(Engine(plain.model, plain.tokenizer, load_drafter(tiny_run)[0]), chats)
    assert random_len < 1.1 and trained_len > 1.3 and trained_len > random_len + 0.3, (random_len, trained_len)


def test_resume_continues_from_the_checkpoint_with_cached_replies(tiny_run):
    run = tiny_run.with_name("generic-run")
    replies = (run / "replies.jsonl").read_text()
    train(DrafterTrainConfig(out=tiny_run, **{**TINY, "steps": 42}, resume=True))
    metrics = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics == list(range(1, 43)) and (run / "replies.jsonl").read_text() == replies


def test_cli_builds_the_config(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr("training.drafter.train.train", lambda cfg: seen.append(cfg) or cfg.out)
    args = [
        "train",
        "drafter",
        "--stage",
        "domain",
        "--init",
        str(tmp_path / "generic"),
        "--out",
        str(tmp_path / "domain"),
        "--steps",
        "5",
        "--ttt-steps",
        "3",
        "--draft-vocab",
        "2048",
        "--lr",
        "1e-4",
        "--device",
        "cpu",
        "--resume",
        "--replies",
        "dialogs",
        "--train-minutes",
        "7.5",
    ]
    result = CliRunner().invoke(command_app(args), args)
    assert result.exit_code == 0, result.output
    cfg = seen[0]
    assert (cfg.stage, cfg.init, cfg.steps, cfg.ttt_steps, cfg.draft_vocab, cfg.lr, cfg.resume, cfg.replies) == (
        "domain",
        tmp_path / "generic",
        5,
        3,
        2048,
        1e-4,
        True,
        "dialogs",
    )
    assert cfg.resolved_run_dir() == tmp_path / "domain-run" and cfg.train_minutes == 7.5


def test_a_time_budget_fits_the_step_count_to_the_recent_pace(monkeypatch):
    # 5 s of warm-up, 4 s a step up to step 112, then 1 s a step (a GPU's first steps are the slow ones)
    times = [0.0] + [5.0 + 4.0 * i for i in range(12)] + [49.0 + i for i in range(1, 200)]
    clock = iter(times)
    monkeypatch.setattr("training.drafter.train.time.perf_counter", lambda: next(clock))
    budget = StepBudget(minutes=2.0, start=100, most=1000)
    steps, fitted, step = 1000, [], 100
    while step < steps:
        step += 1
        steps = budget.steps_after(step, steps)
        fitted.append(steps)
    # after step 112 (49 s used, 4 s a step) 71 s are left: 17 more steps; after 122 (59 s, 1 s a step): 61 more
    assert fitted[:11] == [1000] * 11 and fitted[11] == 112 + 17 and fitted[21] == 122 + 61
    assert steps == 183 and step == 183  # ends on the budget, at the 1 s pace
    assert StepBudget(minutes=10.0, start=0, most=50, began=0.0, mark=(2, 0.0)).steps_after(12, 50) == 50  # never more than asked
