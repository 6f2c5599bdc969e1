"""Schema migrations (Alembic): how a database gets to the schema this code expects.

A new database is created from the table definitions and stamped at the newest revision (one step, no
replay of history). A database with a revision is upgraded. A database created before migrations existed
(tables, no ``alembic_version``) is stamped at the baseline, which describes exactly that schema, then
upgraded. tests/test_migrations.py checks that the revisions lead to the same schema as the tables.

A schema change is a change to the tables plus a revision:
``alembic revision --autogenerate -m "what changed"`` (alembic.ini at the repository root; it uses
AGENT_TOOLS_DATABASE_URL), then review the generated file and move ``HEAD`` to it (``HEAD`` lives in
:mod:`agent_tools._store.transcript_rows`, which clients load without SQLAlchemy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, inspect, text

from agent_tools._store.transcript_rows import HEAD

if TYPE_CHECKING:
    from alembic.config import Config

BASELINE = "0001"
# Two workers starting on one new PostgreSQL database must not both create it.
_PG_LOCK_KEY = 0x41475453  # "AGTS"
# Tables of the baseline schema: their presence without alembic_version marks a pre-migrations database.
_BASELINE_MARKERS = frozenset({"sessions", "transcript_messages", "usage_records"})


# Objects the tables do not declare: SQLite's FTS5 index over memories (a virtual table and its shadow
# tables) and PostgreSQL's generated tsvector column with its GIN index. Revisions manage them by hand, and
# comparing the database with the tables leaves them out.
_UNDECLARED = ("memories_fts", "search", "ix_memories_search")


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    return not (name or "").startswith(_UNDECLARED)


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", "agent_tools._store:migrations")
    cfg.attributes["connection"] = connection
    return cfg


def current_revision(conn: Connection) -> str | None:
    """The database's revision, or None when it has none (a new or pre-migrations database)."""
    if "alembic_version" not in set(inspect(conn).get_table_names()):
        return None
    revision: str | None = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return revision


def migrate(conn: Connection, create_new: Callable[[Connection], None]) -> str:
    """Bring the schema behind ``conn`` to the newest revision, inside the caller's transaction.

    ``create_new`` creates every table (and the dialect's extras) on an empty database. Returns what was
    done: "current" (nothing to do), "created", "upgraded" or "stamped-baseline".
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    tables = set(inspect(conn).get_table_names())
    if "alembic_version" in tables and conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD:
        return "current"
    if not tables:
        # A new database: create the tables and record HEAD as ``alembic stamp head`` would (its version
        # table, one row), without loading Alembic. Every fresh deployment, test store and bench run
        # starts here, and Alembic, once loaded, stays in the worker's memory.
        create_new(conn)
        conn.execute(
            text(
                "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
                "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
            )
        )
        conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": HEAD})
        return "created"
    from alembic import command

    cfg = alembic_config(conn)
    if "alembic_version" in tables:
        command.upgrade(cfg, "head")
        return "upgraded"
    if tables & _BASELINE_MARKERS:
        command.stamp(cfg, BASELINE)
        command.upgrade(cfg, "head")
        return "stamped-baseline"
    create_new(conn)
    command.stamp(cfg, "head")
    return "created"
