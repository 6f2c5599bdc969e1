"""The standard library's read of a SQLite transcript gives what the SQLAlchemy store gives, for the URLs
SQLAlchemy reads as that file, and refuses a store no worker made as the store does."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC
from pathlib import Path

import pytest
from sqlalchemy import make_url

from agent_tools._errors import StoreNotReady
from agent_tools._messages import Message, ToolCall
from agent_tools._session import SessionConfig
from agent_tools._store.base import is_sqlite_file
from agent_tools._store.db import Store
from agent_tools._store.transcript_rows import HEAD, plain_sqlite_file, read_transcript, row_to_message
from agent_tools._store.transcripts import TranscriptStore

PLAIN = [
    "sqlite+aiosqlite:////tmp/a/store.sqlite",
    "sqlite:///relative.db",
    "sqlite+pysqlite:////abs path/with spaces.db",
    "sqlite:////tmp/ünïcode.db",
]
# Not a file, or a file whose URL SQLAlchemy reads with more rules (queries, escapes, other drivers).
LEFT_TO_SQLALCHEMY = [
    "sqlite://",
    "sqlite:///",
    "sqlite:///:memory:",
    "sqlite+aiosqlite:///:memory:",
    "sqlite:////tmp/a.db?mode=ro",
    "sqlite:////tmp/a%20b.db",
    "sqlite:////tmp/a.db#frag",
    "sqlite+pysqlcipher:////tmp/a.db",
    "SQLITE:////tmp/a.db",
    "postgresql+asyncpg://u:p@127.0.0.1/test",
]


@pytest.mark.parametrize("url", PLAIN + LEFT_TO_SQLALCHEMY)
def test_a_plain_file_url_names_the_file_sqlalchemy_names(url: str) -> None:
    path = plain_sqlite_file(url)
    assert (path is not None) == (url in PLAIN)
    if path is not None:
        assert is_sqlite_file(url) and make_url(url).database == path


def _config(sid: str) -> SessionConfig:
    return SessionConfig(
        session_id=sid,
        agent="assistant",
        organisation="org",
        project="proj",
        user="u",
        title="t",
        model="scripted:x",
        tools=[],
        max_steps=5,
        root_id=sid,
    )


def _deep(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": [value]}
    return value


HOSTILE = [
    Message(role="user", content="NUL\x00 lone \ud800 surrogate"),
    Message(
        role="assistant",
        content="x" * 300_000,
        tool_calls=[
            ToolCall(id="c1", name="lookup", arguments={"deep": _deep(25), "big": 10**40, "f": 1e308}),
            ToolCall(id="c2", name="bad", arguments={}, raw_arguments="{not json", refused="not JSON"),
        ],
    ),
    Message(role="tool", content="", tool_call_id="c1", name="lookup", artifact_ref="art-1"),
    Message(role="assistant", content="ünïcödé ✓ 𝔘"),
]


async def test_the_plain_read_gives_the_stores_rows(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/store.sqlite"
    store = Store(url)
    await store.create_schema()
    try:
        t = TranscriptStore(store)
        sid = f"s-{uuid.uuid4().hex[:8]}"
        start = await t.open_session(_config(sid), [Message(role="system", content="be brief")])
        await t.append(sid, start, HOSTILE)
        await t.open_session(_config("other"), [Message(role="system", content="not this one")])
        for offset, limit in [(0, 100), (1, 2), (3, 1), (5, 10), (0, 0)]:
            stored = await t.page(sid, offset, limit)
            plain = read_transcript(url, sid, offset, limit)
            assert [(r.seq, row_to_message(r), r.created_at) for r in plain] == [
                (p.seq, p.message, p.created_at) for p in stored
            ], (offset, limit)
        whole = read_transcript(url, sid, 0, 100)
        assert {r.created_at.tzinfo for r in whole} == {UTC}
        assert len(whole) == 1 + len(HOSTILE) and whole[1].content == "NUL\ufffd lone \ufffd surrogate"
        # Numbers beyond SQLite's integers, and negative ones, are bounds, not errors.
        assert read_transcript(url, sid, -(10**30), 10**30) == whole
        assert read_transcript(url, sid, 10**30, 5) == [] and read_transcript(url, sid, 0, -1) == []
        assert read_transcript(url, "x" * 100_000 + "\x00", 0, 5) == []
    finally:
        await store.close()


async def test_a_store_no_worker_made_is_refused_as_the_store_refuses_it(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/missing.sqlite"
    with pytest.raises(StoreNotReady) as plain:
        read_transcript(url, "s", 0, 10)
    with pytest.raises(StoreNotReady) as stored:
        await Store.open_existing(url)
    assert str(plain.value) == str(stored.value) and "does not exist yet" in str(plain.value)
    assert not (tmp_path / "missing.sqlite").exists()  # a reader creates nothing

    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    url = f"sqlite+aiosqlite:///{empty}"
    with pytest.raises(StoreNotReady, match="has no schema yet"):
        read_transcript(url, "s", 0, 10)

    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        conn.execute("INSERT INTO alembic_version VALUES ('0001')")
    conn.close()
    url = f"sqlite+aiosqlite:///{old}"
    with pytest.raises(StoreNotReady) as plain:
        read_transcript(url, "s", 0, 10)
    with pytest.raises(StoreNotReady) as stored:
        await Store.open_existing(url)
    assert str(plain.value) == str(stored.value) and f"this version needs {HEAD}" in str(plain.value)


def test_a_url_it_does_not_read_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a plain SQLite file URL"):
        read_transcript("postgresql+asyncpg://127.0.0.1/test", "s", 0, 10)
