"""A Django Ninja API for the tests: every kind of result, sync and async, session and
bearer-token auth, each body with a countable side effect (``views._effect``)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status
from ninja.security import HttpBearer, django_auth

from idempotency import idempotency_exempt, idempotent
from idempotency.contrib.ninja import protect
from tests.testapp import views

#: Bearer tokens of the token principals (a string principal: Ninja's ``request.auth``).
STRING_TOKENS = {"token-a", "token-b"}
#: Bearer tokens that stand for a user (``request.auth`` is the user instance).
USER_TOKENS = {"user-token-alice": "alice", "user-token-bob": "bob"}


class StringBearer(HttpBearer):
    """``request.auth`` is the token itself, a string (an API key)."""

    def authenticate(self, request: HttpRequest, token: str) -> str | None:
        return token if token in STRING_TOKENS else None


class UserBearer(HttpBearer):
    """``request.auth`` is the user the token names."""

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        username = USER_TOKENS.get(token)
        if username is None:
            return None
        return get_user_model().objects.filter(username=username).first()


class PayIn(Schema):
    amount: int = 1
    label: str = "x"


class PayOut(Schema):
    id: int
    amount: int


api = NinjaAPI(urls_namespace="ninja-tests", auth=[StringBearer(), UserBearer(), django_auth])


def _paid(request: HttpRequest) -> dict[str, int]:
    effect = views._effect(request)
    return {"id": effect.pk, "amount": effect.amount}


@api.post("/dict/")
@idempotent
def pay_dict(request: HttpRequest, payload: PayIn) -> dict[str, int]:
    """A dict: Ninja answers 200 with it as JSON."""
    return _paid(request)


@api.post("/schema/", response={201: PayOut})
@idempotent
def pay_schema(request: HttpRequest, payload: PayIn) -> PayOut:
    """A Schema instance, under a declared 201 response."""
    return PayOut(**_paid(request))


@api.post("/status/", response={201: PayOut, 404: dict[str, str]})
@idempotent
def pay_status(request: HttpRequest, payload: PayIn) -> Status:
    """``Status(code, body)``; ``?missing=1`` raises Ninja's HttpError(404) after the effect."""
    paid = _paid(request)
    if request.GET.get("missing"):
        raise HttpError(404, "no such thing")
    return Status(201, paid)


@api.post("/tuple/", response={201: PayOut})
@idempotent
def pay_tuple(request: HttpRequest, payload: PayIn) -> tuple[int, dict[str, int]]:
    """The ``(status, body)`` tuple of Ninja before 1.5."""
    return 201, _paid(request)


@api.post("/response/")
@idempotent(mode="lease")
def pay_response(request: HttpRequest, payload: PayIn) -> HttpResponse:
    """A Django response, returned as is; lease mode."""
    return JsonResponse(_paid(request), status=201)


@api.post("/crash/")
@idempotent
def crash(request: HttpRequest, payload: PayIn) -> dict[str, int]:
    """The effect, then an exception no handler answers: the key is released."""
    _paid(request)
    raise RuntimeError("boom")


@api.post("/undeclared-status/", response={201: PayOut})
@idempotent
def undeclared_status(request: HttpRequest, payload: PayIn) -> Status:
    """Answers a status its ``response=`` does not declare: Ninja cannot turn the result
    into a response (a ConfigError), after the body ran."""
    return Status(202, _paid(request))


@api.post("/async/", response={201: PayOut})
@idempotent
async def pay_async(request: HttpRequest, payload: PayIn) -> Status:
    """An async operation (lease mode), its effect in a thread."""
    return Status(201, await sync_to_async(_paid)(request))


@api.post("/async-missing/", response={201: PayOut, 404: dict[str, str]})
@idempotent
async def async_missing(request: HttpRequest, payload: PayIn) -> Status:
    """An async body that raises HttpError(404) after its effect: a definitive answer."""
    await sync_to_async(_paid)(request)
    raise HttpError(404, "no such thing")


@api.post("/open/", auth=None, response={201: PayOut})
@idempotent
def pay_open(request: HttpRequest, payload: PayIn) -> Status:
    """No authentication: an anonymous caller (the ``ANONYMOUS`` setting decides)."""
    return Status(201, _paid(request))


class Nameless:
    """A principal with no identity the default scope can name."""


class NamelessBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Nameless | None:
        return Nameless() if token == "nameless" else None


@api.post("/nameless/", auth=NamelessBearer(), response={201: PayOut})
@idempotent
def pay_nameless(request: HttpRequest, payload: PayIn) -> Status:
    return Status(201, _paid(request))


@api.post("/plain/", response={201: PayOut})
def pay_plain(request: HttpRequest, payload: PayIn) -> Status:
    """Not decorated: protected only where IdempotencyMiddleware is installed."""
    return Status(201, _paid(request))


@api.post("/under-middleware/", response={201: PayOut})
def pay_under_middleware(request: HttpRequest, payload: PayIn) -> Status:
    """Not decorated, for the middleware's tests only: the middleware protects it in
    place the first time it routes an unsafe request to it."""
    return Status(201, _paid(request))


@api.get("/dict/")
@idempotent
def read(request: HttpRequest) -> dict[str, bool]:
    """A safe method: never takes part, keys or not."""
    views.record_execution("read")
    return {"read": True}


#: One option for a whole router: every unsafe operation of it (``protect`` below).
protected = Router()


@protected.post("/orders/", response={201: PayOut})
def create_order(request: HttpRequest, payload: PayIn) -> Status:
    return Status(201, _paid(request))


@protected.put("/orders/{order_id}/")
def replace_order(request: HttpRequest, order_id: int, payload: PayIn) -> dict[str, int]:
    return {**_paid(request), "order": order_id}


@protected.post("/async-orders/", response={201: PayOut})
async def create_order_async(request: HttpRequest, payload: PayIn) -> Status:
    return Status(201, await sync_to_async(_paid)(request))


@protected.get("/orders/")
def list_orders(request: HttpRequest) -> list[int]:
    views.record_execution("list")
    return []


@protected.post("/exempt/", response={201: PayOut})
@idempotency_exempt
def exempt_order(request: HttpRequest, payload: PayIn) -> Status:
    return Status(201, _paid(request))


@protected.post("/own/", response={201: PayOut})
@idempotent(required=False, ttl=30)
def own_options(request: HttpRequest, payload: PayIn) -> Status:
    """Decorated itself: keeps its own options under a protected router."""
    return Status(201, _paid(request))


protect(protected)
api.add_router("/p/", protected)

#: A whole API under one option, protected before its operations and routers exist.
whole = protect(NinjaAPI(urls_namespace="ninja-whole", auth=StringBearer()), required=True)
later = Router()


@whole.post("/pay/", response={201: PayOut})
def whole_pay(request: HttpRequest, payload: PayIn) -> Status:
    return Status(201, _paid(request))


@later.delete("/orders/{order_id}/")
async def whole_cancel(request: HttpRequest, order_id: int) -> dict[str, int]:
    await sync_to_async(_paid)(request)
    return {"cancelled": order_id}


whole.add_router("/later/", later)
