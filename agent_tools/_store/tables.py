"""The core tables. Capability modules add theirs to the same ``metadata``."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("session_id", String(200), primary_key=True),
    Column("agent", String(100), nullable=False),
    Column("organisation", String(100), nullable=False),
    Column("project", String(100), nullable=False),
    Column("user_id", String(200), nullable=False),
    Column("title", String(300), nullable=False),
    Column("root_id", String(200), nullable=False),
    Column("parent_id", String(200)),
    Column("depth", Integer, nullable=False, default=0),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # The first run id of the run chain that owns the session's rows (None: stored before it was kept).
    Column("run_chain", String(200)),
    Index("ix_sessions_root", "root_id"),
)

transcript = Table(
    "transcript_messages",
    metadata,
    Column("session_id", String(200), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("role", String(20), nullable=False),
    Column("content", Text, nullable=False, default=""),
    Column("tool_calls", JSON),
    Column("tool_call_id", String(200)),
    Column("name", String(200)),
    Column("artifact_ref", String(100)),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # The activity attempt that wrote a model answer (None for other messages): see commit_step.
    Column("attempt", Integer),
)

usage = Table(
    "usage_records",
    metadata,
    # One row per model call; the key makes a retried activity overwrite instead of double-counting.
    Column("call_key", String(300), primary_key=True),
    Column("session_id", String(200), nullable=False),
    Column("root_id", String(200), nullable=False),
    Column("model", String(200), nullable=False),
    Column("input_tokens", BigInteger, nullable=False, default=0),
    Column("output_tokens", BigInteger, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_usage_session", "session_id"),
    Index("ix_usage_root", "root_id"),
)

artifacts = Table(
    "artifacts",
    metadata,
    Column("ref", String(100), primary_key=True),
    Column("session_id", String(200), nullable=False),
    Column("run_id", String(200), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("content", Text, nullable=False),
    Column("size", Integer, nullable=False),
    Column("is_json", Integer, nullable=False, default=0),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_artifacts_session", "session_id"),
)
