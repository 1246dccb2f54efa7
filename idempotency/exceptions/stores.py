"""The errors of a store that cannot serve a keyed request (unreachable, misconfigured,
not durable, holding something that is no record): 5xx problems; nothing ran."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import status

from idempotency.exceptions.requests import IdempotencyError


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


class StoreNotDurable(IdempotencyError):
    """A write reached fewer Redis replicas than a Redis store's ``wait_replicas`` asked
    for in time."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = _(
        "The idempotency record could not be replicated in time; the request did not run. "
        "Retry it with the same key."
    )
    default_code = "idempotency-store-not-durable"
    title = "Idempotency record not durable"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "1"}


class StoreCorrupted(IdempotencyError):
    """The store holds something under a record's key that is not a record (a foreign
    value written by other software, or a damaged one). Nothing ran; the key is logged.
    An operator deletes the value (or gives the store another ``key_prefix``)."""

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


class RecordForged(StoreCorrupted):
    """A stored record failed its authentication (an HMAC-SHA256 under a key derived
    from ``SECRET_KEY``, :mod:`idempotency.stores.authentication`): it was written,
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
