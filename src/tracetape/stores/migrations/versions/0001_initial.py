"""The first schema: batches, runs, events.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("received", sa.Float, nullable=False),
        sa.Column("lines", sa.Integer, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("source", sa.Text, nullable=True),
        sa.Column("first_seen", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
        sa.Column("events", sa.BigInteger, nullable=False),
        sa.Column("steps", sa.Integer, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
    )
    op.create_index("runs_last_seen", "runs", ["last_seen"])
    op.create_table(
        "events",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("received", sa.Float, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("name", sa.Text, nullable=True),
        sa.Column("step", sa.Integer, nullable=True),
        sa.Column("batch", sa.String(64), sa.ForeignKey("batches.digest"), nullable=True),
        sa.Column("record", sa.Text, nullable=False),
    )
    op.create_index("events_run", "events", ["run_id", "id"])
    op.create_index("events_name", "events", ["name", "run_id"])


def downgrade() -> None:
    op.drop_table("events")
    op.drop_table("runs")
    op.drop_table("batches")
