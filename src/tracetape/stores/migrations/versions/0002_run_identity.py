"""Run identity and idempotent ingest: 64-bit steps, and a key per stored line.

``events.line_key`` names what a record is in its run (its place in its source, a cassette
record's sequence number, an OTLP span's id), unique per run, so a line sent twice, in any
batching, is stored once. Rows stored before have no key. Steps become 64-bit on PostgreSQL
(SQLite's integers already are).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("events", "step", type_=sa.BigInteger, existing_nullable=True)
        op.alter_column("runs", "steps", type_=sa.BigInteger, existing_nullable=False)
    op.add_column("events", sa.Column("line_key", sa.String(32), nullable=True))
    op.create_index("events_line", "events", ["run_id", "line_key"], unique=True)


def downgrade() -> None:
    op.drop_index("events_line", "events")
    op.drop_column("events", "line_key")
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("runs", "steps", type_=sa.Integer, existing_nullable=False)
        op.alter_column("events", "step", type_=sa.Integer, existing_nullable=True)
