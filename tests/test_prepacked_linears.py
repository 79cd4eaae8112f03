"""Linears whose bf16 weights are reordered once for oneDNN: the same bits as `F.linear`, never a stale copy."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from models.engine import Engine
from models.invariance import RowStableLinear, prepack_linears, prepackable


def stable_linear(fan_in: int, fan_out: int, bias: bool = False) -> RowStableLinear:
    torch.manual_seed(0)
    linear = torch.nn.Linear(fan_in, fan_out, bias=bias).to(torch.bfloat16)
    linear.__class__ = RowStableLinear
    return linear


def reference(linear: RowStableLinear, x: torch.Tensor) -> torch.Tensor:
    """What the unpacked layer gives: F.linear, a single row run as two."""
    rows = x.reshape(-1, x.shape[-1])
    return F.linear(rows.expand(2, -1) if rows.shape[0] == 1 else rows, linear.weight, linear.bias)[: rows.shape[0]]


def test_this_machine_prepacks_bf16_linears():
    """The speed the docs report depends on it; a CPU without oneDNN's bf16 kernels falls back to F.linear."""
    assert prepackable(torch.zeros(2, 2, dtype=torch.bfloat16))
    assert not prepackable(torch.zeros(2, 2))


@pytest.mark.parametrize(("fan_in", "fan_out", "bias"), [(576, 576, False), (1536, 576, False), (576, 49152, False), (576, 192, True)])
def test_a_prepacked_linear_gives_the_unpacked_bits_at_any_row_count(fan_in, fan_out, bias):
    linear = stable_linear(fan_in, fan_out, bias)
    assert linear.prepack()
    x = torch.randn(320, fan_in, dtype=torch.bfloat16)
    with torch.inference_mode():
        for rows in [*range(1, 34), 64, 320]:  # decode, verify and packed batches, then prefills
            assert torch.equal(linear(x[:rows]), reference(linear, x[:rows])), rows
        assert linear(x[:5][None]).shape == (1, 5, fan_out)


def test_a_weight_written_after_packing_is_never_served_from_the_stale_copy():
    linear = stable_linear(576, 576)
    assert linear.prepack()
    x = torch.randn(4, 576, dtype=torch.bfloat16)
    with torch.no_grad():
        linear.weight.mul_(2)  # an optimizer step writes in place
    assert torch.equal(linear(x), reference(linear, x))
    linear.weight = torch.nn.Parameter(torch.randn(576, 576, dtype=torch.bfloat16))
    assert torch.equal(linear(x), reference(linear, x))
    assert linear.prepack() and torch.equal(linear(x), reference(linear, x))


def test_a_prepacked_linear_still_trains():
    """Autograd never goes through the packed copy: gradients reach the weight, and the step is seen at once."""
    linear = stable_linear(576, 192)
    assert linear.prepack()
    x = torch.randn(4, 576, dtype=torch.bfloat16)
    linear(x).float().square().sum().backward()
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0
    with torch.no_grad():
        linear.weight -= linear.weight.grad
        assert torch.equal(linear(x), reference(linear, x))


def test_a_copy_leaves_the_packed_weight_behind_and_packs_again():
    linear = stable_linear(576, 576)
    assert linear.prepack()
    twin = copy.deepcopy(linear)
    assert twin.packed is None and linear.packed is not None
    x = torch.randn(3, 576, dtype=torch.bfloat16)
    assert torch.equal(twin(x), linear(x))
    assert prepack_linears(twin) is twin and twin.packed is not None


def test_fp32_linears_stay_unpacked():
    linear = torch.nn.Linear(8, 8)
    prepack_linears(torch.nn.Sequential(linear))
    assert isinstance(linear, RowStableLinear) and linear.packed is None


def test_the_engine_serves_prepacked_weights_and_the_same_logits_as_without(stages):
    engine = Engine(stages.llm.engine.model, stages.llm.engine.tokenizer)
    linears = [m for m in engine.model.modules() if isinstance(m, RowStableLinear)]
    assert len(linears) == 30 * 7 + 1 and all(m.packed is not None for m in linears)
    prompt = engine.encode_chat([{"role": "user", "content": "How much does it cost to check a bag?"}])

    def logits() -> torch.Tensor:
        session = engine.new_session()
        with torch.inference_mode():
            first, _ = session.prefill(engine.model, prompt)
            decoded = session.forward(engine.model, [int(first.argmax())])
            return torch.cat([first[None], decoded, session.forward(engine.model, [11, 12, 13])])

    packed = logits()
    saved = [(m.packed, m.packed_for) for m in linears]
    try:
        for m in linears:
            m.packed = None
        assert torch.equal(logits(), packed)
    finally:
        for m, (weights, key) in zip(linears, saved):
            m.packed, m.packed_for = weights, key
