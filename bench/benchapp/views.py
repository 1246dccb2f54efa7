"""The benchmarked endpoints. Every write variant runs the same body, :func:`write_entry`.

* ``bare``: a DRF write endpoint with token authentication, no idempotency.
* ``noop``: an authenticated DRF endpoint that does nothing (the replay path's reference).
* ours (``bench.benchapp.ours``): the same view under ``@idempotent(store=..., mode=...)``.
* peers (``bench/urls_peers.py``): the bare view, with the peer's middleware in front.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.http import HttpRequest, HttpResponse
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
