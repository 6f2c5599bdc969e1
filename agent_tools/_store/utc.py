"""Times as the store gives them back: aware, in UTC. SQLite keeps no zone, so the store writes and compares
every time as UTC. Light on purpose: the plain SQLite transcript read uses it without SQLAlchemy."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["as_utc"]


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC time (a naive one is taken as UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
