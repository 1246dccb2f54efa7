"""DEMO ONLY: what ``retry_storm`` compares the protected pay endpoint with.

:class:`NaiveOrderPayApi` is the first draft everyone writes: read the account,
subtract, ``save()``; no key, no version check, no unique reference. It is routed
only by ``config/urls_demo.py`` (the URLconf of ``config/settings_demo.py``),
never by the production ``config/urls.py``.

:class:`SlowNetworkMiddleware` holds every response back for a random moment,
as a slow network or an overloaded proxy does, so the client's timeouts fire
after the server has already done the work: the situation retries are made in.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import get_object_or_404
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import Account, LedgerEntry, LedgerEntryKind
from orders.models import Order, OrderStatus


class NaiveOrderPayApi(APIView):
    """``POST /demo/naive/orders/{id}/pay/``: charge the order's amount. DEMO ONLY.

    Every request that reaches it charges again, and two at once can lose an
    update of the balance (both read the same balance, both save theirs).
    """

    def post(self, request: Request, pk: int) -> Response:
        order = get_object_or_404(Order, pk=pk, user=request.user)
        account = get_object_or_404(Account, user=request.user)  # read ...
        if account.balance < order.amount:
            return Response({"detail": "insufficient funds"}, status=status.HTTP_409_CONFLICT)
        account.balance -= order.amount
        account.save(update_fields=["balance"])  # ... then save(): the race
        Order.objects.filter(pk=order.pk).update(status=OrderStatus.PAID)
        LedgerEntry.objects.create(
            account=account,
            amount=-order.amount,
            balance_after=account.balance,
            reference=f"naive_{order.pk}_{uuid.uuid4().hex[:16]}",  # the storm audits per order
            kind=LedgerEntryKind.DEDUCTION,
        )
        return Response(
            {"order_id": order.pk, "balance": str(account.balance)},
            status=status.HTTP_201_CREATED,
        )


class SlowNetworkMiddleware:
    """Delay each response by a random 0..``DEMO_RESPONSE_DELAY`` seconds. DEMO ONLY."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        delay: Any = getattr(settings, "DEMO_RESPONSE_DELAY", 0.0)
        if request.method == "POST" and delay:
            time.sleep(random.uniform(0.0, float(delay)))
        return response
