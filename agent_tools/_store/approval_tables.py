"""Tool approvals in the store: every decision, for audit, and the grant an approved call consumes once.

A row is written when a decision is taken (approved, denied, timed out) and never changed after, except
by the one claim of an approved row: ``consumed_at`` goes from NULL to a time in a single
``UPDATE ... WHERE consumed_at IS NULL``, so of two attempts of the same tool activity (a retry after a
worker died mid-call) exactly one runs the tool. The winner stores the call's result beside the grant; a
later attempt returns that result, or says the call was interrupted, and never runs the tool again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Connection, DateTime, Index, String, Table, Text, select, update

from agent_tools._store.base import Database, upsert_rows
from agent_tools._store.tables import metadata
from agent_tools._store.utc import as_utc

tool_approvals = Table(
    "tool_approvals",
    metadata,
    Column("session_id", String(200), primary_key=True),
    Column("approval_id", String(200), primary_key=True),
    Column("call_id", String(200), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("arguments_preview", Text, nullable=False, default=""),
    # approved | denied | timed_out
    Column("outcome", String(20), nullable=False),
    Column("reason", Text),
    Column("decided_by", String(200)),
    Column("via", String(20)),
    Column("requested_at", DateTime(timezone=True), nullable=False),
    Column("decided_at", DateTime(timezone=True), nullable=False),
    # Set once, by the tool activity that runs the approved call.
    Column("consumed_at", DateTime(timezone=True)),
    # That run's ToolCallOutput (JSON), once it finished.
    Column("result", Text),
    Index("ix_tool_approvals_decided", "session_id", "decided_at"),
)


def _time(value: str | datetime) -> datetime:
    return as_utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


@dataclass(frozen=True)
class ApprovalRow:
    session_id: str
    approval_id: str
    call_id: str
    tool: str
    digest: str
    arguments_preview: str
    outcome: str
    reason: str | None
    decided_by: str | None
    via: str | None
    requested_at: datetime
    decided_at: datetime
    consumed_at: datetime | None
    result: str | None


def _row(r: Any) -> ApprovalRow:
    return ApprovalRow(
        session_id=r.session_id,
        approval_id=r.approval_id,
        call_id=r.call_id,
        tool=r.tool,
        digest=r.digest,
        arguments_preview=r.arguments_preview,
        outcome=r.outcome,
        reason=r.reason,
        decided_by=r.decided_by,
        via=r.via,
        requested_at=_time(r.requested_at),
        decided_at=_time(r.decided_at),
        consumed_at=_time(r.consumed_at) if r.consumed_at is not None else None,
        result=r.result,
    )


class ApprovalStore:
    def __init__(self, store: Database) -> None:
        self.store = store

    async def record(self, row: dict[str, Any]) -> None:
        """Write a decision; a retried write of the same one changes nothing (a decision is final)."""
        values = {
            **row,
            "requested_at": _time(row["requested_at"]),
            "decided_at": _time(row["decided_at"]),
        }

        def write(conn: Connection) -> None:
            upsert_rows(conn, tool_approvals, [values], keys=["session_id", "approval_id"], update=None)

        await self.store.run(write)

    async def claim(self, session_id: str, approval_id: str, digest: str) -> bool:
        """Consume an approved grant for these arguments; True for the one caller that does."""
        now = datetime.now(UTC)

        def claim(conn: Connection) -> bool:
            done = conn.execute(
                update(tool_approvals)
                .where(
                    tool_approvals.c.session_id == session_id,
                    tool_approvals.c.approval_id == approval_id,
                    tool_approvals.c.digest == digest,
                    tool_approvals.c.outcome == "approved",
                    tool_approvals.c.consumed_at.is_(None),
                )
                .values(consumed_at=now)
            )
            return bool(done.rowcount == 1)

        return await self.store.run(claim)

    async def save_result(self, session_id: str, approval_id: str, result: str) -> None:
        def write(conn: Connection) -> None:
            conn.execute(
                update(tool_approvals)
                .where(tool_approvals.c.session_id == session_id, tool_approvals.c.approval_id == approval_id)
                .values(result=result)
            )

        await self.store.run(write)

    async def get(self, session_id: str, approval_id: str) -> ApprovalRow | None:
        def read(conn: Connection) -> ApprovalRow | None:
            r = conn.execute(
                select(tool_approvals).where(
                    tool_approvals.c.session_id == session_id, tool_approvals.c.approval_id == approval_id
                )
            ).first()
            return _row(r) if r is not None else None

        return await self.store.run(read)

    async def for_session(self, session_id: str) -> list[ApprovalRow]:
        """The session's decisions, oldest first (the audit trail)."""

        def read(conn: Connection) -> list[ApprovalRow]:
            rows = conn.execute(
                select(tool_approvals)
                .where(tool_approvals.c.session_id == session_id)
                .order_by(tool_approvals.c.decided_at, tool_approvals.c.approval_id)
            ).all()
            return [_row(r) for r in rows]

        return await self.store.run(read)
