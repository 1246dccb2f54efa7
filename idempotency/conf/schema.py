"""Every setting of django-idempotency, described once (:data:`SETTINGS`), and what
follows from the descriptions: the defaults and the settings that hold dotted paths.

A test keeps the settings reference (docs/reference/settings.md) in step with it.
"""

from __future__ import annotations

from typing import Any

from idempotency.conf.setting import Setting

#: The values of ``MODE``, and of ``mode=`` on views, functions and tasks.
MODES = ("auto", "atomic", "lease")


#: Every setting, described once. The settings reference is checked against it.
SETTINGS: dict[str, Setting] = {
    "ENABLED": Setting(True, "False: every body runs directly, touching no store.", "bool"),
    "HEADER": Setting(
        "Idempotency-Key", "Name of the request header that carries the key.", "header"
    ),
    "STORES": Setting(
        {"default": {"BACKEND": "idempotency.stores.DatabaseStore"}},
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

#: Settings that hold dotted paths, imported on first use.
IMPORT_STRINGS = frozenset(name for name, s in SETTINGS.items() if s.kind == "path")
