"""Tool approvals: every decision, for audit, and the grant an approved call consumes once
(``agent_tools._store.approval_tables``).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_approvals",
        sa.Column("session_id", sa.String(200), primary_key=True),
        sa.Column("approval_id", sa.String(200), primary_key=True),
        sa.Column("call_id", sa.String(200), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("arguments_preview", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("decided_by", sa.String(200)),
        sa.Column("via", sa.String(20)),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("consumed_at", sa.DateTime(timezone=True)),
        sa.Column("result", sa.Text()),
    )
    op.create_index("ix_tool_approvals_decided", "tool_approvals", ["session_id", "decided_at"])


def downgrade() -> None:
    op.drop_index("ix_tool_approvals_decided", table_name="tool_approvals")
    op.drop_table("tool_approvals")
