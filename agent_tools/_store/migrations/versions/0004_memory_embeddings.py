"""Semantic recall: each memory's embedding (float32 blob, unit length) and the model that made it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not a batch: on SQLite a batch may copy the table, and the copy would lose the FTS5
# triggers that keep memories_fts in step. Both databases add (and, SQLite 3.35+, drop) a column in place.
def upgrade() -> None:
    op.add_column("memories", sa.Column("embedding", sa.LargeBinary(), nullable=True))
    op.add_column("memories", sa.Column("embedding_model", sa.String(length=200), nullable=True))


def downgrade() -> None:
    op.drop_column("memories", "embedding_model")
    op.drop_column("memories", "embedding")
