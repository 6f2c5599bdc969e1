"""The transcript store's hot paths (Store.run) on SQLite and PostgreSQL: a session's opening rows, a model
step's write, reads from the worker cache and from the store, and what retried activities leave behind."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from agent_tools._messages import Message, ToolCall, Usage, message_fingerprint
from agent_tools._session import SessionConfig
from agent_tools._store.db import Store
from agent_tools._store.tables import sessions
from agent_tools._store.transcripts import SessionIdTaken, TranscriptStore


def _answer(text_: str, call: str | None = None) -> Message:
    calls = [ToolCall(id=call, name="lookup", arguments={"topic": call})] if call else []
    return Message(role="assistant", content=text_, tool_calls=calls)


async def _open(t: TranscriptStore, sid: str, run_chain: str | None = None) -> int:
    config = SessionConfig(
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
    return await t.open_session(config, [Message(role="system", content="be brief")], run_chain=run_chain)


async def test_a_second_run_chain_under_one_session_id_is_refused_and_writes_nothing(store: Store) -> None:
    t = TranscriptStore(store)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    assert await _open(t, sid, "run-1") == 1
    assert await _open(t, sid, "run-1") == 1  # a retried prepare of the same run
    with pytest.raises(SessionIdTaken, match="holds the transcript of an earlier run"):
        await _open(t, sid, "run-2")
    row = await t.session_row(sid)
    assert row is not None and row.run_chain == "run-1"
    # A row stored before chains were kept belongs to no known run: refused too.
    old = f"s-{uuid.uuid4().hex[:8]}"
    assert await _open(t, old) == 1
    with pytest.raises(SessionIdTaken):
        await _open(t, old, "run-3")


async def test_a_session_written_step_by_step_reads_back_whole(store: Store) -> None:
    t = TranscriptStore(store)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    assert await _open(t, sid) == 1
    # A retried prepare changes nothing.
    assert await _open(t, sid) == 1
    row = await t.session_row(sid)
    assert row is not None and row.agent == "assistant" and row.root_id == sid

    first = [Message(role="user", content="hello")]
    pos = await t.commit_step(
        session_id=sid, position=1, new_messages=first, answer=_answer("", "c1"), root_id=sid, model="m", used=Usage(calls=1, input_tokens=10, output_tokens=2)
    )  # fmt: skip
    assert pos == 3
    tool = [Message(role="tool", tool_call_id="c1", name="lookup", content="facts")]
    pos = await t.commit_step(
        session_id=sid, position=3, new_messages=tool, answer=_answer("done"), root_id=sid, model="m", used=Usage(calls=1, input_tokens=20, output_tokens=3)
    )  # fmt: skip
    assert pos == 5

    expected = ["system:be brief", "user:hello", "assistant:", "tool:facts", "assistant:done"]
    assert [f"{m.role}:{m.content}" for m in await t.load(sid)] == expected
    # A fresh store (another worker) reads from the database; the cache answers only for the exact prefix.
    other = TranscriptStore(store)
    loaded = await other.prefix(sid, 5, last_answer=message_fingerprint(_answer("done")))
    assert [f"{m.role}:{m.content}" for m in loaded] == expected
    assert (await other.load(sid, upto=2))[-1].content == "hello"
    assert await t.usage_total(session_id=sid) == Usage(calls=2, input_tokens=30, output_tokens=5)


async def test_message_times_come_back_aware_in_utc_on_either_store(store: Store) -> None:
    t = TranscriptStore(store)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    before = datetime.now(UTC)
    await _open(t, sid)
    await t.append(sid, 1, [Message(role="user", content="what time is it")])
    after = datetime.now(UTC)
    found = await t.page(sid) + await t.search(sid, "time")
    assert len(found) == 3
    for stored in found:  # SQLite keeps no zone: a naive time here could not be compared with these
        assert stored.created_at.utcoffset() == UTC.utcoffset(None)
        assert before.replace(microsecond=0) <= stored.created_at <= after


async def test_a_retried_step_replaces_the_answer_and_its_usage(store: Store) -> None:
    t = TranscriptStore(store)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    await _open(t, sid)
    new = [Message(role="user", content="hi")]
    for answer, tokens in (("first attempt", 5), ("second attempt", 7)):
        await t.commit_step(
            session_id=sid, position=1, new_messages=new, answer=_answer(answer), root_id=sid, model="m", used=Usage(calls=1, output_tokens=tokens)
        )  # fmt: skip
    assert [m.content for m in await TranscriptStore(store).load(sid)] == ["be brief", "hi", "second attempt"]
    assert await t.usage_total(root_id=sid) == Usage(calls=1, output_tokens=7)


async def test_run_is_one_transaction(store: Store) -> None:
    t = TranscriptStore(store)
    sid = f"s-{uuid.uuid4().hex[:8]}"

    def half_then_fail(conn: Connection) -> None:
        row = {"session_id": sid, "agent": "a", "organisation": "o", "project": "p", "user_id": "u", "title": "t"}
        conn.execute(sessions.insert().values(**row, root_id=sid, depth=0, created_at=datetime.now(UTC)))
        raise RuntimeError("fails after the first write")

    with pytest.raises(RuntimeError, match="fails after the first write"):
        await store.run(half_then_fail)
    assert await t.session_row(sid) is None


async def test_sqlite_file_transactions_run_in_the_store_thread(tmp_path: Path) -> None:
    store = Store(f"sqlite+aiosqlite:///{tmp_path}/s.sqlite")
    await store.create_schema()
    try:
        name = await store.run(lambda conn: threading.current_thread().name)
        assert name.startswith("agent-tools-sqlite")
    finally:
        await store.close()
    # An in-memory database cannot be shared by a second engine: it stays on the async engine.
    memory = Store("sqlite+aiosqlite:///:memory:")
    try:
        assert await memory.run(lambda conn: conn.execute(text("select 41 + 1")).scalar_one()) == 42
    finally:
        await memory.close()


async def test_a_late_attempt_cannot_overwrite_the_answer_a_retry_gave(store: Store) -> None:
    """Attempt 1 timed out but its model call still finished after attempt 2's answer was accepted: the
    stored answer stays attempt 2's, which is the one the workflow has."""
    t = TranscriptStore(store)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    await _open(t, sid)
    new = [Message(role="user", content="hello")]
    accepted = _answer("from attempt 2")
    await t.commit_step(session_id=sid, position=1, new_messages=new, answer=accepted, root_id=sid, model="m", used=Usage(calls=1), attempt=2)  # fmt: skip
    await t.commit_step(session_id=sid, position=1, new_messages=new, answer=_answer("from attempt 1"), root_id=sid, model="m", used=Usage(calls=1), attempt=1)  # fmt: skip
    assert [m.content for m in await t.load(sid)][-1] == "from attempt 2"
    # A worker with an empty cache reads it back and vouches for it with the session's fingerprint.
    fresh = TranscriptStore(store)
    assert (await fresh.prefix(sid, 3, last_answer=message_fingerprint(accepted)))[-1].content == "from attempt 2"


async def test_a_stored_answer_other_than_the_sessions_is_refused_on_a_cache_miss(store: Store) -> None:
    from agent_tools._store.transcripts import TranscriptOutOfStep

    t = TranscriptStore(store)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    await _open(t, sid)
    await t.commit_step(session_id=sid, position=1, new_messages=[Message(role="user", content="hi")], answer=_answer("A"), root_id=sid, model="m", used=Usage(calls=1))  # fmt: skip
    with pytest.raises(TranscriptOutOfStep):
        await TranscriptStore(store).prefix(sid, 3, last_answer=message_fingerprint(_answer("B")))


async def test_nul_bytes_and_lone_surrogates_never_reach_the_store(store: Store) -> None:
    t = TranscriptStore(store)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    await _open(t, sid)
    dirty = Message(role="tool", tool_call_id="c\x00", name="n\ud800", content="a\x00b\ud800c")
    await t.append(sid, 1, [dirty])
    (loaded,) = (await t.load(sid))[1:]
    assert loaded.content == "a\ufffdb\ufffdc"
    assert (loaded.tool_call_id, loaded.name) == ("c\ufffd", "n\ufffd")


async def test_a_closed_store_used_again_opens_what_it_needs(store_url: str) -> None:
    """Like an engine after ``dispose()``: a client's transcript store read after the client closed it
    still answers (a SQLite file's worker threads are made again), on both databases."""
    s = Store(store_url)
    await s.create_schema()
    t = TranscriptStore(s)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    await _open(t, sid)
    await s.close()
    assert [m.content for m in await t.load(sid)] == ["be brief"]
    assert await t.count(sid) == 1
    await s.close()
