"""Exceptions of django-idempotency, with stable names and codes.

The HTTP errors subclass DRF's ``APIException`` (``status_code``,
``default_detail``, ``default_code``) so they can be raised and caught like
any DRF error; the library itself renders them as RFC 9457 problem details.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions, status

from idempotency.problems import problem_response


class IdempotencyError(exceptions.APIException):
    """Base of every HTTP error the library answers with.

    A DRF ``APIException`` (``status_code``, ``default_detail``, ``default_code``), so
    a view may raise one and DRF renders it; ``default_code`` is the stable problem
    ``code`` and ``title`` its stable title. Keyword arguments beyond ``detail`` become
    extra members of the problem document.
    """

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_detail = _("The idempotency key could not be used.")
    default_code = "idempotency-error"
    title = "Idempotency error"

    def __init__(self, detail: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
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
            str(self.detail),
            headers=self.headers(),
            **self.extra,
        )


class InvalidIdempotencyKey(IdempotencyError):
    """400: the key header is malformed (empty, too long, not printable ASCII, sent twice)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = _("The Idempotency-Key header is malformed.")
    default_code = "idempotency-key-invalid"
    title = "Invalid idempotency key"


class IdempotencyKeyRequired(IdempotencyError):
    """400: the view requires a key and the unsafe request carries none."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = _("This endpoint requires an Idempotency-Key header.")
    default_code = "idempotency-key-required"
    title = "Idempotency key required"


class IdempotencyKeyMismatch(IdempotencyError):
    """422: the key was used before with a different request (body, query or endpoint)."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = _(
        "This idempotency key was already used with a different request "
        "(another body, query or endpoint)."
    )
    default_code = "idempotency-key-mismatch"
    title = "Idempotency key reused with a different request"


class IdempotencyRequestInProgress(IdempotencyError):
    """409: the first request with this key is still running; retry after ``Retry-After``.

    ``retry_after`` is the ``Retry-After`` value in whole seconds (at least 1).
    """

    status_code = status.HTTP_409_CONFLICT
    default_detail = _("A request with this idempotency key is still being processed; retry later.")
    default_code = "idempotency-request-in-progress"
    title = "Request in progress"

    def __init__(self, detail: str | None = None, *, retry_after: int = 1, **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.retry_after = max(1, int(retry_after))

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class IdempotencyTooManyRecords(IdempotencyError):
    """429: the caller has made ``MAX_NEW_RECORDS`` new records in this ``RECORD_WINDOW``;
    retry after ``Retry-After`` (replays of its existing keys are not limited).

    ``retry_after`` is the ``Retry-After`` value in whole seconds (at least 1).
    """

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_detail = _(
        "Too many new idempotency keys from this caller in a short time; retry later."
    )
    default_code = "idempotency-too-many-records"
    title = "Too many new idempotency records"

    def __init__(self, detail: str | None = None, *, retry_after: int = 1, **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.retry_after = max(1, int(retry_after))

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class IdempotencyResponseNotStored(IdempotencyError):
    """Replayed for a key whose first request completed with a response too large to
    store (``MAX_RESPONSE_BYTES``) or one that could not be read back (an async stream):
    the request ran once and will not run again, but its response cannot be repeated."""

    status_code = status.HTTP_410_GONE
    default_detail = _(
        "The request with this idempotency key already completed, but its response was "
        "not stored, so it cannot be replayed. It will not run again."
    )
    default_code = "idempotency-response-not-stored"
    title = "Response not stored"


class IdempotencyAnonymousNotAllowed(IdempotencyError):
    """403: an anonymous caller sent a key and ``ANONYMOUS`` is ``"reject"``."""

    status_code = status.HTTP_403_FORBIDDEN
    default_detail = _(
        "Idempotency keys are only accepted from authenticated callers on this endpoint."
    )
    default_code = "idempotency-anonymous-not-allowed"
    title = "Idempotency key not accepted from anonymous callers"


class StoreUnavailable(IdempotencyError):
    """The store (database, Redis or cache) behind idempotency could not be reached.

    Raised by stores instead of their backend's connection errors. The request was not
    run (idempotency fails closed): the client should retry after ``Retry-After``.
    """

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = _(
        "The idempotency store is unreachable, so this request was not run; retry later."
    )
    default_code = "idempotency-store-unavailable"
    title = "Idempotency store unavailable"

    def __init__(self, detail: str | None = None, *, retry_after: int = 1, **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.retry_after = max(1, int(retry_after))
        self.wait = self.retry_after  # DRF's exception handler sends it as Retry-After

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}

    def __reduce__(self) -> tuple[type[StoreUnavailable], tuple[str]]:
        # picklable, so a Celery task failing with it reports it faithfully
        return (type(self), (str(self.detail),))


class StoreMisconfigured(IdempotencyError):
    """The store a view uses cannot work as configured (for example a ``RedisStore``
    without a django-redis cache). The request was not run; the cause is logged as
    ``ImproperlyConfigured`` on the ``idempotency`` logger, and ``manage.py check``
    reports it before the first request (``idempotency.E007`` and its neighbours)."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = _(
        "The idempotency store of this endpoint is misconfigured, so this request was not "
        "run. The server's log names the cause."
    )
    default_code = "idempotency-store-misconfigured"
    title = "Idempotency store misconfigured"


class SubmitTokenInvalid(IdempotencyError):
    """400: the submit token is missing, unknown, expired, foreign or for another purpose."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = _("The submit token is missing, expired, or was not issued to you.")
    default_code = "submit-token-invalid"
    title = "Invalid submit token"


class SubmitTokenUsed(IdempotencyError):
    """409: the submit token was already consumed (the form was submitted before)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = _("This submit token has already been used.")
    default_code = "submit-token-used"
    title = "Submit token already used"


class StoreNotDurable(IdempotencyError):
    """A write reached fewer Redis replicas than ``REDIS_WAIT_REPLICAS`` asked for in time."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = _(
        "The idempotency record could not be replicated in time; the request did not run. "
        "Retry it with the same key."
    )
    default_code = "idempotency-store-not-durable"
    title = "Idempotency record not durable"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "1"}


class LockNotAcquired(Exception):
    """The lock stayed held by someone else for the whole wait."""

    def __init__(self, name: str, waited: float) -> None:
        super().__init__(f"Lock {name!r} not acquired within {waited:g} s")
        self.name = name
        self.waited = waited

    def __reduce__(self) -> tuple[type[LockNotAcquired], tuple[str, float]]:
        # picklable, so a Celery task failing with it reports it faithfully
        return (type(self), (self.name, self.waited))


class StaleOwner(Exception):
    """A recovery point was saved by a request whose lease had been taken over by another
    owner (:func:`~idempotency.recovery_point`). A stale completion or release raises
    nothing: the store refuses it and the ``stale_owner`` signal reports it."""


def _ref(scope: str, key: str) -> str:
    """A record as messages name it (``scope_hash/key_hash``): exception messages end up
    in logs (Celery's, the caller's), which never carry raw keys or scopes."""
    from idempotency.keyed import log_ref

    return log_ref(scope, key)


class InProgress(Exception):
    """A non-HTTP idempotent call (function, task) is already running under this key."""

    def __init__(self, scope: str, key: str) -> None:
        # the message names the record by its keyed hash: Celery and callers log it
        super().__init__(f"Idempotent call {_ref(scope, key)} is already in progress")
        self.scope = scope
        self.key = key

    def __reduce__(self) -> tuple[type[InProgress], tuple[str, str]]:
        return (type(self), (self.scope, self.key))


class ImproperlyApplied(ImproperlyConfigured, TypeError):
    """A decorator or mixin was used where it cannot work (it never fails silently)."""


class IdempotencyKeyMissing(ValueError):
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


class StoreCorrupted(IdempotencyError):
    """The store holds something under a record's key that is not a record (a foreign
    value written by other software, or a damaged one). Nothing ran; the key is logged.
    An operator deletes the value (or picks another ``KEY_PREFIX``)."""

    status_code = status.HTTP_500_INTERNAL_SERVER_ERROR
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
        return (type(self), (str(self.detail),))


class FunctionKeyMismatch(IdempotencyKeyMismatch, ValueError):
    """The key is live for a *different* function (or Celery task) in the same scope.

    Two callables share a key only by mistake (a key template too broad, such as
    ``"{order_id}"`` used by both "pay" and "refund"): instead of returning the
    other callable's result, the call fails. Make the key name its purpose
    (``"pay:{order_id}"``) or give each callable its own ``scope``.

    It is a :class:`ValueError` (the key argument is wrong) and an
    :class:`~idempotency.exceptions.IdempotencyKeyMismatch`, so code that already
    catches the HTTP layer's mismatch catches this one too (DRF renders it 422).
    """

    default_code = "idempotency-key-reused-by-another-function"
    title = "Idempotency key reused by another function"

    def __init__(self, scope: str, key: str, name: str) -> None:
        super().__init__(
            f"Idempotency key {_ref(scope, key)} is already used by another "
            f"function or task than {name}; give each one keys of its own."
        )
        self.scope = scope
        self.key = key
        self.name = name

    def __reduce__(self) -> tuple[type[FunctionKeyMismatch], tuple[str, str, str]]:
        return (type(self), (self.scope, self.key, self.name))


class ArgumentsMismatch(IdempotencyKeyMismatch, ValueError):
    """The key is live for the same function or task called with *other arguments*.

    The HTTP layer's 422 for functions: a retry must repeat the call, and a call with
    other arguments under the same key is a different call (a key template that leaves
    out something that matters, or a tampered payload). ``fingerprint=`` narrows which
    arguments count, or turns the check off.
    """

    default_code = "idempotency-key-reused-with-other-arguments"
    title = "Idempotency key reused with other arguments"

    def __init__(self, scope: str, key: str, name: str) -> None:
        super().__init__(
            f"Idempotency key {_ref(scope, key)} was used by {name} with other "
            "arguments; a repeat must pass the same ones (see fingerprint=)."
        )
        self.scope = scope
        self.key = key
        self.name = name

    def __reduce__(self) -> tuple[type[ArgumentsMismatch], tuple[str, str, str]]:
        return (type(self), (self.scope, self.key, self.name))
