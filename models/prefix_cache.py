"""Engine sessions kept across requests, found by the tokens they hold: like SGLang's radix cache and llama.cpp's prompt
cache, a new request on a conversation that was seen before (the same system prompt and history, one turn more) reuses
the KV cache of its common prefix instead of prefilling it again. Bounded by sessions and by tokens held; the least
recently used go first. A session is lent to one request at a time."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from models.session import Session, common_prefix_len

MIN_REUSE = 16  # tokens in common below which a fresh session is as good


class PrefixCache:
    def __init__(
        self, new_session: Callable[[], Session], max_tokens: int = 32768, max_sessions: int = 32, min_reuse: int = MIN_REUSE
    ) -> None:
        self.new_session, self.max_tokens, self.max_sessions, self.min_reuse = new_session, max_tokens, max_sessions, min_reuse
        self._idle: OrderedDict[int, Session] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def tokens(self) -> int:
        """Tokens held by the idle sessions."""
        with self._lock:
            return sum(len(s.ids) for s in self._idle.values())

    def take(self, prompt: list[int]) -> Session:
        """The idle session sharing the longest prefix with `prompt` (at least `min_reuse` tokens), else a new one."""
        with self._lock:
            best, key = max(((common_prefix_len(s.ids, prompt), k) for k, s in self._idle.items()), default=(0, None))
            if key is not None and best >= self.min_reuse:
                return self._idle.pop(key)
        return self.new_session()

    def give_back(self, session: Session) -> None:
        """Keep a session a request finished with (its cache holds its prompt and reply), evicting the oldest over bounds."""
        if self.max_tokens <= 0 or len(session.ids) > self.max_tokens:
            return
        with self._lock:
            self._idle[id(session)] = session
            held = sum(len(s.ids) for s in self._idle.values())
            while len(self._idle) > self.max_sessions or held > self.max_tokens:
                _, dropped = self._idle.popitem(last=False)
                held -= len(dropped.ids)
