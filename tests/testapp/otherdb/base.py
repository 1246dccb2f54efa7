"""SQLite under another vendor's name, as a third-party backend (or Oracle) would report
itself: ``connection.vendor`` is what the system check judges."""

from __future__ import annotations

from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteWrapper


class DatabaseWrapper(SQLiteWrapper):
    vendor = "othervendor"
    display_name = "Other vendor"
