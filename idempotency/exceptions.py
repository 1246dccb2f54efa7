"""The exceptions of django-idempotency, and the RFC 9457 problems they are answered as.

One naming scheme: :class:`IdempotencyError` is the base of every error answered over
HTTP (the one name that says "idempotency", as Django's ``DatabaseError`` and DRF's
``APIException`` name their library); every other name says what went wrong and to what,
subject first (``KeyMismatch``, ``RequestInProgress``, ``StoreUnavailable``,
``LockNotAcquired``), since the module already says whose errors they are.

The HTTP errors carry what DRF's ``APIException`` carries (``status_code``,
``default_detail``, ``default_code``, ``detail``) without importing DRF: the library
answers them itself as RFC 9457 problem details (:meth:`IdempotencyError.as_response`,
built by :func:`problem_response`, the one JSON shape every error of the library takes),
and :mod:`idempotency.contrib.drf.exceptions` lets a DRF view raise them.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from idempotency.conf import idempotency_settings
from idempotency.utils.hashing import log_ref

__all__ = [
    "AnonymousNotAllowed",
    "ArgumentsMismatch",
    "CallInProgress",
    "CallableMismatch",
    "IdempotencyError",
    "ImproperlyApplied",
    "KeyInvalid",
    "KeyMismatch",
    "KeyPartMissing",
    "KeyRequired",
    "LockNotAcquired",
    "PROBLEM_CONTENT_TYPE",
    "RecordForged",
    "RequestInProgress",
    "ResponseNotStored",
    "StaleOwner",
    "StoreCorrupted",
    "StoreMisconfigured",
    "StoreNotDurable",
    "StoreUnavailable",
    "StoredError",
    "SubmitTokenInvalid",
    "SubmitTokenUsed",
    "TaskDeferred",
    "TooManyRecords",
    "problem_body",
    "problem_response",
    "render_problem",
]


# -- RFC 9457 problem details: the one JSON shape every error takes ------------------------

#: The media type of every problem document (RFC 9457).
PROBLEM_CONTENT_TYPE = "application/problem+json"


def render_problem(body: dict[str, Any]) -> bytes:
    """The bytes of a problem document: compact JSON, non-ASCII escaped.

    The same rendering as DRF's ``JSONRenderer`` with ``COMPACT_JSON`` (its default)
    and ``UNICODE_JSON = False``, so a project whose DRF errors are problem details
    too answers every error in one style.
    """
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode()


def problem_body(status: int, code: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    """The problem document: ``type``/``code`` are stable, ``detail`` is for humans."""
    body: dict[str, Any] = {
        "type": f"{idempotency_settings.PROBLEM_TYPE_BASE}{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    body.update(extra)
    return body


def problem_response(
    status: int,
    code: str,
    title: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> HttpResponse:
    """An ``application/problem+json`` response, rendered and ready to return from any view.

    Args:
        status: The HTTP status.
        code: The stable machine-readable code; ``type`` is ``PROBLEM_TYPE_BASE`` + code.
        title: The stable human title of the problem.
        detail: This occurrence, for humans.
        headers: Response headers to add (``Retry-After``).
        **extra: More members of the problem document.
    """
    content = render_problem(problem_body(status, code, title, detail, **extra))
    response = HttpResponse(content, status=status, content_type=PROBLEM_CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


# -- the base: an error answered as a problem ------------------------------------------


class IdempotencyError(Exception):
    """Base of every error the library answers over HTTP, as an RFC 9457 problem.

    Shaped as DRF's ``APIException``: ``status_code``, ``default_detail`` (used when no
    ``detail`` is given), ``default_code`` (the stable problem ``code``) and ``detail``
    (this occurrence, for humans); ``title`` is the problem's stable title. Keyword
    arguments beyond ``detail`` become extra members of the problem document.
    """

    status_code: int = 400
    default_detail: str | Promise = _("The idempotency key could not be used.")
    default_code = "idempotency-error"
    title = "Idempotency error"

    def __init__(self, detail: str | None = None, **extra: Any) -> None:
        self.detail = str(self.default_detail if detail is None else detail)
        super().__init__(self.detail)
        self.extra = extra

    @property
    def code(self) -> str:
        """The stable problem ``code`` (``default_code``)."""
        return self.default_code

    def headers(self) -> dict[str, str]:
        """Response headers the problem carries (``Retry-After`` for some)."""
        return {}

    def as_response(self) -> HttpResponse:
        """The ``application/problem+json`` response of this error."""
        return problem_response(
            self.status_code,
            self.code,
            self.title,
            self.detail,
            headers=self.headers(),
            **self.extra,
        )


class _RetryLater(IdempotencyError):
    """An error the client retries after ``retry_after`` whole seconds (at least 1),
    sent as ``Retry-After``."""

    def __init__(self, detail: str | None = None, *, retry_after: int = 1, **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.retry_after = max(1, int(retry_after))

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


# -- the 4xx answers to a keyed request ------------------------------------------------


class KeyInvalid(IdempotencyError):
    """400: the key header is malformed (empty, too long, not printable ASCII, sent twice)."""

    status_code = 400
    default_detail = _("The Idempotency-Key header is malformed.")
    default_code = "idempotency-key-invalid"
    title = "Invalid idempotency key"


class KeyRequired(IdempotencyError):
    """400: the view requires a key and the unsafe request carries none."""

    status_code = 400
    default_detail = _("This endpoint requires an Idempotency-Key header.")
    default_code = "idempotency-key-required"
    title = "Idempotency key required"


class KeyMismatch(IdempotencyError):
    """422: the key was used before with a different request (body, query or endpoint)."""

    status_code = 422
    default_detail = _(
        "This idempotency key was already used with a different request "
        "(another body, query or endpoint)."
    )
    default_code = "idempotency-key-mismatch"
    title = "Idempotency key reused with a different request"


class RequestInProgress(_RetryLater):
    """409: the first request with this key is still running; retry after ``Retry-After``
    (``retry_after``, in whole seconds)."""

    status_code = 409
    default_detail = _("A request with this idempotency key is still being processed; retry later.")
    default_code = "idempotency-request-in-progress"
    title = "Request in progress"


class TooManyRecords(_RetryLater):
    """429: the caller has made ``MAX_NEW_RECORDS`` new records in this ``RECORD_WINDOW``;
    retry after ``Retry-After`` (``retry_after``; replays of its existing keys are not
    limited)."""

    status_code = 429
    default_detail = _(
        "Too many new idempotency keys from this caller in a short time; retry later."
    )
    default_code = "idempotency-too-many-records"
    title = "Too many new idempotency records"


class ResponseNotStored(IdempotencyError):
    """410, replayed for a key whose first request completed with a response too large to
    store (``MAX_RESPONSE_BYTES``) or one that could not be read back (an async stream):
    the request ran once and will not run again, but its response cannot be repeated."""

    status_code = 410
    default_detail = _(
        "The request with this idempotency key already completed, but its response was "
        "not stored, so it cannot be replayed. It will not run again."
    )
    default_code = "idempotency-response-not-stored"
    title = "Response not stored"


class AnonymousNotAllowed(IdempotencyError):
    """403: an anonymous caller sent a key and ``ANONYMOUS`` is ``"reject"``."""

    status_code = 403
    default_detail = _(
        "Idempotency keys are only accepted from authenticated callers on this endpoint."
    )
    default_code = "idempotency-anonymous-not-allowed"
    title = "Idempotency key not accepted from anonymous callers"


class SubmitTokenInvalid(IdempotencyError):
    """400: the submit token is missing, unknown, expired, foreign or for another purpose."""

    status_code = 400
    default_detail = _("The submit token is missing, expired, or was not issued to you.")
    default_code = "submit-token-invalid"
    title = "Invalid submit token"


class SubmitTokenUsed(IdempotencyError):
    """409: the submit token was already consumed (the form was submitted before)."""

    status_code = 409
    default_detail = _("This submit token has already been used.")
    default_code = "submit-token-used"
    title = "Submit token already used"


# -- a store that cannot serve (5xx): nothing ran --------------------------------------


class StoreUnavailable(_RetryLater):
    """The store (database, Redis or cache) behind idempotency could not be reached.

    Raised by stores instead of their backend's connection errors. The request was not
    run (idempotency fails closed): the client should retry after ``Retry-After``.
    """

    status_code = 503
    default_detail = _(
        "The idempotency store is unreachable, so this request was not run; retry later."
    )
    default_code = "idempotency-store-unavailable"
    title = "Idempotency store unavailable"

    def __reduce__(self) -> tuple[type[StoreUnavailable], tuple[str]]:
        # picklable, so a Celery task failing with it reports it faithfully
        return (type(self), (self.detail,))


class StoreMisconfigured(IdempotencyError):
    """The store a view uses cannot work as configured (for example a ``RedisStore``
    without a django-redis cache). The request was not run; the cause is logged as
    ``ImproperlyConfigured`` on the ``idempotency`` logger, and ``manage.py check``
    reports it before the first request (``idempotency.E007`` and its neighbours)."""

    status_code = 503
    default_detail = _(
        "The idempotency store of this endpoint is misconfigured, so this request was not "
        "run. The server's log names the cause."
    )
    default_code = "idempotency-store-misconfigured"
    title = "Idempotency store misconfigured"


class StoreNotDurable(_RetryLater):
    """A write reached fewer Redis replicas than a Redis store's ``wait_replicas`` asked
    for in time."""

    status_code = 503
    default_detail = _(
        "The idempotency record could not be replicated in time; the request did not run. "
        "Retry it with the same key."
    )
    default_code = "idempotency-store-not-durable"
    title = "Idempotency record not durable"


class StoreCorrupted(IdempotencyError):
    """The store holds something under a record's key that is not a record (a foreign
    value written by other software, or a damaged one). Nothing ran; the key is logged.
    An operator deletes the value (or gives the store another ``key_prefix``)."""

    status_code = 500
    default_detail = _(
        "The idempotency record of this key is unreadable, so the request was not run."
    )
    default_code = "idempotency-record-unreadable"
    title = "Idempotency record unreadable"

    def __init__(self, detail: str | None = None, *, scope: str = "", key: str = "") -> None:
        super().__init__(detail)
        self.scope = scope
        self.key = key

    def __reduce__(self) -> tuple[type[StoreCorrupted], tuple[str]]:
        return (type(self), (self.detail,))


class RecordForged(StoreCorrupted):
    """A stored record failed its authentication (an HMAC-SHA256 under a key derived
    from ``SECRET_KEY``, :mod:`idempotency.stores.records`): it was written,
    moved or altered by someone without the application's secret, or under a secret no
    longer listed in ``SECRET_KEY_FALLBACKS``. It is never replayed and the request
    does not run; the record is logged under its hash and counted (signal
    ``record_forged``). A :class:`StoreCorrupted`, so code that handles an unreadable
    record handles this one too."""

    default_detail = _(
        "The idempotency record of this key failed its authentication, so it was not "
        "replayed and the request was not run."
    )
    default_code = "idempotency-record-forged"
    title = "Idempotency record forged"


# -- keyed function and task calls -----------------------------------------------------


class RecordError(Exception):
    """An error about one record, made of its raw ``scope`` and ``key`` (kept as
    attributes) and a message that names the record by their keyed hashes only
    (:attr:`template`'s ``{ref}``, ``scope_hash/key_hash``): Celery, callers and
    Django's error log print it, and logs never carry raw keys or scopes."""

    template = "The idempotency record {ref}"

    def __init__(self, scope: str, key: str) -> None:
        super().__init__(self.template.format(ref=log_ref(scope, key)))
        self.scope = scope
        self.key = key

    def __reduce__(self) -> tuple[type[RecordError], tuple[str, str]]:
        return (type(self), (self.scope, self.key))


class CallInProgress(RecordError):
    """A keyed call that is not an HTTP request (``@idempotent_function``, a Celery or
    Django task) is already running under this key."""

    template = "Idempotent call {ref} is already in progress"


class TaskDeferred(CallInProgress):
    """A Django task's run (``@idempotent_django_task``) found its key in progress
    elsewhere and enqueued itself again to run later (``run_after``): this run did
    nothing, the copy whose result id is ``deferred_id`` answers instead (``run_after``:
    when it may start, ISO 8601)."""

    def __init__(self, scope: str, key: str, deferred_id: str, run_after: str) -> None:
        super().__init__(scope, key)
        self.args = (
            f"Idempotent call {log_ref(scope, key)} is already in progress: deferred as "
            f"task result {deferred_id}, to run after {run_after}",
        )
        self.deferred_id = deferred_id
        self.run_after = run_after

    def __reduce__(self) -> tuple[type[CallInProgress], tuple[str, ...]]:  # type: ignore[override]  # four arguments, not two
        return (TaskDeferred, (self.scope, self.key, self.deferred_id, self.run_after))


class KeyPartMissing(ValueError):
    """A function's or task's key has a part that is None or empty (``"pay:{trade_no}"``
    called with ``trade_no=None``, ``""``, ``[]``, ``{}``): no key is built from it, since
    every such call would share one. ``optional=True`` runs the call without
    idempotency instead (and logs a warning)."""


class StoredError(Exception):
    """The replay of an exception stored with ``store_errors=True`` whose type could not
    be rebuilt from its arguments: it carries the type's dotted name and the message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message

    def __reduce__(self) -> tuple[type[StoredError], tuple[str, str]]:
        return (type(self), (self.type_name, self.message))


class _CallMismatch(KeyMismatch, ValueError):
    """The key is live for another call in the same scope: a :class:`ValueError` (the key
    argument is wrong) and a :class:`KeyMismatch`, so code that already catches the HTTP
    layer's mismatch catches these too. ``template`` says which call."""

    template = ""

    def __init__(self, scope: str, key: str, name: str) -> None:
        super().__init__(self.template.format(ref=log_ref(scope, key), name=name))
        self.scope = scope
        self.key = key
        self.name = name

    def __reduce__(self) -> tuple[type[_CallMismatch], tuple[str, str, str]]:
        return (type(self), (self.scope, self.key, self.name))


class CallableMismatch(_CallMismatch):
    """The key is live for a *different* function (or task) in the same scope.

    Two callables share a key only by mistake (a key template too broad, such as
    ``"{order_id}"`` used by both "pay" and "refund"): instead of returning the
    other callable's result, the call fails. Make the key name its purpose
    (``"pay:{order_id}"``) or give each callable its own ``scope``.
    """

    default_code = "idempotency-key-reused-by-another-function"
    title = "Idempotency key reused by another function"
    template = (
        "Idempotency key {ref} is already used by another function or task than {name}; "
        "give each one keys of its own."
    )


class ArgumentsMismatch(_CallMismatch):
    """The key is live for the same function or task called with *other arguments*.

    The HTTP layer's 422 for functions: a retry must repeat the call, and a call with
    other arguments under the same key is a different call (a key template that leaves
    out something that matters, or a tampered payload). ``fingerprint=`` narrows which
    arguments count, or turns the check off.
    """

    default_code = "idempotency-key-reused-with-other-arguments"
    title = "Idempotency key reused with other arguments"
    template = (
        "Idempotency key {ref} was used by {name} with other arguments; a repeat must "
        "pass the same ones (see fingerprint=)."
    )


# -- how the library is used -----------------------------------------------------------


class ImproperlyApplied(ImproperlyConfigured, TypeError):
    """A decorator or mixin was used where it cannot work (it never fails silently)."""


class LockNotAcquired(Exception):
    """The lock stayed held by someone else for the whole wait."""

    def __init__(self, name: str, waited: float) -> None:
        super().__init__(f"Lock {name!r} not acquired within {waited:g} s")
        self.name = name
        self.waited = waited

    def __reduce__(self) -> tuple[type[LockNotAcquired], tuple[str, float]]:
        # picklable, so a Celery task failing with it reports it faithfully
        return (type(self), (self.name, self.waited))


class StaleOwner(RecordError):
    """A recovery point was saved by a request whose lease had been taken over by another
    owner (:func:`~idempotency.recovery_point`). A stale completion or release raises
    nothing: the store refuses it and the ``stale_owner`` signal reports it.

    Its message names the record by its keyed hashes (``scope_hash/key_hash``), as every
    other exception's does: Django's error log prints it. ``scope`` and ``key`` hold the
    raw values."""

    template = "The idempotency record {ref} is no longer owned by this request"
