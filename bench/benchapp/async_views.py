"""The ASGI variants: an ``async def`` view, bare and under ``@idempotent``.

The view does what a bare async endpoint can do without a thread: it parses the JSON body
and answers 201. Its caller comes from :class:`TokenUserMiddleware` (DRF's token, looked
up once per process and kept): both the bare view and ours pay the same for it, and
``request.auser()`` answers it without a query, as a stateless token (a JWT) would.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import markcoroutinefunction, sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponseBase, JsonResponse

from idempotency import DatabaseStore, RedisStore, idempotent

_users: dict[str, Any] = {}


def _user_of(token: str) -> Any:
    from rest_framework.authtoken.models import Token

    found = Token.objects.select_related("user").filter(key=token).first()
    return found.user if found is not None else AnonymousUser()


class TokenUserMiddleware:
    """``request.user`` and ``request.auser()`` from ``Authorization: Token <key>``."""

    async_capable = True
    sync_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]):
        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Token ").strip()
        user = _users.get(token)
        if user is None:
            user = await sync_to_async(_user_of, thread_sensitive=False)(token)
            if user.is_authenticated:
                _users[token] = user

        async def auser() -> Any:
            return user

        request.user = user
        request.auser = auser  # type: ignore[attr-defined]
        return await self.get_response(request)


async def _write(request: HttpRequest) -> JsonResponse:
    data = json.loads(request.body)
    return JsonResponse({"amount": data.get("amount"), "memo": data.get("memo")}, status=201)


async def bare(request: HttpRequest) -> JsonResponse:
    return await _write(request)


@idempotent(store=RedisStore(), mode="lease")
async def redis(request: HttpRequest) -> JsonResponse:
    return await _write(request)


@idempotent(store=DatabaseStore(), mode="lease")
async def db_lease(request: HttpRequest) -> JsonResponse:
    return await _write(request)
