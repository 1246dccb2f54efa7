"""One view per (interface, view kind) of the interface matrix (tests/contract/test_matrix.py),
Django Ninja operations included (``decorator``, ``protect`` and ``middleware``).

Every view body appends one line to an O_APPEND file (``MATRIX_COUNTER_FILE``)
before anything else: a rollback cannot undo it, so the tests count executions
of the body, not committed rows. Each answer carries a fresh random ``run`` so
a replay that re-ran the view cannot be byte-identical.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django import forms
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import View
from django.views.generic import CreateView, FormView
from ninja import NinjaAPI, Router
from ninja.responses import Status
from ninja.security import HttpBearer, django_auth
from rest_framework import viewsets
from rest_framework.decorators import action, api_view
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency import idempotent
from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.contrib.ninja import protect
from tests.testapp.models import Effect

COUNTER_ENV = "MATRIX_COUNTER_FILE"
#: amounts the views accept (a database integer column holds them all)
LIMIT = 10**9


def count(probe: str) -> None:
    """Record one execution of a view body (survives any rollback)."""
    fd = os.open(os.environ[COUNTER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{probe}\n".encode())
    finally:
        os.close(fd)


def executions(probe: str) -> int:
    try:
        with open(os.environ[COUNTER_ENV]) as f:
            return sum(1 for line in f if line.rstrip("\n") == probe)
    except FileNotFoundError:
        return 0


def _amount(request: Any) -> int:
    try:
        if isinstance(request, Request):
            data: Any = request.data
        elif request.content_type == "application/json":
            data = json.loads(request.body or b"{}")
        else:
            data = request.POST
        amount = int(data.get("amount", 1))
    except (ValueError, TypeError, AttributeError, RecursionError, OverflowError):
        return 1  # int(Infinity) overflows: the fuzz test found it (a 500 from the view)
    return amount if abs(amount) <= LIMIT else 1


def work(request: Any, amount: int | None = None, *, linger: bool = True) -> dict[str, Any]:
    """The body of every matrix view: count, write a row, optionally linger (``?sleep=``)."""
    probe = str(request.headers.get("X-Probe", ""))
    count(probe)
    amount = _amount(request) if amount is None else amount
    Effect.objects.create(label=probe[:255], amount=amount)
    delay = float(request.GET.get("sleep", "0"))
    if delay and linger:
        time.sleep(delay)  # real time: the view's work, as long as the request asks
    return {"run": uuid.uuid4().hex, "amount": amount, "atomic": connection.in_atomic_block}


async def awork(request: HttpRequest) -> dict[str, Any]:
    result = await sync_to_async(work)(request, linger=False)
    delay = float(request.GET.get("sleep", "0"))
    if delay:
        await asyncio.sleep(delay)  # real time: the view's work, as long as the request asks
    return result


def created(data: dict[str, Any]) -> JsonResponse:
    return JsonResponse(data, status=201)


class AmountForm(forms.Form):
    amount = forms.IntegerField(min_value=-LIMIT, max_value=LIMIT)


# -- the plain views (the middleware's cells), one per kind ---------------------------------


def function(request: HttpRequest) -> HttpResponse:
    return created(work(request))


class Cbv(View):
    def post(self, request: HttpRequest) -> HttpResponse:
        return created(work(request))


class Form(FormView):  # type: ignore[type-arg]
    form_class = AmountForm

    def form_valid(self, form: AmountForm) -> HttpResponse:
        return created(work(self.request, form.cleaned_data["amount"]))

    def form_invalid(self, form: AmountForm) -> HttpResponse:
        return JsonResponse({"errors": form.errors}, status=400)


class Create(CreateView):  # type: ignore[type-arg]
    model = Effect
    fields = ["amount"]

    def form_valid(self, form: Any) -> HttpResponse:
        form.instance.label = "create"
        self.object = form.save()
        return created(work(self.request, self.object.amount))

    def form_invalid(self, form: Any) -> HttpResponse:
        return JsonResponse({"errors": form.errors}, status=400)


class Api(APIView):
    def post(self, request: Request) -> Response:
        return Response(work(request), status=201)


@api_view(["POST"])
def api_function(request: Request) -> Response:
    return Response(work(request), status=201)


class Actions(viewsets.ViewSet):
    @action(detail=False, methods=["post"])
    def run(self, request: Request) -> Response:
        return Response(work(request), status=201)


async def async_function(request: HttpRequest) -> HttpResponse:
    return created(await awork(request))


class AsyncCbv(View):
    async def post(self, request: HttpRequest) -> HttpResponse:
        return created(await awork(request))


# -- the decorator's cells ------------------------------------------------------------------


@idempotent
def dec_function(request: HttpRequest) -> HttpResponse:
    return created(work(request))


class DecCbv(View):
    @idempotent
    def post(self, request: HttpRequest) -> HttpResponse:
        return created(work(request))


class DecForm(Form):
    @idempotent
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().post(request, *args, **kwargs)


class DecCreate(Create):
    @idempotent
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().post(request, *args, **kwargs)


class DecApi(APIView):
    @idempotent
    def post(self, request: Request) -> Response:
        return Response(work(request), status=201)


@api_view(["POST"])
@idempotent
def dec_api_function(request: Request) -> Response:
    return Response(work(request), status=201)


class DecActions(viewsets.ViewSet):
    @action(detail=False, methods=["post"])
    @idempotent
    def run(self, request: Request) -> Response:
        return Response(work(request), status=201)


@idempotent
async def dec_async_function(request: HttpRequest) -> HttpResponse:
    return created(await awork(request))


class DecAsyncCbv(View):
    @idempotent
    async def post(self, request: HttpRequest) -> HttpResponse:
        return created(await awork(request))


# -- Django Ninja's cells: one API per cell, its one operation at the cell's path ----------


class DrfToken(HttpBearer):
    """The matrix callers' ``Authorization: Token <key>`` as Ninja auth: ``request.auth``
    is the token's user (the same caller, and scope, as under DRF); the ASGI caller's
    session (``django_auth``) where its token header is not sent."""

    openapi_scheme = "token"

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        from rest_framework.authtoken.models import Token

        found = Token.objects.select_related("user").filter(key=token).first()
        return found.user if found is not None else None


def _ninja_sync() -> Callable[..., Any]:
    def operation(request: HttpRequest) -> Status:
        return Status(201, work(request))

    return operation


def _ninja_async() -> Callable[..., Any]:
    async def operation(request: HttpRequest) -> Status:
        return Status(201, await awork(request))

    return operation


def ninja_view(name: str, func: Callable[..., Any], *, protected: bool = False) -> Any:
    """The view Django routes to for a Ninja API of one POST operation ``func``."""
    api = NinjaAPI(urls_namespace=f"matrix-{name}", auth=[DrfToken(), django_auth])
    router = Router()
    router.add_api_operation("/", ["POST"], func, response={201: dict[str, Any]})
    if protected:
        protect(router)
    api.add_router("", router)
    (view,) = [p.callback for p in api.urls[0] if p.callback.__module__.startswith("ninja.")]
    return view


# -- the mixin's cells (DRF only) -----------------------------------------------------------


class MixinApi(IdempotentMixin, Api):
    pass


class MixinActions(IdempotentMixin, Actions):
    pass


#: cell name -> (view callable, the body kind it takes: "json" or "form", async?)
Cell = tuple[Callable[..., Any], str, bool]


def _cells() -> dict[str, Cell]:
    kinds: dict[str, tuple[Any, Any, str, bool]] = {
        # kind: (plain view, decorated view, body, async)
        "function": (function, dec_function, "json", False),
        "cbv": (Cbv.as_view(), DecCbv.as_view(), "json", False),
        "form-view": (Form.as_view(), DecForm.as_view(), "form", False),
        "create-view": (Create.as_view(), DecCreate.as_view(), "form", False),
        "apiview": (Api.as_view(), DecApi.as_view(), "json", False),
        "api-view": (api_function, dec_api_function, "json", False),
        "viewset-action": (
            Actions.as_view({"post": "run"}),
            DecActions.as_view({"post": "run"}),
            "json",
            False,
        ),
        "async-function": (async_function, dec_async_function, "json", True),
        "async-cbv": (AsyncCbv.as_view(), DecAsyncCbv.as_view(), "json", True),
    }
    cells: dict[str, Cell] = {}
    for kind, (plain, decorated, body, is_async) in kinds.items():
        cells[f"middleware/{kind}"] = (plain, body, is_async)
        cells[f"decorator/{kind}"] = (decorated, body, is_async)
    for kind, make, is_async in (
        ("ninja", _ninja_sync, False),
        ("ninja-async", _ninja_async, True),
    ):
        cells[f"middleware/{kind}"] = (ninja_view(f"mw-{kind}", make()), "json", is_async)
        cells[f"decorator/{kind}"] = (ninja_view(kind, idempotent(make())), "json", is_async)
        cells[f"protect/{kind}"] = (
            ninja_view(f"protect-{kind}", make(), protected=True),
            "json",
            is_async,
        )
    cells["mixin/apiview"] = (MixinApi.as_view(), "json", False)
    cells["mixin/viewset-action"] = (MixinActions.as_view({"post": "run"}), "json", False)
    return cells


CELLS = _cells()
