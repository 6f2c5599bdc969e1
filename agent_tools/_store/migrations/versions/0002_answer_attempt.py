"""The attempt that wrote a model answer: a late attempt of a step whose retry was accepted must not
overwrite the answer the workflow received (``TranscriptStore.commit_step``).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("transcript_messages") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("transcript_messages") as batch:
        batch.drop_column("attempt")
