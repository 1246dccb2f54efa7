"""What crossed the wire to PostgreSQL: libpq's own protocol trace of a connection.

Django's ``CaptureQueriesContext`` records what code asked its cursor to run; this
records the messages psycopg sent, so a test can count round trips (a simple-protocol
``Query`` message is one) and see which statements shared one.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from django.db.backends.base.base import BaseDatabaseWrapper


@contextmanager
def sent_queries(connection: BaseDatabaseWrapper) -> Iterator[list[str]]:
    """The text of every ``Query`` message sent on ``connection`` (psycopg 3) while
    open, one item per message, in order; filled when the block ends."""
    from psycopg import pq

    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    sent: list[str] = []
    with tempfile.TemporaryFile() as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield sent
        finally:
            pgconn.untrace()
            trace.seek(0)
            for line in trace.read().decode().splitlines():
                parts = line.split("\t", 3)
                if len(parts) == 4 and parts[0] == "F" and parts[2] in ("Query", "Parse"):
                    sent.append(_text(parts[3]))


def _text(message: str) -> str:
    """The statement of a traced ``Query`` (`` "text"``) or ``Parse`` (`` "name" "text"
    count types...``); libpq quotes the text without escaping what it contains."""
    message = message.strip()
    parse = _PARSE.fullmatch(message)
    if parse is not None:
        return parse.group(1)
    return message[1:-1]


_PARSE = re.compile(r'"[^"]*" "(.*)" \d+(?: \S+)*')
