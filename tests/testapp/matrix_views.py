"""One view per (interface, view kind) of the interface matrix (tests/contract/test_matrix.py),
Django Ninja operations included (``decorator``, ``protect`` and ``middleware``).

Every view body is :func:`tests.testapp.matrix_bodies.work`, which counts its
executions where a rollback cannot undo them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
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
from tests.testapp.matrix_bodies import LIMIT, awork, created, work
from tests.testapp.models import Effect


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
