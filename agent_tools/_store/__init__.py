"""SQL store (SQLAlchemy 2, async): SQLite embedded, PostgreSQL at scale, one schema for both."""

from agent_tools._store.db import Store

__all__ = ["Store"]
