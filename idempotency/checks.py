"""System checks of django-idempotency (ids ``idempotency.E0xx`` / ``W0xx``).

Every message lives in :data:`~idempotency.check_messages.MESSAGES`, so each id is
used for one problem only. Values are validated against their description in
:data:`idempotency.conf.SETTINGS` (type, choices, bounds, nullability); the checks
then look at how the settings fit together, and at what each view configures for
itself (a store of its own, atomic mode: the URL patterns are walked). They read
``settings.IDEMPOTENCY`` as written and never raise. Only the deployment check
(``check --deploy``) connects anywhere: it asks the Redis behind the stores, tokens
and locks whether it persists anything (W007).
"""

from __future__ import annotations

import difflib
import importlib.util
from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from idempotency.check_messages import MESSAGES
from idempotency.conf import DEFAULTS, HEADER_NAME, SETTINGS
from idempotency.http.responses import NEVER_REPLAYED

#: The id a value outside its description gets, by kind of setting (others: E004).
_CODE_OF_KIND = {"choice": "E014", "header": "E010"}
_LOCMEM = "django.core.cache.backends.locmem.LocMemCache"
_DUMMY = "django.core.cache.backends.dummy.DummyCache"
_REDIS_CACHE = "django_redis.cache.RedisCache"
_AUTHENTICATION = "django.contrib.auth.middleware.AuthenticationMiddleware"
_IDEMPOTENCY = "idempotency.http.middleware.IdempotencyMiddleware"


class _Hidden:
    """What a check shows instead of a secret setting's value."""

    def __repr__(self) -> str:
        return "<hidden>"


_HIDDEN = _Hidden()


def _message(code: str, **values: Any) -> checks.CheckMessage:
    entry = MESSAGES[code]
    level = checks.Error if code.startswith("E") else checks.Warning
    return level(
        entry.msg.format(**values),
        hint=entry.hint.format(**values),
        id=f"idempotency.{code}",
    )


def _raw() -> dict[Any, Any] | None:
    raw = getattr(settings, "IDEMPOTENCY", None)
    return {} if raw is None else raw if isinstance(raw, dict) else None


@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Validate ``settings.IDEMPOTENCY``, how it fits the rest of the settings, and the
    stores and modes the project's views configure for themselves."""
    raw = _raw()
    if raw is None:
        return [_message("E001", type=type(getattr(settings, "IDEMPOTENCY", None)).__name__)]
    values = {**DEFAULTS, **raw}
    errors = _check_keys(raw) + _check_values(values)
    uses = _stores(values, errors)
    errors += _check_stores(values, uses)
    errors += _check_database_vendors(values, uses)
    errors += _check_redis(values, _redis_users(raw, values, uses))
    errors += _check_aliases(values)
    errors += _check_routers(values)
    errors += _check_middleware()
    errors += _check_codec(values)
    errors += _check_backends(values)
    errors += _check_purge(values, uses)
    errors += _check_gates()
    return _unique(errors)


def _unique(messages: list[checks.CheckMessage]) -> list[checks.CheckMessage]:
    return [m for i, m in enumerate(messages) if m not in messages[:i]]


def _check_keys(raw: dict[Any, Any]) -> list[checks.CheckMessage]:
    errors = []
    valid = sorted(SETTINGS)
    for key in raw:
        if key in SETTINGS:
            continue
        close = difflib.get_close_matches(str(key).upper(), valid, n=1)
        suggestion = f"Did you mean {close[0]!r}? " if close else ""
        errors.append(_message("E002", key=key, suggestion=suggestion, valid=", ".join(valid)))
    return errors


def _check_values(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """Every value against its description in :data:`~idempotency.conf.SETTINGS`."""
    errors = []
    for name, setting in SETTINGS.items():
        value = values[name]
        if setting.kind == "path":
            errors += _check_import(name, value)
        elif not setting.accepts(value):
            code = _CODE_OF_KIND.get(setting.kind, "E004")
            shown = _HIDDEN if setting.secret else value
            errors.append(
                _message(code, name=name, value=shown, expected=setting.expected, help=setting.help)
            )
        elif setting.kind == "headers":
            errors += [
                _message("E010", name=name, value=header)
                for header in value
                if not HEADER_NAME.match(header)
            ]
    replayed = values["REPLAY_HEADERS"]
    if SETTINGS["REPLAY_HEADERS"].accepts(replayed):
        errors += [_message("E011", header=h) for h in replayed if h.lower() in NEVER_REPLAYED]
    if values["METRICS"] and importlib.util.find_spec("prometheus_client") is None:
        errors.append(_message("E018"))
    if values["OPENTELEMETRY"] and not _installed("opentelemetry", "opentelemetry.trace"):
        errors.append(_message("E043"))
    ttl, lease = values["TTL"], values["LEASE"]
    if SETTINGS["TTL"].accepts(ttl) and SETTINGS["LEASE"].accepts(lease) and ttl < lease:
        errors.append(_message("E016", ttl=ttl, lease=lease))
    return errors


def _installed(*modules: str) -> bool:
    """Whether every module is importable (a dotted one only once its parent is)."""
    return all(importlib.util.find_spec(module) is not None for module in modules)


def _check_import(name: str, value: Any) -> list[checks.CheckMessage]:
    try:
        if not isinstance(value, str):
            if callable(value):
                return []
            raise ImportError("not a dotted path")
        import_string(value)
    except Exception as exc:  # noqa: BLE001 - any failure to import is reported
        return [_message("E005", name=name, value=value, error=exc, default=DEFAULTS[name])]
    return []


def _store_class(value: Any) -> type | None:
    """The store class ``value`` (a dotted path, class or instance) names; None when it
    names none (an import error is E005's, reported where the path is given)."""
    from idempotency.stores.base import BaseStore

    if isinstance(value, BaseStore):
        return type(value)
    if isinstance(value, str):
        try:
            value = import_string(value)
        except Exception:  # noqa: BLE001 - reported as E005
            return None
    return value if isinstance(value, type) and issubclass(value, BaseStore) else None


def _is(store: type, path: str) -> bool:
    return issubclass(store, import_string(path))


def _cache_backend(alias: Any) -> str | None:
    """The BACKEND of the cache ``alias``, or None when there is no such cache."""
    caches: dict[str, Any] = getattr(settings, "CACHES", {}) or {}
    config = caches.get(alias) if isinstance(alias, str) else None
    return str(config.get("BACKEND", "")) if isinstance(config, dict) else None


def _backend_is(backend: str | None, path: str) -> bool:
    if not backend or backend == path:
        return bool(backend)
    try:
        cls, base = import_string(backend), import_string(path)
    except Exception:  # noqa: BLE001 - an unimportable backend is Django's own check
        return False
    return isinstance(cls, type) and isinstance(base, type) and issubclass(cls, base)


def _unpickles(backend: str) -> bool:
    """Whether records in a cache of ``backend`` could only be read through its
    unpickling serializer (:mod:`idempotency.stores.raw_cache` reads the others raw)."""
    from idempotency.stores.raw_cache import DJANGO_BUILTIN_REDIS, DJANGO_REDIS, IN_PROCESS

    readable = (DJANGO_REDIS, DJANGO_BUILTIN_REDIS, *IN_PROCESS)
    return not any(_backend_is(backend, path) for path in readable)


def _no_cache(what: str, alias: Any) -> checks.CheckMessage:
    """E008: ``what`` names a cache that is not in CACHES."""
    aliases = ", ".join(sorted(getattr(settings, "CACHES", {}) or {})) or "(none)"
    return _message("E008", what=what, alias=alias, aliases=aliases)


def _view_policies() -> list[tuple[str, Any]]:
    """``(view name, policy)`` of every protected view; none when the URLconf cannot be
    loaded (Django's own URL checks report that)."""
    from idempotency.http.discovery import protected_views

    try:
        return list(protected_views())
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django
        return []


def _stores(
    values: dict[str, Any], errors: list[checks.CheckMessage]
) -> list[tuple[str, type, Any, Any]]:
    """Every store in use, as ``(what, class, instance or None, mode)``: the global
    ``STORE``, and each one a view names itself (``store=``, ``idempotency_store``)."""
    uses = []
    configured = values["STORE"]
    store = _store_class(configured)
    importable = callable(configured) or isinstance(configured, str)
    if store is None and importable and not _check_import("STORE", configured):
        errors.append(_message("E013", what="IDEMPOTENCY['STORE']", value=configured))
    if store is not None:
        instance = values["STORE"] if not isinstance(values["STORE"], str | type) else None
        uses.append((f"the store {store.__qualname__}", store, instance, values["MODE"]))
    for view, policy in _view_policies():
        what = f"the store of the view {view!r}"
        option = policy.store
        if option is None:
            if policy.mode == "atomic" and store is not None:
                uses.append((f"the view {view!r}", store, None, "atomic"))
            continue
        cls = _store_class(option)
        if cls is None:
            errors.append(_message("E013", what=_cap(what), value=option))
            continue
        uses.append(
            (what, cls, option if not isinstance(option, str | type) else None, policy.mode)
        )
    return uses


def _check_stores(
    values: dict[str, Any], uses: list[tuple[str, type, Any, Any]]
) -> list[checks.CheckMessage]:
    """E006, E008, E012 and W001 for each store in use; W004 and W005 for the global one."""
    errors: list[checks.CheckMessage] = []
    for what, store, instance, mode in uses:
        if mode == "atomic" and not store.supports_atomic:  # type: ignore[attr-defined]
            errors.append(_message("E006", what=_cap(what), store=store.__qualname__))
        if not _is(store, "idempotency.stores.cache.CacheStore"):
            continue
        alias = getattr(instance, "alias", None) or values["CACHE_ALIAS"]
        backend = _cache_backend(alias)
        where = "IDEMPOTENCY['CACHE_ALIAS']" if alias == values["CACHE_ALIAS"] else what
        if backend is None:
            errors.append(_no_cache(where, alias))
        elif _backend_is(backend, _DUMMY):
            errors.append(_message("E012", what=_cap(what), alias=alias))
        elif _unpickles(backend):
            errors.append(_message("E020", what=_cap(what), alias=alias, backend=backend))
        elif _backend_is(backend, _LOCMEM):
            errors.append(_message("W001", what=_cap(what), alias=alias))
    configured = _store_class(values["STORE"])
    if configured is not None:
        is_database = _is(configured, "idempotency.stores.database.DatabaseStore")
        if values["RESPONSE_CACHE"] is not None and not is_database:
            errors.append(_message("W005", store=configured.__qualname__))
        databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
        database = databases.get(str(values["DATABASE_ALIAS"])) or {}
        if values["MODE"] == "lease" and is_database and database.get("ATOMIC_REQUESTS"):
            errors.append(_message("W004", alias=values["DATABASE_ALIAS"]))
    return errors


#: The database vendors (``connection.vendor``) DatabaseStore has SQL for.
SUPPORTED_VENDORS = frozenset({"postgresql", "mysql", "sqlite"})


def _vendor(engine: str) -> str | None:
    """The ``vendor`` of a database ENGINE's wrapper (``connection.vendor``, read from the
    class: nothing connects), or None when the backend cannot be loaded (Django reports
    that itself)."""
    from django.db.utils import load_backend

    try:
        vendor = load_backend(engine).DatabaseWrapper.vendor
    except Exception:  # noqa: BLE001 - a backend that does not load is Django's to report
        return None
    return str(vendor)


def _check_database_vendors(
    values: dict[str, Any], uses: list[tuple[str, type, Any, Any]]
) -> list[checks.CheckMessage]:
    """E030: a DatabaseStore in use on a database it has no SQL for (Oracle, a third-party
    backend), caught at startup instead of answering 500 to every keyed request."""
    databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
    errors = []
    for what, store, instance, _mode in uses:
        if not _is(store, "idempotency.stores.database.DatabaseStore"):
            continue
        alias = getattr(instance, "_using", None) or values["DATABASE_ALIAS"]
        engine = (databases.get(alias) or {}).get("ENGINE") if isinstance(alias, str) else None
        if not isinstance(engine, str):
            continue  # an unknown alias is E015
        vendor = _vendor(engine)
        if vendor is not None and vendor not in SUPPORTED_VENDORS:
            errors.append(
                _message("E030", what=_cap(what), alias=alias, engine=engine, vendor=vendor)
            )
    return errors


def _redis_users(
    raw: dict[Any, Any], values: dict[str, Any], uses: list[tuple[str, type, Any, Any]]
) -> dict[str, list[str]]:
    """What needs a django-redis connection, by cache alias: the Redis stores in use,
    and the locks and tokens when set to Redis."""
    default = values["REDIS_ALIAS"]
    users: dict[str, list[str]] = {}
    for what, store, instance, _mode in uses:
        if _is(store, "idempotency.stores.redis.RedisStore"):
            alias = getattr(instance, "alias", None) or default
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


def _check_backends(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """E044, E045 and E046: SUBMIT_TOKEN_BACKEND or LOCK_BACKEND names no usable backend
    (it cannot be imported, is no subclass of its base class, or is abstract)."""
    from idempotency.locks.locking import LOCK_BACKENDS
    from idempotency.tokens.api import TOKEN_BACKENDS

    errors: list[checks.CheckMessage] = []
    for pluggable in (TOKEN_BACKENDS, LOCK_BACKENDS):
        problem = pluggable.problem(values[pluggable.setting])
        if problem is not None:
            errors.append(
                checks.Error(problem.text, hint=problem.hint, id=f"idempotency.{problem.code}")
            )
    return errors


def _redis_unavailable(alias: Any) -> str:
    """Why the django-redis connection of ``alias`` cannot be had, or "" when it can."""
    if importlib.util.find_spec("django_redis") is None:
        return "django_redis is not installed"
    backend = _cache_backend(alias)
    if backend is None:
        return f"the cache {alias!r} is not in CACHES"
    if not _backend_is(backend, _REDIS_CACHE):
        return f"the cache {alias!r} uses {backend!r}, not django_redis"
    return ""


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _users_text(users: list[str]) -> str:
    more = f" (and {len(users) - 3} more)" if len(users) > 3 else ""
    return " and ".join(users[:3]) + more


def _check_redis(values: dict[str, Any], users: dict[str, list[str]]) -> list[checks.CheckMessage]:
    errors = []
    for alias, who in users.items():
        where = "IDEMPOTENCY['REDIS_ALIAS']" if alias == values["REDIS_ALIAS"] else "its alias"
        if reason := _redis_unavailable(alias):
            errors.append(
                _message(
                    "E007", what=_cap(_users_text(who)), reason=reason, alias=alias, where=where
                )
            )
    return errors


def _check_aliases(values: dict[str, Any]) -> list[checks.CheckMessage]:
    errors = []
    response_cache = values["RESPONSE_CACHE"]
    if isinstance(response_cache, str):
        backend = _cache_backend(response_cache)
        if backend is None:
            errors.append(_no_cache("IDEMPOTENCY['RESPONSE_CACHE']", response_cache))
        elif _backend_is(backend, _LOCMEM):
            errors.append(_message("W003", alias=response_cache))
        elif _unpickles(backend):
            what = "IDEMPOTENCY['RESPONSE_CACHE']"
            errors.append(_message("E020", what=what, alias=response_cache, backend=backend))
    alias = values["DATABASE_ALIAS"]
    databases = getattr(settings, "DATABASES", {}) or {}
    known = ", ".join(sorted(databases)) or "(none)"
    if not isinstance(alias, str) or alias not in databases:
        return [*errors, _message("E015", alias=alias, aliases=known)]
    wrapped = values["ATOMIC_DATABASES"]
    if not SETTINGS["ATOMIC_DATABASES"].accepts(wrapped):
        return errors  # E004
    unknown = [name for name in wrapped if name not in databases]
    if unknown:
        return [*errors, _message("E017", unknown=unknown, known=known)]
    if values["MODE"] != "lease":
        outside = sorted(set(databases) - {alias, *wrapped})
        if outside:
            errors.append(_message("W006", aliases=", ".join(outside), alias=alias))
    return errors


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


def _check_codec(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """E040: BODY_CODEC names a codec that cannot be built (FernetCodec without keys or
    without cryptography; a class that is no BodyCodec). Its message never shows a key."""
    from django.core.exceptions import ImproperlyConfigured

    from idempotency.codecs import BodyCodec

    configured = values["BODY_CODEC"]
    if _check_import("BODY_CODEC", configured):
        return []  # E005
    try:
        obj = import_string(configured) if isinstance(configured, str) else configured
        codec = obj() if isinstance(obj, type) else obj
    except (ImproperlyConfigured, TypeError, ValueError) as exc:
        return [_message("E040", error=exc)]
    if not isinstance(codec, BodyCodec):
        return [_message("E040", error=f"{type(codec).__name__} is not a BodyCodec")]
    return []


#: The Celery beat task that purges expired records (idempotency.beat).
PURGE_TASK = "idempotency.purge_expired_records"


def _beat_purges() -> bool:
    """Whether ``CELERY_BEAT_SCHEDULE`` schedules :data:`PURGE_TASK`."""
    schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
    if not isinstance(schedule, dict):
        return False
    return any(isinstance(e, dict) and e.get("task") == PURGE_TASK for e in schedule.values())


def _check_purge(
    values: dict[str, Any], uses: list[tuple[str, type, Any, Any]]
) -> list[checks.CheckMessage]:
    """W040: a DatabaseStore in use, and nothing deletes its expired rows: PURGE_EVERY is
    None and no beat schedule names the purge task."""
    if values["PURGE_EVERY"] is not None or _beat_purges():
        return []
    database = [w for w, s, _i, _m in uses if _is(s, "idempotency.stores.database.DatabaseStore")]
    if not database:
        return []
    return [_message("W040", what=_cap(database[0]), task=PURGE_TASK)]


def _check_gates() -> list[checks.CheckMessage]:
    """E041: under IdempotencyMiddleware, a function view that checks access inside itself
    (its replays would skip the check, so the middleware leaves it alone). E042:
    ``@idempotent`` above an access decorator (its replays come before the check)."""
    from idempotency.http.discovery import GATE_NAME, gate_below_idempotent, url_views

    try:
        views = list(url_views())
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django
        return []
    middleware = list(getattr(settings, "MIDDLEWARE", None) or ())
    from idempotency.http.middleware import gated_view

    errors = []
    wrapped = _middleware_index(middleware, _IDEMPOTENCY) is not None
    for name, callback in views:
        if gate_below_idempotent(callback):
            errors.append(_message("E042", view=name, gate=GATE_NAME))
        elif wrapped and gated_view(callback) is not None:
            errors.append(_message("E041", view=name, gate=GATE_NAME))
    return errors


def _middleware_index(middleware: list[Any], path: str) -> tuple[int, str] | None:
    """Where the first entry that is (a subclass of) the class at ``path`` sits."""
    for index, entry in enumerate(middleware):
        if isinstance(entry, str) and _backend_is(entry, path):
            return index, entry
    return None


def _check_middleware() -> list[checks.CheckMessage]:
    """E019: IdempotencyMiddleware placed before AuthenticationMiddleware."""
    middleware = list(getattr(settings, "MIDDLEWARE", None) or ())
    idempotency = _middleware_index(middleware, _IDEMPOTENCY)
    authentication = _middleware_index(middleware, _AUTHENTICATION)
    if idempotency is None or authentication is None or idempotency[0] > authentication[0]:
        return []
    return [_message("E019", idempotency=idempotency[1], authentication=authentication[1])]


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
    """W007: the Redis that holds records, tokens or locks (global or a view's store)
    must survive a restart."""
    raw = _raw()
    if raw is None:
        return []
    values = {**DEFAULTS, **raw}
    users = _redis_users(raw, values, _stores(values, []))
    warnings = []
    for alias, who in users.items():
        if _redis_unavailable(alias):
            continue  # E007
        try:
            from django_redis import get_redis_connection

            client = get_redis_connection(alias)
        except Exception:  # noqa: BLE001 - E007 covers a missing or wrong cache
            continue
        if redis_persists(client) is False:
            warnings.append(_message("W007", what=_users_text(who), alias=alias))
    return warnings


__all__ = ["MESSAGES", "check_redis_persistence", "check_settings", "redis_persists"]
