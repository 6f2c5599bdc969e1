"""The memory table, and the full-text index each database builds for it.

* SQLite: an external-content FTS5 table ``memories_fts`` (porter stemming) kept in step by triggers;
  ``create_sqlite_extras`` creates it. The scope token is indexed beside the text so a MATCH stays inside
  one scope instead of ranking every user's memories.
* PostgreSQL: a stored generated ``tsvector`` column (english configuration) with a GIN index, added right
  after the table is created.

``seq`` is an integer primary key on purpose: FTS5's external content addresses rows by a rowid that
must never change (an implicit SQLite rowid may, on VACUUM).
"""

from __future__ import annotations

from sqlalchemy import (
    DDL,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    event,
    text,
)

from agent_tools.activities.store.tables import metadata

memories = Table(
    "memories",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("memory_id", String(64), nullable=False, unique=True),
    Column("organisation", String(100), nullable=False),
    Column("project", String(100), nullable=False),
    Column("user_id", String(200), nullable=False),
    Column("agent", String(100), nullable=False),
    Column("scope_key", String(40), nullable=False),
    Column("content", Text, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("tier", String(20), nullable=False),
    Column("tags", Text, nullable=False, default=""),  # "|tag1|tag2|" so a LIKE finds one tag exactly
    Column("uses", Integer, nullable=False, default=1),
    # The call (session/call id) that last wrote or used the row: a retried activity sees its own mark and
    # does not count, promote or save a second time.
    Column("last_call", String(300)),
    Column("created_by_call", String(300), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("last_used_at", DateTime(timezone=True), nullable=False),
    Column("deleted_at", DateTime(timezone=True)),
    # Semantic recall (agent_tools/activities/embeddings.py): the content's embedding, unit length, float32
    # little-endian, and the model (``name`` or ``name@dimensions``) that made it; NULL without an endpoint or
    # when the endpoint failed at save time (then only full text finds the memory).
    Column("embedding", LargeBinary),
    Column("embedding_model", String(200)),
    # Dedup: one row per fact per scope (deleted rows are revived rather than duplicated).
    UniqueConstraint("scope_key", "content_hash", name="uq_memories_scope_hash"),
    Index("ix_memories_scope_updated", "scope_key", "updated_at"),
)

# PostgreSQL full text: generated tsvector + GIN. Runs once, when create_all creates the table.
# fastupdate off: with the default pending list, searches after a burst of saves recheck every pending row
# until (auto)vacuum merges it (measured: 1.3 s instead of 35 ms per query after a bulk load). Saves are rare
# next to searches, so they pay for the index update instead.
# (Two statements: asyncpg prepares each statement, so one DDL may hold only one.)
event.listen(
    memories,
    "after_create",
    DDL(  # type: ignore[no-untyped-call]
        "ALTER TABLE memories ADD COLUMN IF NOT EXISTS search tsvector "
        "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
    ).execute_if(dialect="postgresql"),
)
event.listen(
    memories,
    "after_create",
    DDL(  # type: ignore[no-untyped-call]
        "CREATE INDEX IF NOT EXISTS ix_memories_search ON memories USING gin (search) WITH (fastupdate = off)"
    ).execute_if(dialect="postgresql"),
)

# SQLite: the FTS5 index must go with its table (drop_schema), or a re-created table would reuse rowids
# that the stale index still maps to old text.
event.listen(
    memories,
    "after_drop",
    DDL("DROP TABLE IF EXISTS memories_fts").execute_if(dialect="sqlite"),  # type: ignore[no-untyped-call]
)

_SQLITE_FTS = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5("
    "scope_key, content, content='memories', content_rowid='seq', tokenize='porter unicode61')",
    "CREATE TRIGGER IF NOT EXISTS memories_fts_ai AFTER INSERT ON memories BEGIN "
    "INSERT INTO memories_fts(rowid, scope_key, content) VALUES (new.seq, new.scope_key, new.content); END",
    "CREATE TRIGGER IF NOT EXISTS memories_fts_ad AFTER DELETE ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, scope_key, content) "
    "VALUES ('delete', old.seq, old.scope_key, old.content); END",
    "CREATE TRIGGER IF NOT EXISTS memories_fts_au AFTER UPDATE OF content, scope_key ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, scope_key, content) "
    "VALUES ('delete', old.seq, old.scope_key, old.content); "
    "INSERT INTO memories_fts(rowid, scope_key, content) VALUES (new.seq, new.scope_key, new.content); END",
]


def create_sqlite_extras(conn: Connection) -> None:
    """FTS5 index and its triggers (idempotent)."""
    for statement in _SQLITE_FTS:
        conn.execute(text(statement))
