"""Server settings: flags and TALKLINE_* environment variables, in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.stages import ThreadBudget

DEFAULT_PROFILES = Path(__file__).resolve().parent.parent / "profiles"


def _env(name: str, default: str) -> str:
    return os.environ.get(f"TALKLINE_{name}", default)


@dataclass
class Settings:
    host: str = field(default_factory=lambda: _env("HOST", "127.0.0.1"))
    port: int = field(default_factory=lambda: int(_env("PORT", "8000")))
    profiles_dir: Path = field(default_factory=lambda: Path(_env("PROFILES", str(DEFAULT_PROFILES))))
    db_url: str = field(default_factory=lambda: _env("DB", "sqlite:///talkline.db"))
    llm: str = field(default_factory=lambda: _env("LLM", "embedded"))
    llm_url: str | None = field(default_factory=lambda: _env("LLM_URL", "") or None)
    llm_timeout: float = field(default_factory=lambda: float(_env("LLM_TIMEOUT", "10")))
    model_path: Path | None = None
    threads: ThreadBudget = ThreadBudget()
    warmup: bool = True
    max_frame_bytes: int = 64 * 1024
