"""Errors of how the library is used rather than of one keyed request: a decorator or
mixin applied where it cannot work, a lock held by someone else for the whole wait, a
recovery point saved by an owner whose lease was taken over."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from idempotency.exceptions.calls import RecordError


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
