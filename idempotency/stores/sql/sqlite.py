"""SQLite's SQL in :class:`~idempotency.stores.database.DatabaseStore`: the application's clock.

SQLite runs in the application's process, so "now" and each deadline are parameters
that the application computes (:class:`~idempotency.stores.sql.Clock`). Everything else
is PostgreSQL's text (:mod:`.postgresql`): SQLite has ``INSERT … ON CONFLICT`` and
``RETURNING`` (3.35 and later), and reads datetimes back as text the store converts.
"""

from __future__ import annotations

#: "Now": a parameter, the application's clock.
NOW = "%(now)s"


def later(name: str) -> str:
    """SQL of "now plus parameter ``name``'s seconds": the parameter itself, a deadline
    computed by the application."""
    return f"%({name})s"
