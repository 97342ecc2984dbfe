"""How a run ended, and its verdict against the run of its source before it.

``runs.ended``: as a cassette's trailer or a ``DatabaseStore``'s commit says (``completed``,
``interrupted``, ``failed: Type``); NULL where nothing said (seed lines, spans, OTLP, a live
push, and every run stored before this revision). ``runs.verdict``: the first line of
``tracetape diff`` of the run against the run ``runs.verdict_of`` (the run of its source
before it), and the line of what each run came to, computed when a recording's last lines are
stored; NULL until then, and again once either run changes.

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
    op.add_column("runs", sa.Column("verdict", sa.Text, nullable=True))
    op.add_column("runs", sa.Column("verdict_of", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "verdict_of")
    op.drop_column("runs", "verdict")
    op.drop_column("runs", "ended")
