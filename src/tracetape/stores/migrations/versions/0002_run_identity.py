"""Run identity and idempotent ingest: 64-bit steps, and a key per stored line.

``events.line_key`` names what a record is in its run (its place in its source and its
content, a cassette record's sequence number, an OTLP span's id: ``collector.ingest``), unique
per run, so a line sent twice, in any batching, is stored once. Steps become 64-bit on
PostgreSQL (SQLite's integers already are).

The rows stored before get their key from their stored record, as ``collector.ingest`` gave it
when this revision was written (a frozen copy below: a migration never changes with later
code); a record that holds per-field digests, or is not a tool call, was read from a cassette.
Where a run already holds the same line twice (pushed twice before this revision), the first
keeps the key and the others stay as they are, without one.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _line_key(rec: dict[str, Any]) -> str:
    source = rec.get("source", "")
    basis: tuple[Any, ...]
    if source == "otlp" and rec.get("span_id"):
        basis = ("span", rec["span_id"])
    elif rec.get("seq") is not None and ("digests" in rec or rec.get("kind") != "tool"):
        basis = ("seq", source, rec["seq"], rec.get("key"))
    else:
        basis = ("line", source, rec.get("line", 0), 0, rec.get("run"), rec.get("key"),
                 rec.get("out_digest"))  # fmt: skip
    text = json.dumps(basis, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.alter_column("events", "step", type_=sa.BigInteger, existing_nullable=True)
        op.alter_column("runs", "steps", type_=sa.BigInteger, existing_nullable=False)
    op.add_column("events", sa.Column("line_key", sa.String(32), nullable=True))
    seen: set[tuple[str, str]] = set()
    keys: list[dict[str, Any]] = []
    for row_id, run, record in bind.execute(
        sa.text("SELECT id, run_id, record FROM events ORDER BY id")
    ):
        key = _line_key(json.loads(record))
        if (run, key) not in seen:
            seen.add((run, key))
            keys.append({"i": row_id, "k": key})
    if keys:
        bind.execute(sa.text("UPDATE events SET line_key = :k WHERE id = :i"), keys)
    op.create_index("events_line", "events", ["run_id", "line_key"], unique=True)


def downgrade() -> None:
    op.drop_index("events_line", "events")
    op.drop_column("events", "line_key")
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("runs", "steps", type_=sa.Integer, existing_nullable=False)
        op.alter_column("events", "step", type_=sa.Integer, existing_nullable=True)
