"""Memory recall on PostgreSQL: per-scope document frequencies, and a scope-aware full-text index.

* ``memory_terms`` (both databases; only PostgreSQL fills it): how many of a scope's memories hold each
  lexeme, kept by triggers, filled here from the existing memories.
* ``ix_memories_search_scope``: GIN over the words and the scope key as one more lexeme, replacing the
  word-only ``ix_memories_search`` (no extension needed).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Frozen copies of agent_tools/_store/memory_tables.py at this revision.
_FUNCTION = """CREATE OR REPLACE FUNCTION memory_terms_apply() RETURNS trigger LANGUAGE plpgsql AS $$
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
END $$"""
_TRIGGERS = [
    "CREATE TRIGGER memory_terms_ai AFTER INSERT ON memories REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION memory_terms_apply()",
    "CREATE TRIGGER memory_terms_ad AFTER DELETE ON memories REFERENCING OLD TABLE AS old_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION memory_terms_apply()",
    "CREATE TRIGGER memory_terms_au AFTER UPDATE OF content, scope_key ON memories FOR EACH ROW "
    "WHEN (OLD.search IS DISTINCT FROM NEW.search OR OLD.scope_key IS DISTINCT FROM NEW.scope_key) "
    "EXECUTE FUNCTION memory_terms_apply()",
]


def upgrade() -> None:
    op.create_table(
        "memory_terms",
        sa.Column("scope_key", sa.String(length=40), nullable=False),
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("docs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("scope_key", "lexeme"),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    # The migration holds memories' lock from here to its commit (CREATE TRIGGER takes it), so no save
    # falls between the counts and the triggers.
    op.execute(_FUNCTION)
    for statement in _TRIGGERS:
        op.execute(statement)
    op.execute(
        "INSERT INTO memory_terms (scope_key, lexeme, docs) "
        "SELECT m.scope_key, u.lexeme, count(*) FROM memories m, unnest(m.search) u GROUP BY 1, 2"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_memories_search_scope ON memories USING gin "
        "((array_to_tsvector(ARRAY[scope_key::text]) || search)) WITH (fastupdate = off)"
    )
    op.execute("DROP INDEX IF EXISTS ix_memories_search")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE INDEX IF NOT EXISTS ix_memories_search ON memories USING gin (search) WITH (fastupdate = off)"
        )
        op.execute("DROP INDEX IF EXISTS ix_memories_search_scope")
        op.execute("DROP FUNCTION IF EXISTS memory_terms_apply() CASCADE")
    op.drop_table("memory_terms")
