"""The Redis behind the stores, tokens and locks: a client to it (E007) and, under
``check --deploy``, whether it keeps what it acknowledged across a restart (W007): AOF,
fsynced every second or on every write."""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlsplit

from django.core import checks

from idempotency.checks.caches import cache_backend
from idempotency.checks.messages import cap, message
from idempotency.checks.stores import Use, configured, is_store

#: The Redis backends in use, by what they connect to (``cache 'x'`` or a URL shown
#: without its password): one of them (its ``client`` reaches that Redis) and what uses it.
RedisUsers = dict[str, tuple[Any, list[str]]]


def target(backend: Any) -> str:
    """What a Redis backend connects to, in words: its cache alias, or its URL without
    the user and password."""
    location = getattr(backend, "location", None)
    if location is None:
        return f"cache {backend.cache or 'default'!r}"
    parts = urlsplit(location)
    host = parts.netloc.rpartition("@")[2]
    return str(parts._replace(netloc=host).geturl())


def redis_users(raw: dict[Any, Any], values: dict[str, Any], uses: list[Use]) -> RedisUsers:
    """The Redis backends in use: the Redis stores, and the Redis tokens and locks (locks
    only where ``LOCKS`` is set: the default is inert until a lock is taken)."""
    from idempotency.locks.locking import lock_backends
    from idempotency.locks.redis import RedisLockBackend
    from idempotency.tokens.api import token_backends
    from idempotency.tokens.redis import RedisTokens

    found: list[tuple[str, Any]] = [
        (what, instance)
        for what, store, instance, _mode in uses
        if is_store(store, "idempotency.stores.redis.RedisStore")
    ]
    parts: list[tuple[Any, type, str]] = [(token_backends, RedisTokens, "submit tokens")]
    if "LOCKS" in raw:
        parts.append((lock_backends, RedisLockBackend, "locks"))
    for handler, cls, what in parts:
        for alias, (backend_class, instance) in configured(handler, values).items():
            if issubclass(backend_class, cls):
                found.append((f"the {what} {alias!r}", instance))
    users: RedisUsers = {}
    for what, backend in found:
        _backend, who = users.setdefault(target(backend), (backend, []))
        if what not in who:
            who.append(what)
    return users


def redis_unavailable(backend: Any) -> str:
    """Why ``backend`` cannot have its Redis client, or "" when it can."""
    if importlib.util.find_spec("redis") is None:
        return "redis-py is not installed"
    if getattr(backend, "location", None) is not None:
        return ""
    from django.core.exceptions import ImproperlyConfigured

    from idempotency.core.redis_clients import cache_connection

    alias = backend.cache or "default"
    if cache_backend(alias) is None:
        return f"the cache {alias!r} is not in CACHES"
    try:
        cache_connection(alias)
    except ImproperlyConfigured as exc:
        return str(exc).rstrip(".")
    return ""


def users_text(users: list[str]) -> str:
    """The first three users of a Redis, and how many more there are."""
    more = f" (and {len(users) - 3} more)" if len(users) > 3 else ""
    return " and ".join(users[:3]) + more


def check_redis(users: RedisUsers) -> list[checks.CheckMessage]:
    """E007: a Redis backend in use cannot have its client."""
    errors = []
    for backend, who in users.values():
        if reason := redis_unavailable(backend):
            needs = "redis-py" if getattr(backend, "location", None) else "a Redis cache"
            alias = getattr(backend, "cache", None) or "default"
            errors.append(
                message("E007", what=cap(users_text(who)), needs=needs, reason=reason, alias=alias)
            )
    return errors


def redis_forgets(client: Any) -> str | None:
    """What a Redis server forgets of the records it acknowledged, in words ("": no more
    than AOF's ``appendfsync everysec`` does, the last second on a machine crash), or None
    when it cannot tell (CONFIG forbidden or renamed, as on managed services, or no
    answer)."""
    try:
        found = [
            client.config_get(name).get(name) for name in ("appendonly", "appendfsync", "save")
        ]
    except Exception:  # noqa: BLE001 - an unanswerable server is not a finding
        return None
    if all(value is None for value in found):
        return None
    aof, fsync, save = [
        (v.decode() if isinstance(v, bytes) else str(v or "")).strip().lower() for v in found
    ]
    if aof == "yes":
        if fsync == "no":
            return (
                "leaves the fsync of its append-only file to the kernel (appendfsync no): a "
                "machine crash forgets the records of the last 30 seconds or so"
            )
        return ""
    if save:
        return (
            f'keeps no append-only file, only RDB snapshots (appendonly no, save "{save}"): '
            "a restart forgets every record written since the last snapshot"
        )
    return 'persists nothing (appendonly no, save ""): a restart forgets every record'


def check_persistence(users: RedisUsers) -> list[checks.CheckMessage]:
    """W007 for each reachable Redis of ``users`` that forgets more than AOF with
    ``appendfsync everysec`` would."""
    warnings = []
    for where, (backend, who) in users.items():
        if redis_unavailable(backend):
            continue  # E007
        try:
            client = backend.client
        except Exception:  # noqa: BLE001 - E007 covers a missing or wrong cache
            continue
        if forgets := redis_forgets(client):
            warnings.append(message("W007", what=users_text(who), alias=where, forgets=forgets))
    return warnings
