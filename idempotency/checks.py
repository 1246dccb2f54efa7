"""System checks of django-idempotency (ids ``idempotency.E0xx`` / ``W0xx``).

Every message lives in :data:`MESSAGES`, so each id is used for one problem
only. The checks read ``settings.IDEMPOTENCY`` as written (not the cached
settings object) and never raise. Only the deployment check (``check --deploy``)
connects anywhere: it asks the Redis behind the store, tokens and locks whether it
persists anything (W007).
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from idempotency.conf import DEFAULTS, MODES


@dataclass(frozen=True)
class _Message:
    msg: str
    hint: str


#: Every message of every check, by id. ``{placeholders}`` are filled per message.
#: W002 is retired: a CacheStore on DummyCache stores nothing, which is an error (E012).
MESSAGES: dict[str, _Message] = {
    "E001": _Message(
        "The IDEMPOTENCY setting must be a dict, not {type}.",
        "Write IDEMPOTENCY = {{...}} with the settings to change, or remove it.",
    ),
    "E002": _Message(
        "Unknown key {key!r} in the IDEMPOTENCY setting.",
        "{suggestion}Valid keys: {valid}.",
    ),
    "E003": _Message(
        "IDEMPOTENCY['MODE'] is {value!r}; it must be 'auto', 'atomic' or 'lease'.",
        "'auto' uses atomic mode where the store supports it and lease mode elsewhere.",
    ),
    "E004": _Message(
        "IDEMPOTENCY[{name!r}] is {value!r}; it must be {expected}.",
        "Give a number of seconds (or of rows for PURGE_BATCH_SIZE).",
    ),
    "E005": _Message(
        "IDEMPOTENCY[{name!r}] = {value!r} cannot be imported: {error}",
        "Give the dotted path of an importable object, such as {default!r}.",
    ),
    "E006": _Message(
        "IDEMPOTENCY['MODE'] is 'atomic', but the store {store} does not support atomic mode.",
        "Use DatabaseStore for atomic mode, or set MODE to 'lease' or 'auto'.",
    ),
    "E007": _Message(
        "{what} needs django-redis, but {reason}.",
        "Install django-redis and point IDEMPOTENCY['REDIS_ALIAS'] (now {alias!r}) at a "
        "CACHES entry whose BACKEND is 'django_redis.cache.RedisCache'.",
    ),
    "E008": _Message(
        "IDEMPOTENCY[{name!r}] names the cache {alias!r}, which is not in CACHES.",
        "Add that alias to CACHES or name one of: {aliases}.",
    ),
    "E009": _Message(
        "IDEMPOTENCY['ANONYMOUS'] is {value!r}; it must be 'reject' or 'ignore'.",
        "'reject' answers 403 to anonymous requests with a key; 'ignore' runs them "
        "without idempotency. Anonymous callers never share stored responses.",
    ),
    "E010": _Message(
        "IDEMPOTENCY[{name!r}] = {value!r} is not a valid HTTP header name.",
        "A header name is one or more letters, digits or !#$%&'*+-.^_`|~ (RFC 9110 token).",
    ),
    "E011": _Message(
        "IDEMPOTENCY['REPLAY_HEADERS'] {problem}.",
        "Give a list of response header names. Set-Cookie and hop-by-hop headers "
        "(Connection, Transfer-Encoding, ...) are never replayed.",
    ),
    "E012": _Message(
        "The idempotency store is a CacheStore on the cache {alias!r}, a DummyCache: "
        "nothing is stored, so no request is deduplicated.",
        "Point IDEMPOTENCY['CACHE_ALIAS'] at a real cache (Redis), or use DatabaseStore.",
    ),
    "E013": _Message(
        "IDEMPOTENCY['STORE'] = {value!r} is not a store class.",
        "Name a subclass of idempotency.stores.base.BaseStore, such as "
        "'idempotency.stores.DatabaseStore'.",
    ),
    "E014": _Message(
        "IDEMPOTENCY[{name!r}] is {value!r}; it must be one of {choices}.",
        "See the configuration section of the README.",
    ),
    "E015": _Message(
        "IDEMPOTENCY['DATABASE_ALIAS'] names the database {alias!r}, which is not in DATABASES.",
        "Add that alias to DATABASES or name one of: {aliases}.",
    ),
    "E016": _Message(
        "IDEMPOTENCY['TTL'] ({ttl}) is shorter than IDEMPOTENCY['LEASE'] ({lease}).",
        "A record must outlive its lease, or an in-progress key could expire and run again "
        "while its first request is still running: make TTL at least LEASE.",
    ),
    "E017": _Message(
        "IDEMPOTENCY['ATOMIC_DATABASES'] {problem}.",
        "List the aliases (keys of DATABASES) that protected views write to, besides "
        "DATABASE_ALIAS.",
    ),
    "E018": _Message(
        "IDEMPOTENCY['METRICS'] is on, but prometheus_client is not installed.",
        "pip install 'django-idempotency[metrics]', or set METRICS to False.",
    ),
    "W001": _Message(
        "The idempotency store is a CacheStore on the cache {alias!r}, a LocMemCache: "
        "each process has its own, so a key is only deduplicated within one process.",
        "With several worker processes (gunicorn, uWSGI, Celery), point "
        "IDEMPOTENCY['CACHE_ALIAS'] at a shared cache (Redis), or use DatabaseStore.",
    ),
    "W006": _Message(
        "Atomic mode wraps only the database {alias!r} in the view's transaction; "
        "writes to {aliases} would stay outside it.",
        "A view that writes to those databases keeps those writes when its key is released "
        "(a 5xx, an exception), and its retry repeats them. List the aliases protected views "
        "write to in IDEMPOTENCY['ATOMIC_DATABASES'] (or per view: databases=[...]), or "
        "silence this warning if no protected view writes there.",
    ),
    "W003": _Message(
        "IDEMPOTENCY['RESPONSE_CACHE'] is the cache {alias!r}, a LocMemCache: it is not "
        "shared, so replays in other processes still query the database.",
        "Use a shared cache (Redis) as RESPONSE_CACHE, or set it to None.",
    ),
    "W004": _Message(
        "DATABASES[{alias!r}] has ATOMIC_REQUESTS=True and IDEMPOTENCY['MODE'] is 'lease': "
        "a lease claim commits only with the view's transaction, so concurrent requests "
        "cannot see it and may run the same key twice.",
        "Use MODE 'atomic' or 'auto' with DatabaseStore, a Redis store for lease mode, or "
        "exclude idempotent views from ATOMIC_REQUESTS with transaction.non_atomic_requests.",
    ),
    "W007": _Message(
        "The Redis behind {what} (cache {alias!r}) persists nothing (appendonly no, "
        'save ""): a restart forgets every record, so retries of completed requests '
        "run again.",
        "Turn on AOF (appendonly yes, appendfsync everysec) or RDB snapshots on that Redis, "
        "or use DatabaseStore. See the README's section on Redis durability.",
    ),
    "W005": _Message(
        "IDEMPOTENCY['RESPONSE_CACHE'] is set, but the store {store} does not use it.",
        "RESPONSE_CACHE only fronts DatabaseStore; remove it or use DatabaseStore.",
    ),
    "W008": _Message(
        "IDEMPOTENCY['DATABASE_ALIAS'] is {alias!r}, which the DATABASE_ROUTERS treat as "
        "read-only for {model}: they send its reads there and its writes to {write!r}.",
        "Point DATABASE_ALIAS at the primary ({write!r}). The library reads and writes "
        "only its own alias, never through the routers, so a replay never reads a lagging "
        "replica; that alias must therefore be the writable primary.",
    ),
}

_NUMBERS: dict[str, tuple[bool, bool]] = {
    # name: (integer only, zero allowed)
    "TTL": (False, False),
    "LEASE": (False, False),
    "WAIT": (False, True),
    "RETRY_AFTER": (False, False),
    "SUBMIT_TOKEN_TTL": (False, False),
    "PURGE_BATCH_SIZE": (True, False),
    "REDIS_WAIT_REPLICAS": (True, True),
    "REDIS_WAIT_TIMEOUT": (False, False),
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "ATOMIC_CLAIM": ("first", "optimistic"),
    "LOCK_BACKEND": ("redis", "postgres"),
    "SUBMIT_TOKEN_BACKEND": ("database", "redis"),
    "STORE_UNAVAILABLE": ("reject", "run"),
}
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
#: Response headers that must never be replayed.
NEVER_REPLAYED = frozenset(
    {
        "set-cookie",
        "set-cookie2",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_LOCMEM = "django.core.cache.backends.locmem.LocMemCache"
_DUMMY = "django.core.cache.backends.dummy.DummyCache"


def _message(code: str, **values: Any) -> checks.CheckMessage:
    entry = MESSAGES[code]
    level = checks.Error if code.startswith("E") else checks.Warning
    return level(
        entry.msg.format(**values),
        hint=entry.hint.format(**values),
        id=f"idempotency.{code}",
    )


@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Validate ``settings.IDEMPOTENCY`` and how it fits the rest of the settings."""
    raw = getattr(settings, "IDEMPOTENCY", None)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return [_message("E001", type=type(raw).__name__)]
    values = {**DEFAULTS, **raw}
    errors: list[checks.CheckMessage] = []
    errors += _check_keys(raw)
    errors += _check_values(values)
    store = _check_imports(values, errors)
    errors += _check_store(values, raw, store)
    errors += _check_aliases(values)
    errors += _check_routers(values)
    return errors


def _check_keys(raw: dict[Any, Any]) -> list[checks.CheckMessage]:
    errors = []
    valid = sorted(DEFAULTS)
    for key in raw:
        if key in DEFAULTS:
            continue
        close = difflib.get_close_matches(str(key).upper(), valid, n=1)
        suggestion = f"Did you mean {close[0]!r}? " if close else ""
        errors.append(_message("E002", key=key, suggestion=suggestion, valid=", ".join(valid)))
    return errors


def _is_number(value: Any, *, integer: bool, zero: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if integer and not isinstance(value, int):
        return False
    if not math.isfinite(value):
        return False
    return bool(value >= 0) if zero else bool(value > 0)


def _check_values(values: dict[str, Any]) -> list[checks.CheckMessage]:
    errors = []
    if values["MODE"] not in MODES:
        errors.append(_message("E003", value=values["MODE"]))
    for name, (integer, zero) in _NUMBERS.items():
        value = values[name]
        if not _is_number(value, integer=integer, zero=zero):
            kind = "an integer" if integer else "a number"
            expected = f"{kind} {'>= 0' if zero else '> 0'}"
            errors.append(_message("E004", name=name, value=value, expected=expected))
    if values["ANONYMOUS"] not in ("reject", "ignore"):
        errors.append(_message("E009", value=values["ANONYMOUS"]))
    for name in ("HEADER", "SUBMIT_TOKEN_HEADER"):
        if not _is_header_name(values[name]):
            errors.append(_message("E010", name=name, value=values[name]))
    fingerprint_headers = values["FINGERPRINT_HEADERS"]
    if isinstance(fingerprint_headers, list | tuple):
        errors += [
            _message("E010", name="FINGERPRINT_HEADERS", value=header)
            for header in fingerprint_headers
            if not _is_header_name(header)
        ]
    else:
        errors.append(_message("E010", name="FINGERPRINT_HEADERS", value=fingerprint_headers))
    errors += _check_replay_headers(values["REPLAY_HEADERS"])
    lock_timeout = values["LOCK_TIMEOUT"]
    if lock_timeout is not None and not _is_number(lock_timeout, integer=False, zero=False):
        errors.append(
            _message(
                "E004", name="LOCK_TIMEOUT", value=lock_timeout, expected="None or a number > 0"
            )
        )
    if values["METRICS"] and importlib.util.find_spec("prometheus_client") is None:
        errors.append(_message("E018"))
    for name, choices in _CHOICES.items():
        if values[name] not in choices:
            errors.append(
                _message("E014", name=name, value=values[name], choices=", ".join(choices))
            )
    max_bytes = values["MAX_RESPONSE_BYTES"]
    if max_bytes is not None and not _is_number(max_bytes, integer=True, zero=False):
        errors.append(
            _message(
                "E004",
                name="MAX_RESPONSE_BYTES",
                value=max_bytes,
                expected="None or an integer > 0",
            )
        )
    ttl, lease = values["TTL"], values["LEASE"]
    numbers = (_is_number(v, integer=False, zero=False) for v in (ttl, lease))
    if all(numbers) and ttl < lease:
        errors.append(_message("E016", ttl=ttl, lease=lease))
    return errors


def _is_header_name(value: Any) -> bool:
    return isinstance(value, str) and bool(_TOKEN.match(value))


def _check_replay_headers(value: Any) -> list[checks.CheckMessage]:
    if not isinstance(value, list | tuple) or not all(isinstance(h, str) for h in value):
        return [_message("E011", problem=f"must be a list of header names, not {value!r}")]
    return [
        _message("E011", problem=f"contains {header!r}, which is never replayable")
        for header in value
        if header.lower() in NEVER_REPLAYED
    ]


def _check_imports(values: dict[str, Any], errors: list[checks.CheckMessage]) -> type | None:
    """Import the dotted-path settings (E005); the store class, if it imported."""
    store: type | None = None
    for name in ("STORE", "SCOPE", "FINGERPRINT"):
        value = values[name]
        if not isinstance(value, str):
            if name == "STORE" and isinstance(value, type):
                store = value
            elif not callable(value):
                errors.append(
                    _message(
                        "E005",
                        name=name,
                        value=value,
                        error="not a dotted path",
                        default=DEFAULTS[name],
                    )
                )
            continue
        try:
            imported = import_string(value)
        except Exception as exc:  # noqa: BLE001 - any failure to import is reported
            errors.append(
                _message("E005", name=name, value=value, error=str(exc), default=DEFAULTS[name])
            )
            continue
        if name == "STORE":
            store = imported if isinstance(imported, type) else None
    if store is not None:
        from idempotency.stores.base import BaseStore

        if not issubclass(store, BaseStore):
            errors.append(_message("E013", value=values["STORE"]))
            store = None
    return store


def _subclass(store: type | None, path: str) -> bool:
    if store is None:
        return False
    cls = import_string(path)
    return isinstance(cls, type) and issubclass(store, cls)


def _cache_backend(alias: Any) -> str | None:
    """The BACKEND of the cache ``alias``, or None when there is no such cache."""
    caches: dict[str, Any] = getattr(settings, "CACHES", {}) or {}
    if not isinstance(alias, str):
        return None
    config = caches.get(alias)
    if not isinstance(config, dict):
        return None
    return str(config.get("BACKEND", ""))


def _backend_is(backend: str | None, path: str) -> bool:
    if not backend:
        return False
    if backend == path:
        return True
    try:
        cls = import_string(backend)
        base = import_string(path)
    except Exception:  # noqa: BLE001 - an unimportable backend is Django's own check
        return False
    return isinstance(cls, type) and isinstance(base, type) and issubclass(cls, base)


def _check_store(
    values: dict[str, Any], raw: dict[Any, Any], store: type | None
) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    store_name = getattr(store, "__qualname__", "?")
    if (
        store is not None
        and values["MODE"] == "atomic"
        and not getattr(store, "supports_atomic", False)
    ):
        errors.append(_message("E006", store=store_name))

    is_database = _subclass(store, "idempotency.stores.database.DatabaseStore")
    is_cache = _subclass(store, "idempotency.stores.cache.CacheStore")
    if is_cache:
        alias = values["CACHE_ALIAS"]
        backend = _cache_backend(alias)
        if backend is None:
            errors.append(_message("E008", name="CACHE_ALIAS", alias=alias, aliases=_aliases()))
        elif _backend_is(backend, _DUMMY):
            errors.append(_message("E012", alias=alias))
        elif _backend_is(backend, _LOCMEM):
            errors.append(_message("W001", alias=alias))

    redis_users = []
    if _subclass(store, "idempotency.stores.redis.RedisStore"):
        redis_users.append(f"The store {store_name}")
    # LOCK_BACKEND defaults to "redis" but is inert until a lock is taken: check it when set
    if raw.get("LOCK_BACKEND") == "redis":
        redis_users.append("LOCK_BACKEND 'redis'")
    if values["SUBMIT_TOKEN_BACKEND"] == "redis":
        redis_users.append("SUBMIT_TOKEN_BACKEND 'redis'")
    if redis_users:
        reason = _redis_unavailable(values["REDIS_ALIAS"])
        if reason:
            errors.append(
                _message(
                    "E007",
                    what=" and ".join(redis_users),
                    reason=reason,
                    alias=values["REDIS_ALIAS"],
                )
            )

    if values["RESPONSE_CACHE"] is not None and store is not None and not is_database:
        errors.append(_message("W005", store=store_name))

    if values["MODE"] == "lease" and is_database:
        alias = values["DATABASE_ALIAS"]
        databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
        if isinstance(alias, str) and (databases.get(alias) or {}).get("ATOMIC_REQUESTS"):
            errors.append(_message("W004", alias=alias))
    return errors


def _redis_unavailable(alias: Any) -> str:
    """Why the django-redis connection of ``alias`` cannot be had, or "" when it can."""
    if importlib.util.find_spec("django_redis") is None:
        return "django_redis is not installed"
    backend = _cache_backend(alias)
    if backend is None:
        return f"the cache {alias!r} (REDIS_ALIAS) is not in CACHES"
    if not _backend_is(backend, "django_redis.cache.RedisCache"):
        return f"the cache {alias!r} (REDIS_ALIAS) uses {backend!r}, not django_redis"
    return ""


def _aliases() -> str:
    return ", ".join(sorted(getattr(settings, "CACHES", {}) or {})) or "(none)"


def _check_aliases(values: dict[str, Any]) -> list[checks.CheckMessage]:
    errors = []
    response_cache = values["RESPONSE_CACHE"]
    if response_cache is not None:
        backend = _cache_backend(response_cache)
        if backend is None:
            errors.append(
                _message("E008", name="RESPONSE_CACHE", alias=response_cache, aliases=_aliases())
            )
        elif _backend_is(backend, _LOCMEM):
            errors.append(_message("W003", alias=response_cache))
    alias = values["DATABASE_ALIAS"]
    databases = getattr(settings, "DATABASES", {}) or {}
    if not isinstance(alias, str) or alias not in databases:
        errors.append(
            _message("E015", alias=alias, aliases=", ".join(sorted(databases)) or "(none)")
        )
    else:
        errors += _check_atomic_databases(values, databases)
    return errors


def _redis_users(raw: dict[Any, Any], values: dict[str, Any], store: type | None) -> list[str]:
    users = []
    if _subclass(store, "idempotency.stores.redis.RedisStore"):
        users.append(f"the store {getattr(store, '__qualname__', '?')}")
    if raw.get("LOCK_BACKEND") == "redis":
        users.append("the locks")
    if values["SUBMIT_TOKEN_BACKEND"] == "redis":
        users.append("the submit tokens")
    return users


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


@checks.register(deploy=True)
def check_redis_persistence(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W007: the Redis that holds records, tokens or locks must survive a restart."""
    raw = getattr(settings, "IDEMPOTENCY", None) or {}
    if not isinstance(raw, dict):
        return []
    values = {**DEFAULTS, **raw}
    configured = values["STORE"]
    try:
        store: type | None = (
            import_string(configured) if isinstance(configured, str) else configured
        )
    except Exception:  # noqa: BLE001 - reported by check_settings (E005)
        store = None
    if store is not None and not isinstance(store, type):
        store = type(store)  # a store instance given in settings
    users = _redis_users(raw, values, store)
    alias = values["REDIS_ALIAS"]
    if not users or _redis_unavailable(alias):
        return []
    try:
        from django_redis import get_redis_connection

        client = get_redis_connection(alias)
    except Exception:  # noqa: BLE001 - E007 covers a missing or wrong cache
        return []
    if redis_persists(client) is False:
        return [_message("W007", what=" and ".join(users), alias=alias)]
    return []


def _check_routers(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """W008: the store's alias is one the routers only read from (a replica)."""
    alias = values["DATABASE_ALIAS"]
    databases = getattr(settings, "DATABASES", {}) or {}
    if not getattr(settings, "DATABASE_ROUTERS", None) or alias not in databases:
        return []
    from django.db import router

    from idempotency.models import IdempotencyRecord, SubmitToken

    for model in (IdempotencyRecord, SubmitToken):
        try:
            read = router.db_for_read(model)
            write = router.db_for_write(model)
        except Exception:  # noqa: BLE001 - a router's own bug is not ours to report
            continue
        if read == alias and write != alias:
            return [_message("W008", alias=alias, model=model._meta.label, write=write)]
    return []


def _check_atomic_databases(
    values: dict[str, Any], databases: dict[str, Any]
) -> list[checks.CheckMessage]:
    """E017 for ATOMIC_DATABASES naming unknown aliases; W006 when views may write to a
    database that atomic mode leaves outside the view's transaction."""
    wrapped = values["ATOMIC_DATABASES"]
    known = ", ".join(sorted(databases)) or "(none)"
    if not isinstance(wrapped, list | tuple) or not all(isinstance(a, str) for a in wrapped):
        return [_message("E017", problem=f"must be a list of database aliases, not {wrapped!r}")]
    unknown = [alias for alias in wrapped if alias not in databases]
    if unknown:
        return [_message("E017", problem=f"names {unknown!r}, not in DATABASES ({known})")]
    if values["MODE"] == "lease":
        return []
    outside = sorted(set(databases) - {values["DATABASE_ALIAS"], *wrapped})
    if outside:
        return [_message("W006", aliases=", ".join(outside), alias=values["DATABASE_ALIAS"])]
    return []
