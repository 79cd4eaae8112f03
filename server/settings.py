"""Server settings: flags and TALKLINE_* environment variables, in one place."""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from models.spec_config import SpecConfig
from pipeline.profile import DEFAULT_PROFILES
from pipeline.stages import ThreadBudget


def _env(name: str, default: str) -> str:
    return os.environ.get(f"TALKLINE_{name}", default)


def _env_flag(name: str, default: bool) -> bool:
    """A TALKLINE_* on/off variable: 0, false, no or off turn it off."""
    return _env(name, "1" if default else "0").strip().lower() not in ("0", "false", "no", "off")


def _env_list(name: str) -> list[str]:
    """A comma-separated TALKLINE_* variable as a list, blanks dropped."""
    return [item.strip() for item in _env(name, "").split(",") if item.strip()]


def spec_from_env(spec: bool | None = None, **flags: object) -> SpecConfig | None:
    """Speculative decoding from TALKLINE_SPEC, _DRAFTER, _DRAFT_TOKENS, _MIN_DRAFT_CONFIDENCE and _PROMPT_LOOKUP over
    SpecConfig's defaults, with the flags that were given (not None) on top; None when it is turned off."""
    if not (_env_flag("SPEC", True) if spec is None else spec):
        return None
    env = {
        "drafter": Path(v) if (v := _env("DRAFTER", "")) else None,
        "draft_tokens": int(v) if (v := _env("DRAFT_TOKENS", "")) else None,
        "min_confidence": float(v) if (v := _env("MIN_DRAFT_CONFIDENCE", "")) else None,
        "prompt_lookup": _env_flag("PROMPT_LOOKUP", True) if _env("PROMPT_LOOKUP", "") else None,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    return SpecConfig(**{k: v for k, v in env.items() if v is not None} | given)


def parse_number_profiles(text: str) -> dict[str, str]:
    """'+15551234567=skyways,+15557654321=northbank' -> {number: profile id}."""
    pairs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        number, sep, profile = (s.strip() for s in item.partition("="))
        if not (sep and number and profile):
            raise ValueError(f"TALKLINE_NUMBER_PROFILES: '{item}' is not NUMBER=PROFILE")
        pairs[number] = profile
    return pairs


def parse_ice_servers(text: str) -> list[dict]:
    """TALKLINE_ICE_SERVERS: a JSON list of {urls, username, credential}, as a browser's RTCPeerConnection takes them."""
    if not text.strip():
        return []
    try:
        servers = json.loads(text)
    except ValueError as e:
        raise ValueError(f"TALKLINE_ICE_SERVERS is not JSON: {e}") from None
    for server in servers if isinstance(servers, list) else [None]:
        urls = server.get("urls") if isinstance(server, dict) else None
        if not (isinstance(urls, str) or (isinstance(urls, list) and urls and all(isinstance(u, str) for u in urls))):
            example = '[{"urls": "turn:HOST:3478", "username": "U", "credential": "P"}]'
            raise ValueError(f"TALKLINE_ICE_SERVERS must be a JSON list like {example}")
        if set(server) - {"urls", "username", "credential"}:
            raise ValueError(f"TALKLINE_ICE_SERVERS: unknown keys {sorted(set(server) - {'urls', 'username', 'credential'})}")
    return servers


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
    llm_weights: str = field(default_factory=lambda: _env("LLM_WEIGHTS", "bf16"))  # int8: weight-only (models/quantize.py)
    llm_batching: bool = field(default_factory=lambda: _env_flag("LLM_BATCHING", True))  # models/batching.py
    llm_slots: int = field(default_factory=lambda: int(_env("LLM_SLOTS", "0")))  # models/forward_gate.py; 0: unscheduled
    spec: SpecConfig | None = field(default_factory=lambda: spec_from_env())  # None: plain greedy decoding
    threads: ThreadBudget = ThreadBudget()
    asr_window_s: float = field(default_factory=lambda: float(_env("ASR_WINDOW_S", "10")))  # 30: Whisper's own padding
    warmup: bool = True
    max_frame_bytes: int = field(default_factory=lambda: int(_env("MAX_FRAME_BYTES", str(64 * 1024))))
    max_text_chars: int = field(default_factory=lambda: int(_env("MAX_TEXT_CHARS", "2000")))
    max_calls: int = field(default_factory=lambda: int(_env("MAX_CALLS", "8")))
    max_call_s: float = field(default_factory=lambda: float(_env("MAX_CALL_S", "1800")))
    drain_s: float = field(default_factory=lambda: float(_env("DRAIN_S", "300")))  # SIGTERM: how long running calls may go on
    heartbeat_s: float = field(default_factory=lambda: float(_env("HEARTBEAT_S", "5")))  # liveness in a shared database
    max_frames_per_s: int = field(default_factory=lambda: int(_env("MAX_FRAMES_PER_S", "200")))
    connections_per_minute: int = field(default_factory=lambda: int(_env("CONNECTIONS_PER_MINUTE", "30")))  # per IP; 0: no limit
    api_keys: list[str] = field(default_factory=lambda: _env_list("API_KEYS"))
    api_keys_file: Path | None = field(default_factory=lambda: Path(f) if (f := _env("API_KEYS_FILE", "")) else None)
    carrier_secret: str | None = field(default_factory=lambda: _env("CARRIER_SECRET", "") or None)
    cors_origins: list[str] = field(default_factory=lambda: _env_list("CORS_ORIGINS"))
    public_url: str | None = field(default_factory=lambda: _env("PUBLIC_URL", "") or None)
    twilio_auth_token: str | None = field(default_factory=lambda: _env("TWILIO_AUTH_TOKEN", "") or None)
    # call control (transfer, hang-up) on the carriers' REST APIs; the base URLs are for tests and regional endpoints
    twilio_account_sid: str | None = field(default_factory=lambda: _env("TWILIO_ACCOUNT_SID", "") or None)
    twilio_api_base: str = field(default_factory=lambda: _env("TWILIO_API_BASE", "https://api.twilio.com"))
    telnyx_api_key: str | None = field(default_factory=lambda: _env("TELNYX_API_KEY", "") or None)
    telnyx_api_base: str = field(default_factory=lambda: _env("TELNYX_API_BASE", "https://api.telnyx.com"))
    vonage_jwt: str | None = field(default_factory=lambda: _env("VONAGE_JWT", "") or None)
    vonage_api_base: str = field(default_factory=lambda: _env("VONAGE_API_BASE", "https://api.nexmo.com"))
    carrier_api_timeout: float = field(default_factory=lambda: float(_env("CARRIER_API_TIMEOUT", "5")))
    number_profiles: dict[str, str] = field(default_factory=lambda: parse_number_profiles(_env("NUMBER_PROFILES", "")))
    default_profile: str | None = field(default_factory=lambda: _env("DEFAULT_PROFILE", "") or None)
    ice_servers: list[dict] = field(default_factory=lambda: parse_ice_servers(_env("ICE_SERVERS", "")))  # STUN/TURN for WebRTC
    webrtc_connect_s: float = field(default_factory=lambda: float(_env("WEBRTC_CONNECT_S", "30")))  # an unconnected peer is dropped

    def check_phone_routing(self, profile_ids: Collection[str]) -> None:
        """Fill in the default phone profile (first id alphabetically); fail on a number or default that names no profile."""
        self.default_profile = self.default_profile or min(profile_ids)
        unknown = sorted({self.default_profile, *self.number_profiles.values()} - set(profile_ids))
        if unknown:
            raise ValueError(f"TALKLINE_DEFAULT_PROFILE / TALKLINE_NUMBER_PROFILES name unknown profiles: {', '.join(unknown)}")
