"""Events: the waits the ingress signals directly (``event_subscriptions``), each claimed by the first event
delivered to it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_subscriptions",
        sa.Column("subscription_id", sa.String(length=64), nullable=False),
        sa.Column("organisation", sa.String(length=100), nullable=False),
        sa.Column("project", sa.String(length=100), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=200), nullable=False),
        sa.Column("match", sa.JSON(), nullable=False),
        sa.Column("exclude_event_ids", sa.JSON(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_event_id", sa.String(length=64), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_by", sa.String(length=16), nullable=True),
        sa.PrimaryKeyConstraint("subscription_id"),
    )
    op.create_index(
        "ix_event_subscriptions_scope_kind", "event_subscriptions", ["organisation", "project", "kind"], unique=False
    )
    op.create_index("ix_event_subscriptions_deadline", "event_subscriptions", ["deadline"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_event_subscriptions_deadline", table_name="event_subscriptions")
    op.drop_index("ix_event_subscriptions_scope_kind", table_name="event_subscriptions")
    op.drop_table("event_subscriptions")
