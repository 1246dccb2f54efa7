"""The errors a keyed HTTP request is answered with (4xx), and their base,
:class:`IdempotencyError`: a DRF ``APIException`` the library renders as an RFC 9457
problem."""

from __future__ import annotations

from typing import Any

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
