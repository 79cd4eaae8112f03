"""Security headers on every HTTP response, and CORS for the configured origins only."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Everything the page loads comes from this server; the policy makes a stray external request fail loudly.
CONTENT_POLICY = (
    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": CONTENT_POLICY,
    "Permissions-Policy": "microphone=(self), camera=(), geolocation=()",
}
RAW_HEADERS = [(name.lower().encode(), value.encode()) for name, value in HEADERS.items()]


class SecurityHeaders:
    """ASGI middleware: adds HEADERS to each HTTP response that does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in RAW_HEADERS if h[0] not in present)]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def install(app: FastAPI, cors_origins: list[str]) -> None:
    """Security headers on everything; cross-origin reads only from `cors_origins` (none by default)."""
    app.add_middleware(CORSMiddleware, allow_origins=cors_origins, allow_methods=["GET"], allow_headers=["Authorization"])
    app.add_middleware(SecurityHeaders)
