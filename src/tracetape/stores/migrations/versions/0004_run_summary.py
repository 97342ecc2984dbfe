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

``pages``: diff pages kept whole (gzip), by a key of what they read (the two runs, how many
events each held, how they ended, the collector's version and configuration): a run's diff
against the run of its source before it is drawn when its recording's last lines are stored,
and a page drawn on view is kept too, so a first view in a new process reads it. A run whose
lines change forgets the pages that read it; the oldest beyond ``Database.KEPT_PAGES`` go.

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
    op.create_table(
        "pages",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("run_a", sa.String(200), nullable=False),
        sa.Column("run_b", sa.String(200), nullable=False),
        sa.Column("made", sa.Float, nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
    )
    op.create_index("pages_run_a", "pages", ["run_a"])
    op.create_index("pages_run_b", "pages", ["run_b"])


def downgrade() -> None:
    op.drop_table("pages")
    for name, _ in reversed(_COLUMNS):
        op.drop_column("runs", name)
