"""How a run ended: ``runs.ended``, as a cassette's trailer or a live recording's commit says
(``completed``, ``interrupted``, ``failed: Type``, ``unfinished``); NULL where nothing said
(seed lines, spans, OTLP, and every run stored before this revision).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("ended", sa.String(140), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "ended")
