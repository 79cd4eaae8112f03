"""Weight-only int8: close to the bf16 layer, row-invariant, and speculative decoding stays lossless on it."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from models.eagle3 import load_drafter
from models.engine import Engine
from models.quantize import Int8Linear, quantize_int8, with_weights
from models.session import GenerationStats

QUESTIONS = ["How much does it cost to check a bag?", "List three colors and explain why you like them."]


def test_an_int8_layer_is_close_to_its_float_layer_and_each_row_is_its_own():
    torch.manual_seed(0)
    linear = nn.Linear(576, 1536, bias=True)
    q = Int8Linear(linear)
    x = torch.randn(16, 576, dtype=torch.bfloat16)
    want = linear(x.float())
    got = q(x)
    assert q.qweight.dtype == torch.int8 and got.dtype == torch.bfloat16
    assert (got.float() - want).norm() / want.norm() < 0.02
    for rows in range(1, 17):
        assert torch.equal(q(x[:rows]), got[:rows])  # bit for bit: a verify forward equals decoding alone
    assert torch.equal(q(x[None, 3:5]), got[None, 3:5])


def test_quantize_swaps_every_linear_and_rejects_unknown_weights():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 4)))
    quantize_int8(model)
    assert [type(m) for m in model.modules() if isinstance(m, nn.Linear | Int8Linear)] == [Int8Linear, Int8Linear]
    with pytest.raises(ValueError, match="bf16, int8"):
        with_weights(model, "int4")


@pytest.fixture(scope="module")
def int8_engines(stages):
    from models.assets import default_drafter_dir

    model = quantize_int8(copy.deepcopy(stages.llm.engine.model))
    tokenizer = stages.llm.engine.tokenizer
    drafter = quantize_int8(load_drafter(default_drafter_dir())[0])
    return Engine(model, tokenizer), Engine(model, tokenizer, drafter, draft_tokens=4, min_draft_confidence=0.6)


@pytest.mark.parametrize("question", QUESTIONS)
def test_speculative_decoding_of_the_int8_model_equals_its_plain_greedy(int8_engines, question):
    plain, spec = int8_engines
    prompt = plain.encode_chat([{"role": "user", "content": question}])
    want = list(plain.generate(plain.new_session(), prompt, 40))
    stats = GenerationStats()
    got = list(spec.generate(spec.new_session(), prompt, 40, stats=stats))
    assert got == want and stats.drafted_tokens > 0
    assert plain.tokenizer.decode(want, skip_special_tokens=True).strip()
