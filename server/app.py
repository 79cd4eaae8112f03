"""FastAPI app factory: load and warm the models once, then serve transports, profiles, health and metrics."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from fastapi import FastAPI

from pipeline.llm import EmbeddedLLM, LLMBackend, OpenAICompatLLM
from pipeline.metrics import Metrics
from pipeline.profile import Profile, load_profiles
from pipeline.stages import Stages, load_stages
from pipeline.store import Store
from server import headers
from server.limits import CallSlots
from server.routes import health, page, profiles, twilio_webhook
from server.security import Guard
from server.settings import Settings
from server.transports import browser, telnyx, twilio, vonage, webrtc

log = logging.getLogger(__name__)
STALE_BEATS = 3  # a server that missed this many heartbeats has stopped


@dataclass
class AppState:
    settings: Settings
    profiles: dict[str, Profile]
    stages: Stages
    store: Store
    metrics: Metrics
    guard: Guard
    calls: CallSlots
    peers: set = field(default_factory=set)  # WebRTC calls (webrtc.PeerCall), from their answered offer to their end


async def heartbeat(store: Store, every_s: float) -> None:
    """Keep this server marked live in the database and close the calls of servers that stopped beating (a crash here,
    or another replica's: their calls end as `interrupted`)."""
    while True:
        try:
            await store.run(store.beat)
            if closed := await store.run(store.close_orphans, every_s * STALE_BEATS):
                log.warning("marked %d call(s) of a server that stopped as interrupted", closed)
        except Exception:
            log.exception("heartbeat: the database did not answer")
        await asyncio.sleep(every_s)


def carries_credentials(scope: dict) -> bool:
    """FastAPI traces requests with their query string; one that carries an API key or a carrier secret is not traced."""
    query = scope.get("query_string", b"").decode("latin-1")
    return any(f"{name}=" in query for name in ("token", "secret"))


def build_llm(settings: Settings) -> LLMBackend:
    """The LLM backend named by the settings."""
    if settings.llm == "sglang":
        if not settings.llm_url:
            raise ValueError("--llm sglang needs --llm-url http://HOST:PORT")
        return OpenAICompatLLM(settings.llm_url, timeout=settings.llm_timeout)
    if settings.llm != "embedded":
        raise ValueError(f"unknown LLM backend '{settings.llm}': use 'embedded' or 'sglang'")
    import torch

    from models.engine import Engine

    torch.set_num_threads(settings.threads.llm)
    engine = Engine.load(
        settings.model_path, spec=settings.spec, weights=settings.llm_weights, batching=settings.llm_batching, slots=settings.llm_slots
    )
    return EmbeddedLLM(engine)


def build_stages(settings: Settings, profiles: Iterable[Profile] = ()) -> Stages:
    """The models a server runs, with the end-of-turn models `profiles`' turn rules read."""
    rules = [profile.turn.endpoint_rule() for profile in profiles]
    return load_stages(build_llm(settings), settings.threads, settings.asr_window_s, rules)


def create_app(settings: Settings | None = None, stages: Stages | None = None) -> FastAPI:
    """The app; pass `stages` to share already loaded models (tests, several apps in one process)."""
    settings = settings or Settings()
    profiles_by_id = load_profiles(settings.profiles_dir)
    settings.check_phone_routing(profiles_by_id)
    if not settings.twilio_auth_token:
        log.warning("TALKLINE_TWILIO_AUTH_TOKEN is not set: POST /twilio/voice does not check webhook signatures")
    guard = Guard(settings)
    for line in guard.describe():
        log.warning(line)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loaded = stages or await asyncio.to_thread(build_stages, settings, list(profiles_by_id.values()))
        if settings.warmup and stages is None:
            await loaded.warmup()
        store = Store(settings.db_url, server_id=f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        await store.run(store.beat)
        beating = asyncio.create_task(heartbeat(store, settings.heartbeat_s))
        app.state.talkline = AppState(settings, profiles_by_id, loaded, store, Metrics(), guard, CallSlots(settings.max_calls))
        log.info("Talkline ready: %d profiles, LLM backend %s", len(profiles_by_id), loaded.llm.name)
        yield
        beating.cancel()
        running = [peer.task for peer in app.state.talkline.peers]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await store.run(store.leave)
        store.engine.dispose()
        if stages is None:
            await loaded.aclose()

    app = FastAPI(title="Talkline", lifespan=lifespan, telemetry={"exclude": carries_credentials})
    headers.install(app, settings.cors_origins)
    app.include_router(health.router)
    app.include_router(profiles.router)
    app.include_router(browser.router)
    app.include_router(webrtc.router)
    for phone in (twilio_webhook, twilio, telnyx, vonage):
        app.include_router(phone.router)
    app.include_router(page.router)
    return app
