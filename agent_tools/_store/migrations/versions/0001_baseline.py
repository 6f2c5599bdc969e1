"""Baseline: the schema as ``metadata.create_all`` made it before migrations existed.

Databases created before then are stamped at this revision (see ``agent_tools._store.migrations``). Like
every revision, it is a frozen record: the SQL below is copied, not imported, so later edits to the table
modules cannot change what it did.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


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
_POSTGRES_FTS = [
    "ALTER TABLE memories ADD COLUMN IF NOT EXISTS search tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED",
    "CREATE INDEX IF NOT EXISTS ix_memories_search ON memories USING gin (search) WITH (fastupdate = off)",
]


def upgrade() -> None:
    op.create_table(
        "artifacts",
        sa.Column("ref", sa.String(length=100), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("is_json", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("ref"),
    )
    op.create_index("ix_artifacts_session", "artifacts", ["session_id"], unique=False)

    op.create_table(
        "events",
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("organisation", sa.String(length=100), nullable=False),
        sa.Column("project", sa.String(length=100), nullable=False),
        sa.Column("source", sa.String(length=100), nullable=False),
        sa.Column("delivery_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=200), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("event_id"),
    )
    op.create_index("ix_events_scope_time", "events", ["organisation", "project", "received_at"], unique=False)

    op.create_table(
        "memories",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("memory_id", sa.String(length=64), nullable=False),
        sa.Column("organisation", sa.String(length=100), nullable=False),
        sa.Column("project", sa.String(length=100), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("agent", sa.String(length=100), nullable=False),
        sa.Column("scope_key", sa.String(length=40), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("tier", sa.String(length=20), nullable=False),
        sa.Column("tags", sa.Text(), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("last_call", sa.String(length=300), nullable=True),
        sa.Column("created_by_call", sa.String(length=300), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("memory_id"),
        sa.UniqueConstraint("scope_key", "content_hash", name="uq_memories_scope_hash"),
    )
    op.create_index("ix_memories_scope_updated", "memories", ["scope_key", "updated_at"], unique=False)

    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("agent", sa.String(length=100), nullable=False),
        sa.Column("organisation", sa.String(length=100), nullable=False),
        sa.Column("project", sa.String(length=100), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("root_id", sa.String(length=200), nullable=False),
        sa.Column("parent_id", sa.String(length=200), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id"),
    )
    op.create_index("ix_sessions_root", "sessions", ["root_id"], unique=False)

    op.create_table(
        "transcript_messages",
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tool_calls", sa.JSON(), nullable=True),
        sa.Column("tool_call_id", sa.String(length=200), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("artifact_ref", sa.String(length=100), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq"),
    )
    op.create_table(
        "usage_records",
        sa.Column("call_key", sa.String(length=300), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("root_id", sa.String(length=200), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("call_key"),
    )
    op.create_index("ix_usage_root", "usage_records", ["root_id"], unique=False)
    op.create_index("ix_usage_session", "usage_records", ["session_id"], unique=False)

    op.create_table(
        "web_cache",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_web_cache_expires", "web_cache", ["expires_at"], unique=False)

    # What the tables do not declare, per dialect (memory_tables.py adds the same on a new database).
    if op.get_bind().dialect.name == "sqlite":
        for statement in _SQLITE_FTS:
            op.execute(statement)
    elif op.get_bind().dialect.name == "postgresql":
        for statement in _POSTGRES_FTS:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS memories_fts")
    op.drop_index("ix_web_cache_expires", table_name="web_cache")

    op.drop_table("web_cache")
    op.drop_index("ix_usage_session", table_name="usage_records")
    op.drop_index("ix_usage_root", table_name="usage_records")

    op.drop_table("usage_records")
    op.drop_table("transcript_messages")
    op.drop_index("ix_sessions_root", table_name="sessions")

    op.drop_table("sessions")
    op.drop_index("ix_memories_scope_updated", table_name="memories")

    op.drop_table("memories")
    op.drop_index("ix_events_scope_time", table_name="events")

    op.drop_table("events")
    op.drop_index("ix_artifacts_session", table_name="artifacts")

    op.drop_table("artifacts")
