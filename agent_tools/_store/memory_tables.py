"""The memory table, and the full-text index each database builds for it.

* SQLite: an external-content FTS5 table ``memories_fts`` (porter stemming) kept in step by triggers;
  ``create_sqlite_extras`` creates it. The scope token is indexed beside the text so a MATCH stays inside
  one scope instead of ranking every user's memories.
* PostgreSQL: a stored generated ``tsvector`` column (english configuration) with a GIN index, added right
  after the table is created. The GIN index is on the scope's key as one more lexeme beside the words
  (``SCOPED_SEARCH``), so a search finds its scope's matches in the index, not every scope's.
* ``memory_terms`` (PostgreSQL): how many of a scope's memories hold each lexeme, kept exact by triggers in
  the writing transaction. A search reads its words' document frequencies there (one index lookup each)
  instead of counting matches (a GIN scan of every match plus a heap visit per counted row). SQLite leaves
  it empty: FTS5 counts from its index alone.

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

from agent_tools._store.tables import metadata

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
    # Semantic recall (agent_tools/activities/_embeddings.py): the content's embedding, unit length, float32
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
# until (auto)vacuum merges it, many times slower after a bulk load. Saves are rare
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


# The indexed expression: the row's words and its scope key as one more lexeme (array_to_tsvector takes it as
# it is, unparsed), so "this scope AND any of these words" is one GIN search that never reaches other scopes'
# matches. A query must spell the expression exactly so to use the index. The bare ``search`` column has no
# index: a condition on it is checked on the rows a plan reads, which is what the newest-first query wants.
# (Not btree_gin's GIN over (scope_key, search): it also serves scope_key alone, and the planner then reads a
# whole scope through it to sort by date instead of walking ix_memories_scope_updated; and it needs an
# extension that a database may not offer.)
SCOPED_SEARCH = "(array_to_tsvector(ARRAY[scope_key::text]) || search)"
event.listen(
    memories,
    "after_create",
    DDL(  # type: ignore[no-untyped-call]
        f"CREATE INDEX IF NOT EXISTS ix_memories_search_scope ON memories USING gin ({SCOPED_SEARCH}) "
        "WITH (fastupdate = off)"
    ).execute_if(dialect="postgresql"),
)


memory_terms = Table(
    "memory_terms",
    metadata,
    Column("scope_key", String(40), primary_key=True),
    Column("lexeme", Text, primary_key=True),
    # Rows of the scope whose ``search`` holds the lexeme, deleted ones included (as counting matches did).
    Column("docs", Integer, nullable=False),
)

# The triggers that keep memory_terms exact (PostgreSQL). Inserts and deletes are counted per statement
# from its transition table, summed per (scope, lexeme) and applied in key order (INSERT ... SELECT ...
# ORDER BY upserts in that order): two writers lock the counters in the same order, so they cannot
# deadlock. An update counts only when the text or the scope changes (a recall's use count, the most
# frequent update, costs nothing here).
PG_TERMS_DDL = [
    """CREATE OR REPLACE FUNCTION memory_terms_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_terms (scope_key, lexeme, docs)
        SELECT n.scope_key, u.lexeme, count(*) FROM new_rows n, unnest(n.search) u
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (scope_key, lexeme) DO UPDATE SET docs = memory_terms.docs + excluded.docs;
        RETURN NULL;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO memory_terms (scope_key, lexeme, docs)
        SELECT o.scope_key, u.lexeme, -count(*) FROM old_rows o, unnest(o.search) u
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (scope_key, lexeme) DO UPDATE SET docs = memory_terms.docs + excluded.docs;
        RETURN NULL;
    END IF;
    -- A row whose text or scope changed.
    INSERT INTO memory_terms (scope_key, lexeme, docs)
    SELECT scope_key, lexeme, sum(n) FROM (
        SELECT NEW.scope_key AS scope_key, u.lexeme, 1 AS n FROM unnest(NEW.search) u
        UNION ALL
        SELECT OLD.scope_key, u.lexeme, -1 FROM unnest(OLD.search) u
    ) d GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2
    ON CONFLICT (scope_key, lexeme) DO UPDATE SET docs = memory_terms.docs + excluded.docs;
    RETURN NULL;
END $$""",
    "CREATE TRIGGER memory_terms_ai AFTER INSERT ON memories REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION memory_terms_apply()",
    "CREATE TRIGGER memory_terms_ad AFTER DELETE ON memories REFERENCING OLD TABLE AS old_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION memory_terms_apply()",
    "CREATE TRIGGER memory_terms_au AFTER UPDATE OF content, scope_key ON memories FOR EACH ROW "
    "WHEN (OLD.search IS DISTINCT FROM NEW.search OR OLD.scope_key IS DISTINCT FROM NEW.scope_key) "
    "EXECUTE FUNCTION memory_terms_apply()",
]


def _pg_terms_triggers(target: Table, connection: Connection, **_: object) -> None:
    # memory_terms is created after memories (create_all orders tables by name), so both exist here.
    if connection.dialect.name == "postgresql":
        for statement in PG_TERMS_DDL:
            connection.execute(text(statement))


def _pg_terms_function_drop(target: Table, connection: Connection, **_: object) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("DROP FUNCTION IF EXISTS memory_terms_apply() CASCADE"))


event.listen(memory_terms, "after_create", _pg_terms_triggers)
event.listen(memory_terms, "after_drop", _pg_terms_function_drop)

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
