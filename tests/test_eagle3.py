"""Tests for the EAGLE3 drafter (SGLang LlamaForCausalLMEagle3 checkpoint format)."""

import json
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from models.eagle3 import (
    DrafterCache,
    DrafterCheckpointError,
    Eagle3Config,
    Eagle3Drafter,
    load_drafter,
    random_drafter,
    save_drafter,
    vocab_mapping_from_counts,
)

torch.set_num_threads(1)

H, HEADS, KV, HD, INTER, VOCAB, DVOCAB = 64, 4, 2, 16, 96, 512, 128


def tiny_target(**kw) -> LlamaConfig:
    args = dict(
        hidden_size=H,
        num_attention_heads=HEADS,
        num_key_value_heads=KV,
        num_hidden_layers=8,
        intermediate_size=INTER,
        vocab_size=VOCAB,
        rope_theta=5000.0,
        rms_norm_eps=1e-5,
        max_position_embeddings=256,
    )
    return LlamaConfig(**{**args, **kw})


def tiny_drafter(seed: int = 0) -> Eagle3Drafter:
    drafter = random_drafter(tiny_target(), DVOCAB, seed=seed)
    for p in drafter.parameters():  # random norm weights too, so a swapped norm would show
        if p.ndim == 1:
            torch.nn.init.uniform_(p, 0.5, 1.5)
    drafter.set_embedding(torch.nn.Embedding(VOCAB, H))
    return drafter.eval()


EXPECTED_SHAPES = {
    "fc.weight": (H, 3 * H),
    "midlayer.self_attn.q_proj.weight": (HEADS * HD, 2 * H),
    "midlayer.self_attn.k_proj.weight": (KV * HD, 2 * H),
    "midlayer.self_attn.v_proj.weight": (KV * HD, 2 * H),
    "midlayer.self_attn.o_proj.weight": (H, HEADS * HD),
    "midlayer.mlp.gate_proj.weight": (INTER, H),
    "midlayer.mlp.up_proj.weight": (INTER, H),
    "midlayer.mlp.down_proj.weight": (H, INTER),
    "midlayer.hidden_norm.weight": (H,),
    "midlayer.input_layernorm.weight": (H,),
    "midlayer.post_attention_layernorm.weight": (H,),
    "norm.weight": (H,),
    "lm_head.weight": (DVOCAB, H),
    "d2t": (DVOCAB,),
    "t2d": (VOCAB,),
}


def test_config_hf_dict_fields_and_round_trip():
    cfg = Eagle3Config.from_target(tiny_target(), draft_vocab_size=DVOCAB)
    d = cfg.to_hf_dict()
    assert d == {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "num_hidden_layers": 1,
        "hidden_size": H,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "head_dim": HD,
        "intermediate_size": INTER,
        "rms_norm_eps": 1e-5,
        "rope_theta": 5000.0,
        "rope_scaling": None,
        "max_position_embeddings": 256,
        "hidden_act": "silu",
        "vocab_size": VOCAB,
        "draft_vocab_size": DVOCAB,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "eagle_config": {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]},
    }
    assert Eagle3Config.from_hf_dict(json.loads(json.dumps(d))) == cfg
    hf = LlamaConfig.from_dict(d)  # what SGLang's AutoConfig sees
    assert hf.rope_parameters["rope_theta"] == 5000.0 and hf.draft_vocab_size == DVOCAB
    assert hf.eagle_config["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]


def test_config_defaults_and_rope_sources():
    smol = SimpleNamespace(
        hidden_size=576,
        num_attention_heads=9,
        num_key_value_heads=3,
        num_hidden_layers=30,
        intermediate_size=1536,
        rms_norm_eps=1e-5,
        rope_theta=100000.0,
        rope_scaling=None,
        max_position_embeddings=8192,
        hidden_act="silu",
        vocab_size=49152,
        torch_dtype="bfloat16",
    )  # transformers-4 style attributes
    cfg = Eagle3Config.from_target(smol, draft_vocab_size=8192)
    assert cfg.aux_layer_ids == [1, 14, 26] and cfg.head_dim == 64 and cfg.torch_dtype == "bfloat16"
    assert cfg.rope_theta == 100000.0 and cfg.rope_scaling is None
    assert Eagle3Config.from_target(smol, 8192, aux_layer_ids=[1, 14, 26]).aux_layer_ids == [1, 14, 26]
    with pytest.raises(ValueError):
        Eagle3Config.from_target(smol, 8192, aux_layer_ids=[1, 14, 30])
    v5 = {**cfg.to_hf_dict(), "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0}}
    del v5["rope_theta"], v5["rope_scaling"]  # transformers-5 style config.json
    assert Eagle3Config.from_hf_dict(v5) == cfg
    del v5["eagle_config"]  # the aux layers cannot be guessed without the target's depth
    with pytest.raises(DrafterCheckpointError, match="eagle_aux_hidden_state_layer_ids"):
        Eagle3Config.from_hf_dict(v5)


@pytest.mark.parametrize(
    "rope",
    [None, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}],
)
def test_rope_matches_transformers(rope):
    target = tiny_target(rope_parameters={"rope_type": "default", "rope_theta": 5000.0, **(rope or {})})
    cfg = Eagle3Config.from_target(target, DVOCAB)
    assert cfg.rope_scaling == rope and cfg.rope_theta == 5000.0
    pos = torch.arange(200).view(2, 100)
    cos, sin = Eagle3Drafter(cfg).rope(pos, torch.float32)
    ref_cos, ref_sin = LlamaRotaryEmbedding(target)(torch.zeros(1), pos)
    torch.testing.assert_close(cos, ref_cos)
    torch.testing.assert_close(sin, ref_sin)


def test_state_dict_names_and_shapes():
    drafter = tiny_drafter()
    sd = drafter.state_dict()
    assert {k: tuple(v.shape) for k, v in sd.items()} == EXPECTED_SHAPES
    assert sd["d2t"].dtype == torch.int64 and sd["t2d"].dtype == torch.bool
    assert set(dict(drafter.named_parameters())) | set(dict(drafter.named_buffers())) == set(EXPECTED_SHAPES)


def test_save_load_round_trip_bit_exact(tmp_path):
    for dtype in (torch.float32, torch.bfloat16):
        drafter = tiny_drafter().to(dtype)
        drafter.set_vocab_mapping(*vocab_mapping_from_counts(torch.randint(0, 50, (VOCAB,)), DVOCAB))
        save_drafter(drafter, drafter.config, tmp_path / str(dtype))
        loaded, cfg = load_drafter(tmp_path / str(dtype))
        assert cfg.to_hf_dict() == {**drafter.config.to_hf_dict(), "torch_dtype": str(dtype)[6:]}
        assert json.loads((tmp_path / str(dtype) / "config.json").read_text()) == cfg.to_hf_dict()
        a, b = drafter.state_dict(), loaded.state_dict()
        assert a.keys() == b.keys() == load_file(tmp_path / str(dtype) / "model.safetensors").keys()
        for k in a:
            assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k
    loaded, cfg = load_drafter(tmp_path / str(torch.float32), dtype=torch.bfloat16)
    assert loaded.fc.weight.dtype == torch.bfloat16 and loaded.d2t.dtype == torch.int64
    assert cfg.torch_dtype == "bfloat16"


@pytest.mark.parametrize(
    "edit, kind, key, want, found",
    [
        ("rename", "missing", "midlayer.hidden_norm.weight", (H,), None),
        ("extra", "unexpected", "embed_tokens.weight", None, (VOCAB, H)),
        ("shape", "wrongly shaped", "fc.weight", (H, 3 * H), (H, 2 * H)),
    ],
)
def test_load_rejects_bad_checkpoint(tmp_path, edit, kind, key, want, found):
    save_drafter(tiny_drafter(), tiny_drafter().config, tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    if edit == "rename":
        tensors["midlayer.hidden_norm.weights"] = tensors.pop(key)
    elif edit == "extra":
        tensors[key] = torch.zeros(VOCAB, H)
    else:
        tensors[key] = torch.zeros(H, 2 * H)
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(DrafterCheckpointError) as err:
        load_drafter(tmp_path)
    assert isinstance(err.value, ValueError)
    assert f"{kind} key {key!r}: expected shape {want}, found {found}" in str(err.value)


def reference_forward(d: Eagle3Drafter, ids: torch.Tensor, aux: torch.Tensor):
    """Plain, cache-free restatement of SGLang's LlamaForCausalLMEagle3 forward."""
    t = ids.shape[1]
    rms = lambda x, norm: norm.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)  # noqa: E731
    hidden = aux @ d.fc.weight.T
    layer, att = d.midlayer, d.midlayer.self_attn
    x = torch.cat([rms(d.embed(ids), layer.input_layernorm), rms(hidden, layer.hidden_norm)], -1)
    heads = lambda w, n: (x @ w.T).view(2, t, n, HD).transpose(1, 2)  # noqa: E731
    q, k, v = heads(att.q_proj.weight, HEADS), heads(att.k_proj.weight, KV), heads(att.v_proj.weight, KV)
    cos, sin = LlamaRotaryEmbedding(tiny_target())(x, torch.arange(t).expand(2, t))
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    k, v = k.repeat_interleave(HEADS // KV, 1), v.repeat_interleave(HEADS // KV, 1)
    scores = (q @ k.transpose(-1, -2)) / HD**0.5 + torch.full((t, t), float("-inf")).triu(1)
    h = hidden + (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, t, H) @ att.o_proj.weight.T
    m = rms(h, layer.post_attention_layernorm)
    mlp = layer.mlp
    act = torch.nn.functional.silu(m @ mlp.gate_proj.weight.T) * (m @ mlp.up_proj.weight.T)
    out = h + act @ mlp.down_proj.weight.T
    return rms(out, d.norm) @ d.lm_head.weight.T, out


@torch.no_grad()
def test_forward_matches_reference_and_incremental_cache():
    torch.manual_seed(0)
    drafter = tiny_drafter()
    ids, aux = torch.randint(0, VOCAB, (2, 9)), torch.randn(2, 9, 3 * H)
    pos = torch.arange(9).expand(2, 9)
    logits, out = drafter(drafter.embed(ids), aux, pos)
    assert logits.shape == (2, 9, DVOCAB) and out.shape == (2, 9, H)
    ref_logits, ref_out = reference_forward(drafter, ids, aux)
    torch.testing.assert_close(logits, ref_logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out, ref_out, atol=1e-4, rtol=1e-4)
    fused_logits, _ = drafter(drafter.embed(ids), drafter.fuse(aux), pos)
    torch.testing.assert_close(fused_logits, logits, atol=1e-5, rtol=0)

    cache, steps = DrafterCache(), []
    for a, b in [(0, 4), (4, 5), (5, 6), (6, 9)]:
        step_logits, step_out = drafter(drafter.embed(ids[:, a:b]), aux[:, a:b], pos[:, a:b], cache)
        assert cache.length == b
        steps.append((step_logits, step_out))
    torch.testing.assert_close(torch.cat([s[0] for s in steps], 1), logits, atol=1e-4, rtol=0)
    torch.testing.assert_close(torch.cat([s[1] for s in steps], 1), out, atol=1e-4, rtol=0)


@torch.no_grad()
def test_cache_crop_rolls_back():
    torch.manual_seed(1)
    drafter = tiny_drafter()
    ids, aux = torch.randint(0, VOCAB, (2, 8)), torch.randn(2, 8, 3 * H)
    pos = torch.arange(8).expand(2, 8)
    full_logits, _ = drafter(drafter.embed(ids), aux, pos)
    cache = DrafterCache()
    drafter(drafter.embed(ids[:, :5]), aux[:, :5], pos[:, :5], cache)
    wrong = torch.randint(0, VOCAB, (2, 3))  # rejected draft continuation
    drafter(drafter.embed(wrong), torch.randn(2, 3, 3 * H), pos[:, 5:], cache)
    assert cache.length == 8
    cache.crop(5)
    assert cache.length == 5 and cache.k.shape == (2, KV, 5, HD) and cache.v.shape == (2, KV, 5, HD)
    logits, _ = drafter(drafter.embed(ids[:, 5:]), aux[:, 5:], pos[:, 5:], cache)
    torch.testing.assert_close(logits, full_logits[:, 5:], atol=1e-4, rtol=0)
    with pytest.raises(ValueError):
        cache.crop(9)
    cache.crop(0)
    assert cache.length == 0


def test_vocab_mapping_from_counts_and_draft_to_target():
    counts = torch.zeros(VOCAB, dtype=torch.long)
    top = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(0))[:DVOCAB]
    counts[top] = torch.arange(DVOCAB) + 10
    counts[top[0]] = 1  # least frequent of the chosen still beats the zero-count rest
    d2t, t2d = vocab_mapping_from_counts(counts, DVOCAB)
    chosen = top.sort().values
    assert d2t.dtype == torch.int64 and t2d.dtype == torch.bool and d2t.shape == (DVOCAB,) and t2d.shape == (VOCAB,)
    assert torch.equal(torch.arange(DVOCAB) + d2t, chosen)
    assert torch.equal(t2d.nonzero().flatten(), chosen)
    drafter = tiny_drafter()
    drafter.set_vocab_mapping(d2t, t2d)
    assert torch.equal(drafter.draft_to_target(torch.tensor([[0, 5], [DVOCAB - 1, 7]])), chosen[torch.tensor([[0, 5], [DVOCAB - 1, 7]])])
    d2t_ties, _ = vocab_mapping_from_counts(torch.ones(VOCAB), 4)  # ties resolve to the lowest ids
    assert torch.equal(d2t_ties, torch.zeros(4, dtype=torch.long))


def test_random_drafter_is_seeded_and_maps_first_ids():
    a, b, c = (random_drafter(tiny_target(), DVOCAB, seed=s) for s in (3, 3, 4))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.fc.weight, c.fc.weight)
    assert torch.equal(a.d2t, torch.zeros(DVOCAB, dtype=torch.long))
    assert torch.equal(a.t2d, torch.arange(VOCAB) < DVOCAB)
    with pytest.raises(RuntimeError):
        a.embed(torch.tensor([[1]]))
