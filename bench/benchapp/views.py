"""The benchmarked endpoints. Every write variant runs the same body, :func:`write_entry`.

* ``bare``: a DRF write endpoint with token authentication, no idempotency.
* ``noop``: an authenticated DRF endpoint that does nothing (the replay path's reference).
* ours (``bench.benchapp.ours``): the same view under ``@idempotent(store=..., mode=...)``.
* peers (``bench/urls_peers.py``): the bare view, with the peer's middleware in front.

Every path goes through :func:`named_views`, one view that hands a request to the view
its URL names, so every benchmark path costs Django's resolver the same (see
:mod:`bench.urls`). :class:`QueryCountMiddleware` counts the SQL statements of every
request, server-side, into ``X-Bench-SQL``: the load generator sums the header over all
responses of a phase, so a phase's statements per request are counted where they run,
not guessed. Only statements that go through Django's cursors are seen: BEGIN (implicit)
and COMMIT are not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from bench.benchapp.models import Account, Entry


def write_entry(request: Request) -> Response:
    """Insert one Entry row and debit the caller's balance, in one transaction."""
    with transaction.atomic():
        return write_entry_in_transaction(request)


def write_entry_in_transaction(request: Request) -> Response:
    """:func:`write_entry`'s body for a caller that already holds the transaction (atomic
    mode's own): no nested ``atomic()``, so no SAVEPOINT and RELEASE round trips."""
    data = request.data
    amount = int(data.get("amount", 1))
    memo = str(data.get("memo", ""))[:100]
    # the account first: on MySQL/MariaDB the entry's foreign-key check share-locks the
    # account row, and two requests of one caller holding that lock would then both wait
    # to update it (a deadlock, 500s under wrk); the same two statements either way
    Account.objects.filter(pk=request.user.pk).update(balance=F("balance") - amount)
    entry = Entry.objects.create(account_id=request.user.pk, amount=amount, memo=memo)
    return Response({"id": entry.pk, "amount": amount, "memo": memo}, status=201)


class BareWrite(APIView):
    def post(self, request: Request) -> Response:
        return write_entry(request)


class Noop(APIView):
    def post(self, request: Request) -> Response:
        return Response({"ok": True})


def health(request: HttpRequest) -> HttpResponse:
    """Readiness probe of the orchestrator (no database, no authentication)."""
    return HttpResponse(b"ok", content_type="text/plain")


def named_views(views: dict[str, Callable[..., Any]]) -> Callable[..., HttpResponseBase]:
    """A view of ``request, name`` that calls ``views[name](request)``, or answers 404."""

    def by_name(request: HttpRequest, name: str) -> HttpResponseBase:
        view = views.get(name)
        if view is None:
            raise Http404(name)
        response: HttpResponseBase = view(request)
        return response

    by_name.csrf_exempt = True  # type: ignore[attr-defined]  # the views it calls decide
    return by_name


SQL_HEADER = "X-Bench-SQL"


class QueryCountMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        count = 0

        def counter(
            execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
        ) -> Any:
            nonlocal count
            count += 1
            return execute(sql, params, many, context)

        with connection.execute_wrapper(counter):
            response = self.get_response(request)
        response[SQL_HEADER] = str(count)
        return response
