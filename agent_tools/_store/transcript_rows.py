"""A transcript row as a message, and the transcript of a SQLite file read with the standard library alone.

Clients read a SQLite store's transcript here rather than through SQLAlchemy, whose import costs a
command such as ``agent-tools show`` a fifth of its time (docs/design-notes.md, "Performance levers").
Nothing here imports SQLAlchemy; :mod:`agent_tools._store.transcripts` shares :func:`row_to_message`.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from contextlib import closing
from datetime import datetime
from typing import Any, NamedTuple

from agent_tools._errors import StoreNotReady
from agent_tools._messages import Message, ToolCall
from agent_tools._store.utc import as_utc

# The newest schema revision (tests/test_migrations.py checks it against the revisions). Knowing it here lets
# a store that is already current skip loading Alembic, a third of a second at every worker and CLI start.
HEAD = "0008"

# URLs whose database part SQLAlchemy takes as it is: no query, no percent-escapes, a named file. Any other
# SQLite URL goes through SQLAlchemy (tests/test_transcript_rows.py compares the two parsers).
_PLAIN_SQLITE_URL = re.compile(r"sqlite(?:\+(?:pysqlite|aiosqlite))?:///(?P<path>[^?%#]+)")

_INT64_MAX = (1 << 63) - 1
_COLUMNS = "seq, role, content, tool_calls, tool_call_id, name, artifact_ref, created_at"


class TranscriptRow(NamedTuple):
    """The columns of ``transcript_messages`` a reader uses, decoded as SQLAlchemy decodes them."""

    seq: int
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None
    artifact_ref: str | None
    created_at: datetime


def row_to_message(row: Any) -> Message:
    """The message of a transcript row (a SQLAlchemy row or a :class:`TranscriptRow`)."""
    return Message(
        role=row.role,
        content=row.content or "",
        tool_calls=[ToolCall.model_validate(tc) for tc in (row.tool_calls or [])],
        tool_call_id=row.tool_call_id,
        name=row.name,
        artifact_ref=row.artifact_ref,
    )


def not_ready(shown_url: str, revision: str | None) -> StoreNotReady:
    """The error of a store without the schema this code expects (``revision`` None: no schema at all)."""
    state = "has no schema yet" if revision is None else f"is at revision {revision}, this version needs {HEAD}"
    return StoreNotReady(
        f"the store at {shown_url} {state}: start a worker (`agent-tools worker`), or run `agent-tools migrate`"
    )


def missing(shown_url: str) -> StoreNotReady:
    """The error of a SQLite store whose file no worker has created yet."""
    return StoreNotReady(
        f"the store at {shown_url} does not exist yet: start a worker (`agent-tools worker`), "
        "or run `agent-tools migrate`"
    )


def plain_sqlite_file(url: str) -> str | None:
    """The file of a SQLite URL this module reads, or None for any other URL (SQLAlchemy's to read)."""
    match = _PLAIN_SQLITE_URL.fullmatch(url)
    if match is None or match["path"] == ":memory:":
        return None
    return match["path"]


def read_transcript(url: str, session_id: str, offset: int, limit: int) -> list[TranscriptRow]:
    """One session's rows from position ``offset`` on, at most ``limit``, of the SQLite store at ``url``
    (a URL :func:`plain_sqlite_file` accepts). Blocking: run it in a thread.

    Raises:
        StoreNotReady: no worker has created the store, or its schema is not at :data:`HEAD`.
    """
    path = plain_sqlite_file(url)
    if path is None:
        raise ValueError(f"not a plain SQLite file URL: {url!r}")
    # Never creates the file: a client does not own the store.
    if not os.path.exists(path):
        raise missing(url)
    # SQLite's own bounds: a negative LIMIT would mean none, and a larger int is not an INTEGER.
    offset, limit = min(max(offset, 0), _INT64_MAX), min(max(limit, 0), _INT64_MAX)
    with closing(sqlite3.connect(path, timeout=30)) as conn:
        try:
            revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError:  # no version table: a new or pre-migrations file
            revision = None
        if revision is None or revision[0] != HEAD:
            raise not_ready(url, None if revision is None else str(revision[0]))
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM transcript_messages WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
            (session_id, offset, limit),
        ).fetchall()
    return [
        TranscriptRow(
            seq=seq,
            role=role,
            content=content,
            tool_calls=json.loads(tool_calls) if tool_calls is not None else None,
            tool_call_id=tool_call_id,
            name=name,
            artifact_ref=artifact_ref,
            created_at=as_utc(datetime.fromisoformat(created_at)),
        )
        for seq, role, content, tool_calls, tool_call_id, name, artifact_ref, created_at in rows
    ]
