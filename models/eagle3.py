"""EAGLE3 draft model in SGLang's `LlamaForCausalLMEagle3` checkpoint format (as written by SpecForge)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from transformers import LlamaConfig
from transformers.activations import ACT2FN
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


def default_aux_layer_ids(n_layers: int) -> list[int]:
    """SGLang's default capture: the hidden states entering layers 2, L//2 and L-3, as output-of-layer ids."""
    return [1, n_layers // 2 - 1, n_layers - 4]


class DrafterCheckpointError(ValueError):
    """A drafter checkpoint does not match the tensors its config implies."""


def _rope_of(cfg: Any) -> tuple[float, dict | None]:
    """(rope_theta, rope_scaling or None for plain RoPE) from a transformers 4 or 5 config."""
    params = dict(getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {})
    theta = params.pop("rope_theta", None) or getattr(cfg, "rope_theta", None) or 10000.0
    if params.get("rope_type", params.get("type", "default")) == "default":
        return float(theta), None
    return float(theta), params


def _target_fields(cfg: Any) -> dict[str, Any]:
    """Eagle3Config fields shared with a Llama config (a transformers config or a SimpleNamespace of config.json)."""
    heads = cfg.num_attention_heads
    theta, scaling = _rope_of(cfg)
    dtype = getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None) or "float32"
    return {
        **{
            k: getattr(cfg, k)
            for k in (
                "hidden_size",
                "num_attention_heads",
                "intermediate_size",
                "rms_norm_eps",
                "max_position_embeddings",
                "hidden_act",
                "vocab_size",
            )
        },
        "num_key_value_heads": getattr(cfg, "num_key_value_heads", None) or heads,
        "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // heads,
        "rope_theta": theta,
        "rope_scaling": scaling,
        "torch_dtype": str(dtype).removeprefix("torch."),
    }


@dataclass
class Eagle3Config:
    """Drafter hyper-parameters; `to_hf_dict` is the config.json SGLang reads."""

    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None
    max_position_embeddings: int
    hidden_act: str
    vocab_size: int
    draft_vocab_size: int
    # id i = output of target decoder layer i (HF hidden_states[i + 1]); SGLang captures the input of layer i + 1.
    aux_layer_ids: list[int]
    torch_dtype: str

    @classmethod
    def from_target(cls, target_config: Any, draft_vocab_size: int, aux_layer_ids: list[int] | None = None) -> Eagle3Config:
        """Drafter config for a HF Llama target; aux ids default to the states entering layers 2, L//2, L-3."""
        n_layers = target_config.num_hidden_layers
        aux = list(aux_layer_ids) if aux_layer_ids is not None else default_aux_layer_ids(n_layers)
        if len(aux) != 3 or not all(0 <= i < n_layers for i in aux):
            raise ValueError(f"need 3 aux layer ids in [0, {n_layers}), got {aux}")
        if not 0 < draft_vocab_size <= target_config.vocab_size:
            raise ValueError(f"draft_vocab_size {draft_vocab_size} not in (0, {target_config.vocab_size}]")
        return cls(**_target_fields(target_config), draft_vocab_size=draft_vocab_size, aux_layer_ids=aux)

    def to_hf_dict(self) -> dict[str, Any]:
        """config.json contents in SGLang/SpecForge's LlamaForCausalLMEagle3 format."""
        fields = asdict(self)
        aux = fields.pop("aux_layer_ids")
        return {
            "architectures": ["LlamaForCausalLMEagle3"],
            "model_type": "llama",
            "num_hidden_layers": 1,
            **fields,
            "tie_word_embeddings": False,
            "eagle_config": {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": aux},
        }

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Eagle3Config:
        """Parse a config.json dict as written by `to_hf_dict`."""
        if d.get("num_hidden_layers", 1) != 1 or d.get("tie_word_embeddings", False):
            raise DrafterCheckpointError("only single-layer drafters with an untied lm_head are supported")
        aux = (d.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        if not aux:  # SGLang's fallback depends on the target's depth, which this file does not know
            raise DrafterCheckpointError("config.json lacks eagle_config.eagle_aux_hidden_state_layer_ids")
        return cls(**_target_fields(SimpleNamespace(**d)), draft_vocab_size=d["draft_vocab_size"], aux_layer_ids=list(aux))


@dataclass
class DrafterCache:
    """Per-sequence KV cache of the drafter's one attention layer: k/v [B, kv_heads, S, head_dim]."""

    k: Tensor | None = None
    v: Tensor | None = None

    @property
    def length(self) -> int:
        """Number of cached positions."""
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add new positions; returns the full cached k, v."""
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def crop(self, n: int) -> None:
        """Keep only the first n positions (roll back rejected drafts)."""
        if not 0 <= n <= self.length:
            raise ValueError(f"cannot crop cache of length {self.length} to {n}")
        if self.k is not None:
            self.k, self.v = self.k[:, :, :n], self.v[:, :, :n]


class RMSNorm(nn.Module):
    """Llama RMSNorm (normalises in float32)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Eagle3Attention(nn.Module):
    """GQA causal self-attention whose q/k/v read the 2*hidden concat of embedding and hidden state."""

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(2 * cfg.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(2 * cfg.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(2 * cfg.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, cfg.hidden_size, bias=False)

    def project(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Rotated queries [B, nh, T, hd] and keys [B, nkv, T, hd], and values, for inputs x [B, T, 2H]."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin, v

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, cache: DrafterCache | None) -> Tensor:
        b, t, _ = x.shape
        q, k, v = self.project(x, cos, sin)
        if cache is not None:
            k, v = cache.append(k, v)  # [B, nkv, S, hd]
        s = k.shape[2]
        mask = torch.ones(t, s, dtype=torch.bool, device=x.device).tril(s - t)  # new queries are the last t positions
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))  # [B, T, H]


class Eagle3MLP(nn.Module):
    """Llama gated MLP."""

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.act = ACT2FN[cfg.hidden_act]

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class Eagle3DecoderLayer(nn.Module):
    """SGLang's EAGLE3 `midlayer`: attention over [norm(embeds), norm(hidden)], residual = hidden."""

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        self.self_attn = Eagle3Attention(cfg)
        self.mlp = Eagle3MLP(cfg)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, embeds: Tensor, hidden: Tensor, cos: Tensor, sin: Tensor, cache: DrafterCache | None) -> Tensor:
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], dim=-1)  # [B, T, 2H]
        h = hidden + self.self_attn(x, cos, sin, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class Eagle3Drafter(nn.Module):
    """EAGLE3 drafter; the token embedding is borrowed from the target and is not part of the state_dict."""

    def __init__(self, config: Eagle3Config, embed_tokens: nn.Module | Tensor | None = None) -> None:
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.fc = nn.Linear(3 * h, h, bias=False)
        self.midlayer = Eagle3DecoderLayer(config)
        self.norm = RMSNorm(h, config.rms_norm_eps)
        self.lm_head = nn.Linear(h, config.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(config.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(config.vocab_size, dtype=torch.bool))
        self._inv_freq, self._rope_scale = self._rope_init(config)  # plain attrs: no dtype casts, not saved
        self.__dict__["_embed"] = embed_tokens  # bypass nn.Module registration so it is never saved

    @staticmethod
    def _rope_init(cfg: Eagle3Config) -> tuple[Tensor, float]:
        if cfg.rope_scaling is None:
            return 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float) / cfg.head_dim)), 1.0
        hf = LlamaConfig.from_dict(cfg.to_hf_dict())
        return ROPE_INIT_FUNCTIONS[hf.rope_parameters["rope_type"]](hf)

    def set_embedding(self, embed_tokens: nn.Module | Tensor) -> None:
        """Share the target's token embedding (module or [vocab, H] weight)."""
        self.__dict__["_embed"] = embed_tokens

    def embed(self, input_ids: Tensor) -> Tensor:
        """Target-vocab ids [B, T] -> embeddings [B, T, H] via the shared target embedding."""
        e = self.__dict__["_embed"]
        if e is None:
            raise RuntimeError("no token embedding set; call set_embedding(target.get_input_embeddings())")
        return e(input_ids) if isinstance(e, nn.Module) else F.embedding(input_ids, e)

    def rope(self, position_ids: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """cos, sin [B, T, head_dim] for positions [B, T]."""
        if self._inv_freq.device != position_ids.device:
            self._inv_freq = self._inv_freq.to(position_ids.device)
        freqs = position_ids[..., None].float() * self._inv_freq  # [B, T, hd/2]
        emb = torch.cat([freqs, freqs], dim=-1)
        return (emb.cos() * self._rope_scale).to(dtype), (emb.sin() * self._rope_scale).to(dtype)

    def fuse(self, aux_hidden: Tensor) -> Tensor:
        """Concatenated target aux hidden states [B, T, 3H] -> fused hidden [B, T, H]."""
        return self.fc(aux_hidden)

    def forward(
        self, input_embeds: Tensor, hidden: Tensor, position_ids: Tensor, cache: DrafterCache | None = None
    ) -> tuple[Tensor, Tensor]:
        """(draft logits [B, T, Vd], pre-norm hidden [B, T, H]); hidden may be aux [B, T, 3H] (then fused first)."""
        if hidden.shape[-1] == 3 * self.config.hidden_size:
            hidden = self.fuse(hidden)
        cos, sin = self.rope(position_ids, hidden.dtype)
        out = self.midlayer(input_embeds, hidden, cos, sin, cache)  # [B, T, H]
        return self.lm_head(self.norm(out)), out

    def draft_to_target(self, ids: Tensor) -> Tensor:
        """Draft-vocab ids -> target-vocab ids (id + d2t[id])."""
        return ids + self.d2t[ids]

    def set_vocab_mapping(self, d2t: Tensor, t2d: Tensor) -> None:
        """Install a draft<->target vocab mapping, e.g. from `vocab_mapping_from_counts`."""
        if d2t.shape != self.d2t.shape or t2d.shape != self.t2d.shape:
            raise ValueError(f"mapping shapes {tuple(d2t.shape)}, {tuple(t2d.shape)} do not fit this drafter")
        self.d2t.copy_(d2t)
        self.t2d.copy_(t2d)


def _mapping_from_ids(ids: Tensor, target_vocab_size: int) -> tuple[Tensor, Tensor]:
    """Ascending target ids [N] -> (d2t int64 [N], t2d bool [target_vocab])."""
    d2t = ids.long() - torch.arange(ids.numel())
    t2d = torch.zeros(target_vocab_size, dtype=torch.bool)
    t2d[ids] = True
    return d2t, t2d


def vocab_mapping_from_counts(counts: Tensor, draft_vocab_size: int) -> tuple[Tensor, Tensor]:
    """SpecForge-style mapping: the N most frequent target ids (ties -> lower id), sorted ascending."""
    order = torch.sort(counts, descending=True, stable=True).indices
    return _mapping_from_ids(order[:draft_vocab_size].sort().values, counts.numel())


def random_drafter(target_config: Any, draft_vocab_size: int, seed: int) -> Eagle3Drafter:
    """Randomly initialised float32 drafter mapping draft ids to the first `draft_vocab_size` target ids."""
    cfg = Eagle3Config.from_target(target_config, draft_vocab_size)
    drafter = Eagle3Drafter(cfg)
    gen = torch.Generator().manual_seed(seed)
    std = getattr(target_config, "initializer_range", 0.02)
    with torch.no_grad():
        for module in drafter.modules():
            if isinstance(module, nn.Linear):
                module.weight.normal_(0.0, std, generator=gen)
    drafter.set_vocab_mapping(*_mapping_from_ids(torch.arange(draft_vocab_size), cfg.vocab_size))
    return drafter


def save_drafter(drafter: Eagle3Drafter, config: Eagle3Config, path: str | Path) -> None:
    """Write config.json (torch_dtype = the weights' dtype) and model.safetensors."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = replace(config, torch_dtype=str(drafter.fc.weight.dtype).removeprefix("torch."))
    (path / CONFIG_NAME).write_text(json.dumps(config.to_hf_dict(), indent=2) + "\n")
    tensors = {k: v.detach().contiguous() for k, v in drafter.state_dict().items()}
    save_file(tensors, str(path / WEIGHTS_NAME), metadata={"format": "pt"})


def load_drafter(path: str | Path, dtype: torch.dtype | None = None) -> tuple[Eagle3Drafter, Eagle3Config]:
    """Strictly load a drafter; float weights keep their stored dtype unless `dtype` is given."""
    path = Path(path)
    config = Eagle3Config.from_hf_dict(json.loads((path / CONFIG_NAME).read_text()))
    tensors = load_file(str(path / WEIGHTS_NAME))
    drafter = Eagle3Drafter(config)
    expected = drafter.state_dict()
    for key in sorted(expected.keys() | tensors.keys()):
        want = tuple(expected[key].shape) if key in expected else None
        found = tuple(tensors[key].shape) if key in tensors else None
        if want != found:
            kind = "missing" if found is None else "unexpected" if want is None else "wrongly shaped"
            raise DrafterCheckpointError(f"{path}: {kind} key {key!r}: expected shape {want}, found {found}")
    drafter.to(dtype or tensors["fc.weight"].dtype)  # casts float tensors only
    drafter.load_state_dict(tensors, strict=True)
    return drafter, replace(config, torch_dtype=str(drafter.fc.weight.dtype).removeprefix("torch."))
