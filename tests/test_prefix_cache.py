"""The engine's prefix cache: a request gets the idle session sharing the longest prefix with its prompt, and the pool
stays within its bounds, oldest out first."""

from __future__ import annotations

from transformers import DynamicCache

from models.prefix_cache import MIN_REUSE, PrefixCache
from models.session import Session


def holding(ids: list[int]) -> Session:
    return Session(cache=DynamicCache(), ids=list(ids))


def test_the_longest_shared_prefix_wins_and_a_short_one_starts_fresh():
    cache = PrefixCache(lambda: holding([]), max_tokens=1000)
    system, other = list(range(100)), list(range(500, 600))
    near, far = holding(system + [1, 2, 3]), holding(system[:40])
    for session in (far, near, holding(other)):
        cache.give_back(session)
    assert cache.take(system + [1, 2, 9]) is near
    assert cache.take(system + [7]) is far, "the best one left"
    assert cache.take(list(range(MIN_REUSE - 1)) + [999]).ids == [], "too little in common: a fresh session"
    assert cache.tokens == 100, "only the unrelated session is left idle"


def test_a_pool_can_ask_for_more_in_common_than_a_shared_instruction():
    instruction = list(range(15))
    cache = PrefixCache(lambda: holding(instruction), max_tokens=1000, min_reuse=len(instruction) + 1)
    turn = holding(instruction + [40, 41])
    cache.give_back(turn)
    assert cache.take(instruction + [50, 51]) is not turn, "another turn leaves this one's words alone"
    assert cache.take(instruction + [40, 41, 42]) is turn


def test_the_pool_keeps_its_token_and_session_bounds():
    cache = PrefixCache(lambda: holding([]), max_tokens=250, max_sessions=3)
    sessions = [holding([n] * 100) for n in range(3)]
    for session in sessions:
        cache.give_back(session)
    assert cache.tokens == 200, "the oldest went to stay under 250 tokens"
    assert cache.take([0] * 100).ids == [], "the oldest is gone"
    assert cache.take([2] * 100) is sessions[2]
    cache.give_back(holding([5] * 300))
    assert cache.tokens == 100, "a session bigger than the whole pool is not kept"
    for n in range(5):
        cache.give_back(holding([10 + n] * 20))
    assert len(cache._idle) == 3
    assert PrefixCache(lambda: holding([]), max_tokens=0).take([1] * 50).ids == []
