"""One-time submit tokens: a form or client action can be submitted once per token.

The server issues a token when it renders a form (or when a client asks, with
:class:`SubmitTokenIssueView`); the submission carries it back in the
``SUBMIT_TOKEN_HEADER`` header (``X-Submit-Token``) and consuming it is **one
atomic operation**, so of two identical submissions (a double click, a client
retry) exactly one gets through; the other is answered 409::

    from idempotency import consume_submit_token, issue_submit_token

    token = issue_submit_token(user_or_scope=request.user, purpose="checkout")
    ...
    consume_submit_token(token=token, user_or_scope=request.user, purpose="checkout")
    # raises SubmitTokenUsed (409) on a second use, SubmitTokenInvalid (400) when the
    # token is unknown, expired, issued to someone else or for another purpose

A token is 256 random bits (URL-safe base64). Only its SHA-256 hash is stored,
bound to the scope it was issued to (``user:<pk>`` for a user, or any string)
and its purpose; it lives ``SUBMIT_TOKEN_TTL`` seconds (600).

Backends (``SUBMIT_TOKEN_BACKEND``):

``"database"`` (default)
    The :class:`~idempotency.models.SubmitToken` table. Consuming is one
    ``UPDATE … SET consumed_at = now WHERE token_hash = … AND scope = … AND
    purpose = … AND consumed_at IS NULL AND expires_at > now`` judged by its row
    count; the consumed row is the tombstone that tells "used" from "never
    existed". Inside ``transaction.atomic()`` the consumption commits (or rolls
    back) with the caller's writes. Expired rows are deleted by
    :func:`purge_expired_submit_tokens` (Celery beat task
    ``idempotency.purge_expired_submit_tokens``).
``"redis"``
    The django-redis connection of ``REDIS_ALIAS``. Consuming is one Lua script
    that compares the binding, deletes the token and writes a tombstone.

A consumed token answers "used" (409) until its expiry, and at least
:data:`TOMBSTONE_SECONDS` after its use; after that it is simply invalid (400).
Tokens issued for one scope and purpose are invalid for any other, and a
foreign or wrong-purpose attempt never consumes the token.

In views: :func:`require_submit_token` (function views, DRF methods) and
:class:`SubmitTokenPermission` (DRF views) consume the token after
authentication; a consumed token is spent even when the view then fails, so the
client asks for a new one (this is what makes the token at-most-once).
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q
from django.http import HttpRequest, HttpResponseBase
from django.utils import timezone
from rest_framework import serializers, status
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.exceptions import (
    ImproperlyApplied,
    StoreUnavailable,
    SubmitTokenInvalid,
    SubmitTokenUsed,
)
from idempotency.http.views import split_view_args
from idempotency.outages import guard

__all__ = [
    "IssuedToken",
    "SubmitTokenIssueView",
    "SubmitTokenPermission",
    "consume_submit_token",
    "issue_submit_token",
    "issue_token",
    "purge_expired_submit_tokens",
    "require_submit_token",
    "token_scope",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Seconds a consumed token keeps answering "used" at least (even past its expiry).
TOMBSTONE_SECONDS = 60
#: Longest purpose accepted (``SubmitToken.purpose``).
MAX_PURPOSE_LENGTH = 100
#: Longest token looked at; anything longer is invalid without a lookup.
MAX_TOKEN_LENGTH = 256

OK, USED, INVALID = "ok", "used", "invalid"


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: str
    scope: str
    purpose: str
    expires_at: datetime


# -- scope, purpose, hashing -------------------------------------------------------------


def token_scope(user_or_scope: Any) -> str | None:
    """``user:<pk>`` for an authenticated user, the string itself for a scope, else None."""
    if isinstance(user_or_scope, str):
        return user_or_scope or None
    if user_or_scope is None or getattr(user_or_scope, "is_anonymous", False):
        return None
    pk = getattr(user_or_scope, "pk", None)
    if pk is None:
        return None
    return f"user:{pk}"


def _check_purpose(purpose: Any) -> str:
    if not isinstance(purpose, str) or not purpose:
        raise ValueError("A submit token's purpose must be a non-empty string")
    if len(purpose) > MAX_PURPOSE_LENGTH:
        raise ValueError(f"A submit token's purpose is at most {MAX_PURPOSE_LENGTH} characters")
    return purpose


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# -- backends ----------------------------------------------------------------------------


class DatabaseTokens:
    """Tokens as :class:`~idempotency.models.SubmitToken` rows (the default backend)."""

    @property
    def using(self) -> str:
        return str(idempotency_settings.DATABASE_ALIAS)

    def _tokens(self) -> Any:
        from idempotency.models import SubmitToken

        return SubmitToken.objects.using(self.using)

    @guard("database", keyed=False)
    def issue(self, token_hash: str, scope: str, purpose: str, ttl: float) -> datetime:
        now = timezone.now()
        expires_at = now + timedelta(seconds=ttl)
        self._tokens().create(
            token_hash=token_hash,
            scope=scope,
            purpose=purpose,
            created_at=now,
            expires_at=expires_at,
        )
        return expires_at

    @guard("database", keyed=False)
    def consume(self, token_hash: str, scope: str, purpose: str) -> str:
        now = timezone.now()
        bound = self._tokens().filter(token_hash=token_hash, scope=scope, purpose=purpose)
        # the one atomic step: of concurrent consumers, one UPDATE matches the row
        if bound.filter(consumed_at__isnull=True, expires_at__gt=now).update(consumed_at=now):
            return OK
        tombstone = bound.filter(consumed_at__isnull=False).filter(
            Q(expires_at__gt=now) | Q(consumed_at__gt=now - timedelta(seconds=TOMBSTONE_SECONDS))
        )
        return USED if tombstone.exists() else INVALID

    def purge(self, *, now: datetime, batch_size: int) -> int:
        cutoff = now - timedelta(seconds=TOMBSTONE_SECONDS)
        expired = (
            self._tokens()
            .filter(expires_at__lte=cutoff)
            .filter(Q(consumed_at__isnull=True) | Q(consumed_at__lte=cutoff))
        )
        deleted = 0
        while True:
            ids = list(expired.values_list("pk", flat=True)[:batch_size])
            if not ids:
                return deleted
            count, _ = self._tokens().filter(pk__in=ids).delete()
            deleted += count


#: KEYS[1] token, KEYS[2] tombstone; ARGV[1] binding, ARGV[2] shortest tombstone (ms).
REDIS_CONSUME = """
local bound = redis.call('GET', KEYS[1])
if bound then
  if bound ~= ARGV[1] then return 'invalid' end
  local keep = redis.call('PTTL', KEYS[1])
  if keep < tonumber(ARGV[2]) then keep = tonumber(ARGV[2]) end
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], bound, 'PX', keep)
  return 'ok'
end
if redis.call('GET', KEYS[2]) == ARGV[1] then return 'used' end
return 'invalid'
"""


class RedisTokens:
    """Tokens as Redis strings; consumption is one compare-delete-and-tombstone script."""

    @property
    def client(self) -> Any:
        from django_redis import get_redis_connection

        return get_redis_connection(idempotency_settings.REDIS_ALIAS)

    def keys(self, token_hash: str) -> tuple[str, str]:
        # one hash tag: the token and its tombstone live on one Redis Cluster slot
        base = f"{idempotency_settings.KEY_PREFIX}:st:{{{token_hash}}}"
        return base, f"{base}:used"

    @staticmethod
    def binding(scope: str, purpose: str) -> str:
        return json.dumps([scope, purpose], separators=(",", ":"))

    @guard("redis", keyed=False)
    def issue(self, token_hash: str, scope: str, purpose: str, ttl: float) -> datetime:
        expires_at = timezone.now() + timedelta(seconds=ttl)
        key, _tombstone = self.keys(token_hash)
        self.client.set(key, self.binding(scope, purpose), px=max(1, int(ttl * 1000)), nx=True)
        return expires_at

    @guard("redis", keyed=False)
    def consume(self, token_hash: str, scope: str, purpose: str) -> str:
        client = self.client
        reply = client.register_script(REDIS_CONSUME)(
            keys=list(self.keys(token_hash)),
            args=[self.binding(scope, purpose), TOMBSTONE_SECONDS * 1000],
        )
        return reply.decode() if isinstance(reply, bytes) else str(reply)


def _backend() -> DatabaseTokens | RedisTokens:
    name = idempotency_settings.SUBMIT_TOKEN_BACKEND
    if name == "database":
        return DatabaseTokens()
    if name == "redis":
        return RedisTokens()
    raise ImproperlyConfigured(
        f"IDEMPOTENCY['SUBMIT_TOKEN_BACKEND'] must be 'database' or 'redis', got {name!r}"
    )


# -- the API -----------------------------------------------------------------------------


def issue_token(*, user_or_scope: Any, purpose: str, ttl: float | None = None) -> IssuedToken:
    """:func:`issue_submit_token`, also telling the scope and expiry."""
    scope = token_scope(user_or_scope)
    if scope is None:
        raise ValueError(
            "Submit tokens are bound to an authenticated user or an explicit scope string; "
            f"got {user_or_scope!r}"
        )
    purpose = _check_purpose(purpose)
    seconds = float(idempotency_settings.SUBMIT_TOKEN_TTL if ttl is None else ttl)
    if seconds <= 0:
        raise ValueError("A submit token's ttl must be positive")
    token = secrets.token_urlsafe(32)
    expires_at = _backend().issue(_hash(token), scope, purpose, seconds)
    return IssuedToken(token=token, scope=scope, purpose=purpose, expires_at=expires_at)


def issue_submit_token(*, user_or_scope: Any, purpose: str, ttl: float | None = None) -> str:
    """A new one-time token for ``purpose``, bound to a user (``user:<pk>``) or scope string.

    It lives ``ttl`` seconds (default ``SUBMIT_TOKEN_TTL``). Only its SHA-256 hash is
    stored; the token itself is returned once, here.
    """
    return issue_token(user_or_scope=user_or_scope, purpose=purpose, ttl=ttl).token


def consume_submit_token(*, token: str, user_or_scope: Any, purpose: str) -> None:
    """Use ``token`` up, atomically: of concurrent consumers exactly one returns.

    Raises :class:`~idempotency.exceptions.SubmitTokenUsed` (409) when it was already
    consumed, and :class:`~idempotency.exceptions.SubmitTokenInvalid` (400) when it is
    unknown, expired, bound to another scope or issued for another purpose (which
    never consumes it).
    """
    scope = token_scope(user_or_scope)
    if (
        scope is None
        or not isinstance(token, str)
        or not token
        or len(token) > MAX_TOKEN_LENGTH
        or not isinstance(purpose, str)
        or not purpose
    ):
        raise SubmitTokenInvalid()
    outcome = _backend().consume(_hash(token), scope, purpose)
    if outcome == OK:
        return
    if outcome == USED:
        signals.token_used.send(sender=None, scope=scope, purpose=purpose)
        raise SubmitTokenUsed()
    raise SubmitTokenInvalid()


def purge_expired_submit_tokens(
    *, batch_size: int | None = None, now: datetime | None = None
) -> int:
    """Delete expired token rows (database backend) in batches; the number deleted.

    A consumed row is kept as a tombstone until it is both expired and
    :data:`TOMBSTONE_SECONDS` old. Redis tokens expire by themselves (returns 0).
    """
    backend = _backend()
    if not isinstance(backend, DatabaseTokens):
        return 0
    size = int(batch_size or idempotency_settings.PURGE_BATCH_SIZE)
    return backend.purge(now=now or timezone.now(), batch_size=max(1, size))


# -- views -------------------------------------------------------------------------------


def _header_token(request: HttpRequest | Request) -> str | None:
    value = request.headers.get(idempotency_settings.SUBMIT_TOKEN_HEADER)
    value = (value or "").strip()
    return value or None


def _missing() -> SubmitTokenInvalid:
    return SubmitTokenInvalid(
        f"This action needs a one-time submit token in the "
        f"{idempotency_settings.SUBMIT_TOKEN_HEADER} header."
    )


def _user_scope(request: HttpRequest | Request) -> str | None:
    return token_scope(getattr(request, "user", None))


def _request_of(args: tuple[Any, ...]) -> HttpRequest | Request:
    return split_view_args(args, decorator="@require_submit_token")[1]


def require_submit_token(
    purpose: str, *, scope: Callable[[Any], str | None] | None = None
) -> Callable[[F], F]:
    """Let an unsafe request (POST, PUT, PATCH, DELETE) through only with a fresh token.

    Reads the ``SUBMIT_TOKEN_HEADER`` header and consumes the token for ``purpose``,
    bound to the request's user (or to ``scope(request)``). A missing, invalid or
    foreign token is answered 400, a used one 409, both as problem+json; safe methods
    pass untouched. Put it on function views (below ``@login_required``), on DRF
    ``APIView`` methods, or below ``@api_view``, so it runs after authentication.
    """
    _check_purpose(purpose)
    get_scope = scope or _user_scope

    def check(request: HttpRequest | Request) -> HttpResponseBase | None:
        if request.method in SAFE_METHODS:
            return None
        token = _header_token(request)
        if token is None:
            return _missing().as_response()
        try:
            consume_submit_token(token=token, user_or_scope=get_scope(request), purpose=purpose)
        except (SubmitTokenInvalid, SubmitTokenUsed, StoreUnavailable) as exc:
            return exc.as_response()
        return None

    def decorate(view: F) -> F:
        if isinstance(view, type):
            raise ImproperlyApplied(
                "@require_submit_token decorates view functions and methods; for a DRF view "
                "class use permission_classes = [..., SubmitTokenPermission]."
            )
        if getattr(view, "cls", None) is not None or getattr(view, "view_class", None):
            raise ImproperlyApplied(
                "@require_submit_token was applied to the result of as_view() or @api_view: "
                "it would run before authentication. Put it below @api_view."
            )
        if iscoroutinefunction(view):

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                refused = await sync_to_async(check)(_request_of(args))
                if refused is not None:
                    return refused
                return await view(*args, **kwargs)

            wrapped: Any = functools.wraps(view)(async_wrapper)
            markcoroutinefunction(wrapped)
        else:

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                refused = check(_request_of(args))
                if refused is not None:
                    return refused
                return view(*args, **kwargs)

            wrapped = functools.wraps(view)(wrapper)
        wrapped.submit_token_purpose = purpose
        return cast(F, wrapped)

    return decorate


class SubmitTokenPermission(BasePermission):
    """DRF permission: unsafe requests must carry a fresh submit token.

    The view names the token's purpose with ``submit_token_purpose = "checkout"``
    (or a ``get_submit_token_purpose()`` method, e.g. per viewset action). List it
    **last** in ``permission_classes``: DRF checks permissions in order, after
    authentication, so the token is only consumed once the caller is known and
    allowed. An anonymous caller is refused (401/403) without touching the token.
    It raises :class:`~idempotency.exceptions.SubmitTokenUsed` (409) and
    :class:`~idempotency.exceptions.SubmitTokenInvalid` (400), which DRF's exception
    handler renders. Throttles run after permissions: a throttled request has
    already spent its token.
    """

    def purpose_for(self, view: APIView) -> str:
        getter = getattr(view, "get_submit_token_purpose", None)
        purpose = getter() if callable(getter) else getattr(view, "submit_token_purpose", None)
        if not purpose:
            raise ImproperlyApplied(
                f"{type(view).__name__} uses SubmitTokenPermission but names no "
                "submit_token_purpose."
            )
        return _check_purpose(purpose)

    def has_permission(self, request: Request, view: APIView) -> bool:
        # the method of the HTTP request itself: the browsable API checks permissions on
        # POST clones of a GET request to decide which forms to show, consuming nothing
        method = getattr(getattr(request, "_request", None), "method", None) or request.method
        if method in SAFE_METHODS or request.method in SAFE_METHODS:
            return True
        purpose = self.purpose_for(view)
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return False
        token = _header_token(request)
        if token is None:
            raise _missing()
        consume_submit_token(token=token, user_or_scope=user, purpose=purpose)
        return True


class SubmitTokenIssueView(APIView):
    """``POST {"purpose": "checkout"}`` → 201 ``{"token", "purpose", "expires_at"}``.

    Route it in the project, e.g. ``path("api/idempotency/tokens/",
    SubmitTokenIssueView.as_view())``. Authenticated callers only; the token is bound
    to the caller. Subclass to restrict ``allowed_purposes`` or set ``token_ttl``.
    """

    permission_classes = [IsAuthenticated]
    #: Purposes a client may ask for (None: any).
    allowed_purposes: ClassVar[frozenset[str] | None] = None
    #: Seconds the issued tokens live (None: ``SUBMIT_TOKEN_TTL``).
    token_ttl: ClassVar[float | None] = None

    class InputSerializer(serializers.Serializer[Any]):
        purpose = serializers.CharField(max_length=MAX_PURPOSE_LENGTH)

    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        purpose: str = serializer.validated_data["purpose"]
        allowed = self.allowed_purposes
        if allowed is not None and purpose not in allowed:
            raise serializers.ValidationError({"purpose": ["This purpose is not offered."]})
        issued = issue_token(user_or_scope=request.user, purpose=purpose, ttl=self.token_ttl)
        return Response(
            {
                "token": issued.token,
                "purpose": issued.purpose,
                "expires_at": issued.expires_at.isoformat(),
            },
            status=status.HTTP_201_CREATED,
            headers={"Cache-Control": "no-store"},
        )
