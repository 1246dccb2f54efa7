"""System checks of django-idempotency (ids ``idempotency.E0xx`` / ``W0xx``; their words
are in :mod:`idempotency.check_messages`, so each id names one problem).

Django runs the three checks at the end (``IdempotencyConfig.ready`` registers them, and
imports this module when Django first runs them). They read ``settings.IDEMPOTENCY`` as
written and never raise:

- each value against its description in :data:`idempotency.conf.SETTINGS` (type,
  choices, bounds, nullability, importable paths, installed extras);
- each alias of ``STORES``, ``TOKENS`` and ``LOCKS``: its backend, location and options;
- the stores in use (each alias of ``STORES`` and each store a view names, found by
  walking the URL patterns), their modes, caches and databases, and the purge;
- the Redis behind stores, tokens and locks;
- the middleware's place, and access checks the replays cannot skip.

The deployment checks (``check --deploy``) ask for the project's own problem
documentation (W041) and, the only check that connects anywhere, ask the Redis behind the
stores, tokens and locks whether it persists anything (W007).
"""

from __future__ import annotations

import difflib
import importlib.util
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import router
from django.db.utils import load_backend
from django.utils.module_loading import import_string

from idempotency.check_messages import cap, message
from idempotency.codecs import BodyCodec
from idempotency.conf import DEFAULTS, HEADER_NAME, SETTINGS
from idempotency.http.discovery import GATE_NAME, gate_below_idempotent, protected_views, url_views
from idempotency.http.responses import NEVER_REPLAYED
from idempotency.locks.base import lock_backends
from idempotency.locks.redis import RedisLockBackend
from idempotency.scopes import user_scope
from idempotency.stores.base import AtomicStore, stores
from idempotency.stores.database import DatabaseStore
from idempotency.utils.backends import DEFAULT_ALIAS, BackendHandler, UnusableBackend
from idempotency.utils.caches import DJANGO_BUILTIN_REDIS, DJANGO_REDIS, IN_PROCESS
from idempotency.utils.redis_clients import cache_connection

LOCMEM = "django.core.cache.backends.locmem.LocMemCache"
DUMMY = "django.core.cache.backends.dummy.DummyCache"
REDIS_CACHE = "django_redis.cache.RedisCache"
#: django-redis' client that spreads keys over several servers itself: it hands out no
#: one Redis connection (``get_client`` raises), so nothing could be read raw through it.
SHARD_CLIENT = "django_redis.client.ShardClient"


def cache_backend(alias: Any) -> str | None:
    """The BACKEND of the cache ``alias``, or None when there is no such cache."""
    caches: dict[str, Any] = getattr(settings, "CACHES", {}) or {}
    config = caches.get(alias) if isinstance(alias, str) else None
    return str(config.get("BACKEND", "")) if isinstance(config, dict) else None


def backend_is(backend: str | None, path: str) -> bool:
    """Whether the class at the dotted path ``backend`` is (a subclass of) the one at
    ``path``; False when either cannot be imported."""
    if not backend or backend == path:
        return bool(backend)
    try:
        cls, base = import_string(backend), import_string(path)
    except Exception:  # noqa: BLE001 - an unimportable backend is Django's own check
        return False
    return isinstance(cls, type) and isinstance(base, type) and issubclass(cls, base)


def unpickles(backend: str) -> bool:
    """Whether records in a cache of ``backend`` could only be read through its
    unpickling serializer (:mod:`idempotency.stores.cache` reads the others raw)."""
    readable = (DJANGO_REDIS, DJANGO_BUILTIN_REDIS, *IN_PROCESS)
    return not any(backend_is(backend, path) for path in readable)


def unreadable(what: str, alias: str, backend: str) -> checks.CheckMessage | None:
    """E020 or E050 when records and counters in the cache ``alias`` (of ``backend``)
    could only be read through its unpickling serializer; None when they are read raw."""
    if unpickles(backend):
        return message("E020", what=what, alias=alias, backend=backend)
    caches: dict[str, Any] = getattr(settings, "CACHES", {}) or {}
    options = caches[alias].get("OPTIONS") or {}
    client = options.get("CLIENT_CLASS") if isinstance(options, dict) else None
    if isinstance(client, str) and backend_is(client, SHARD_CLIENT):
        return message("E050", what=what, alias=alias, client=client)
    return None


def no_cache(what: str, alias: Any) -> checks.CheckMessage:
    """E008: ``what`` names a cache that is not in CACHES."""
    aliases = ", ".join(sorted(getattr(settings, "CACHES", {}) or {})) or "(none)"
    return message("E008", what=what, alias=alias, aliases=aliases)


def check_response_cache(uses: list[Any]) -> list[checks.CheckMessage]:
    """E008, W003, E020 and E050 for the response cache of each database store in use: a cache
    that exists, is shared and never unpickles what it reads."""
    errors = []
    for what, store, instance, _mode in uses:
        cache = instance.response_cache if issubclass(store, DatabaseStore) else None
        alias = cache.alias if cache is not None else None
        if not isinstance(alias, str):
            continue
        where = f"The response cache of {what}"
        backend = cache_backend(alias)
        if backend is None:
            errors.append(no_cache(where, alias))
        elif backend_is(backend, LOCMEM):
            errors.append(message("W003", what=where, alias=alias))
        elif refused := unreadable(where, alias, backend):
            errors.append(refused)
    return errors


#: The id a value outside its description gets, by kind of setting (others: E004).
_CODE_OF_KIND = {"choice": "E014", "header": "E010"}


class _Hidden:
    """What a check shows instead of a secret setting's value."""

    def __repr__(self) -> str:
        return "<hidden>"


_HIDDEN = _Hidden()


def raw_settings() -> dict[Any, Any] | None:
    """``settings.IDEMPOTENCY`` as written (``{}`` when unset), or None when it is no
    dict (E001)."""
    raw = getattr(settings, "IDEMPOTENCY", None)
    return {} if raw is None else raw if isinstance(raw, dict) else None


def check_keys(raw: dict[Any, Any]) -> list[checks.CheckMessage]:
    """E002 for every key that names no setting, with the closest one suggested."""
    errors = []
    valid = sorted(SETTINGS)
    for key in raw:
        if key in SETTINGS:
            continue
        close = difflib.get_close_matches(str(key).upper(), valid, n=1)
        suggestion = f"Did you mean {close[0]!r}? " if close else ""
        errors.append(message("E002", key=key, suggestion=suggestion, valid=", ".join(valid)))
    return errors


def check_values(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """Every value against its description in :data:`~idempotency.conf.SETTINGS`."""
    errors = []
    for name, setting in SETTINGS.items():
        value = values[name]
        if setting.kind == "path":
            if value is not None or not setting.nullable:
                errors += check_import(name, value)
        elif not setting.accepts(value):
            code = _CODE_OF_KIND.get(setting.kind, "E004")
            shown = _HIDDEN if setting.secret else value
            errors.append(
                message(code, name=name, value=shown, expected=setting.expected, help=setting.help)
            )
        elif setting.kind == "headers":
            errors += [
                message("E010", name=name, value=header)
                for header in value
                if not HEADER_NAME.match(header)
            ]
    replayed = values["REPLAY_HEADERS"]
    if SETTINGS["REPLAY_HEADERS"].accepts(replayed):
        errors += [message("E011", header=h) for h in replayed if h.lower() in NEVER_REPLAYED]
    if values["METRICS"] and importlib.util.find_spec("prometheus_client") is None:
        errors.append(message("E018"))
    if values["OPENTELEMETRY"] and not _installed("opentelemetry", "opentelemetry.trace"):
        errors.append(message("E043"))
    ttl, lease = values["TTL"], values["LEASE"]
    if SETTINGS["TTL"].accepts(ttl) and SETTINGS["LEASE"].accepts(lease) and ttl < lease:
        errors.append(message("E016", ttl=ttl, lease=lease))
    return errors


def _installed(*modules: str) -> bool:
    """Whether every module is importable (a dotted one only once its parent is)."""
    return all(importlib.util.find_spec(module) is not None for module in modules)


def check_import(name: str, value: Any) -> list[checks.CheckMessage]:
    """E005 when the dotted-path setting ``name`` cannot be imported (an object given
    instead of a path passes)."""
    try:
        if not isinstance(value, str):
            if callable(value):
                return []
            raise ImportError("not a dotted path")
        import_string(value)
    except Exception as exc:  # noqa: BLE001 - any failure to import is reported
        return [message("E005", name=name, value=value, error=exc, default=DEFAULTS[name])]
    return []


def check_codec(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """E040: BODY_CODEC names a codec that cannot be built (FernetCodec without keys or
    without cryptography; a class that is no BodyCodec). Its message never shows a key."""
    configured = values["BODY_CODEC"]
    if check_import("BODY_CODEC", configured):
        return []  # E005
    try:
        obj = import_string(configured) if isinstance(configured, str) else configured
        codec = obj() if isinstance(obj, type) else obj
    except (ImproperlyConfigured, TypeError, ValueError) as exc:
        return [message("E040", error=exc)]
    if not isinstance(codec, BodyCodec):
        return [message("E040", error=f"{type(codec).__name__} is not a BodyCodec")]
    return []


def check_problem_type_base(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """W041 (``check --deploy``): ``PROBLEM_TYPE_BASE`` is still the default, whose domain
    nobody here owns: every error's ``type`` would link to a page that documents nothing
    (or to whatever someone who registers the domain puts there)."""
    base = values["PROBLEM_TYPE_BASE"]
    if base != DEFAULTS["PROBLEM_TYPE_BASE"]:
        return []
    return [message("W041", base=base)]


def handlers() -> list[BackendHandler[Any]]:
    """The handler of each setting of aliases: stores, tokens, locks."""
    # imported here: idempotency.tokens imports DRF (its views), an optional dependency
    from idempotency.tokens.base import token_backends

    return [stores, token_backends, lock_backends]


def as_check(problem: UnusableBackend) -> checks.CheckMessage:
    """The check message of a problem the loader would raise."""
    return checks.Error(problem.text, hint=problem.hint, id=f"idempotency.{problem.code}")


def check_backends(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """E015, E044-E046 and E060-E064 for every alias of ``STORES``, ``TOKENS`` and
    ``LOCKS``."""
    errors: list[checks.CheckMessage] = []
    for handler in handlers():
        entries = values[handler.setting]
        if not SETTINGS[handler.setting].accepts(entries):
            continue  # E004
        if DEFAULT_ALIAS not in entries:
            aliases = ", ".join(repr(a) for a in entries) or "none"
            problem = UnusableBackend(
                "E060",
                setting=handler.setting,
                what=handler.what,
                alias=DEFAULT_ALIAS,
                aliases=aliases,
            )
            errors.append(as_check(problem))
        for alias, entry in entries.items():
            problems = handler.problems(alias, entry)
            errors += [as_check(problem) for problem in problems]
            if not problems:
                errors += _databases(handler, alias, entry)
    return errors


def _databases(handler: BackendHandler[Any], alias: str, entry: Any) -> list[checks.CheckMessage]:
    """E015 for each option of an entry that names a database not in DATABASES."""
    cls = handler.backend_class(alias)
    databases = getattr(settings, "DATABASES", {}) or {}
    errors = []
    for name, value in (entry.get("OPTIONS") or {}).items():
        option = getattr(cls, "options", {}).get(name)
        if option is not None and option.kind == "database" and value not in databases:
            where = f"IDEMPOTENCY[{handler.setting!r}][{alias!r}]['OPTIONS'][{name!r}]"
            known = ", ".join(sorted(databases)) or "(none)"
            errors.append(message("E015", where=where, alias=value, aliases=known))
    return errors


#: A store in use: ``(what, class, instance or None, mode)``, ``what`` naming it in messages.
Use = tuple[str, type, Any, Any]

DATABASE_STORE = "idempotency.stores.database.DatabaseStore"


def is_store(store: type, path: str) -> bool:
    """Whether ``store`` is (a subclass of) the store class at ``path``."""
    return issubclass(store, import_string(path))


def _view_policies() -> list[tuple[str, Any]]:
    """``(view name, policy)`` of every protected view; none when the URLconf cannot be
    loaded (Django's own URL checks report that)."""
    try:
        return list(protected_views())
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django
        return []


def configured(handler: Any, values: dict[str, Any]) -> dict[str, tuple[type, Any]]:
    """``alias: (class, instance)`` of each usable alias of ``handler``'s setting (the
    others are :func:`check_backends`' to report). Making one
    connects nowhere: every backend connects on first use."""
    entries = values[handler.setting]
    if not SETTINGS[handler.setting].accepts(entries):
        return {}  # E004
    found = {}
    for alias, entry in entries.items():
        if handler.problems(alias, entry):
            continue
        try:
            instance = handler.create(alias)
        except Exception:  # noqa: BLE001 - a constructor's own failure shows at first use
            continue
        found[alias] = (type(instance), instance)
    return found


def stores_in_use(values: dict[str, Any], errors: list[checks.CheckMessage]) -> list[Use]:
    """Every store in use: each alias of ``STORES``, and each store a view names itself
    (``store=``, ``idempotency_store``). An alias no entry configures is appended to
    ``errors`` (E013)."""
    usable = configured(stores, values)
    uses: list[Use] = [
        (f"the store {alias!r}", cls, instance, values["MODE"])
        for alias, (cls, instance) in usable.items()
    ]
    entries = values["STORES"] if isinstance(values["STORES"], dict) else {}
    for view, policy in _view_policies():
        what = f"the store of the view {view!r}"
        option = policy.store
        if option is None:
            if policy.mode == "atomic" and "default" in usable:
                uses.append((f"the view {view!r}", *usable["default"], "atomic"))
            continue
        if isinstance(option, str):
            if option not in entries:
                aliases = ", ".join(repr(a) for a in entries) or "none"
                errors.append(message("E013", what=cap(what), value=option, aliases=aliases))
            elif option in usable:
                uses.append((what, *usable[option], policy.mode))
            continue
        uses.append((what, type(option), option, policy.mode))
    return uses


def check_stores(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """E006, E008, E012, E020, E050 and W001 for each store in use; W004 for each database
    store in lease mode."""
    errors: list[checks.CheckMessage] = []
    databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
    for what, store, instance, mode in uses:
        if mode == "atomic" and not issubclass(store, AtomicStore):  # as the engine chooses
            errors.append(message("E006", what=cap(what), store=store.__qualname__))
        if is_store(store, DATABASE_STORE):
            database = databases.get(instance.using) or {}
            if mode == "lease" and database.get("ATOMIC_REQUESTS"):
                errors.append(message("W004", what=cap(what), alias=instance.using))
        if not is_store(store, "idempotency.stores.cache.CacheStore"):
            continue
        alias = instance.alias
        backend = cache_backend(alias)
        if backend is None:
            errors.append(no_cache(cap(what), alias))
        elif backend_is(backend, DUMMY):
            errors.append(message("E012", what=cap(what), alias=alias))
        elif refused := unreadable(cap(what), alias, backend):
            errors.append(refused)
        elif backend_is(backend, LOCMEM):
            errors.append(message("W001", what=cap(what), alias=alias))
    return errors


#: The Celery beat task that purges expired records (idempotency.contrib.celery.task).
PURGE_TASK = "idempotency.purge_expired_records"


def _beat_purges() -> bool:
    """Whether ``CELERY_BEAT_SCHEDULE`` schedules :data:`PURGE_TASK`."""
    schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
    if not isinstance(schedule, dict):
        return False
    return any(isinstance(e, dict) and e.get("task") == PURGE_TASK for e in schedule.values())


def check_purge(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """W040: a DatabaseStore in use, and nothing deletes its expired rows: PURGE_EVERY is
    None and no beat schedule names the purge task."""
    if values["PURGE_EVERY"] is not None or _beat_purges():
        return []
    database = [w for w, s, _i, _m in uses if is_store(s, DATABASE_STORE)]
    if not database:
        return []
    return [message("W040", what=cap(database[0]), task=PURGE_TASK)]


#: The database vendors (``connection.vendor``) DatabaseStore has SQL for.
SUPPORTED_VENDORS = frozenset({"postgresql", "mysql", "sqlite"})


def _vendor(engine: str) -> str | None:
    """The ``vendor`` of a database ENGINE's wrapper (``connection.vendor``, read from the
    class: nothing connects), or None when the backend cannot be loaded (Django reports
    that itself)."""
    try:
        vendor = load_backend(engine).DatabaseWrapper.vendor
    except Exception:  # noqa: BLE001 - a backend that does not load is Django's to report
        return None
    return str(vendor)


def check_database_vendors(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """E030: a DatabaseStore in use on a database it has no SQL for (Oracle, a third-party
    backend), caught at startup instead of answering 500 to every keyed request."""
    databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
    errors = []
    for what, store, instance, _mode in uses:
        if not is_store(store, DATABASE_STORE):
            continue
        alias = instance.using
        engine = (databases.get(alias) or {}).get("ENGINE") if isinstance(alias, str) else None
        if not isinstance(engine, str):
            continue  # an unknown alias is E015
        vendor = _vendor(engine)
        if vendor is not None and vendor not in SUPPORTED_VENDORS:
            errors.append(
                message("E030", what=cap(what), alias=alias, engine=engine, vendor=vendor)
            )
    return errors


def store_databases(uses: list[Use]) -> list[str]:
    """The databases of the database stores in use, each once, in order."""
    found = [instance.using for _w, store, instance, _m in uses if is_store(store, DATABASE_STORE)]
    return list(dict.fromkeys(found))


def check_database_aliases(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """E017 (ATOMIC_DATABASES) and W006 (databases outside atomic mode's transaction)."""
    databases = getattr(settings, "DATABASES", {}) or {}
    known = ", ".join(sorted(databases)) or "(none)"
    stores = [alias for alias in store_databases(uses) if alias in databases]  # else E015
    if not stores:
        return []
    wrapped = values["ATOMIC_DATABASES"]
    if not SETTINGS["ATOMIC_DATABASES"].accepts(wrapped):
        return []  # E004
    unknown = [name for name in wrapped if name not in databases]
    if unknown:
        return [message("E017", unknown=unknown, known=known)]
    if values["MODE"] != "lease":
        outside = sorted(set(databases) - {*stores, *wrapped})
        if outside:
            return [message("W006", aliases=", ".join(outside), alias=", ".join(stores))]
    return []


def check_routers(uses: list[Use]) -> list[checks.CheckMessage]:
    """W008: a database store's database is one the routers only read from (a replica)."""
    databases = getattr(settings, "DATABASES", {}) or {}
    if not getattr(settings, "DATABASE_ROUTERS", None):
        return []
    record, token = (
        apps.get_model("idempotency", "IdempotencyRecord"),
        apps.get_model("idempotency", "SubmitToken"),
    )
    warnings = []
    for what, store, instance, _mode in uses:
        alias = instance.using if is_store(store, DATABASE_STORE) else None
        if alias not in databases:
            continue
        for model in (record, token):
            try:
                read = router.db_for_read(model)
                write = router.db_for_write(model)
            except Exception:  # noqa: BLE001 - a router's own bug is not ours to report
                continue
            if read == alias and write != alias:
                where = f"The database of {what}"
                found = message(
                    "W008", what=where, alias=alias, model=model._meta.label, write=write
                )
                warnings.append(found)
                break
    return warnings


#: django-tenants' database backend: its connection names the request's schema.
TENANTS_ENGINE = "django_tenants.postgresql_backend"


def check_tenant_scope(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """W050: django-tenants under the default scope; W051: DATABASE_ROUTERS under it."""
    if values["SCOPE"] not in (SETTINGS["SCOPE"].default, user_scope):
        return []
    databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
    # django-tenants runs only on its backend: every project of it names this ENGINE
    tenants = [
        alias
        for alias, db in databases.items()
        if isinstance(db, dict) and db.get("ENGINE") == TENANTS_ENGINE
    ]
    if tenants:
        return [message("W050", alias=tenants[0])]
    if getattr(settings, "DATABASE_ROUTERS", None):
        return [message("W051")]
    return []


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
    # imported here: idempotency.tokens imports DRF (its views), an optional dependency
    from idempotency.tokens.base import token_backends
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


_AUTHENTICATION = "django.contrib.auth.middleware.AuthenticationMiddleware"
_IDEMPOTENCY = "idempotency.http.middleware.IdempotencyMiddleware"


def _middleware_index(middleware: list[Any], path: str) -> tuple[int, str] | None:
    """Where the first entry that is (a subclass of) the class at ``path`` sits."""
    for index, entry in enumerate(middleware):
        if isinstance(entry, str) and backend_is(entry, path):
            return index, entry
    return None


def check_middleware() -> list[checks.CheckMessage]:
    """E019: IdempotencyMiddleware placed before AuthenticationMiddleware."""
    middleware = list(getattr(settings, "MIDDLEWARE", None) or ())
    idempotency = _middleware_index(middleware, _IDEMPOTENCY)
    authentication = _middleware_index(middleware, _AUTHENTICATION)
    if idempotency is None or authentication is None or idempotency[0] > authentication[0]:
        return []
    return [message("E019", idempotency=idempotency[1], authentication=authentication[1])]


def check_gates() -> list[checks.CheckMessage]:
    """E041: under IdempotencyMiddleware, a function view that checks access inside itself
    (its replays would skip the check, so the middleware leaves it alone). E042:
    ``@idempotent`` above an access decorator (its replays come before the check)."""
    try:
        views = list(url_views())
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django
        return []
    middleware = list(getattr(settings, "MIDDLEWARE", None) or ())
    # imported here: the middleware imports DRF, an optional dependency
    from idempotency.http.middleware import gated_view

    errors = []
    wrapped = _middleware_index(middleware, _IDEMPOTENCY) is not None
    for name, callback in views:
        if gate_below_idempotent(callback):
            errors.append(message("E042", view=name, gate=GATE_NAME))
        elif wrapped and gated_view(callback) is not None:
            errors.append(message("E041", view=name, gate=GATE_NAME))
    return errors


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Validate ``settings.IDEMPOTENCY``, how it fits the rest of the settings, and the
    stores and modes the project's views configure for themselves."""
    raw = raw_settings()
    if raw is None:
        return [message("E001", type=type(getattr(settings, "IDEMPOTENCY", None)).__name__)]
    values = {**DEFAULTS, **raw}
    errors = check_keys(raw) + check_values(values)
    errors += check_backends(values)
    uses = stores_in_use(values, errors)
    errors += check_stores(values, uses)
    errors += check_database_vendors(values, uses)
    errors += check_redis(redis_users(raw, values, uses))
    errors += check_response_cache(uses)
    errors += check_database_aliases(values, uses)
    errors += check_routers(uses)
    errors += check_tenant_scope(values)
    errors += check_middleware()
    errors += check_codec(values)
    errors += check_purge(values, uses)
    errors += check_gates()
    return [m for i, m in enumerate(errors) if m not in errors[:i]]


def check_redis_persistence(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W007: the Redis that holds records, tokens or locks (global or a view's store)
    must survive a restart."""
    raw = raw_settings()
    if raw is None:
        return []
    values = {**DEFAULTS, **raw}
    return check_persistence(redis_users(raw, values, stores_in_use(values, [])))


def check_problem_documentation(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W041: the problems' ``type`` links to the project's own documentation."""
    raw = raw_settings()
    if raw is None:
        return []
    return check_problem_type_base({**DEFAULTS, **raw})


__all__ = [
    "check_problem_documentation",
    "check_redis_persistence",
    "check_settings",
    "redis_forgets",
]
