"""The messages of the system checks (:mod:`idempotency.checks`), kept together so each
id names one problem only, and how a check makes one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core import checks


@dataclass(frozen=True)
class _Message:
    msg: str
    hint: str


#: Every message of every check, by id. ``{placeholders}`` are filled per message.
#: Retired ids: W002 (a CacheStore on DummyCache is E012), E003 and E009 (a value
#: outside a setting's choices is E014, whichever the setting), W005 (a response cache
#: is an option of DatabaseStore only: another store refuses it, E063).
MESSAGES: dict[str, _Message] = {
    "E001": _Message(
        "The IDEMPOTENCY setting must be a dict, not {type}.",
        "Write IDEMPOTENCY = {{...}} with the settings to change, or remove it.",
    ),
    "E002": _Message(
        "Unknown key {key!r} in the IDEMPOTENCY setting.",
        "{suggestion}Valid keys: {valid}.",
    ),
    "E004": _Message(
        "IDEMPOTENCY[{name!r}] is {value!r}; it must be {expected}.", "{name}: {help}"
    ),
    "E005": _Message(
        "IDEMPOTENCY[{name!r}] = {value!r} cannot be imported: {error}",
        "Give the dotted path of an importable object, such as {default!r}.",
    ),
    "E006": _Message(
        "{what} asks for atomic mode, but its store {store} does not support atomic mode.",
        "Use DatabaseStore for atomic mode, or set the mode to 'lease' or 'auto'.",
    ),
    "E007": _Message(
        "{what} needs {needs}, but {reason}.",
        "Give its alias a LOCATION (redis://, rediss:// or unix://; needs redis-py), or "
        "point its OPTIONS['cache'] (now {alias!r}) at a CACHES entry whose BACKEND is "
        "'django.core.cache.backends.redis.RedisCache' (or django-redis').",
    ),
    "E008": _Message(
        "{what} names the cache {alias!r}, which is not in CACHES.",
        "Add that alias to CACHES or name one of: {aliases}.",
    ),
    "E010": _Message(
        "IDEMPOTENCY[{name!r}] = {value!r} is not a valid HTTP header name.",
        "A header name is one or more letters, digits or !#$%&'*+-.^_`|~ (RFC 9110 token).",
    ),
    "E011": _Message(
        "IDEMPOTENCY['REPLAY_HEADERS'] contains {header!r}, which is never replayable.",
        "Set-Cookie and hop-by-hop headers (Connection, Transfer-Encoding, ...) are never "
        "replayed: remove it from the list.",
    ),
    "E012": _Message(
        "{what} is a CacheStore on the cache {alias!r}, a DummyCache: nothing is stored, "
        "so no request is deduplicated.",
        "Point the CacheStore at a real cache (Redis), or use DatabaseStore.",
    ),
    "E013": _Message(
        "{what} is {value!r}, which is no alias of IDEMPOTENCY['STORES'].",
        "Name one of its aliases ({aliases}), or add {value!r} to IDEMPOTENCY['STORES'].",
    ),
    "E014": _Message(
        "IDEMPOTENCY[{name!r}] is {value!r}; it must be {expected}.", "{name}: {help}"
    ),
    "E015": _Message(
        "{where} names the database {alias!r}, which is not in DATABASES.",
        "Add that alias to DATABASES or name one of: {aliases}.",
    ),
    "E016": _Message(
        "IDEMPOTENCY['TTL'] ({ttl}) is shorter than IDEMPOTENCY['LEASE'] ({lease}).",
        "A record must outlive its lease, or an in-progress key could expire and run again "
        "while its first request is still running: make TTL at least LEASE.",
    ),
    "E017": _Message(
        "IDEMPOTENCY['ATOMIC_DATABASES'] names {unknown!r}, not in DATABASES ({known}).",
        "List the aliases (keys of DATABASES) that protected views write to, besides "
        "the store's database.",
    ),
    "E018": _Message(
        "IDEMPOTENCY['METRICS'] is on, but prometheus_client is not installed.",
        "Install the metrics extra, pip install '/path/to/django-idempotency[metrics]' (from "
        "a checkout: docs/installation.md), or set METRICS to False.",
    ),
    "E019": _Message(
        "{idempotency!r} comes before {authentication!r} in MIDDLEWARE: it runs before "
        "the user is known, so every logged-in caller of a Django view is anonymous to it "
        "(403 idempotency-anonymous-not-allowed, or no idempotency with ANONYMOUS "
        "'ignore').",
        "Move {idempotency!r} below {authentication!r} (last in MIDDLEWARE is safest).",
    ),
    "E020": _Message(
        "{what} keeps records in the cache {alias!r}, whose backend {backend} unpickles "
        "what it reads: anyone who can write to that cache could run code in this process.",
        "Point it at a Redis cache (django_redis or Django's RedisCache: records are read "
        "as raw bytes, never unpickled) or a LocMemCache (one process), or use "
        "DatabaseStore or RedisStore.",
    ),
    "E050": _Message(
        "{what} keeps records in the cache {alias!r}, whose django-redis client {client} "
        "gives no single Redis connection: its records and record-cap counters could only "
        "be read and counted through the cache's own serializer, which unpickles.",
        "Use django-redis' DefaultClient (or HerdClient, SentinelClient) for that cache, "
        "or use RedisStore or DatabaseStore.",
    ),
    "W050": _Message(
        "The database {alias!r} is django-tenants' (a schema per tenant) while "
        "IDEMPOTENCY['SCOPE'] is the default: "
        "records are scoped by the principal alone, so two tenants' users with one primary "
        "key share records (a replay of the other's response, or a 422 on its keys).",
        "Set IDEMPOTENCY['SCOPE'] = 'idempotency.scopes.tenant_schema_scope' (the scope "
        "names the tenant's schema), or a scope function of your own that names the tenant.",
    ),
    "W051": _Message(
        "DATABASE_ROUTERS is set while IDEMPOTENCY['SCOPE'] is the default: the default "
        "scope names a principal's database only when the principal was loaded from it, so "
        "tenants that share a user table (or route by something else) share records.",
        "With a database per tenant that holds its own users, the default scope is enough "
        "(auth.user@<alias>:<pk>): silence this warning. Otherwise set IDEMPOTENCY['SCOPE'] "
        "to a function that names the tenant. Routers that only split reads from writes "
        "need nothing: silence it (SILENCED_SYSTEM_CHECKS).",
    ),
    "E040": _Message(
        "IDEMPOTENCY['BODY_CODEC'] cannot be used: {error}",
        "Name a subclass of idempotency.codecs.BodyCodec; for FernetCodec install the "
        "crypto extra and list Fernet keys in BODY_ENCRYPTION_KEYS "
        "(cryptography.fernet.Fernet.generate_key()).",
    ),
    "E041": _Message(
        "The view {view!r} checks access inside itself ({gate}), so IdempotencyMiddleware "
        "cannot replay its answers after that check: it leaves the view alone, and "
        "retries of it run again.",
        "Decorate the view with @idempotent below the access decorator (@login_required "
        "then @idempotent: the check runs first), make it a class-based view with an "
        "access mixin, or mark it @idempotency_exempt.",
    ),
    "E042": _Message(
        "The view {view!r} has @idempotent above {gate}: a replay would answer before "
        "the access check runs (a user who lost the permission still gets the answer).",
        "Put @idempotent below the access decorator, so the check runs first.",
    ),
    "E043": _Message(
        "IDEMPOTENCY['OPENTELEMETRY'] is on, but opentelemetry-api is not installed.",
        "Install the otel extra, pip install '/path/to/django-idempotency[otel]' (from a "
        "checkout: docs/installation.md), or set OPENTELEMETRY to False.",
    ),
    "E044": _Message(
        "{where} = {value!r} names no {what}: it cannot be imported ({error}).",
        "Name the dotted path of a subclass of {base}.",
    ),
    "E045": _Message(
        "{where} = {value!r} names no {what}: {found} is not a subclass of {base}.",
        "Name the dotted path of a subclass of {base}.",
    ),
    "E046": _Message(
        "{where} = {value!r} names no usable {what}: {found} does not implement {methods}.",
        "Implement every abstract method of {base} in {found} (the methods subclasses "
        "must implement come first in its documentation).",
    ),
    "E060": _Message(
        "IDEMPOTENCY[{setting!r}] has no {what} {alias!r}.",
        "Add the alias to IDEMPOTENCY[{setting!r}] (a dict of aliases, each "
        "{{'BACKEND': ..., 'LOCATION': ..., 'OPTIONS': {{...}}}}, as CACHES), or name one of "
        "its aliases: {aliases}.",
    ),
    "E061": _Message(
        "{where} is {value!r}{extra}; it must be a dict.",
        "Write each alias as CACHES does: {{'BACKEND': 'dotted.path.Class', 'LOCATION': ..., "
        "'OPTIONS': {{...}}}} (LOCATION and OPTIONS may be left out; OPTIONS is a dict).",
    ),
    "E062": _Message(
        "{where} is {value!r}; for {backend} it must be {expected}.",
        "Redis stores, tokens and locks take redis://, rediss:// (TLS) or unix:// URLs "
        "(or, instead, OPTIONS {{'cache': <a CACHES alias>}}); other backends take none.",
    ),
    "E063": _Message(
        "{where} has the option {name!r}, which {backend} does not accept.",
        "{suggestion}{backend} accepts: {accepted}.",
    ),
    "E064": _Message(
        "{where} is {value!r}; it must be {expected}.",
        "{name}: {help}",
    ),
    "E030": _Message(
        "{what} keeps its records in the database {alias!r} ({engine}, vendor {vendor!r}), "
        "and DatabaseStore has SQL only for PostgreSQL, MySQL/MariaDB and SQLite: every "
        "keyed request would fail there.",
        "Use a store that needs no SQL: RedisStore ('idempotency.stores.redis.RedisStore') "
        "or CacheStore ('idempotency.stores.cache.CacheStore'); or point the store's "
        "OPTIONS['database'] at a PostgreSQL, MySQL, MariaDB or SQLite database.",
    ),
    "W001": _Message(
        "{what} is a CacheStore on the cache {alias!r}, a LocMemCache: each process has "
        "its own, so a key is only deduplicated within one process.",
        "With several worker processes (gunicorn, uWSGI, Celery), point the CacheStore "
        "at a shared cache (Redis), or use DatabaseStore.",
    ),
    "W003": _Message(
        "{what} is the cache {alias!r}, a LocMemCache: it is not "
        "shared, so replays in other processes still query the database.",
        "Use a shared cache (Redis) as the response cache, or set it to None.",
    ),
    "W004": _Message(
        "{what} keeps records in DATABASES[{alias!r}], which has ATOMIC_REQUESTS=True, "
        "and runs in lease mode: "
        "a lease claim commits only with the view's transaction, so concurrent requests "
        "cannot see it and may run the same key twice.",
        "Use MODE 'atomic' or 'auto' with DatabaseStore, a Redis store for lease mode, or "
        "exclude idempotent views from ATOMIC_REQUESTS with transaction.non_atomic_requests.",
    ),
    "W006": _Message(
        "Atomic mode wraps only the database {alias!r} in the view's transaction; "
        "writes to {aliases} would stay outside it.",
        "A view that writes to those databases keeps those writes when its key is released "
        "(a 5xx, an exception), and its retry repeats them. List the aliases protected views "
        "write to in IDEMPOTENCY['ATOMIC_DATABASES'] (or per view: databases=[...]), or "
        "silence this warning if no protected view writes there.",
    ),
    "W007": _Message(
        "The Redis behind {what} ({alias}) {forgets}, so retries of the requests it had "
        "completed run again.",
        "Turn on AOF on that Redis (appendonly yes) with appendfsync everysec (a machine "
        "crash then loses about the last second of records; a process crash nothing) or "
        "always (nothing), or use DatabaseStore. See 'Redis durability' in the docs "
        "(explanation/reliability).",
    ),
    "W008": _Message(
        "{what} is {alias!r}, which the DATABASE_ROUTERS treat as "
        "read-only for {model}: they send its reads there and its writes to {write!r}.",
        "Point it at the primary ({write!r}). The library reads and writes "
        "only its own alias, never through the routers, so a replay never reads a lagging "
        "replica; that alias must therefore be the writable primary.",
    ),
    "W040": _Message(
        "{what} keeps records in the database, but nothing deletes the expired ones: "
        "IDEMPOTENCY['PURGE_EVERY'] is None and CELERY_BEAT_SCHEDULE does not schedule "
        "{task!r}, so the table grows without bound.",
        "Set PURGE_EVERY (a bounded purge on the request path), schedule {task!r} with "
        "Celery beat, or run manage.py purge_idempotency_records from cron and silence "
        "this warning (SILENCED_SYSTEM_CHECKS).",
    ),
    "W041": _Message(
        "IDEMPOTENCY['PROBLEM_TYPE_BASE'] is the default {base!r}: the \"type\" of every "
        "error links to a domain this project does not own, which documents nothing there.",
        "Set PROBLEM_TYPE_BASE to where your API documents its errors, such as "
        "'https://api.example.com/docs/problems/' (the code is appended: "
        "idempotency-key-mismatch, ...), as the IETF Idempotency-Key draft asks error "
        "answers to link to their documentation. See docs/reference/problems.md.",
    ),
}


def message(code: str, **values: Any) -> checks.CheckMessage:
    """The check message of ``code`` (an Error for ``E…``, a Warning for ``W…``), its
    text and hint filled with ``values``."""
    entry = MESSAGES[code]
    level = checks.Error if code.startswith("E") else checks.Warning
    return level(
        entry.msg.format(**values),
        hint=entry.hint.format(**values),
        id=f"idempotency.{code}",
    )


def cap(text: str) -> str:
    """``text`` with its first letter upper-cased (a message's subject)."""
    return text[:1].upper() + text[1:]
