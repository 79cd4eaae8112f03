"""Who may connect: API keys (loopback clients only without them), the carrier secret, allowed origins, connection rates."""

from __future__ import annotations

import hmac
import logging
import time
from collections import Counter, deque
from dataclasses import dataclass, replace
from ipaddress import ip_address
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from starlette.requests import HTTPConnection

from server.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Denial:
    """Why a connection is refused: the `error` event code, the HTTP status and the WebSocket close code."""

    code: str
    status: int
    close: int
    message: str


UNAUTHORIZED = Denial("unauthorized", 401, 4401, "a valid API key is required: 'Authorization: Bearer KEY' or ?token=KEY")
LOOPBACK_ONLY = Denial("forbidden", 403, 4403, "no API keys are configured: only clients on this machine may connect")
FOREIGN_ORIGIN = Denial("forbidden", 403, 4403, "this origin is not allowed (TALKLINE_CORS_ORIGINS)")
CARRIER_LOOPBACK_ONLY = Denial("forbidden", 403, 4403, "no TALKLINE_CARRIER_SECRET: only clients on this machine may connect")
RATE_LIMITED = Denial("rate_limited", 429, 4429, "too many new connections from this address; retry in a minute")
KEY_QUOTA = Denial("quota_exceeded", 429, 4429, "this API key is at its limit of concurrent calls; end one, or raise its quota (KEY:N)")


class ConnectionRate:
    """New connections per client address over a sliding minute; a limit of 0 allows any number."""

    WINDOW_S = 60.0

    def __init__(self, per_minute: int) -> None:
        self.limit = per_minute
        self.seen: dict[str, deque[float]] = {}
        self._checks = 0

    def allow(self, address: str) -> bool:
        """Count one new connection from `address`; False once it went over the limit this minute."""
        if self.limit <= 0:
            return True
        now = time.monotonic()
        self._checks += 1
        if self._checks % 1024 == 0:  # forget quiet addresses, so the table stays small
            self.seen = {a: q for a, q in self.seen.items() if q and q[-1] > now - self.WINDOW_S}
        recent = self.seen.setdefault(address, deque())
        while recent and recent[0] <= now - self.WINDOW_S:
            recent.popleft()
        if len(recent) >= self.limit:
            return False
        recent.append(now)
        return True

    def refund(self, address: str) -> None:
        """Take back the newest count of `address`: the connection turned out to be authenticated."""
        if self.limit > 0 and (recent := self.seen.get(address)):
            recent.pop()


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8 and ::1 (and IPv4-mapped loopback)."""
    try:
        address = ip_address(host or "")
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def matches(given: str | None, secrets: list[str]) -> bool:
    """Constant-time comparison of `given` against every secret."""
    found = False
    for secret in secrets:
        found |= hmac.compare_digest((given or "").encode(), secret.encode())
    return bool(given) and found


def bearer_token(conn: HTTPConnection) -> str | None:
    """The key from `Authorization: Bearer KEY`, else from ?token=KEY (browsers cannot set WebSocket headers)."""
    scheme, _, token = conn.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return conn.query_params.get("token")


def parse_key(entry: str) -> tuple[str, int | None]:
    """'KEY' -> (KEY, None); 'KEY:N' -> (KEY, N): at most N concurrent calls on that key."""
    key, sep, quota = entry.strip().rpartition(":")
    if sep and key and quota.isdigit():
        return key, int(quota)
    return entry.strip(), None


def load_api_keys(settings: Settings) -> dict[str, int | None]:
    """TALKLINE_API_KEYS plus the lines of TALKLINE_API_KEYS_FILE (blank lines and # comments skipped), each key with
    its concurrent-call quota (None: only TALKLINE_MAX_CALLS applies)."""
    entries = list(settings.api_keys)
    if settings.api_keys_file is not None:
        lines = Path(settings.api_keys_file).read_text(encoding="utf-8").splitlines()
        entries += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return dict(parse_key(entry) for entry in entries)


class KeyQuotas:
    """Concurrent calls per API key, against each key's quota."""

    def __init__(self, quotas: dict[str, int | None]) -> None:
        self.quotas = quotas
        self.active: Counter[str] = Counter()

    def take(self, key: str | None) -> bool:
        if key is None:
            return True
        if (quota := self.quotas.get(key)) is not None and self.active[key] >= quota:
            return False
        self.active[key] += 1
        return True

    def give_back(self, key: str | None) -> None:
        if key is not None:
            self.active[key] -= 1

    def refusal(self, key: str) -> Denial:
        return replace(KEY_QUOTA, message=KEY_QUOTA.message.replace("its limit of", f"its limit of {self.quotas[key]}"))


class Guard:
    """The access rules of one server, built once from its settings; every route and transport asks it."""

    def __init__(self, settings: Settings) -> None:
        quotas = load_api_keys(settings)
        self.keys = list(quotas)
        self.quotas = KeyQuotas(quotas)
        self.carrier_secret = settings.carrier_secret
        self.origins = {origin.rstrip("/") for origin in settings.cors_origins}
        self.rate = ConnectionRate(settings.connections_per_minute)

    def describe(self) -> list[str]:
        """What an operator should know at start-up."""
        lines = []
        if not self.keys:
            lines.append("no API keys (TALKLINE_API_KEYS): /ws/call and /profiles accept clients on this machine only (127.0.0.0/8, ::1)")
        if not self.carrier_secret:
            lines.append("no TALKLINE_CARRIER_SECRET: the carrier media sockets accept clients on this machine only")
        return lines

    def key_of(self, conn: HTTPConnection) -> str | None:
        """The configured API key the client presented, if any (compared in constant time against every key)."""
        given, found = bearer_token(conn) or "", None
        for key in self.keys:
            if hmac.compare_digest(given.encode(), key.encode()):
                found = key
        return found

    def client(self, conn: HTTPConnection) -> Denial | None:
        """A browser or API client (/ws/call, /profiles): origin, then API key or loopback. A valid key is not counted
        against the per-address connection rate (TALKLINE_MAX_CALLS and key quotas bound it); anything else is."""
        if self.keys and self.key_of(conn) is not None:
            return self._origin(conn)
        if not self.rate.allow(_host(conn) or "?"):
            return RATE_LIMITED
        if denial := self._origin(conn):
            return denial
        if self.keys:
            return UNAUTHORIZED
        return None if is_loopback(_host(conn)) else LOOPBACK_ONLY

    def carrier(self, conn: HTTPConnection) -> Denial | None:
        """A carrier media socket at connect time. It counts against the per-address rate until it authenticates: with
        a secret in its URL at once, else with the start message (`carrier_start`); without a configured secret only
        loopback clients may connect, and they are counted."""
        if self.carrier_secret and matches(conn.query_params.get("secret"), [self.carrier_secret]):
            return None
        if not self.rate.allow(_host(conn) or "?"):
            return RATE_LIMITED
        if self.carrier_secret:
            return None
        return self._origin(conn) or (None if is_loopback(_host(conn)) else CARRIER_LOOPBACK_ONLY)

    def carrier_start(self, conn: HTTPConnection, secret: str | None) -> Denial | None:
        """The secret from the start message (Twilio's <Parameter>, ...) or the URL's ?secret=, when one is configured;
        a stream that proves it in its start message is taken off the address's count."""
        if not self.carrier_secret:
            return None
        if matches(conn.query_params.get("secret"), [self.carrier_secret]):
            return None
        if matches(secret, [self.carrier_secret]):
            self.rate.refund(_host(conn) or "?")
            return None
        return UNAUTHORIZED

    def _origin(self, conn: HTTPConnection) -> Denial | None:
        """Browsers send an Origin: it must be this server's own host or a configured one (no cross-site sockets)."""
        origin = conn.headers.get("origin")
        if not origin or origin.rstrip("/") in self.origins:
            return None
        own = _hostname(f"//{conn.headers.get('host', '')}")
        return None if own is not None and _hostname(origin) == own else FOREIGN_ORIGIN


def _host(conn: HTTPConnection) -> str | None:
    return conn.client.host if conn.client else None


def _hostname(url: str) -> str | None:
    """The host of a URL without its port (a proxy may drop the port, as nginx's $host does); None if unreadable."""
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


async def guard_client(request: Request) -> None:
    """FastAPI dependency for the HTTP API (async, so on the event loop like the socket checks): 401, 403 or 429."""
    if denial := request.app.state.talkline.guard.client(request):
        log.info("%s %s from %s refused: %s", request.method, request.url.path, _host(request), denial.code)
        headers = {401: {"WWW-Authenticate": "Bearer"}, 429: {"Retry-After": "60"}}.get(denial.status)
        raise HTTPException(denial.status, denial.message, headers=headers)
