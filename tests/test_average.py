"""`talkline train average`: two LoRA adapters as one whose change to each weight is the weighted mean of theirs."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from models.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS, lora_deltas
from training.average import average_adapters

MODULES = ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj")


def _adapter(path, r: int, alpha: int, seed: int, modules=MODULES, rslora: bool = False):
    g = torch.Generator().manual_seed(seed)
    weights = {}
    for module in modules:
        weights[f"base_model.model.{module}.lora_A.weight"] = torch.randn(r, 12, generator=g)
        weights[f"base_model.model.{module}.lora_B.weight"] = torch.randn(8, r, generator=g)
    path.mkdir()
    save_file(weights, str(path / ADAPTER_WEIGHTS))
    config = {"peft_type": "LORA", "r": r, "lora_alpha": alpha, "use_rslora": rslora, "base_model_name_or_path": "base"}
    (path / ADAPTER_CONFIG).write_text(json.dumps(config))
    return path


def test_the_average_changes_each_weight_by_the_weighted_mean_of_the_two_changes(tmp_path):
    first = _adapter(tmp_path / "a", r=4, alpha=8, seed=1)
    second = _adapter(tmp_path / "b", r=2, alpha=16, seed=2, rslora=True)
    out = average_adapters(first, second, 0.25, tmp_path / "avg")
    one, two, mean = lora_deltas(first), lora_deltas(second), lora_deltas(out)
    assert set(mean) == {f"{m}.weight" for m in MODULES}
    for name, delta in mean.items():
        torch.testing.assert_close(delta, 0.25 * one[name] + 0.75 * two[name], rtol=1e-5, atol=1e-5)
    assert json.loads((out / ADAPTER_CONFIG).read_text())["r"] == 6


def test_adapters_of_other_modules_or_a_weight_outside_zero_to_one_are_refused(tmp_path):
    first = _adapter(tmp_path / "a", r=4, alpha=8, seed=1)
    other = _adapter(tmp_path / "b", r=4, alpha=8, seed=2, modules=MODULES[:1])
    with pytest.raises(ValueError, match="different modules"):
        average_adapters(first, other, 0.5, tmp_path / "avg")
    with pytest.raises(ValueError, match="between 0 and 1"):
        average_adapters(first, first, 1.0, tmp_path / "avg")
