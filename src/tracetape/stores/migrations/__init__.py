"""The database schema's versions, as Alembic migrations (``versions/``).

``upgrade(engine)`` brings a database to the newest revision: on first start it creates the
schema; later releases add revisions here and every collector upgrades on start. Two
processes starting at once against one PostgreSQL database take an advisory lock first; on
SQLite the migration runs inside one write transaction. A database newer than this
tracetape (a revision it does not know) is an error that says so, never a downgrade.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...errors import ConfigError

__all__ = ["HEAD", "upgrade"]

HEAD = "0004"
_HERE = Path(__file__).parent
_LOCK = 0x7472_6163  # "trac": the advisory lock id of schema upgrades


def upgrade(engine: Engine) -> None:
    """Upgrade ``engine``'s database to ``HEAD`` (see the module docstring)."""
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    config = Config()
    config.set_main_option("script_location", str(_HERE))
    known = {rev.revision for rev in ScriptDirectory.from_config(config).walk_revisions()}
    with _sqlite_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"), {"id": _LOCK})
        current = None
        if sa.inspect(conn).has_table("alembic_version"):
            current = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
        if current is not None and current not in known:
            raise ConfigError(
                f"{engine.url.render_as_string()}: the database's schema is at revision "
                f"{current!r}, newer than this tracetape knows ({HEAD}); upgrade tracetape"
            )
        config.attributes["connection"] = conn
        try:
            command.upgrade(config, "head")
        except CommandError as exc:
            raise ConfigError(f"{engine.url.render_as_string()}: {exc}") from None


@contextmanager
def _sqlite_lock(engine: Engine) -> Iterator[None]:
    """On a SQLite file, one migrating process at a time (a lock file beside it)."""
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    if not path or path == ":memory:":
        yield
        return
    with open(f"{path}.migrate-lock", "a+b") as fh:  # noqa: PTH123 - a plain lock file
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
