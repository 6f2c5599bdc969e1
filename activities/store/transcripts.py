"""Transcript, session registry, usage and artifact rows: the store behind the session loop."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select

from activities.store.db import Store, upsert
from activities.store.tables import artifacts, sessions, transcript, usage
from agent_tools.messages import Message, ToolCall, Usage


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    message: Message
    created_at: datetime


def _row_to_message(row: Any) -> Message:
    return Message(
        role=row.role,
        content=row.content or "",
        tool_calls=[ToolCall.model_validate(tc) for tc in (row.tool_calls or [])],
        tool_call_id=row.tool_call_id,
        name=row.name,
        artifact_ref=row.artifact_ref,
    )


def _message_row(session_id: str, seq: int, m: Message) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "seq": seq,
        "role": m.role,
        "content": m.content,
        "tool_calls": [tc.model_dump() for tc in m.tool_calls] or None,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "artifact_ref": m.artifact_ref,
        "created_at": _now(),
    }


class TranscriptStore:
    """Append-only transcripts keyed by (session, position): a retried write lands on the same rows."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def register_session(
        self,
        *,
        session_id: str,
        agent: str,
        organisation: str,
        project: str,
        user: str,
        title: str,
        root_id: str,
        parent_id: str | None,
        depth: int,
    ) -> None:
        row = {
            "session_id": session_id,
            "agent": agent,
            "organisation": organisation,
            "project": project,
            "user_id": user,
            "title": title,
            "root_id": root_id,
            "parent_id": parent_id,
            "depth": depth,
            "created_at": _now(),
        }
        async with self.store.engine.begin() as conn:
            await upsert(conn, sessions, [row], keys=["session_id"])

    async def append(self, session_id: str, start: int, messages: list[Message], *, replace: bool = False) -> int:
        """Write ``messages`` at positions start..; returns the position after them.

        ``replace`` overwrites rows a previous attempt wrote (the model's answer from a retried call);
        otherwise existing rows win, which makes re-sending the same new messages harmless.
        """
        rows = [_message_row(session_id, start + i, m) for i, m in enumerate(messages)]
        async with self.store.engine.begin() as conn:
            await upsert(
                conn,
                transcript,
                rows,
                keys=["session_id", "seq"],
                update=["role", "content", "tool_calls", "tool_call_id", "name", "artifact_ref", "created_at"]
                if replace
                else None,
            )
        return start + len(messages)

    async def load(self, session_id: str, *, upto: int | None = None) -> list[Message]:
        stmt = select(transcript).where(transcript.c.session_id == session_id)
        if upto is not None:
            stmt = stmt.where(transcript.c.seq < upto)
        async with self.store.engine.connect() as conn:
            rows = (await conn.execute(stmt.order_by(transcript.c.seq))).all()
        return [_row_to_message(r) for r in rows]

    async def page(self, session_id: str, offset: int = 0, limit: int = 100) -> list[StoredMessage]:
        stmt = (
            select(transcript)
            .where(transcript.c.session_id == session_id, transcript.c.seq >= offset)
            .order_by(transcript.c.seq)
            .limit(limit)
        )
        async with self.store.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [StoredMessage(r.seq, _row_to_message(r), r.created_at) for r in rows]

    async def count(self, session_id: str) -> int:
        stmt = select(func.count()).select_from(transcript).where(transcript.c.session_id == session_id)
        async with self.store.engine.connect() as conn:
            return int((await conn.execute(stmt)).scalar_one())

    async def search(
        self, session_id: str, query: str, *, role: str | None = None, limit: int = 20
    ) -> list[StoredMessage]:
        """Case-insensitive substring search over one session's messages, newest first."""
        stmt = select(transcript).where(
            transcript.c.session_id == session_id,
            func.lower(transcript.c.content).contains(query.lower(), autoescape=True),
        )
        if role:
            stmt = stmt.where(transcript.c.role == role)
        stmt = stmt.order_by(transcript.c.seq.desc()).limit(limit)
        async with self.store.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [StoredMessage(r.seq, _row_to_message(r), r.created_at) for r in rows]

    async def session_row(self, session_id: str) -> Any | None:
        async with self.store.engine.connect() as conn:
            return (await conn.execute(select(sessions).where(sessions.c.session_id == session_id))).first()

    # ---- usage --------------------------------------------------------------------------------------

    async def record_usage(
        self, *, call_key: str, session_id: str, root_id: str, model: str, used: Usage
    ) -> None:
        row = {
            "call_key": call_key,
            "session_id": session_id,
            "root_id": root_id,
            "model": model,
            "input_tokens": used.input_tokens,
            "output_tokens": used.output_tokens,
            "cost_usd": used.cost_usd,
            "created_at": _now(),
        }
        async with self.store.engine.begin() as conn:
            await upsert(
                conn, usage, [row], keys=["call_key"], update=["input_tokens", "output_tokens", "cost_usd", "model"]
            )

    async def usage_total(self, *, session_id: str | None = None, root_id: str | None = None) -> Usage:
        stmt = select(
            func.count(), func.sum(usage.c.input_tokens), func.sum(usage.c.output_tokens), func.sum(usage.c.cost_usd)
        )
        if session_id is not None:
            stmt = stmt.where(usage.c.session_id == session_id)
        if root_id is not None:
            stmt = stmt.where(usage.c.root_id == root_id)
        async with self.store.engine.connect() as conn:
            n, i, o, c = (await conn.execute(stmt)).one()
        return Usage(calls=int(n or 0), input_tokens=int(i or 0), output_tokens=int(o or 0), cost_usd=float(c or 0))

    # ---- artifacts ----------------------------------------------------------------------------------

    async def save_artifact(
        self, *, ref: str, session_id: str, run_id: str, tool: str, content: str, is_json: bool
    ) -> None:
        row = {
            "ref": ref,
            "session_id": session_id,
            "run_id": run_id,
            "tool": tool,
            "content": content,
            "size": len(content),
            "is_json": int(is_json),
            "created_at": _now(),
        }
        async with self.store.engine.begin() as conn:
            await upsert(conn, artifacts, [row], keys=["ref"])

    async def load_artifact(self, ref: str) -> Any | None:
        async with self.store.engine.connect() as conn:
            return (await conn.execute(select(artifacts).where(artifacts.c.ref == ref))).first()
