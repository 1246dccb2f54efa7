"""System checks of django-idempotency: errors ``idempotency.E0xx`` and warnings ``W0xx``,
each id's words kept in :data:`MESSAGES` so that it names one problem.

``IdempotencyConfig.ready`` registers the three checks below (this module is imported
when Django first runs them). They read ``settings.IDEMPOTENCY`` as written and never
raise. Only the deployment check W007 connects anywhere: it asks the Redis behind the
stores, tokens and locks what it persists.
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import router
from django.db.utils import load_backend
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.module_loading import import_string

from idempotency.codecs import BodyCodec
from idempotency.conf import DEFAULTS, HEADER_NAME, SETTINGS
from idempotency.http import views as http_views
from idempotency.http.middleware import GATE_NAME, gate_below_idempotent, gated_view
from idempotency.http.options import Policy
from idempotency.http.responses import NEVER_REPLAYED
from idempotency.locks.base import lock_backends
from idempotency.locks.redis import RedisLockBackend
from idempotency.scopes import user_scope
from idempotency.stores.base import AtomicStore, stores
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore
from idempotency.tokens.base import token_backends
from idempotency.tokens.redis import RedisTokens
from idempotency.utils.backends import (
    DEFAULT_ALIAS,
    ENTRY_MESSAGES,
    BackendHandler,
    CheckText,
)
from idempotency.utils.caches import DJANGO_BUILTIN_REDIS, DJANGO_REDIS, IN_PROCESS
from idempotency.utils.redis_clients import cache_connection

#: Every message of every check, by id; ``{placeholders}`` are filled per message. Retired
#: ids: W002 (a CacheStore on DummyCache is E012), E003 and E009 (a value outside a
#: setting's choices is E014, whichever the setting), W005 (a response cache is an option
#: of DatabaseStore only: another store refuses it, E063).
MESSAGES: dict[str, CheckText] = {
    **ENTRY_MESSAGES,
    "E001": CheckText(
        "The IDEMPOTENCY setting must be a dict, not {type}.",
        "Write IDEMPOTENCY = {{...}} with the settings to change, or remove it.",
    ),
    "E002": CheckText(
        "Unknown key {key!r} in the IDEMPOTENCY setting.",
        "{suggestion}Valid keys: {valid}.",
    ),
    "E004": CheckText(
        "IDEMPOTENCY[{name!r}] is {value!r}; it must be {expected}.", "{name}: {help}"
    ),
    "E005": CheckText(
        "IDEMPOTENCY[{name!r}] = {value!r} cannot be imported: {error}",
        "Give the dotted path of an importable object, such as {default!r}.",
    ),
    "E006": CheckText(
        "{what} asks for atomic mode, but its store {store} does not support atomic mode.",
        "Use DatabaseStore for atomic mode, or set the mode to 'lease' or 'auto'.",
    ),
    "E007": CheckText(
        "{what} needs {needs}, but {reason}.",
        "Give its alias a LOCATION (redis://, rediss:// or unix://; needs redis-py), or "
        "point its OPTIONS['cache'] (now {alias!r}) at a CACHES entry whose BACKEND is "
        "'django.core.cache.backends.redis.RedisCache' (or django-redis').",
    ),
    "E008": CheckText(
        "{what} names the cache {alias!r}, which is not in CACHES.",
        "Add that alias to CACHES or name one of: {aliases}.",
    ),
    "E010": CheckText(
        "IDEMPOTENCY[{name!r}] = {value!r} is not a valid HTTP header name.",
        "A header name is one or more letters, digits or !#$%&'*+-.^_`|~ (RFC 9110 token).",
    ),
    "E011": CheckText(
        "IDEMPOTENCY['REPLAY_HEADERS'] contains {header!r}, which is never replayable.",
        "Set-Cookie and hop-by-hop headers (Connection, Transfer-Encoding, ...) are never "
        "replayed: remove it from the list.",
    ),
    "E012": CheckText(
        "{what} is a CacheStore on the cache {alias!r}, a DummyCache: nothing is stored, "
        "so no request is deduplicated.",
        "Point the CacheStore at a real cache (Redis), or use DatabaseStore.",
    ),
    "E013": CheckText(
        "{what} is {value!r}, which is no alias of IDEMPOTENCY['STORES'].",
        "Name one of its aliases ({aliases}), or add {value!r} to IDEMPOTENCY['STORES'].",
    ),
    "E014": CheckText(
        "IDEMPOTENCY[{name!r}] is {value!r}; it must be {expected}.", "{name}: {help}"
    ),
    "E015": CheckText(
        "{where} names the database {alias!r}, which is not in DATABASES.",
        "Add that alias to DATABASES or name one of: {aliases}.",
    ),
    "E016": CheckText(
        "IDEMPOTENCY['TTL'] ({ttl}) is shorter than IDEMPOTENCY['LEASE'] ({lease}).",
        "A record must outlive its lease, or an in-progress key could expire and run again "
        "while its first request is still running: make TTL at least LEASE.",
    ),
    "E017": CheckText(
        "IDEMPOTENCY['ATOMIC_DATABASES'] names {unknown!r}, not in DATABASES ({known}).",
        "List the aliases (keys of DATABASES) that protected views write to, besides "
        "the store's database.",
    ),
    "E018": CheckText(
        "IDEMPOTENCY['METRICS'] is on, but prometheus_client is not installed.",
        "Install the metrics extra, pip install '/path/to/django-idempotency[metrics]' (from "
        "a checkout: docs/installation.md), or set METRICS to False.",
    ),
    "E019": CheckText(
        "{idempotency!r} comes before {authentication!r} in MIDDLEWARE: it runs before "
        "the user is known, so every logged-in caller of a Django view is anonymous to it "
        "(403 idempotency-anonymous-not-allowed, or no idempotency with ANONYMOUS "
        "'ignore').",
        "Move {idempotency!r} below {authentication!r} (last in MIDDLEWARE is safest).",
    ),
    "E020": CheckText(
        "{what} keeps records in the cache {alias!r}, whose backend {backend} unpickles "
        "what it reads: anyone who can write to that cache could run code in this process.",
        "Point it at a Redis cache (django_redis or Django's RedisCache: records are read "
        "as raw bytes, never unpickled) or a LocMemCache (one process), or use "
        "DatabaseStore or RedisStore.",
    ),
    "E030": CheckText(
        "{what} keeps its records in the database {alias!r} ({engine}, vendor {vendor!r}), "
        "and DatabaseStore has SQL only for PostgreSQL, MySQL/MariaDB and SQLite: every "
        "keyed request would fail there.",
        "Use a store that needs no SQL: RedisStore ('idempotency.stores.redis.RedisStore') "
        "or CacheStore ('idempotency.stores.cache.CacheStore'); or point the store's "
        "OPTIONS['database'] at a PostgreSQL, MySQL, MariaDB or SQLite database.",
    ),
    "E040": CheckText(
        "IDEMPOTENCY['BODY_CODEC'] cannot be used: {error}",
        "Name a subclass of idempotency.codecs.BodyCodec; for FernetCodec install the "
        "crypto extra and list Fernet keys in BODY_ENCRYPTION_KEYS "
        "(cryptography.fernet.Fernet.generate_key()).",
    ),
    "E041": CheckText(
        "The view {view!r} checks access inside itself ({gate}), so IdempotencyMiddleware "
        "cannot replay its answers after that check: it leaves the view alone, and "
        "retries of it run again.",
        "Decorate the view with @idempotent below the access decorator (@login_required "
        "then @idempotent: the check runs first), make it a class-based view with an "
        "access mixin, or mark it @idempotency_exempt.",
    ),
    "E042": CheckText(
        "The view {view!r} has @idempotent above {gate}: a replay would answer before "
        "the access check runs (a user who lost the permission still gets the answer).",
        "Put @idempotent below the access decorator, so the check runs first.",
    ),
    "E043": CheckText(
        "IDEMPOTENCY['OPENTELEMETRY'] is on, but opentelemetry-api is not installed.",
        "Install the otel extra, pip install '/path/to/django-idempotency[otel]' (from a "
        "checkout: docs/installation.md), or set OPENTELEMETRY to False.",
    ),
    "E050": CheckText(
        "{what} keeps records in the cache {alias!r}, whose django-redis client {client} "
        "gives no single Redis connection: its records and record-cap counters could only "
        "be read and counted through the cache's own serializer, which unpickles.",
        "Use django-redis' DefaultClient (or HerdClient, SentinelClient) for that cache, "
        "or use RedisStore or DatabaseStore.",
    ),
    "W001": CheckText(
        "{what} is a CacheStore on the cache {alias!r}, a LocMemCache: each process has "
        "its own, so a key is only deduplicated within one process.",
        "With several worker processes (gunicorn, uWSGI, Celery), point the CacheStore "
        "at a shared cache (Redis), or use DatabaseStore.",
    ),
    "W003": CheckText(
        "{what} is the cache {alias!r}, a LocMemCache: it is not "
        "shared, so replays in other processes still query the database.",
        "Use a shared cache (Redis) as the response cache, or set it to None.",
    ),
    "W004": CheckText(
        "{what} keeps records in DATABASES[{alias!r}], which has ATOMIC_REQUESTS=True, "
        "and runs in lease mode: "
        "a lease claim commits only with the view's transaction, so concurrent requests "
        "cannot see it and may run the same key twice.",
        "Use MODE 'atomic' or 'auto' with DatabaseStore, a Redis store for lease mode, or "
        "exclude idempotent views from ATOMIC_REQUESTS with transaction.non_atomic_requests.",
    ),
    "W006": CheckText(
        "Atomic mode wraps only the database {alias!r} in the view's transaction; "
        "writes to {aliases} would stay outside it.",
        "A view that writes to those databases keeps those writes when its key is released "
        "(a 5xx, an exception), and its retry repeats them. List the aliases protected views "
        "write to in IDEMPOTENCY['ATOMIC_DATABASES'] (or per view: databases=[...]), or "
        "silence this warning if no protected view writes there.",
    ),
    "W007": CheckText(
        "The Redis behind {what} ({alias}) {forgets}, so retries of the requests it had "
        "completed run again.",
        "Turn on AOF on that Redis (appendonly yes) with appendfsync everysec (a machine "
        "crash then loses about the last second of records; a process crash nothing) or "
        "always (nothing), or use DatabaseStore. See 'Redis durability' in the docs "
        "(explanation/reliability).",
    ),
    "W008": CheckText(
        "{what} is {alias!r}, which the DATABASE_ROUTERS treat as "
        "read-only for {model}: they send its reads there and its writes to {write!r}.",
        "Point it at the primary ({write!r}). The library reads and writes "
        "only its own alias, never through the routers, so a replay never reads a lagging "
        "replica; that alias must therefore be the writable primary.",
    ),
    "W040": CheckText(
        "{what} keeps records in the database, but nothing deletes the expired ones: "
        "IDEMPOTENCY['PURGE_EVERY'] is None and CELERY_BEAT_SCHEDULE does not schedule "
        "{task!r}, so the table grows without bound.",
        "Set PURGE_EVERY (a bounded purge on the request path), schedule {task!r} with "
        "Celery beat, or run manage.py purge_idempotency_records from cron and silence "
        "this warning (SILENCED_SYSTEM_CHECKS).",
    ),
    "W041": CheckText(
        "IDEMPOTENCY['PROBLEM_TYPE_BASE'] is the default {base!r}: the \"type\" of every "
        "error links to a domain this project does not own, which documents nothing there.",
        "Set PROBLEM_TYPE_BASE to where your API documents its errors, such as "
        "'https://api.example.com/docs/problems/' (the code is appended: "
        "idempotency-key-mismatch, ...), as the IETF Idempotency-Key draft asks error "
        "answers to link to their documentation. See docs/reference/problems.md.",
    ),
    "W050": CheckText(
        "The database {alias!r} is django-tenants' (a schema per tenant) while "
        "IDEMPOTENCY['SCOPE'] is the default: "
        "records are scoped by the principal alone, so two tenants' users with one primary "
        "key share records (a replay of the other's response, or a 422 on its keys).",
        "Set IDEMPOTENCY['SCOPE'] = 'idempotency.scopes.tenant_schema_scope' (the scope "
        "names the tenant's schema), or a scope function of your own that names the tenant.",
    ),
    "W051": CheckText(
        "DATABASE_ROUTERS is set while IDEMPOTENCY['SCOPE'] is the default: the default "
        "scope names a principal's database only when the principal was loaded from it, so "
        "tenants that share a user table (or route by something else) share records.",
        "With a database per tenant that holds its own users, the default scope is enough "
        "(auth.user@<alias>:<pk>): silence this warning. Otherwise set IDEMPOTENCY['SCOPE'] "
        "to a function that names the tenant. Routers that only split reads from writes "
        "need nothing: silence it (SILENCED_SYSTEM_CHECKS).",
    ),
}


def message(code: str, **values: Any) -> checks.CheckMessage:
    """The check message of ``code`` (an Error for ``E…``, a Warning for ``W…``), its
    text and hint filled with ``values``."""
    entry = MESSAGES[code]
    level = checks.Error if code.startswith("E") else checks.Warning
    return level(
        entry.msg.format(**values), hint=entry.hint.format(**values), id=f"idempotency.{code}"
    )


def cap(text: str) -> str:
    """``text`` with its first letter upper-cased (a message's subject)."""
    return text[:1].upper() + text[1:]


LOCMEM = "django.core.cache.backends.locmem.LocMemCache"
DUMMY = "django.core.cache.backends.dummy.DummyCache"
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
    for what, store, _mode in uses:
        cache = store.response_cache if isinstance(store, DatabaseStore) else None
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
    if values["OPENTELEMETRY"] and (
        importlib.util.find_spec("opentelemetry") is None
        or importlib.util.find_spec("opentelemetry.trace") is None
    ):
        errors.append(message("E043"))
    ttl, lease = values["TTL"], values["LEASE"]
    if SETTINGS["TTL"].accepts(ttl) and SETTINGS["LEASE"].accepts(lease) and ttl < lease:
        errors.append(message("E016", ttl=ttl, lease=lease))
    return errors


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


def check_backends(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """E015, E044-E046 and E060-E064 for every alias of ``STORES``, ``TOKENS`` and
    ``LOCKS``."""
    errors: list[checks.CheckMessage] = []
    for handler in (stores, token_backends, lock_backends):
        entries = values[handler.setting]
        if not SETTINGS[handler.setting].accepts(entries):
            continue  # E004
        if DEFAULT_ALIAS not in entries:
            aliases = ", ".join(repr(a) for a in entries) or "none"
            errors.append(
                message(
                    "E060",
                    setting=handler.setting,
                    what=handler.what,
                    alias=DEFAULT_ALIAS,
                    aliases=aliases,
                )
            )
        for alias, entry in entries.items():
            problems = handler.problems(alias, entry)
            errors += [
                checks.Error(p.text, hint=p.hint, id=f"idempotency.{p.code}") for p in problems
            ]
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


# -- the protected views of a project ---------------------------------------------------

#: Methods (and viewset actions) that take part.
HANDLER_NAMES = ("post", "put", "patch", "delete")


def _policies_of(callback: Any) -> Iterator[Policy]:
    """The policies a view callable (what a URL pattern calls) applies to its requests."""
    policy = http_views.policy_of(callback)
    if policy is not None:
        yield policy
    own = http_views.view_policies(callback)  # a Ninja path's
    if own is not None:
        yield from own
        return
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if not isinstance(cls, type):
        return
    actions = getattr(callback, "actions", None) or {}
    for name in sorted({*HANDLER_NAMES, *actions.values()}):
        yield from http_views.handler_policies(getattr(cls, name, None))
    class_policy = http_views.class_policy(cls, callback)
    if class_policy is not None:  # DRF: IdempotentMixin's
        yield class_policy


def _patterns(patterns: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            namespace = f"{pattern.namespace}:" if pattern.namespace else ""
            yield from _patterns(pattern.url_patterns, prefix + namespace)
        elif isinstance(pattern, URLPattern):
            yield prefix + (pattern.name or str(pattern.pattern)), pattern.callback


def url_views(urlconf: Any = None) -> Iterator[tuple[str, Any]]:
    """``(view name, callback)`` of every URL pattern the URLconf reaches."""
    yield from _patterns(get_resolver(urlconf).url_patterns, "")


def protected_views(urlconf: Any = None) -> Iterator[tuple[str, Policy]]:
    """``(view name, policy)`` for every policy of every view the URLconf reaches."""
    for name, callback in url_views(urlconf):
        seen: set[int] = set()
        for policy in _policies_of(callback):
            if id(policy) not in seen:
                seen.add(id(policy))
                yield name, policy


#: A store in use: ``(what, store, mode)``, ``what`` naming it in messages.
Use = tuple[str, Any, Any]


def _view_policies() -> list[tuple[str, Any]]:
    """``(view name, policy)`` of every protected view; none when the URLconf cannot be
    loaded (Django's own URL checks report that)."""
    try:
        return list(protected_views())
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django
        return []


def configured(handler: Any, values: dict[str, Any]) -> dict[str, Any]:
    """``alias: instance`` of each usable alias of ``handler``'s setting (the
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
            found[alias] = handler.create(alias)
        except Exception:  # noqa: BLE001 - a constructor's own failure shows at first use
            continue
    return found


def stores_in_use(values: dict[str, Any], errors: list[checks.CheckMessage]) -> list[Use]:
    """Every store in use: each alias of ``STORES``, and each store a view names itself
    (``store=``, ``idempotency_store``). An alias no entry configures is appended to
    ``errors`` (E013)."""
    usable = configured(stores, values)
    uses: list[Use] = [
        (f"the store {alias!r}", store, values["MODE"]) for alias, store in usable.items()
    ]
    entries = values["STORES"] if isinstance(values["STORES"], dict) else {}
    for view, policy in _view_policies():
        what = f"the store of the view {view!r}"
        option = policy.store
        if option is None:
            if policy.mode == "atomic" and "default" in usable:
                uses.append((f"the view {view!r}", usable["default"], "atomic"))
            continue
        if isinstance(option, str):
            if option not in entries:
                aliases = ", ".join(repr(a) for a in entries) or "none"
                errors.append(message("E013", what=cap(what), value=option, aliases=aliases))
            elif option in usable:
                uses.append((what, usable[option], policy.mode))
            continue
        uses.append((what, option, policy.mode))
    return uses


def check_stores(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """E006, E008, E012, E020, E050 and W001 for each store in use; W004 for each database
    store in lease mode."""
    errors: list[checks.CheckMessage] = []
    databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
    for what, store, mode in uses:
        if mode == "atomic" and not isinstance(store, AtomicStore):  # as the engine chooses
            errors.append(message("E006", what=cap(what), store=type(store).__qualname__))
        if isinstance(store, DatabaseStore):
            database = databases.get(store.using) or {}
            if mode == "lease" and database.get("ATOMIC_REQUESTS"):
                errors.append(message("W004", what=cap(what), alias=store.using))
        if not isinstance(store, CacheStore):
            continue
        alias = store.alias
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
    database = [w for w, s, _m in uses if isinstance(s, DatabaseStore)]
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
    for what, store, _mode in uses:
        if not isinstance(store, DatabaseStore):
            continue
        alias = store.using
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
    found = [store.using for _w, store, _m in uses if isinstance(store, DatabaseStore)]
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
    for what, store, _mode in uses:
        alias = store.using if isinstance(store, DatabaseStore) else None
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
    found: list[tuple[str, Any]] = [
        (what, store) for what, store, _mode in uses if isinstance(store, RedisStore)
    ]
    parts: list[tuple[Any, type, str]] = [(token_backends, RedisTokens, "submit tokens")]
    if "LOCKS" in raw:
        parts.append((lock_backends, RedisLockBackend, "locks"))
    for handler, cls, what in parts:
        for alias, instance in configured(handler, values).items():
            if isinstance(instance, cls):
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
    """W041: ``PROBLEM_TYPE_BASE`` is still the default, whose domain nobody here owns:
    every error's ``type`` would link to a page that documents nothing."""
    raw, base = raw_settings(), DEFAULTS["PROBLEM_TYPE_BASE"]
    if raw is None or raw.get("PROBLEM_TYPE_BASE", base) != base:
        return []
    return [message("W041", base=base)]


__all__ = [
    "check_problem_documentation",
    "check_redis_persistence",
    "check_settings",
    "redis_forgets",
]
