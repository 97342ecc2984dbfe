"""Run identity and idempotent ingest: 64-bit steps, and a key per stored line.

``events.line_key`` names what a record is in its run (a 64-bit digest of its run and its
place in its source and its content, a cassette record's sequence number or an OTLP span's
id: ``collector.ingest``), unique, so a line sent twice, in any batching, is stored
once. Steps become 64-bit on PostgreSQL (SQLite's integers already are).

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


def _line_key(run: str, rec: dict[str, Any]) -> int:
    source = rec.get("source", "")
    if source == "otlp" and rec.get("span_id"):
        rest = f"span\x1f{rec['span_id']}"
    elif rec.get("seq") is not None and ("digests" in rec or rec.get("kind") != "tool"):
        rest = f"seq\x1f{rec['seq']}\x1f{rec.get('key')}"
    else:
        rest = f"line\x1f{rec.get('line', 0)}\x1f0\x1f{rec.get('key')}\x1f{rec.get('out_digest')}"
    digest = hashlib.blake2b(f"{run}\x1f{source}\x1f{rest}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.alter_column("events", "step", type_=sa.BigInteger, existing_nullable=True)
        op.alter_column("runs", "steps", type_=sa.BigInteger, existing_nullable=False)
    op.add_column("events", sa.Column("line_key", sa.BigInteger, nullable=True))
    seen: set[int] = set()
    keys: list[dict[str, Any]] = []
    for row_id, run, record in bind.execute(
        sa.text("SELECT id, run_id, record FROM events ORDER BY id")
    ):
        key = _line_key(run, json.loads(record))
        if key not in seen:
            seen.add(key)
            keys.append({"i": row_id, "k": key})
    if keys:
        bind.execute(sa.text("UPDATE events SET line_key = :k WHERE id = :i"), keys)
    op.create_index("events_line", "events", ["line_key"], unique=True)


def downgrade() -> None:
    op.drop_index("events_line", "events")
    op.drop_column("events", "line_key")
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("runs", "steps", type_=sa.Integer, existing_nullable=False)
        op.alter_column("events", "step", type_=sa.Integer, existing_nullable=True)
