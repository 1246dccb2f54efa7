"""redis-py clients for the Redis store, submit tokens and locks, built through redis-py's
public API from a URL and options, or from the settings of a Django cache.

A :class:`RedisConnector` is given either ``location``, a ``redis://``, ``rediss://`` or
``unix://`` URL, or ``cache``, the alias of a ``CACHES`` entry whose backend is Django's
``RedisCache`` or django-redis': it then reads that entry's first server (the primary:
every read and write goes there) and ``OPTIONS``, and builds a client of its own with
them. Keyword options given to the connector (:data:`CLIENT_OPTIONS`, or any other
keyword of redis-py's connection pool) win over the cache's. The pool is redis-py's
``BlockingConnectionPool``: a caller that finds every connection busy waits for one
instead of failing. The async client (``redis.asyncio``) is built with the same URL and
options, one per running event loop: an asyncio connection belongs to the loop that
opened it.

:class:`RedisBackend` is the constructor the Redis backends share (the store, submit
tokens, locks).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from idempotency.conf import Setting
from idempotency.utils.backends import KEY_PREFIX

logger = logging.getLogger("idempotency")

DJANGO_REDIS_CACHE = "django.core.cache.backends.redis.RedisCache"
DJANGO_REDIS_PACKAGE_CACHE = "django_redis.cache.RedisCache"
#: django-redis' connection factory for a Redis Cluster (idempotency.redis_cluster): a
#: cache on it makes a cluster client.
CLUSTER_FACTORY = "idempotency.redis_cluster.ClusterConnectionFactory"
#: The pool's cap unless ``max_connections`` says otherwise (redis-py's own default).
DEFAULT_MAX_CONNECTIONS = 100
#: A command that fails on a broken connection (or times out) is sent again this many
#: times, after pauses growing from ``RETRY_BASE`` up to ``RETRY_CAP`` seconds with jitter
#: (redis-py's ``Retry``; the engine retries a completion for as long as its lease lasts).
RETRIES = 3
RETRY_BASE = 0.02
RETRY_CAP = 0.25
#: Seconds a caller waits for a free connection when ``max_connections`` are in use.
POOL_TIMEOUT = 5.0

#: The URL schemes of a Redis ``LOCATION``.
LOCATION_SCHEMES = ("redis", "rediss", "unix")

#: The ``cache`` option of the Redis backends: a ``CACHES`` alias whose Redis they use.
REDIS_CACHE = Setting(
    None,
    "Instead of LOCATION: the CACHES alias of a Redis cache (Django's RedisCache or "
    'django-redis) whose connection settings it uses. Neither: the cache "default".',
    "cache",
    nullable=True,
)

#: Options of the redis-py client every Redis backend takes; None leaves a cache's own
#: setting (or redis-py's default) in place.
CLIENT_OPTIONS = {
    "max_connections": Setting(
        None,
        "The most connections its pool opens (per process, and per event loop); callers "
        "beyond it wait up to pool_timeout for one. None: 100.",
        "integer",
        nullable=True,
    ),
    "pool_timeout": Setting(
        None, "Seconds a caller waits for a free connection. None: 5.", "seconds", nullable=True
    ),
    "retries": Setting(
        None,
        "Times a command that failed on a broken connection or timed out is sent again. None: 3.",
        "integer",
        inclusive=True,
        nullable=True,
    ),
    "socket_timeout": Setting(
        None,
        "Seconds a command may wait for its reply. None: the cache's, or 5.",
        "seconds",
        nullable=True,
    ),
    "socket_connect_timeout": Setting(
        None,
        "Seconds a connection may take to open. None: the cache's, or 5.",
        "seconds",
        nullable=True,
    ),
    "ssl_ca_certs": Setting(
        None,
        "rediss://: the CA file its certificate is checked against.",
        "text",
        nullable=True,
    ),
    "cluster": Setting(False, "True for a Redis Cluster (redis-py's RedisCluster).", "bool"),
}

#: django-redis' ``OPTIONS`` that are connection settings, by redis-py's names.
_DJANGO_REDIS_OPTIONS = {
    "SOCKET_TIMEOUT": "socket_timeout",
    "SOCKET_CONNECT_TIMEOUT": "socket_connect_timeout",
    "PASSWORD": "password",
    "USERNAME": "username",
}
#: django-redis' ``CLIENT_CLASS`` values whose first ``LOCATION`` is the primary.
_DJANGO_REDIS_CLIENTS = {
    "django_redis.client.DefaultClient",
    "django_redis.client.default.DefaultClient",
    "django_redis.client.HerdClient",
    "django_redis.client.herd.HerdClient",
}
#: Options of Django's own ``RedisCache`` that are the cache's, not the connection's.
_DJANGO_CACHE_ONLY = {"serializer", "parser_class"}


def _first_location(location: Any, alias: str) -> str:
    servers = location.split(",") if isinstance(location, str) else list(location or ())
    servers = [server.strip() for server in servers if server and server.strip()]
    if not servers:
        raise ImproperlyConfigured(f"The cache {alias!r} has no LOCATION.")
    return servers[0]


def cache_connection(alias: str) -> tuple[str, dict[str, Any]]:
    """The URL of the primary of the Redis cache ``alias`` and its connection options, by
    redis-py's names (``pool_class``: a class). ``ImproperlyConfigured`` when ``alias``
    is not a Redis cache of Django's or django-redis."""
    from django.conf import settings

    entry = settings.CACHES.get(alias)
    if entry is None:
        raise ImproperlyConfigured(f"The cache {alias!r} is not in CACHES.")
    backend = entry.get("BACKEND", "")
    options = dict(entry.get("OPTIONS") or {})
    if backend not in (DJANGO_REDIS_CACHE, DJANGO_REDIS_PACKAGE_CACHE):
        raise ImproperlyConfigured(
            f"The cache {alias!r} uses {backend!r}, not a Redis cache ({DJANGO_REDIS_CACHE} "
            f"or {DJANGO_REDIS_PACKAGE_CACHE})."
        )
    url = _first_location(entry.get("LOCATION"), alias)
    kwargs: dict[str, Any] = {}
    if backend == DJANGO_REDIS_CACHE:
        # Django passes the rest of OPTIONS to its pool class' from_url, as is done here
        kwargs = {k: v for k, v in options.items() if k not in _DJANGO_CACHE_ONLY}
    else:
        client_class = options.get("CLIENT_CLASS", "django_redis.client.DefaultClient")
        factory = options.get("CONNECTION_FACTORY")
        if client_class not in _DJANGO_REDIS_CLIENTS or factory not in (None, CLUSTER_FACTORY):
            raise ImproperlyConfigured(
                f"The cache {alias!r} uses django-redis with {client_class!r}"
                f"{f' and CONNECTION_FACTORY {factory!r}' if factory else ''}: give the "
                "backend a location URL instead (cluster=True for a Redis Cluster)."
            )
        if factory == CLUSTER_FACTORY:
            kwargs = {"cluster": True, **(options.get("CLUSTER_KWARGS") or {})}
        for name, kwarg in _DJANGO_REDIS_OPTIONS.items():
            if name in options:
                kwargs[kwarg] = options[name]
        kwargs.update(options.get("CONNECTION_POOL_KWARGS") or {})
        if options.get("CONNECTION_POOL_CLASS"):
            kwargs["pool_class"] = options["CONNECTION_POOL_CLASS"]
    pool_class = kwargs.get("pool_class")
    if isinstance(pool_class, str):
        kwargs["pool_class"] = import_string(pool_class)
    return url, kwargs


class RedisConnector:
    """A sync redis-py client and one ``redis.asyncio`` client per event loop, both made on
    first use from ``location`` or ``cache`` and ``options`` (module docstring)."""

    def __init__(
        self,
        location: str | None = None,
        *,
        cache: str | None = None,
        user: str = "Redis",
        **options: Any,
    ) -> None:
        if (location is None) == (cache is None):
            raise ImproperlyConfigured(
                f"{user} takes exactly one of location (a redis://, rediss:// or unix:// "
                "URL) and cache (the alias of a Redis cache)."
            )
        if location is not None and not location.startswith(("redis://", "rediss://", "unix://")):
            raise ImproperlyConfigured(
                f"{user}: location {location!r} is not a redis://, rediss:// or unix:// URL."
            )
        self.location = location
        self.cache = cache
        self.user = user
        self.options = options
        self._lock = threading.Lock()
        self._client: Any = None
        self._connection: tuple[str, dict[str, Any]] | None = None
        self._cluster: bool | None = None
        # per loop: its client and the generator that closes it when the loop ends
        self._async: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[Any, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()

    def connection(self) -> tuple[str, dict[str, Any]]:
        """The URL and the options the clients are built with (read once)."""
        found = self._connection
        if found is None:
            found = self._connection = self._read_connection()
        return found

    def _read_connection(self) -> tuple[str, dict[str, Any]]:
        if self.location is not None:
            url, kwargs = self.location, dict[str, Any]()
        else:
            assert self.cache is not None
            url, kwargs = cache_connection(self.cache)
        kwargs.update(self.options)
        return url, kwargs

    @property
    def client(self) -> Any:
        """The sync client (``redis.Redis``, or ``RedisCluster`` with ``cluster``)."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    url, kwargs = self.connection()
                    self._client = _build(url, kwargs, asynchronous=False)
                client = self._client
        return client

    def async_client(self) -> Any:
        """The running event loop's ``redis.asyncio`` client (call it on the loop).

        The client is closed when its loop ends (:func:`_close_at_loop_end`): left open,
        its connections would be closed by the garbage collector, on a loop already
        closed (``RuntimeError: Event loop is closed`` from redis-py's ``__del__``).
        """
        loop = asyncio.get_running_loop()
        found = self._async.get(loop)
        if found is None:
            url, kwargs = self.connection()
            client = _build(url, kwargs, asynchronous=True)
            closer = _close_at_loop_end(client, lambda: self._async.pop(loop, None))
            found = self._async[loop] = (client, closer)
        return found[0]

    def is_cluster(self) -> bool:
        cluster = self._cluster
        if cluster is None:
            cluster = self._cluster = bool(self.connection()[1].get("cluster"))
        return cluster


class RedisBackend:
    """The constructor every Redis backend shares: a backend class lists it first among its
    bases (``class RedisTokens(RedisBackend, TokenBackend)``) and adds only what it does
    with :attr:`client`. Its keywords are its :attr:`options`, described there."""

    #: The URL schemes of a Redis ``LOCATION``.
    location_schemes: ClassVar[tuple[str, ...]] = LOCATION_SCHEMES
    #: The ``OPTIONS`` of a Redis backend (:mod:`idempotency.utils.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "cache": REDIS_CACHE,
        **CLIENT_OPTIONS,
        "key_prefix": KEY_PREFIX,
    }

    def __init__(
        self,
        location: str | None = None,
        *,
        cache: str | None = None,
        max_connections: int | None = None,
        pool_timeout: float | None = None,
        retries: int | None = None,
        socket_timeout: float | None = None,
        socket_connect_timeout: float | None = None,
        ssl_ca_certs: str | None = None,
        cluster: bool = False,
        key_prefix: str = KEY_PREFIX.default,
    ) -> None:
        self.location = location
        self.cache = cache
        self.key_prefix = key_prefix
        given = {
            "max_connections": max_connections,
            "pool_timeout": pool_timeout,
            "retries": retries,
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_connect_timeout,
            "ssl_ca_certs": ssl_ca_certs,
            "cluster": cluster,
        }
        self.connector = RedisConnector(
            location,
            cache=cache or ("default" if location is None else None),
            user=type(self).__name__,
            # None and a False cluster leave the cache's setting or redis-py's default
            **{
                name: value
                for name, value in given.items()
                if value is not None and value is not False
            },
        )

    @property
    def client(self) -> Any:
        """The sync redis-py client (``redis.Redis``, or ``RedisCluster``)."""
        return self.connector.client


async def _closed_on_shutdown(
    client: Any, forget: Callable[[], object]
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        forget()
        try:
            await client.aclose()
            pool = getattr(client, "connection_pool", None)  # a RedisCluster has none
            if pool is not None:
                await pool.disconnect()  # a pool given to the client outlives aclose()
        except Exception:  # the server may be gone: the connections are dropped anyway
            logger.debug(
                "closing a Redis client at the end of its event loop failed", exc_info=True
            )


def _close_at_loop_end(client: Any, forget: Callable[[], object]) -> AsyncGenerator[None, None]:
    """Close ``client`` (and call ``forget``) when the running loop shuts down.

    asyncio has no "loop closing" callback, but ``asyncio.run`` (which asgiref's
    ``async_to_sync``, uvicorn and pytest-asyncio use) calls ``loop.shutdown_asyncgens()``
    before closing its loop: it closes every async generator the loop saw start and has
    not finished. The generator returned here is started at once (run to its ``yield``,
    which awaits nothing) so the loop registers it, and its ``finally`` closes the client
    on the loop, while the loop can still run the connections' close. The caller keeps
    the generator referenced until then.
    """
    closer = _closed_on_shutdown(client, forget)
    step: Any = closer.__anext__()  # the loop's first-iteration hook registers the generator
    with contextlib.suppress(StopIteration):
        step.send(None)  # runs the body to its yield
    return closer


def _build(url: str, kwargs: dict[str, Any], *, asynchronous: bool) -> Any:
    kwargs = dict(kwargs)
    cluster = bool(kwargs.pop("cluster", False))
    pool_class = kwargs.pop("pool_class", None)
    pool_timeout = kwargs.pop("pool_timeout", POOL_TIMEOUT)
    retries = int(kwargs.pop("retries", RETRIES))
    # the two have the same names (Redis, RedisCluster, the pools, Retry), each for its I/O
    redis_module: Any = importlib.import_module("redis.asyncio" if asynchronous else "redis")
    retry_class = importlib.import_module(f"{redis_module.__name__}.retry").Retry
    retry = kwargs.get("retry")
    if not isinstance(retry, retry_class):
        # none given, or the sync client's given to the async one: as many retries
        # FullJitterBackoff: redis-py 5.0 has it (ExponentialWithJitterBackoff came later)
        from redis.backoff import FullJitterBackoff

        backoff = FullJitterBackoff(cap=RETRY_CAP, base=RETRY_BASE)
        retries = getattr(retry, "get_retries", lambda: retries)() if retry else retries
        kwargs["retry"] = retry_class(backoff, retries)
    if cluster:
        for refused in ("read_from_replicas", "load_balancing_strategy"):
            if kwargs.get(refused):
                raise ImproperlyConfigured(
                    f"{refused} would read idempotency records from replicas, which may "
                    "lag behind their primary; remove it."
                )
        return redis_module.RedisCluster.from_url(url, **kwargs)
    if pool_class is not None:
        # the cache's pool class, or its redis.asyncio namesake for the async client
        name = pool_class.__name__
        if asynchronous or not isinstance(pool_class, type):
            pool_class = getattr(redis_module, name, redis_module.ConnectionPool)
    else:
        # callers beyond the cap wait for a connection (redis-py's plain pool would fail
        # them at once, at its default cap of 100 too)
        pool_class = redis_module.BlockingConnectionPool
        kwargs.setdefault("max_connections", DEFAULT_MAX_CONNECTIONS)
    if issubclass(pool_class, redis_module.BlockingConnectionPool):
        kwargs.setdefault("timeout", pool_timeout)
    if not asynchronous and _packs_as_hiredis(url, kwargs):
        kwargs["command_packer"] = HiredisPacker()
    pool = pool_class.from_url(url, **kwargs)
    return redis_module.Redis(connection_pool=pool)


class HiredisPacker:
    """The sync connections' ``command_packer`` (a parameter of redis-py's ``Connection``):
    hiredis' ``pack_command`` on a command's arguments as they are. redis-py's own packer
    passes every argument through its encoder, in a generator, before calling that same
    function, work that grows with every argument a store command sends. The bytes are
    the same (UTF-8, strict: used only where
    those are the connection's encoding); a command whose name has a space (``SCRIPT
    LOAD``) or an argument hiredis refuses (``None``, ``bool``, ``bytearray``) is packed
    by a plain redis-py ``Connection``, as it would be without this."""

    def __init__(self) -> None:
        from hiredis import pack_command

        self._pack = pack_command
        # a connection never connected: its packer only
        self._theirs: Any = importlib.import_module("redis").Connection().pack_command

    def pack(self, *args: Any) -> list[bytes]:
        name = args[0]
        if (" " not in name) if isinstance(name, str) else (b" " not in name):
            try:
                return [self._pack(args)]
            except TypeError:
                pass
        packed: list[bytes] = self._theirs(*args)
        return packed


def _packs_as_hiredis(url: str, kwargs: dict[str, Any]) -> bool:
    """Whether the sync connections of ``url`` and ``kwargs`` take :class:`HiredisPacker`:
    hiredis installed, no packer or connection class of the caller's, and the encoding
    redis-py's default (UTF-8, strict), in the options and in the URL's query."""
    if importlib.util.find_spec("hiredis") is None:
        return False
    if "command_packer" in kwargs or "connection_class" in kwargs or "encoding" in url:
        return False
    encoding = str(kwargs.get("encoding", "utf-8")).lower().replace("_", "-")
    return encoding in ("utf-8", "utf8") and kwargs.get("encoding_errors", "strict") == "strict"
