"""Settings of django-idempotency: one ``IDEMPOTENCY`` dict, each setting described once.

:data:`SETTINGS` describes every setting: its default, its meaning, its type, its
choices or bounds and whether it may be None, each a :class:`Setting` (which also says
which values it accepts). The system checks (:mod:`idempotency.checks`) validate ``IDEMPOTENCY``
against that description, and a test keeps the settings reference
(docs/reference/settings.md) in step with it.

Read the values through :data:`idempotency_settings`; it re-reads Django's settings
whenever they change (``override_settings`` included), and resolves dotted
paths once until then. Defaults are never written into ``django.conf.settings``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

#: An HTTP header name (RFC 9110 token).
HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")

#: The kinds of value a setting may have (what each accepts: :meth:`Setting.accepts`,
#: :attr:`Setting.expected`), each with the type the settings reference names it by.
_LABELS = {
    "bool": "bool",
    "text": "str",
    "seconds": "seconds",
    "integer": "int",
    "choice": "str",
    "path": "dotted path",
    "header": "str",
    "headers": "list of str",
    "names": "list of str",
    "cache": "str",
    "database": "str",
    "aliases": "list of str",
    "backends": "dict of aliases",
}
KINDS = tuple(_LABELS)


@dataclass(frozen=True)
class Setting:
    """One setting: its default, what it means and which values it takes."""

    default: Any
    #: What the setting means (the system checks' hint for a wrong value).
    help: str
    kind: str
    #: ``choice``: the accepted values.
    choices: tuple[str, ...] = ()
    #: ``seconds``/``integer``: the lower bound, and whether it is allowed itself.
    minimum: float = 0
    inclusive: bool = False
    #: Whether None is a value of its own (documented in ``help``).
    nullable: bool = False
    #: Whether the value is a secret: the checks never show it.
    secret: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown setting kind {self.kind!r}")

    @property
    def label(self) -> str:
        """The type as the settings reference (docs/reference/settings.md) names it."""
        label = _LABELS[self.kind]
        return f"{label} or None" if self.nullable else label

    @property
    def expected(self) -> str:
        """What a valid value is, in words."""
        bound = f"{'>=' if self.inclusive else '>'} {self.minimum:g}"
        text = {
            "bool": "True or False",
            "seconds": f"a number {bound}",
            "integer": f"an integer {bound}",
            "choice": "one of " + ", ".join(repr(c) for c in self.choices),
            "path": "the dotted path of an importable object",
            "header": "a header name",
            "headers": "a list of header names",
            "names": "a list of strings",
            "aliases": "a list of database aliases",
            "backends": "a dict of aliases, each a dict with a BACKEND",
        }.get(self.kind, "a string")
        return f"None or {text}" if self.nullable else text

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has this setting's type, choices and bounds (dotted paths
        are only checked to be paths or objects here: importing them is the checks')."""
        if value is None:
            return self.nullable
        kind = self.kind
        if kind == "bool":
            return isinstance(value, bool)
        if kind in ("seconds", "integer"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return False
            if kind == "integer" and not isinstance(value, int):
                return False
            if not math.isfinite(value):
                return False
            return bool(value >= self.minimum if self.inclusive else value > self.minimum)
        if kind == "choice":
            return value in self.choices
        if kind == "path":
            return isinstance(value, str) or callable(value)
        if kind == "header":
            return isinstance(value, str) and bool(HEADER_NAME.match(value))
        if kind == "backends":  # each entry is the checks' (E044-E046, E060-E064)
            return isinstance(value, dict) and all(isinstance(a, str) for a in value)
        if kind in ("headers", "names", "aliases"):
            return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        return isinstance(value, str)


#: The values of ``MODE``, and of ``mode=`` on views, functions and tasks.
MODES = ("auto", "atomic", "lease")


#: Every setting, described once. The settings reference is checked against it.
SETTINGS: dict[str, Setting] = {
    "ENABLED": Setting(True, "False: every body runs directly, touching no store.", "bool"),
    "HEADER": Setting(
        "Idempotency-Key", "Name of the request header that carries the key.", "header"
    ),
    "STORES": Setting(
        {"default": {"BACKEND": "idempotency.stores.database.DatabaseStore"}},
        'The stores, by alias, each {"BACKEND": dotted path, "LOCATION": ..., '
        '"OPTIONS": {...}} as in CACHES; "default" is used where a view, function or '
        'task names none (store="<alias>"). Each store\'s OPTIONS: docs/howto/stores.md.',
        "backends",
    ),
    "MODE": Setting(
        "auto",
        '"atomic", "lease" or "auto" (atomic where the store supports it, else lease).',
        "choice",
        choices=MODES,
    ),
    "ATOMIC_CLAIM": Setting(
        "first",
        'Atomic mode: "first" claims the key inside the view\'s transaction before the '
        'view runs (a concurrent duplicate waits and never runs the view); "optimistic" '
        "inserts the record after the view, for views whose every effect is in that "
        "transaction.",
        "choice",
        choices=("first", "optimistic"),
    ),
    "ATOMIC_DATABASES": Setting(
        [],
        "Atomic mode: database aliases wrapped in the view's transaction besides "
        "the store's database (list every alias a protected view writes to).",
        "aliases",
    ),
    "TTL": Setting(86400, "Seconds a completed record is kept and replayed (24 h).", "seconds"),
    "LEASE": Setting(
        60,
        "Seconds a lease-mode claim is owned before another request may take it over.",
        "seconds",
    ),
    "WAIT": Setting(
        0.0,
        "Seconds a request waits for a concurrent first request before answering 409.",
        "seconds",
        inclusive=True,
    ),
    "LOCK_TIMEOUT": Setting(
        None,
        "Atomic mode on PostgreSQL: seconds a request may wait on a concurrent duplicate's "
        "claim before answering 409; None: no bound beyond the first request's own "
        "transaction (and no extra statement per request).",
        "seconds",
        nullable=True,
    ),
    "RETRY_AFTER": Setting(
        1,
        "Retry-After of a 409 for a request still in progress, while its claim is young: "
        "it grows with the claim's age (a quarter of it) and never passes the remaining "
        "lease.",
        "seconds",
    ),
    "REQUIRED": Setting(
        False, "Whether views reject unsafe requests that carry no key (400).", "bool"
    ),
    "KEY_SYNTAX": Setting(
        "lenient",
        '"lenient": the key is an RFC 8941 sf-string ("abc") or a bare value (abc), '
        'parameters refused in both; "strict": only an sf-string, exactly as the IETF '
        "draft defines the header (well-formed parameters accepted and ignored).",
        "choice",
        choices=("lenient", "strict"),
    ),
    "SCOPE": Setting(
        "idempotency.scopes.user_scope",
        'Dotted path of scope(request) -> str | None; None or "" means "anonymous". The '
        "default names the principal's model: auth.user:<pk> (and its database when it is "
        "not default: auth.user@<alias>:<pk>); idempotency.scopes.tenant_schema_scope "
        "names django-tenants' schema too.",
        "path",
    ),
    "ANONYMOUS": Setting(
        "reject",
        'What happens to an anonymous request with a key: "reject" (403) or "ignore" (run '
        "it without idempotency). Anonymous callers never share stored responses.",
        "choice",
        choices=("reject", "ignore"),
    ),
    "FINGERPRINT": Setting(
        "idempotency.http.fingerprints.request_fingerprint",
        "Dotted path of fingerprint(request, headers) -> str (the default: a keyed "
        "HMAC-SHA256 hex, see FINGERPRINT_SECRETS).",
        "path",
    ),
    "RESULT_TYPES": Setting(
        [],
        "Dotted paths of classes (results, and exceptions stored with store_errors=True) "
        "that function and task results may be rebuilt into besides those their return "
        "annotations name. A stored record naming any other class is refused as corrupt.",
        "names",
    ),
    "FINGERPRINT_SECRETS": Setting(
        [],
        "Secrets of the keyed request and argument fingerprints (HMAC-SHA256), the "
        "current one first, then older ones still accepted (rotation). Empty: derived "
        "from SECRET_KEY, with SECRET_KEY_FALLBACKS as the older ones.",
        "names",
    ),
    "FINGERPRINT_ACCEPT_UNKEYED": Setting(
        True,
        "Whether a record stored before fingerprints were keyed (an unkeyed SHA-256) "
        "still matches its retry. Turn it off once one TTL has passed since the upgrade.",
        "bool",
    ),
    "FINGERPRINT_HEADERS": Setting(
        [], "Request headers (names) that also go into the fingerprint.", "headers"
    ),
    "FINGERPRINT_EXCLUDE": Setting(
        [],
        "Body fields (form, multipart, top-level JSON keys) and query parameters left out "
        "of the fingerprint, for values that change between attempts of one operation "
        "(csrfmiddlewaretoken always is).",
        "names",
    ),
    "MAX_RESPONSE_BYTES": Setting(
        1048576,
        "Largest response body stored for replay (bytes); a larger one commits, and its "
        "key answers retries with 410 idempotency-response-not-stored. None: no limit.",
        "integer",
        nullable=True,
    ),
    "REPLAY_HEADERS": Setting(
        [
            "Content-Language",
            "Content-Disposition",
            "Location",
            "ETag",
            "Last-Modified",
            "Link",
            "Cache-Control",
        ],
        "Response headers kept and replayed (Content-Type and Vary always are; Set-Cookie "
        "and hop-by-hop headers never are).",
        "headers",
    ),
    "ON_REPLAY": Setting(
        None,
        "Dotted path of on_replay(request, response, record), called on every replay of "
        "a view that names no on_replay of its own: it may add headers to the replayed "
        "response (an expiry, a trace id), nothing else. None: no hook.",
        "path",
        nullable=True,
    ),
    "BODY_CODEC": Setting(
        "idempotency.codecs.IdentityCodec",
        "Dotted path of the codec (a subclass of idempotency.codecs.BodyCodec) every "
        "stored body passes through; idempotency.codecs.FernetCodec encrypts them with "
        "BODY_ENCRYPTION_KEYS.",
        "path",
    ),
    "BODY_ENCRYPTION_KEYS": Setting(
        [],
        "FernetCodec: Fernet keys, newest first; the first encrypts, every one decrypts "
        "(keep a retired key listed until reencrypt_idempotency_records has run or TTL "
        "has passed).",
        "names",
        secret=True,
    ),
    "REDACT_FIELDS": Setting(
        [],
        'JSON fields (names, at any depth) whose values are replaced by "[redacted]" '
        "before a body is stored; replays then answer the redacted body.",
        "names",
    ),
    "STATUS_ONLY": Setting(
        False,
        "Store only the status and allow-listed headers of responses, never their bodies: "
        "a replay answers the stored status with an empty body.",
        "bool",
    ),
    "STORE_ERRORS": Setting(
        False,
        "Store 5xx and transient 4xx responses too (at-most-once) instead of releasing.",
        "bool",
    ),
    "ERROR_TTL": Setting(
        None,
        "Seconds a definitive 4xx answer (a 400, 404, 422, ...) is kept, instead of TTL; 0: "
        "not stored (the key is released, a retry runs again). None: TTL. Only for views "
        "whose 4xx answers have no side effects (a declined payment has one).",
        "seconds",
        inclusive=True,
        nullable=True,
    ),
    "MAX_NEW_RECORDS": Setting(
        None,
        "Most new records one scope (caller) may make per RECORD_WINDOW, across views; "
        "one more is answered 429 idempotency-too-many-records with Retry-After (replays "
        "are not limited). None: no limit.",
        "integer",
        nullable=True,
    ),
    "RECORD_WINDOW": Setting(
        60, "Seconds of the window MAX_NEW_RECORDS counts new records in.", "seconds"
    ),
    "STORE_UNAVAILABLE": Setting(
        "reject",
        'What a view does when its store cannot be reached: "reject" (503 '
        'idempotency-store-unavailable with Retry-After; the view does not run) or "run" '
        "(run it without idempotency: retries may then repeat it).",
        "choice",
        choices=("reject", "run"),
    ),
    "PROBLEM_TYPE_BASE": Setting(
        "https://django-idempotency.dev/problems/",
        'Start of the "type" URI of problem+json errors; the stable code is appended.',
        "text",
    ),
    "SUBMIT_TOKEN_TTL": Setting(600, "Seconds a one-time submit token lives.", "seconds"),
    "SUBMIT_TOKEN_HEADER": Setting(
        "X-Submit-Token", "Request header that carries a one-time submit token.", "header"
    ),
    "TOKENS": Setting(
        {"default": {"BACKEND": "idempotency.tokens.DatabaseTokens"}},
        'The submit-token backends, by alias, each {"BACKEND": dotted path (a subclass '
        'of idempotency.tokens.TokenBackend), "LOCATION": ..., "OPTIONS": {...}}; '
        '"default" issues and consumes tokens.',
        "backends",
    ),
    "LOCKS": Setting(
        {"default": {"BACKEND": "idempotency.locks.RedisLockBackend"}},
        'The lock backends, by alias, each {"BACKEND": dotted path (a subclass of '
        'idempotency.locks.LockBackend), "LOCATION": ..., "OPTIONS": {...}}; lock() uses '
        '"default" unless it names another (backend="<alias>").',
        "backends",
    ),
    "PURGE_BATCH_SIZE": Setting(
        5000, "Rows deleted per batch by purge_idempotency_records.", "integer"
    ),
    "PURGE_EVERY": Setting(
        100,
        "DatabaseStore without a beat: every PURGE_EVERY-th record a process completes, "
        "it deletes one batch of at most PURGE_EVERY_BATCH expired records after the "
        "commit (a bounded, non-blocking DELETE). None: off (a Celery beat or cron runs "
        "purge_idempotency_records instead).",
        "integer",
        nullable=True,
    ),
    "PURGE_EVERY_BATCH": Setting(
        500,
        "Expired records deleted at most by one purge on the request path (PURGE_EVERY): "
        "five per completed record by default, so expiries never outrun it.",
        "integer",
    ),
    "METRICS": Setting(
        False,
        "Count outcomes and claim latency in Prometheus metrics (needs prometheus-client).",
        "bool",
    ),
    "OPENTELEMETRY": Setting(
        False,
        "Trace the claim, the replay, the completion and the release as OpenTelemetry spans, "
        "and count outcomes and claim latency in OpenTelemetry metrics (needs "
        "opentelemetry-api).",
        "bool",
    ),
    "LOG_OUTCOMES": Setting(
        True,
        'Log one record per non-trivial outcome on the "idempotency.outcomes" logger.',
        "bool",
    ),
}

#: Every setting's default, by name.
DEFAULTS: dict[str, Any] = {name: setting.default for name, setting in SETTINGS.items()}

#: Longest idempotency key a store accepts (``IdempotencyRecord.key``), whether it comes
#: from a request's header or from a function's or task's key.
MAX_KEY_LENGTH = 255


class IdempotencySettings:
    """Attribute access to ``settings.IDEMPOTENCY`` merged over :data:`DEFAULTS`."""

    def __init__(self) -> None:
        self._cache: dict[str, Callable[..., Any]] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(settings, "IDEMPOTENCY", None) or {}
        if not isinstance(value, dict):
            return {}
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"Invalid idempotency setting: {name!r}")
        value = self.user_settings.get(name, DEFAULTS[name])
        # kept as an instance attribute: the next read is a plain attribute lookup, not
        # a call of this method (settings are read several times per request)
        self.__dict__[name] = value
        return value

    def imported(self, name: str) -> Callable[..., Any]:
        """The object a dotted-path setting names, imported once."""
        try:
            return self._cache[name]
        except KeyError:
            value = getattr(self, name)
            obj: Callable[..., Any] = import_string(value) if isinstance(value, str) else value
            self._cache[name] = obj
            return obj

    def reload(self) -> None:
        self._cache.clear()
        for name in DEFAULTS:
            self.__dict__.pop(name, None)


idempotency_settings = IdempotencySettings()

_reload_hooks: list[Callable[[], None]] = []


def on_reload(func: Callable[[], None]) -> Callable[[], None]:
    """Register ``func`` to run whenever ``IDEMPOTENCY`` or ``CACHES`` change."""
    _reload_hooks.append(func)
    return func


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in {"IDEMPOTENCY", "CACHES", "DATABASES", "SECRET_KEY", "SECRET_KEY_FALLBACKS"}:
        idempotency_settings.reload()
        for hook in _reload_hooks:
            hook()


setting_changed.connect(_settings_changed)


__all__ = [
    "DEFAULTS",
    "HEADER_NAME",
    "KINDS",
    "MAX_KEY_LENGTH",
    "MODES",
    "SETTINGS",
    "IdempotencySettings",
    "Setting",
    "idempotency_settings",
    "on_reload",
]
