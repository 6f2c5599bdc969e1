"""The web cache table: searches (10 min), pages (15 / 30 min), shared by every worker through the store.

Times are epoch seconds (float): the same comparison on SQLite and PostgreSQL, no timezone round trips.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, String, Table, Text

from agent_tools._store.tables import metadata

web_cache = Table(
    "web_cache",
    metadata,
    # sha256 of kind + normalised request: fixed length whatever the URL or query.
    Column("key", String(64), primary_key=True),
    Column("kind", String(20), nullable=False),
    Column("subject", Text, nullable=False),  # URL or query, for people reading the table
    Column("value", Text, nullable=False),  # JSON of the cached model
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index("ix_web_cache_expires", "expires_at"),
)
