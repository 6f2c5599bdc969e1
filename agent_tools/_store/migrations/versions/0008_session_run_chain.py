"""The run chain a session's rows belong to: a second run started under a finished session's id (a raw start
with Temporal's default reuse policy) is refused instead of writing over the first run's transcript
(``TranscriptStore.open_session``).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("run_chain", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("run_chain")
