"""Calls and turns in a real database (SQLite by default, any SQLAlchemy URL); each turn committed when it ends.

Several voice servers may share one database: each registers itself in `servers` and refreshes its `seen_at`
(a heartbeat); a call records the server running it, and an open call whose server stopped beating is closed as
interrupted by whichever server sweeps next, so one replica's crash never closes another replica's live calls."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    delete,
    event,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class CallRow(Base):
    __tablename__ = "calls"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    profile_id: Mapped[str] = mapped_column(String(64))
    transport: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    end_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    server_id: Mapped[str | None] = mapped_column(Text, nullable=True)  # the server running it (servers.id)


class ServerRow(Base):
    __tablename__ = "servers"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TurnRow(Base):
    __tablename__ = "turns"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[str] = mapped_column(ForeignKey("calls.id"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    caller_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    agent_text: Mapped[str] = mapped_column(Text, default="")
    interrupted: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    asr_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    llm_ttft_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    tts_ttfb_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    voice_to_voice_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    tool_calls: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON list of the turn's tool calls


SCHEMA_TRIES = 5
ADDED_COLUMNS = {"turns": ["tool_calls"], "calls": ["server_id"]}  # nullable TEXT columns newer than the first schema


@dataclass
class TurnRecord:
    call_id: str
    index: int
    caller_text: str | None
    agent_text: str
    interrupted: bool
    started_at: datetime
    ended_at: datetime
    asr_ms: float | None = None
    llm_ttft_ms: float | None = None
    tts_ttfb_ms: float | None = None
    voice_to_voice_ms: float | None = None
    tool_calls: str | None = None


class Store:
    """Synchronous SQLAlchemy work, run in a thread by the async helpers."""

    def __init__(self, url: str = "sqlite:///talkline.db", server_id: str | None = None) -> None:
        self.server_id = server_id  # recorded with each call this store starts
        self.engine = create_engine(url, connect_args={"check_same_thread": False} if url.startswith("sqlite") else {})
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        for attempt in range(SCHEMA_TRIES):  # replicas starting together race to create the same tables
            try:
                Base.metadata.create_all(self.engine)
                self._add_columns()
                break
            except DBAPIError:
                if attempt == SCHEMA_TRIES - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def _add_columns(self) -> None:
        """create_all makes missing tables only: give a database made by an older version the newer columns."""
        for table, columns in ADDED_COLUMNS.items():
            present = {c["name"] for c in inspect(self.engine).get_columns(table)}
            with self.engine.begin() as conn:
                for column in columns:
                    if column not in present:
                        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} TEXT"))

    def start_call(self, call_id: str, profile_id: str, transport: str) -> None:
        with Session(self.engine) as s, s.begin():
            s.add(CallRow(id=call_id, profile_id=profile_id, transport=transport, started_at=utcnow(), server_id=self.server_id))

    def save_turn(self, turn: TurnRecord) -> None:
        with Session(self.engine) as s, s.begin():
            s.add(TurnRow(**turn.__dict__))

    def end_call(self, call_id: str, reason: str) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(update(CallRow).where(CallRow.id == call_id).values(ended_at=utcnow(), end_reason=reason))

    def beat(self) -> None:
        """Register this store's server, or refresh its heartbeat."""
        now = utcnow()
        with Session(self.engine) as s, s.begin():
            if (row := s.get(ServerRow, self.server_id)) is None:
                s.add(ServerRow(id=self.server_id, started_at=now, seen_at=now))
            else:
                row.seen_at = now

    def leave(self) -> None:
        """A server that stops cleanly takes itself off the list."""
        with Session(self.engine) as s, s.begin():
            s.execute(delete(ServerRow).where(ServerRow.id == self.server_id))

    def close_orphans(self, stale_s: float, reason: str = "interrupted") -> int:
        """Close the open calls whose server has not beaten for `stale_s` seconds (or that name no live server);
        forget such servers. Returns how many calls it closed."""
        cutoff = utcnow() - timedelta(seconds=stale_s)
        with Session(self.engine) as s, s.begin():
            s.execute(delete(ServerRow).where(ServerRow.seen_at < cutoff))
            live = select(ServerRow.id)
            orphaned = CallRow.ended_at.is_(None) & (CallRow.server_id.is_(None) | CallRow.server_id.not_in(live))
            return s.execute(update(CallRow).where(orphaned).values(ended_at=utcnow(), end_reason=reason)).rowcount

    def turns(self, call_id: str) -> list[TurnRow]:
        with Session(self.engine, expire_on_commit=False) as s:
            return list(s.scalars(select(TurnRow).where(TurnRow.call_id == call_id).order_by(TurnRow.index)))

    def call(self, call_id: str) -> CallRow | None:
        with Session(self.engine, expire_on_commit=False) as s:
            return s.get(CallRow, call_id)

    async def run(self, fn, *args):
        """Run one of the methods above off the event loop."""
        return await asyncio.to_thread(fn, *args)


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
