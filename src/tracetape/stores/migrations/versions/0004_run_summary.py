"""Each run's numbers and findings, computed when its lines are stored (never on view).

``runs.summary``: a JSON object of the run's numbers (latency, tokens in/out and in all,
cost and the model calls it could not price), its findings by severity (``tracetape
check``), its final answer (redacted, short), computed from ``runs.summary_of`` events by the
collector's background worker after each batch; NULL until then (and for every run stored
before this revision, until a collector backfills it). ``began``/``finished``: the run's own
time (its records' ``ts``), which the run list's dates filter on; ``latency_ms``, ``cost``
and ``worst`` (the worst finding's rank: 3 fatal, 2 suspicious, 1 expected, 0 none) let the
database sort and filter by them; ``names``: the tools and models the run called, which the
run list's text filter matches.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("summary", sa.Text),
    ("summary_of", sa.BigInteger),
    ("began", sa.Float),
    ("finished", sa.Float),
    ("latency_ms", sa.Float),
    ("cost", sa.Float),
    ("worst", sa.Integer),
    ("names", sa.Text),
)


def upgrade() -> None:
    for name, kind in _COLUMNS:
        op.add_column("runs", sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    for name, _ in reversed(_COLUMNS):
        op.drop_column("runs", name)
