"""SQL store (SQLAlchemy 2): SQLite embedded, PostgreSQL at scale, one schema for both.

The store is :class:`agent_tools._store.db.Store`. This package imports nothing itself: a client that reads a
SQLite transcript (:mod:`agent_tools._store.transcript_rows`) never loads SQLAlchemy.
"""
