"""How :class:`~idempotency.stores.DatabaseStore` reaches its table: the database
alias, the model, the SQL built once per connection, "now" for an ORM update, and the
executor threads its ``a*`` twins run in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.functions import Now
from django.utils import timezone

from idempotency.codecs import seal
from idempotency.conf import Setting
from idempotency.core.backends import KEY_PREFIX
from idempotency.stores import authentication
from idempotency.stores import statements as sql
from idempotency.stores.atomic import AtomicStore
from idempotency.stores.records import StoredResponse

P = ParamSpec("P")
R = TypeVar("R")


class DatabaseTable(AtomicStore):
    """The records' table of a database store: ``using``, ``model``, its statements and
    their parameters."""

    #: ``OPTIONS`` of a database store (:mod:`idempotency.core.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "database": Setting(
            "default",
            "Database alias whose IdempotencyRecord table keeps the records.",
            "database",
        ),
        "response_cache": Setting(
            None,
            "Cache alias of a read-through cache of completed responses (Redis "
            "recommended): replays then cost no SQL. None: no response cache.",
            "cache",
            nullable=True,
        ),
        "key_prefix": KEY_PREFIX,
    }

    def __init__(
        self,
        *,
        database: str = "default",
        response_cache: str | None = None,
        key_prefix: str = KEY_PREFIX.default,
    ) -> None:
        """``database``: database alias; ``response_cache``: cache alias of this store's
        response cache, or None; ``key_prefix``: prefix of the response cache's keys."""
        self.database = database
        self._response_cache = response_cache
        self.key_prefix = key_prefix
        # SQL text per (database alias, vendor): built once, not on every request
        self._statements: dict[tuple[str, str], sql.Statements] = {}

    @property
    def using(self) -> str:
        """The database alias (``database``)."""
        return self.database

    @property
    def model(self) -> Any:
        from idempotency.models import IdempotencyRecord

        return IdempotencyRecord

    def _records(self) -> Any:
        return self.model.objects.using(self.using)

    async def run_in_thread(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Every ``a*`` twin: the sync call in Django's sync thread, as Django's own async
        ORM runs its queries.

        Django has no async cursor to await (its ``aget``, ``acreate``… are
        ``sync_to_async`` wrappers), and a connection and its open transaction belong to
        one thread. Run in another thread, a record call would use another connection:
        outside the caller's transaction, and waiting forever on a row that transaction
        holds (a sync caller in ``transaction.atomic()`` calling an async function under
        the same key). So a database store's async calls take the one thread-sensitive
        hop Django's ORM takes; :class:`~idempotency.stores.RedisStore` has no hop at all.
        Django looks after that thread's connection at request boundaries; a call that
        fails outside a transaction also drops a connection the server killed
        (``close_if_unusable_or_obsolete``), so the next call opens a new one instead of
        failing on the dead one (a script's event loop has no request boundaries)."""
        alias = self.using

        def call() -> R:
            try:
                return func(*args, **kwargs)
            except Exception:
                connection = connections[alias]
                if not connection.in_atomic_block:  # never close a caller's transaction
                    connection.close_if_unusable_or_obsolete()
                raise

        return await sync_to_async(call, thread_sensitive=True)()

    def _sql(self, connection: BaseDatabaseWrapper) -> sql.Statements:
        """The statements on ``connection``, built on first use."""
        cache_key = (connection.alias, connection.vendor)
        try:
            return self._statements[cache_key]
        except KeyError:
            pass
        built = sql.build(connection, self.model._meta.db_table)
        self._statements[cache_key] = built
        return built

    def _now_value(self) -> Any:
        """ "Now" for an ORM update: the database server's clock on PostgreSQL and MySQL
        (Django's ``Now()`` is ``CURRENT_TIMESTAMP(6)`` there, in the session's time zone,
        so MySQL's is :class:`UTCNow`)."""
        vendor = connections[self.using].vendor
        if vendor == "postgresql":
            return Now()
        if vendor == "mysql":
            return UTCNow()
        return timezone.now()

    @staticmethod
    def _values(
        connection: BaseDatabaseWrapper,
        scope: str,
        key: str,
        fingerprint: str,
        fence: int,
        method: str,
        route: str,
        *,
        lease: float | None,
        ttl: float,
        response: StoredResponse | None = None,
    ) -> dict[str, Any]:
        """The parameters of an upsert: a claim when ``lease`` is given, else a completed
        record holding ``response``."""
        clock = sql.Clock(connection)
        values = {
            "scope": scope,
            "key": key,
            "fingerprint": fingerprint,
            "fence": fence,
            "method": method[:10],
            "route": route[:255],
        }
        if lease is not None:  # a claim: its state and response columns are in the text
            return {**values, **clock.params(lease=lease, ttl=ttl)}
        stored = StoredResponse(0) if response is None else response
        stored = stored._replace(body=seal(stored.body))
        return {
            **values,
            "state": "completed",
            "status_code": stored.status,
            "response_headers": stored.headers_json(),
            "response_body": stored.body,
            "mac": authentication.sign(
                scope, key, fingerprint=fingerprint, fence=fence, stored=stored, ttl=ttl
            ),
            **clock.params(ttl=ttl),
        }

    @staticmethod
    def _upsert_mysql(
        connection: BaseDatabaseWrapper, statements: sql.Statements, upsert: str, params: Any
    ) -> Any:
        """Run a MySQL upsert and read the row it left (None: gone in between)."""
        assert statements.owner is not None
        with connection.cursor() as cursor:
            cursor.execute(upsert, params)
            cursor.execute(statements.owner, params)
            return cursor.fetchone()


class UTCNow(Now):
    """MySQL's and MariaDB's clock in UTC, the time zone Django stores datetimes in."""

    def as_mysql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(compiler, connection, template=sql.MYSQL_NOW, **extra_context)


def database_aliases() -> list[str]:
    """The aliases of ``STORES`` whose backend is a database store, ``"default"`` first."""
    from idempotency.stores import stores

    aliases = sorted(stores.entries, key=lambda alias: alias != "default")
    found = []
    for alias in aliases:
        cls = stores.backend_class(alias)
        if cls is not None and issubclass(cls, DatabaseTable):
            found.append(alias)
    return found


def configured_database() -> str:
    """The database of the first configured database store (``"default"`` first), else
    ``"default"``: where the purge, the metrics and the scope renaming look by default."""
    from idempotency.stores import stores

    for alias in database_aliases():
        store = stores[alias]
        if isinstance(store, DatabaseTable):
            return store.using
    return "default"
