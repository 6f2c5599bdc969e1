"""Transcript, session registry, usage and artifact rows: the store behind the session loop."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, func, select

from agent_tools._boundaries import clean_json, clean_text
from agent_tools._errors import AgentToolsError
from agent_tools._messages import Message, Usage, message_fingerprint
from agent_tools._store.base import upsert_rows
from agent_tools._store.db import Store
from agent_tools._store.tables import artifacts, sessions, transcript, usage
from agent_tools._store.transcript_rows import row_to_message
from agent_tools._store.utc import as_utc

if TYPE_CHECKING:
    from agent_tools._session import SessionConfig

_MESSAGE_UPDATE = ["role", "content", "tool_calls", "tool_call_id", "name", "artifact_ref", "created_at", "attempt"]
_USAGE_UPDATE = ["input_tokens", "output_tokens", "cost_usd", "model"]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    message: Message
    created_at: datetime


def _usage_row(call_key: str, session_id: str, root_id: str, model: str, used: Usage) -> dict[str, Any]:
    return {
        "call_key": call_key,
        "session_id": session_id,
        "root_id": root_id,
        "model": model,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cost_usd": used.cost_usd,
        "created_at": _now(),
    }


def _message_row(session_id: str, seq: int, m: Message) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "seq": seq,
        "role": m.role,
        # The last line of defence for the store: NUL bytes and lone surrogates never reach PostgreSQL (the
        # boundaries where data enters clean them already).
        "content": clean_text(m.content),
        "tool_calls": clean_json([tc.model_dump() for tc in m.tool_calls], max_depth=64) or None,
        "tool_call_id": clean_text(m.tool_call_id) if m.tool_call_id else None,
        "name": clean_text(m.name) if m.name else None,
        "artifact_ref": m.artifact_ref,
        "created_at": _now(),
        "attempt": None,
    }


class TranscriptOutOfStep(AgentToolsError):
    """The stored transcript does not hold the answer the workflow accepted (see ``prefix``)."""


class SessionIdTaken(AgentToolsError):
    """A run found another run chain's rows under its session id (a raw start on a finished session's id)."""


class TranscriptStore:
    """Append-only transcripts keyed by (session, position): a retried write lands on the same rows.

    Keeps recent sessions' transcripts in worker memory, so a model step reads nothing when this worker ran
    the session's previous step; the caller validates the cache with the last answer's fingerprint.
    """

    def __init__(self, store: Store, *, cache_sessions: int = 512) -> None:
        self.store = store
        self._cache: OrderedDict[str, list[Message]] = OrderedDict()
        self._cache_sessions = cache_sessions

    def _cached(self, session_id: str, start: int, last_answer: str | None) -> list[Message] | None:
        cached = self._cache.get(session_id)
        if cached is None or len(cached) != start:
            return None
        last = next((m for m in reversed(cached) if m.role == "assistant"), None)
        if (message_fingerprint(last) if last else None) != last_answer:
            return None
        self._cache.move_to_end(session_id)
        return cached

    def _remember(self, session_id: str, messages: list[Message]) -> None:
        self._cache[session_id] = messages
        self._cache.move_to_end(session_id)
        while len(self._cache) > self._cache_sessions:
            self._cache.popitem(last=False)

    async def open_session(self, config: SessionConfig, opening: list[Message], *, run_chain: str | None = None) -> int:
        """Register a session and write its opening messages (system prompt, prior history) in one
        transaction; returns the transcript position after them. A retried call changes nothing.

        Raises:
            SessionIdTaken: the session id's rows belong to another run chain than ``run_chain`` (or to one
                stored before chains were kept); nothing is written.
        """
        session_id = config.session_id
        owner = select(sessions.c.run_chain).where(sessions.c.session_id == session_id)
        row = {
            "session_id": session_id,
            "agent": config.agent,
            "organisation": config.organisation,
            "project": config.project,
            "user_id": config.user,
            "title": config.title,
            "root_id": config.root_id,
            "parent_id": config.parent_id,
            "depth": config.depth,
            "created_at": _now(),
            "run_chain": run_chain,
        }
        rows = [_message_row(session_id, i, m) for i, m in enumerate(opening)]

        def write(conn: Connection) -> None:
            found = conn.execute(owner).first()
            if run_chain is not None and found is not None and found.run_chain != run_chain:
                raise SessionIdTaken(
                    f"session id {session_id!r} holds the transcript of an earlier run; this run would write over "
                    "it, so it does not start (start a new session under a new id)"
                )
            upsert_rows(conn, sessions, [row], keys=["session_id"])
            upsert_rows(conn, transcript, rows, keys=["session_id", "seq"])

        await self.store.run(write)
        return len(opening)

    async def append(self, session_id: str, start: int, messages: list[Message], *, replace: bool = False) -> int:
        """Write ``messages`` at positions start..; returns the position after them.

        ``replace`` overwrites rows a previous attempt wrote (the model's answer from a retried call);
        otherwise existing rows win, which makes re-sending the same new messages harmless.
        """
        rows = [_message_row(session_id, start + i, m) for i, m in enumerate(messages)]
        update = _MESSAGE_UPDATE if replace else None
        await self.store.run(
            lambda conn: upsert_rows(conn, transcript, rows, keys=["session_id", "seq"], update=update)
        )
        return start + len(messages)

    async def prefix(self, session_id: str, start: int, *, last_answer: str | None = None) -> list[Message]:
        """Messages ``0..start``: from this worker's cache when it can vouch for them, else from the store."""
        cached = self._cached(session_id, start, last_answer)
        if cached is not None:
            return list(cached)
        found = await self.load(session_id, upto=start)
        last = next((m for m in reversed(found) if m.role == "assistant"), None)
        if last_answer is not None and (message_fingerprint(last) if last else None) != last_answer:
            # The store holds another answer than the one the session received: building on it would give
            # the model a conversation the session never had. Retried (a replica may lag); then the turn fails.
            raise TranscriptOutOfStep(
                f"the stored transcript of {session_id} does not end with the answer the session received"
            )
        self._remember(session_id, found)
        return list(found)

    async def commit_step(
        self,
        *,
        session_id: str,
        position: int,
        new_messages: list[Message],
        answer: Message,
        root_id: str,
        model: str,
        used: Usage,
        attempt: int = 1,
    ) -> int:
        """One model step in one transaction: the messages sent, the answer received, its usage row.

        Rows are replaced, not kept: the new messages are exactly what an earlier attempt sent (the workflow
        re-sends the same ones), and the answer must be the one the workflow received. That is the latest
        attempt's: an attempt that timed out may still finish after its retry was accepted, and its write is
        then dropped (an answer row written by a later attempt stays).
        """
        messages = [*new_messages, answer]
        rows = [_message_row(session_id, position + i, m) for i, m in enumerate(messages)]
        answer_at = position + len(new_messages)
        rows[-1]["attempt"] = attempt
        usage_row = _usage_row(f"{session_id}:{answer_at}", session_id, root_id, model, used)
        current = select(transcript.c.attempt).where(
            transcript.c.session_id == session_id, transcript.c.seq == answer_at
        )

        def write(conn: Connection) -> bool:
            written = conn.execute(current).scalar()
            if written is not None and written > attempt:
                return False  # a later attempt's answer is the one the workflow has
            upsert_rows(conn, transcript, rows, keys=["session_id", "seq"], update=_MESSAGE_UPDATE)
            upsert_rows(conn, usage, [usage_row], keys=["call_key"], update=_USAGE_UPDATE)
            return True

        if not await self.store.run(write):
            self._cache.pop(session_id, None)
            return answer_at + 1
        cached = self._cache.get(session_id)
        if cached is not None and len(cached) == position:
            cached.extend(messages)
        else:
            self._cache.pop(session_id, None)
        return answer_at + 1

    async def record_usage(self, *, call_key: str, session_id: str, root_id: str, model: str, used: Usage) -> None:
        """One model call's usage row (keyed, so a retried call overwrites it)."""
        row = _usage_row(call_key, session_id, root_id, model, used)
        await self.store.run(lambda conn: upsert_rows(conn, usage, [row], keys=["call_key"], update=_USAGE_UPDATE))

    async def load(self, session_id: str, *, upto: int | None = None) -> list[Message]:
        stmt = select(transcript).where(transcript.c.session_id == session_id)
        if upto is not None:
            stmt = stmt.where(transcript.c.seq < upto)
        ordered = stmt.order_by(transcript.c.seq)
        rows = await self.store.run(lambda conn: conn.execute(ordered).all())
        return [row_to_message(r) for r in rows]

    async def page(self, session_id: str, offset: int = 0, limit: int = 100) -> list[StoredMessage]:
        stmt = (
            select(transcript)
            .where(transcript.c.session_id == session_id, transcript.c.seq >= offset)
            .order_by(transcript.c.seq)
            .limit(limit)
        )
        rows = await self.store.run(lambda conn: conn.execute(stmt).all())
        return [StoredMessage(r.seq, row_to_message(r), as_utc(r.created_at)) for r in rows]

    async def count(self, session_id: str) -> int:
        stmt = select(func.count()).select_from(transcript).where(transcript.c.session_id == session_id)
        return int(await self.store.run(lambda conn: conn.execute(stmt).scalar_one()))

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
        ordered = stmt.order_by(transcript.c.seq.desc()).limit(limit)
        rows = await self.store.run(lambda conn: conn.execute(ordered).all())
        return [StoredMessage(r.seq, row_to_message(r), as_utc(r.created_at)) for r in rows]

    async def session_row(self, session_id: str) -> Any | None:
        stmt = select(sessions).where(sessions.c.session_id == session_id)
        return await self.store.run(lambda conn: conn.execute(stmt).first())

    # ---- usage --------------------------------------------------------------------------------------

    async def usage_total(self, *, session_id: str | None = None, root_id: str | None = None) -> Usage:
        stmt = select(
            func.count(), func.sum(usage.c.input_tokens), func.sum(usage.c.output_tokens), func.sum(usage.c.cost_usd)
        )
        if session_id is not None:
            stmt = stmt.where(usage.c.session_id == session_id)
        if root_id is not None:
            stmt = stmt.where(usage.c.root_id == root_id)
        n, i, o, c = await self.store.run(lambda conn: conn.execute(stmt).one())
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
            "content": clean_text(content),
            "size": len(content),
            "is_json": int(is_json),
            "created_at": _now(),
        }
        await self.store.run(lambda conn: upsert_rows(conn, artifacts, [row], keys=["ref"]))

    async def load_artifact(self, ref: str) -> Any | None:
        stmt = select(artifacts).where(artifacts.c.ref == ref)
        return await self.store.run(lambda conn: conn.execute(stmt).first())
