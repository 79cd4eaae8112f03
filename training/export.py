"""`talkline export`: the tuned model as a plain HF safetensors folder (weights merged, tokenizer) that SGLang serves."""

from __future__ import annotations

import shutil
from pathlib import Path

from models.assets import llm_dir


def export(out: Path, model: str = "tuned") -> Path:
    """Copy the resolved model folder (base + adapter merged, see models.assets.llm_dir) to `out`."""
    source = llm_dir(model)
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(source, out, ignore=shutil.ignore_patterns("*.tmp*"))
    return out
