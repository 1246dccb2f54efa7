"""Atomic mode sends the release of a view's savepoint with the statement after it.

Under atomic mode a view's own ``transaction.atomic()`` is nested in the layer's
transaction, so Django ends the view's block with ``RELEASE SAVEPOINT``: a round trip of
its own that the same view without the layer does not make. While the layer's
transaction is open, :class:`ReleaseBatch` (a Django execute wrapper on its connection)
holds each release back and sends it in one query with the statement that follows it,
usually the layer's own completion: the server runs the same statements in the same
order, and the wait between them goes.

Holding a release back changes nothing anyone can observe: a savepoint released one
statement later contains the same work, and a rollback to an enclosing savepoint (or of
the whole transaction) undoes it either way, so a release still held then is dropped
instead (one of a savepoint older than the rollback's, which only hand-written
``savepoint_commit`` calls out of order leave, is sent before the rollback, as asked).
``SAVEPOINT`` itself is never held back: a statement that reaches the server around
Django's cursor (psycopg's ``copy()``, ``callproc()``, the raw connection) would then
run before the savepoint it belongs in, and a rollback of the block would keep it.

While Django logs queries (``DEBUG``, ``CaptureQueriesContext``, ``assertNumQueries``,
the debug toolbar) nothing is held back, so the log lists every statement as Django
asked for it. Only psycopg 3's client-side binding cursor (Django's default) takes two
statements in one query (the simple query protocol); on a server-side binding cursor,
or another driver or database, a held release is sent on its own first, as Django
would have.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

#: Django's savepoint statements (``DatabaseOperations.savepoint_commit_sql`` and
#: ``savepoint_rollback_sql``, with the names ``BaseDatabaseWrapper.savepoint()`` gives).
#: The number after ``_x`` counts up on each connection: a larger one is a later savepoint.
_SAVEPOINT_END = re.compile(r'(RELEASE|ROLLBACK TO) SAVEPOINT "s\d+_x(\d+)"')


@functools.cache
def _client_cursor() -> type | None:
    """psycopg 3's client-side binding cursor, the one cursor that runs several
    statements in one query; None without psycopg 3."""
    try:
        from psycopg import ClientCursor
    except ImportError:
        return None
    return ClientCursor


class ReleaseBatch:
    """A Django execute wrapper that sends ``RELEASE SAVEPOINT`` with the next statement."""

    __slots__ = ("_client_cursor", "held")

    def __init__(self) -> None:
        #: The releases not sent yet, in order.
        self.held: list[str] = []
        self._client_cursor = _client_cursor() or ()

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: dict[str, Any],
    ) -> Any:
        if params is None and not many:
            ended = _SAVEPOINT_END.fullmatch(sql)
            if ended is not None:
                if ended.group(1) == "RELEASE":
                    self.held.append(sql)
                    return None
                # a rollback ends the savepoints made after its own: their releases go
                # unsent (with Django's nesting that is every release held); any other is
                # sent first, as it was asked for before
                target = int(ended.group(2))
                self.held = [r for r in self.held if _number(r) <= target]
        if not self.held:
            return execute(sql, params, many, context)
        held, self.held = self.held, []
        cursor = context["cursor"].cursor
        if many or not isinstance(cursor, self._client_cursor):
            for release in held:  # as Django would have sent them: one by one
                execute(release, None, False, context)
            return execute(sql, params, many, context)
        # the parameters merged first, as psycopg would merge them: its cache of parsed
        # statement texts then keeps hitting (a text joined to a savepoint's name is new
        # every time, and would evict the project's own statements from that cache)
        statement = sql if params is None else cursor.mogrify(sql, params)
        result = execute("; ".join([*held, statement]), None, False, context)
        for _release in held:
            cursor.nextset()  # the releases' results come first
        return result


def _number(release: str) -> int:
    """The counter in a held release's savepoint name."""
    return int(release.rsplit("_x", 1)[1].rstrip('"'))


def batches(connection: BaseDatabaseWrapper) -> bool:
    """Whether a release on ``connection`` can ride with the next statement: PostgreSQL
    through psycopg 3, while Django is not logging its queries (``DEBUG``, or a test
    capturing them: the log then shows every statement as Django asked for it)."""
    if connection.vendor != "postgresql" or connection.queries_logged:
        return False
    if _client_cursor() is None:
        return False
    return getattr(getattr(connection, "Database", None), "__name__", "") == "psycopg"


@contextmanager
def batched_releases(aliases: list[str]) -> Iterator[None]:
    """While open, a savepoint release on ``aliases`` rides with the statement after it
    (see the module's docstring). Open it inside the transaction and close it only where
    the transaction ends: a release still held then is never sent, since the commit or
    rollback ends every savepoint anyway."""
    installed = []
    for alias in aliases:
        connection = connections[alias]
        if batches(connection):
            wrapper = ReleaseBatch()
            connection.execute_wrappers.append(wrapper)
            installed.append((connection, wrapper))
    try:
        yield
    finally:
        for connection, wrapper in installed:
            connection.execute_wrappers.remove(wrapper)
