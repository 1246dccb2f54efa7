"""The Redis behind the stores, tokens and locks: a Redis cache whose connection settings
they can use (E007) and, under ``check --deploy``, whether it keeps anything across a
restart (W007)."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.core import checks

from idempotency.checks.caches import cache_backend
from idempotency.checks.messages import cap, message
from idempotency.checks.stores import Use, is_store


def redis_users(
    raw: dict[Any, Any], values: dict[str, Any], uses: list[Use]
) -> dict[str, list[str]]:
    """What builds its Redis client from a cache's settings, by cache alias: the Redis
    stores in use, and the locks and tokens when set to Redis."""
    default = values["REDIS_ALIAS"]
    users: dict[str, list[str]] = {}
    for what, store, instance, _mode in uses:
        if is_store(store, "idempotency.stores.redis.RedisStore"):
            alias = getattr(instance, "alias", None) if instance is not None else default
            if alias is None:
                continue  # a store built from a URL: no cache to check
            if what not in users.setdefault(alias, []):
                users[alias].append(what)
    from idempotency.locks.locking import LOCK_BACKENDS
    from idempotency.locks.redis import RedisLockBackend
    from idempotency.tokens.api import TOKEN_BACKENDS
    from idempotency.tokens.redis import RedisTokens

    # LOCK_BACKEND defaults to Redis but is inert until a lock is taken: check it when set
    locks = raw.get("LOCK_BACKEND")
    if locks is not None and LOCK_BACKENDS.names(locks, RedisLockBackend):
        users.setdefault(default, []).append(f"LOCK_BACKEND {locks!r}")
    tokens = values["SUBMIT_TOKEN_BACKEND"]
    if TOKEN_BACKENDS.names(tokens, RedisTokens):
        users.setdefault(default, []).append(f"SUBMIT_TOKEN_BACKEND {tokens!r}")
    return users


def redis_unavailable(alias: Any) -> str:
    """Why no Redis client can be built from the cache ``alias``, or "" when it can."""
    from django.core.exceptions import ImproperlyConfigured

    from idempotency.core.redis_clients import cache_connection

    if importlib.util.find_spec("redis") is None:
        return "redis (redis-py) is not installed"
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


def check_redis(values: dict[str, Any], users: dict[str, list[str]]) -> list[checks.CheckMessage]:
    """E007: something needs a django-redis connection its alias cannot give."""
    errors = []
    for alias, who in users.items():
        where = "IDEMPOTENCY['REDIS_ALIAS']" if alias == values["REDIS_ALIAS"] else "its alias"
        if reason := redis_unavailable(alias):
            errors.append(
                message("E007", what=cap(users_text(who)), reason=reason, alias=alias, where=where)
            )
    return errors


def redis_persists(client: Any) -> bool | None:
    """Whether a Redis server keeps data across a restart (AOF or RDB), or None when it
    cannot tell (CONFIG forbidden or renamed, as on managed services, or no answer)."""
    try:
        appendonly = client.config_get("appendonly").get("appendonly")
        save = client.config_get("save").get("save")
    except Exception:  # noqa: BLE001 - an unanswerable server is not a finding
        return None
    if appendonly is None and save is None:
        return None
    text = [v.decode() if isinstance(v, bytes) else str(v or "") for v in (appendonly, save)]
    return text[0].strip().lower() == "yes" or bool(text[1].strip())


def check_persistence(users: dict[str, list[str]]) -> list[checks.CheckMessage]:
    """W007 for each reachable Redis of ``users`` that persists nothing."""
    warnings = []
    for alias, who in users.items():
        if redis_unavailable(alias):
            continue  # E007
        from idempotency.core.redis_clients import RedisConnector

        try:
            client = RedisConnector(cache=alias).client
        except Exception:  # noqa: BLE001 - E007 covers a missing or wrong cache
            continue
        if redis_persists(client) is False:
            warnings.append(message("W007", what=users_text(who), alias=alias))
    return warnings
