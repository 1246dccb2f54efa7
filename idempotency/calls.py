"""The keyed-call engine that idempotent functions and Celery tasks share.

A call under a key (:class:`KeyedCall`) is claimed in the store with a lease and a
fencing token, waits for a running owner (:func:`acquire`), returns a completed key's
stored result (:func:`replayed`) or stores its own (:func:`finish`). Keys come from a
format string or a callable of the call's arguments (:func:`key_builder`); a record's
fingerprint names the function or task that owns the key (:func:`fingerprint_of`), so a
key used by two of them raises :class:`FunctionKeyMismatch`. Results are stored as JSON.

The flow is the lease mode of the HTTP layer (:mod:`idempotency.http.lease`) over
the store contract (:mod:`idempotency.stores.base`); atomic mode runs it inside a
transaction of the store's database (:func:`transaction_for`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import string
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from idempotency import signals
from idempotency.backoff import Backoff
from idempotency.conf import MAX_KEY_LENGTH
from idempotency.exceptions import IdempotencyKeyMismatch, InProgress, StoreUnavailable
from idempotency.stores.base import BaseStore, Claim, ClaimStatus, StoredResponse

logger = logging.getLogger("idempotency")

#: A key: a format string of the call's arguments, or a callable of them.
KeySpec = str | Callable[..., Any]

#: ``method`` recorded for the admin: which kind of caller claimed a record.
FUNCTION_METHOD = "FUNCTION"
#: How a stored result is tagged.
JSON_CONTENT_TYPE = "application/json"


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
            f"Idempotency key {key!r} in scope {scope!r} is already used by another "
            f"function or task than {name}; give each one keys of its own."
        )
        self.scope = scope
        self.key = key
        self.name = name


# -- keys and fingerprints ---------------------------------------------------------------


def qualified_name(func: Callable[..., Any]) -> str:
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    return f"{module}.{name}"


def fingerprint_of(kind: str, name: str) -> str:
    """SHA-256 hex of what owns a key: ``kind`` ("function", "task") and its name."""
    return hashlib.sha256(f"{kind}:{name}".encode()).hexdigest()


def check_key(value: Any, *, owner: str) -> str:
    """``value`` as a key: a non-empty string of at most :data:`MAX_KEY_LENGTH` characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise TypeError(
            f"The idempotency key of {owner} must be a string, got {type(value).__name__}"
        )
    if not value:
        raise ValueError(f"The idempotency key of {owner} is empty")
    if len(value) > MAX_KEY_LENGTH:
        raise ValueError(
            f"The idempotency key of {owner} is {len(value)} characters long; "
            f"at most {MAX_KEY_LENGTH} are allowed"
        )
    return value


def _template_fields(template: str) -> set[str]:
    """Root names of the replacement fields of ``template`` ("{order.pk}" -> "order")."""
    names: set[str] = set()
    for _text, field, _spec, _conversion in string.Formatter().parse(template):
        if field is None:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        if not root or root.isdigit():
            raise ValueError(
                f"Idempotency key template {template!r}: use named fields such as "
                "'{order_id}', not positional ones"
            )
        names.add(root)
    return names


def key_builder(
    key: KeySpec, func: Callable[..., Any], *, owner: str
) -> Callable[[tuple[Any, ...], dict[str, Any]], str]:
    """A function of a call's ``(args, kwargs)`` giving its key (see :func:`idempotent_function`).

    A template is checked against ``func``'s signature at once, so a typo in a field
    name fails at import time rather than on the first call.
    """
    if isinstance(key, str):
        signature = inspect.signature(func)
        parameters = signature.parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        unknown = _template_fields(key) - set(parameters)
        if unknown and not takes_any:
            raise ValueError(
                f"Idempotency key template {key!r} of {owner} names "
                f"{', '.join(sorted(unknown))}, which {owner} has no parameter for "
                f"(parameters: {', '.join(parameters) or 'none'})"
            )
        template = key

        def from_template(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{owner}: {exc}") from exc
            bound.apply_defaults()
            values = dict(bound.arguments)
            for name, parameter in parameters.items():
                if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                    # "{tag}" and "{kwargs[tag]}" both reach a **kwargs argument
                    for extra, value in values.get(name, {}).items():
                        values.setdefault(extra, value)
            try:
                value = template.format(**values)
            except (KeyError, AttributeError, IndexError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"Idempotency key template {template!r} of {owner} could not be "
                    f"formatted with the call's arguments: {exc!r}"
                ) from exc
            return check_key(value, owner=owner)

        return from_template
    if callable(key):
        make = key

        def from_callable(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
            return check_key(make(*args, **kwargs), owner=owner)

        return from_callable
    raise TypeError(
        f"key must be a format string such as 'pay:{{trade_no}}' or a callable of the "
        f"arguments, got {key!r}"
    )


# -- results -----------------------------------------------------------------------------


def encode_result(value: Any, *, owner: str) -> bytes:
    """``value`` as stored JSON bytes; :class:`TypeError` when it is not JSON data."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{owner} returned a {type(value).__name__} that is not JSON-serialisable "
            f"({exc}); the result of an idempotent function or task is stored as JSON "
            "so repeats can return it. Return plain data (dict, list, str, int, float, "
            "bool or None). The key was released; nothing was stored."
        ) from exc


def decode_result(response: StoredResponse | None) -> Any:
    if response is None or not response.body:
        return None
    return json.loads(response.body)


# -- the flow over the store contract ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyedCall:
    """One call under a key: what the store is asked, and how long to wait."""

    store: BaseStore
    scope: str
    key: str
    fingerprint: str
    owner: str
    lease: float
    ttl: float
    wait: float
    method: str = FUNCTION_METHOD
    #: The claim lives in an open transaction of the store's database (atomic mode)
    atomic: bool = False

    def claim(self) -> Claim:
        return self.store.claim(
            self.scope,
            self.key,
            fingerprint=self.fingerprint,
            lease=self.lease,
            ttl=self.ttl,
            method=self.method,
            route=self.owner,
        )

    def lookup(self) -> Claim | None:
        return self.store.lookup(self.scope, self.key, fingerprint=self.fingerprint)

    def in_progress(self) -> InProgress:
        signals.conflict.send(sender=type(self.store), request=None, scope=self.scope, key=self.key)
        return InProgress(self.scope, self.key)

    def mismatch(self) -> FunctionKeyMismatch:
        signals.mismatch.send(sender=type(self.store), request=None, scope=self.scope, key=self.key)
        return FunctionKeyMismatch(self.scope, self.key, self.owner)

    def complete(self, claim: Claim, body: bytes) -> bool:
        response = StoredResponse(200, [("Content-Type", JSON_CONTENT_TYPE)], body)
        try:
            done = self.store.complete(
                self.scope,
                self.key,
                fence=claim.fence,
                response=response,
                ttl=self.ttl,
                fingerprint=self.fingerprint,
            )
        except StoreUnavailable:
            # the call ran: return its result. Its claim ends with its lease (a repeat
            # after that runs it again; atomic mode's commit fails with the store instead).
            logger.warning(
                "idempotency: %s/%s ran but its result could not be stored (store unreachable)",
                self.scope,
                self.key,
            )
            return False
        if not done:
            self._stale(claim, "completion")
        return done

    def release(self, claim: Claim, reason: BaseException | None = None) -> bool:
        if self.atomic:
            # the claim is part of the open transaction: rolling it back releases the key
            # (no SQL: after a database error the transaction can run none)
            transaction.set_rollback(True, using=self.store.using)  # type: ignore[attr-defined]
            self._released(reason)
            return True
        try:
            released = self.store.release(self.scope, self.key, fence=claim.fence)
        except Exception:
            # the caller re-raises its own error; a store outage must not hide it
            logger.exception("idempotency: could not release %s/%s", self.scope, self.key)
            return False
        if released:
            self._released(reason)
        else:
            self._stale(claim, "release")
        return released

    def _released(self, reason: BaseException | None) -> None:
        signals.released.send(
            sender=type(self.store), request=None, scope=self.scope, key=self.key, exception=reason
        )

    def _stale(self, claim: Claim, what: str) -> None:
        logger.warning(
            "idempotency: the %s of %s/%s by %s was refused: its lease ran out and another "
            "caller took the key over (fence %s). Raise the lease above the work's longest "
            "run time.",
            what,
            self.scope,
            self.key,
            self.owner,
            claim.fence,
        )
        signals.stale_owner.send(
            sender=type(self.store),
            request=None,
            scope=self.scope,
            key=self.key,
            fence=claim.fence,
        )


def runs_atomic(store: BaseStore, mode: str) -> bool:
    """Whether a call in ``mode`` runs in a transaction of ``store`` (atomic mode)."""
    if mode == "lease" or (mode == "auto" and not store.supports_atomic):
        return False
    if not store.supports_atomic:
        raise ImproperlyConfigured(
            f"{type(store).__name__} cannot run atomic mode; use mode='lease' or DatabaseStore."
        )
    return True


def transaction_for(store: BaseStore, mode: str) -> AbstractContextManager[Any]:
    """The transaction a call runs in: the store's own in atomic mode, none in lease mode."""
    return store.atomic() if runs_atomic(store, mode) else nullcontext()


def _free(seen: Claim | None) -> bool:
    """Whether a looked-up state means the key can be claimed (released, or lease over)."""
    if seen is None:
        return True
    return seen.status is ClaimStatus.IN_PROGRESS and seen.retry_after <= 0


def _first_state(call: KeyedCall) -> Claim:
    """Where the store reads a live record more cheaply than a claim that meets one
    (``lookup_before_claim``: the database, whose claim would lock the record and need a
    second statement), look first: a repeat then costs one lookup."""
    if call.store.lookup_before_claim:
        seen = call.lookup()
        if not _free(seen):
            return cast(Claim, seen)
    return call.claim()


def acquire(call: KeyedCall) -> Claim:
    """Claim ``call``'s key, waiting up to ``call.wait`` seconds for a running owner.

    Returns a CLAIMED, COMPLETED or (the wait ran out) IN_PROGRESS claim; raises
    :class:`FunctionKeyMismatch` for a key owned by another function.
    """
    backoff = Backoff(call.wait)
    claim = _first_state(call)
    while True:
        if claim.status is ClaimStatus.MISMATCH:
            raise call.mismatch()
        if claim.status is not ClaimStatus.IN_PROGRESS or not backoff.pause():
            return claim
        seen = call.lookup()
        # released, or its owner's lease ran out: try to own it; else keep watching
        claim = call.claim() if _free(seen) else cast(Claim, seen)


async def aacquire(call: KeyedCall) -> Claim:
    """:func:`acquire` for async callers: store calls in a thread, waits on the event loop."""
    claim_async = sync_to_async(call.claim)
    lookup_async = sync_to_async(call.lookup)
    backoff = Backoff(call.wait)
    claim = await sync_to_async(_first_state)(call)
    while True:
        if claim.status is ClaimStatus.MISMATCH:
            raise call.mismatch()
        if claim.status is not ClaimStatus.IN_PROGRESS or not await backoff.apause():
            return claim
        seen = await lookup_async()
        claim = await claim_async() if _free(seen) else cast(Claim, seen)


def replayed(call: KeyedCall, claim: Claim) -> Any:
    """The stored result of a completed key."""
    signals.replayed.send(sender=type(call.store), request=None, scope=call.scope, key=call.key)
    logger.debug(
        "idempotency: %s/%s already done; returning its stored result", call.scope, call.key
    )
    return decode_result(claim.response)


def finish(call: KeyedCall, claim: Claim, result: Any) -> Any:
    """Store ``result`` under the claimed key and return its JSON round trip."""
    try:
        body = encode_result(result, owner=call.owner)
    except TypeError as exc:
        call.release(claim, exc)
        raise
    call.complete(claim, body)
    return json.loads(body)
