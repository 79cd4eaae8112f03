"""Phone-call test helpers: find the call a carrier socket opened (carriers never see our call id) and wait for it to end."""

from __future__ import annotations

import asyncio

from sqlalchemy import select
from sqlalchemy.orm import Session

from pipeline.store import CallRow


async def call_ids(server) -> set[str]:
    """Ids of every call the server has stored so far."""

    def ids() -> set[str]:
        with Session(server.state.store.engine) as s:
            return set(s.scalars(select(CallRow.id)))

    return await server.state.store.run(ids)


async def ended_call(server, before: set[str], transport: str, profile: str, timeout: float = 15.0) -> CallRow:
    """The one call of this transport and profile started since `before`, once it has ended."""

    def rows() -> list[CallRow]:
        with Session(server.state.store.engine, expire_on_commit=False) as s:
            query = select(CallRow).where(CallRow.transport == transport, CallRow.profile_id == profile)
            return [row for row in s.scalars(query) if row.id not in before]

    for _ in range(int(timeout * 10)):
        found = await server.state.store.run(rows)
        assert len(found) <= 1, f"more than one new {transport} call with profile {profile}"
        if found and found[0].ended_at is not None:
            return found[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no ended {transport} call with profile {profile}")


async def active_calls_back_to_zero(http) -> str:
    """The /metrics text once no call is active (fails if one stays open)."""
    for _ in range(100):
        metrics = (await http.get("/metrics")).text
        if "talkline_active_calls 0.0" in metrics:
            return metrics
        await asyncio.sleep(0.1)
    raise AssertionError("a call was leaked: talkline_active_calls did not return to 0")
