"""Events: each wait's match key (``event_subscriptions.match_key``), so an event reads the waits it can
match instead of every open wait of its kind. Existing rows keep a null key: they are read for every event,
as before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("event_subscriptions", sa.Column("match_key", sa.String(length=32), nullable=True))
    op.create_index(
        "ix_event_subscriptions_scope_match",
        "event_subscriptions",
        ["organisation", "project", "match_key"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_event_subscriptions_scope_match", table_name="event_subscriptions")
    op.drop_column("event_subscriptions", "match_key")
